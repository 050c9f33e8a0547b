"""The model and GPU catalogues: data files in ``resources/``, read once, never executed."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.errors import PlanError, PlanFileError
from core.hfconfig import model_from_hf_config
from core.model import ModelSpec
from core.resources import resource_path
from core.units import MiB


@dataclass(frozen=True)
class CatalogueModel:
    id: str
    name: str
    family: str
    hf_repo: str
    published_params: int
    published_params_source: str
    config_source: str
    config: Mapping[str, Any]
    spec: ModelSpec


@dataclass(frozen=True)
class GpuSpec:
    id: str
    name: str
    vendor: str
    segment: str
    memory_bytes: int  # what the driver reports as total memory
    memory_reported: str
    memory_marketing_gb: float
    tflops_dense: Mapping[str, float | None]
    memory_bandwidth_gb_s: float
    board_power_w: float
    sources: tuple[str, ...]
    notes: str = ""

    def peak_tflops(self, dtype: str) -> float:
        """Dense peak for a compute dtype; falls back to the nearest supported rate."""
        order = {
            "fp32": ("fp32", "tf32"),
            "tf32": ("tf32", "fp32"),
            "bf16": ("bf16", "fp16", "fp32"),
            "fp16": ("fp16", "bf16", "fp32"),
            "fp8": ("fp8", "int8", "bf16", "fp16"),
            "int8": ("int8", "fp8", "bf16", "fp16"),
        }.get(dtype, (dtype,))
        for key in order:
            value = self.tflops_dense.get(key)
            if value:
                return float(value)
        return 0.0


def custom_gpu(memory_gb: float, tflops: float) -> GpuSpec:
    """A card the user describes by its memory (decimal GB) and 16-bit dense TFLOP/s."""
    return GpuSpec(
        id="custom",
        name=f"Custom GPU ({memory_gb:g} GB)",
        vendor="custom",
        segment="custom",
        memory_bytes=int(memory_gb * 1e9),
        memory_reported=f"{memory_gb:g} GB as typed",
        memory_marketing_gb=memory_gb,
        tflops_dense={"fp32": tflops / 2, "bf16": tflops, "fp16": tflops},
        memory_bandwidth_gb_s=0.0,
        board_power_w=0.0,
        sources=(),
    )


def _load_json(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            raw = handle.read(50_000_000)
        return json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise PlanFileError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    except RecursionError:
        raise PlanFileError(str(path), "is nested too deeply to be a catalogue") from None
    except ValueError as exc:  # bad UTF-8, bad JSON, an integer of thousands of digits
        raise PlanFileError(str(path), f"is not valid JSON ({exc})") from None


@lru_cache(maxsize=1)
def load_models(path: str | None = None) -> tuple[CatalogueModel, ...]:
    data = _load_json(Path(path) if path else resource_path("models.json"))
    where = path or "resources/models.json"
    if not isinstance(data, dict) or data.get("format") != "vramplan-model-catalogue":
        raise PlanFileError(where, "is not a VRAM Planner model catalogue")
    if not isinstance(data.get("models", []), list):
        raise PlanFileError(where, "has a 'models' entry that is not a list")
    models = []
    for index, entry in enumerate(data.get("models", [])):
        try:
            spec = model_from_hf_config(entry["config"], name=entry["name"])
            models.append(
                CatalogueModel(
                    id=str(entry["id"]),
                    name=str(entry["name"]),
                    family=str(entry.get("family", spec.family)),
                    hf_repo=str(entry.get("hf_repo", "")),
                    published_params=int(entry["published_params"]),
                    published_params_source=str(entry.get("published_params_source", "")),
                    config_source=str(entry.get("config_source", "")),
                    config=entry["config"],
                    spec=spec,
                )
            )
        except (KeyError, TypeError, ValueError, OverflowError, PlanError) as exc:
            raise PlanFileError(where, f"model entry {index} is malformed: {exc}") from None
    return tuple(models)


@lru_cache(maxsize=1)
def load_gpus(path: str | None = None) -> tuple[GpuSpec, ...]:
    data = _load_json(Path(path) if path else resource_path("gpus.json"))
    where = path or "resources/gpus.json"
    if not isinstance(data, dict) or data.get("format") != "vramplan-gpu-catalogue":
        raise PlanFileError(where, "is not a VRAM Planner GPU catalogue")
    if not isinstance(data.get("gpus", []), list):
        raise PlanFileError(where, "has a 'gpus' entry that is not a list")
    gpus = []
    for index, entry in enumerate(data.get("gpus", [])):
        try:
            tflops = {str(k): (None if v is None else float(v)) for k, v in dict(entry["tflops_dense"]).items()}
            memory = int(entry["memory_bytes"])
            if memory <= 0 or (memory % MiB and memory % 1000):
                raise ValueError(f"memory_bytes {memory} is not a whole number of MiB")
            if any(v is not None and (not math.isfinite(v) or v < 0) for v in tflops.values()):
                raise ValueError("a TFLOP/s figure is negative or not finite")
            gpus.append(
                GpuSpec(
                    id=str(entry["id"]),
                    name=str(entry["name"]),
                    vendor=str(entry.get("vendor", "")),
                    segment=str(entry.get("segment", "")),
                    memory_bytes=memory,
                    memory_reported=str(entry.get("memory_reported", "")),
                    memory_marketing_gb=float(entry.get("memory_marketing_gb", 0)),
                    tflops_dense=tflops,
                    memory_bandwidth_gb_s=float(entry.get("memory_bandwidth_gb_s") or 0),
                    board_power_w=float(entry.get("board_power_w") or 0),
                    sources=tuple(str(s) for s in entry.get("sources", ())),
                    notes=str(entry.get("notes", "")),
                )
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise PlanFileError(where, f"GPU entry {index} is malformed: {exc}") from None
    return tuple(gpus)


def find_model(model_id: str) -> CatalogueModel:
    wanted = model_id.strip().lower()
    for model in load_models():
        if model.id == wanted or model.name.lower() == wanted or model.hf_repo.lower() == wanted:
            return model
    raise PlanError("model", model_id, "a model id from `vramplan models`")


def find_gpu(gpu_id: str) -> GpuSpec:
    wanted = gpu_id.strip().lower()
    for gpu in load_gpus():
        if gpu.id == wanted or gpu.name.lower() == wanted:
            return gpu
    raise PlanError("hardware.gpu", gpu_id, "a GPU id from `vramplan gpus` or 'custom'")


def search(items: tuple[Any, ...], text: str) -> list[Any]:
    """Catalogue entries whose id or name contains every word of ``text``."""
    words = text.lower().split()
    return [item for item in items if all(w in f"{item.id} {item.name}".lower() for w in words)]

"""Measured training steps (tools/measure output) and the plans they correspond to.

A measurement file is ``{"format": "vramplan-measurement", "version": 1, "case": {...},
"peak_allocated_bytes": N, ...}``. Reading it only parses JSON; a bad file raises
:class:`PlanFileError` with one clear line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype
from core.errors import PlanError, PlanFileError
from core.files.fileio import read_regular_file
from core.hfconfig import model_from_hf_config
from core.plan import (
    Attention,
    CheckpointPolicy,
    Hardware,
    Inference,
    LoraSettings,
    Method,
    Optimizer,
    OptimizerImpl,
    Plan,
    Precision,
    TorchVersion,
    Workload,
    precision_fields,
    serving_on,
)
from core.units import finite_number

if TYPE_CHECKING:
    from core.estimate import Estimate

FORMAT: Final = "vramplan-measurement"
MAX_BYTES: Final = 10_000_000

# The PyTorch release a measured case is estimated under: the one its file records (``versions.torch``, written by
# tools/measure/runner.py from ``torch.__version__``; tools/measure/sdpa.py follows the installed release's CUDA
# backend choice, grouped-query heads on the memory-efficient kernel from 2.14, core.training.attention.
# efficient_takes_gqa), so a case is not estimated under the default release when it ran another. A file without
# ``versions`` reads as MEASURED_TORCH: every stored measurement ran torch 2.13.0.
MEASURED_TORCH: Final = TorchVersion.V2_8
# (first minor release of each range, range), newest first; the ranges are TorchVersion's (core/inputs.py).
_RELEASES: Final = (
    (14, TorchVersion.V2_14),
    (8, TorchVersion.V2_8),
    (5, TorchVersion.V2_5_TO_2_7),
    (4, TorchVersion.V2_4),
    (1, TorchVersion.V2_1_TO_2_3),
    (0, TorchVersion.V2_0),
)


def torch_release(doc: Mapping[str, Any], where: str = "(measurement)") -> TorchVersion:
    """The TorchVersion range of the release a measurement file records (``versions.torch``, e.g. "2.13.0+cpu")."""
    versions = doc.get("versions")
    if versions is None or (isinstance(versions, Mapping) and versions.get("torch") is None):
        return MEASURED_TORCH
    text = versions.get("torch") if isinstance(versions, Mapping) else None
    parts = text.split("+")[0].split(".") if isinstance(text, str) else []
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[0]) >= 2:
        minor = 99 if int(parts[0]) > 2 else int(parts[1])
        return next(release for first, release in _RELEASES if minor >= first)
    shown = repr(text if text is not None else versions)[:80]
    raise PlanFileError(where, f"'versions.torch' must be a PyTorch release such as \"2.13.0\", not {shown}")


_PRECISIONS: Final = {
    "fp32": Precision.FP32,
    "bf16-mixed": Precision.BF16_MIXED,
    "bf16": Precision.BF16,
    "fp16-mixed": Precision.FP16_MIXED,
    "fp16": Precision.FP16,
}
_OPTIMIZERS: Final = {
    "adamw": Optimizer.ADAMW,
    "adam": Optimizer.ADAM,
    "sgd-momentum": Optimizer.SGD_MOMENTUM,
    "sgd": Optimizer.SGD,
    "adamw-8bit": Optimizer.ADAMW_8BIT,
    "adafactor": Optimizer.ADAFACTOR,
}

# The backend tools/measure ran a step on (tools/measure/__main__.py --backend: fake-cuda, cuda,
# cpu, fake-cpu) that runs it on a card: its peak is the running maximum of
# torch.cuda.memory_allocated (tools/measure/runner.py _peak_fields), which counts the workspaces
# cuBLAS and Transformer Engine take from the caching allocator (core.training.device
# allocator_workspaces). The fake-tensor and CPU backends run no cuBLAS on a card: no workspace.
REAL_GPU_BACKEND: Final = "cuda"


@dataclass(frozen=True)
class Measurement:
    case_id: str
    case: Mapping[str, Any]
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None
    peak_phase: str
    peak_step: int
    breakdown: Mapping[str, int]
    backend: str
    source: str
    torch_version: TorchVersion = MEASURED_TORCH  # the release it ran (versions.torch), for plan_for_case

    @property
    def on_real_gpu(self) -> bool:
        """Whether the step ran on a card, so that its peak holds the libraries' workspaces."""
        return self.backend == REAL_GPU_BACKEND


# The allocator's counters are int64 (pytorch/pytorch b892b2309ad4, c10/core/CachingDeviceAllocator.h,
# struct Stat: ``int64_t current, peak``): no measured peak is larger. A file saying 1e308 bytes
# was taken and shown as a 300-digit figure (2026-12-04).
MAX_MEASURED_BYTES: Final = 2**63 - 1


def _bytes(value: object) -> int | None:
    """``value`` as a byte count a measurement can hold, or None."""
    number = finite_number(value)  # a bool, a string, NaN, infinity: None
    if number is None:
        return None
    exact = value if isinstance(value, int) else number  # float(2**63 - 1) rounds up past the bound
    return int(exact) if 0 <= exact <= MAX_MEASURED_BYTES else None


def _int(doc: Mapping[str, Any], key: str, where: str, optional: bool = False) -> int | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    number = _bytes(value)
    if number is None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise PlanFileError(where, f"'{key}' must be a number of bytes from 0 to 2**63 - 1, not {shown}")
    return number


def measurement_from_dict(doc: Any, where: str = "(measurement)") -> Measurement:
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise PlanFileError(where, "is not a VRAM Planner measurement (format 'vramplan-measurement')")
    case = doc.get("case")
    if not isinstance(case, Mapping):
        raise PlanFileError(where, "has no 'case' object describing the measured run")
    peak = _int(doc, "peak_allocated_bytes", where)
    assert peak is not None
    breakdown_raw = doc.get("breakdown_at_peak") or {}
    if not isinstance(breakdown_raw, Mapping):
        raise PlanFileError(where, "'breakdown_at_peak' must be an object of byte counts")
    breakdown = {}
    for key, value in breakdown_raw.items():
        number = _bytes(value)
        if number is not None:
            breakdown[str(key)] = number
    step = doc.get("peak_step", 0)
    return Measurement(
        case_id=str(case.get("id", "")),
        case=case,
        peak_allocated_bytes=peak,
        peak_reserved_bytes=_int(doc, "peak_reserved_bytes", where, optional=True),
        peak_phase=str(doc.get("peak_phase", "")),
        peak_step=step if isinstance(step, int) and not isinstance(step, bool) else 0,
        breakdown=breakdown,
        backend=str(doc.get("backend", "")),
        source=where,
        torch_version=torch_release(doc, where),
    )


def load_measurement(path: str | os.PathLike[str]) -> Measurement:
    where = str(path)
    raw = read_regular_file(path, MAX_BYTES, "a measurement file")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError):  # ValueError: JSON, or an int of 4,300+ digits
        raise PlanFileError(where, "is not valid JSON") from None
    return measurement_from_dict(doc, where)


def _case_roles(case: Mapping[str, Any]) -> dict[str, Any]:
    """Precision roles and optimizer implementation of a case, over its old ``precision``.

    ``weight_dtype`` is the dtype the model was built in (the frozen base too, for LoRA),
    ``adapter_dtype`` PEFT's adapter storage, ``autocast`` null / "bf16" / "fp16"; absent
    keys keep what ``precision`` meant. ``optimizer_impl`` absent means foreach, what every
    case measured before the key existed ran (tools/measure passes foreach=True on CUDA).
    """
    roles: dict[str, Any] = {}
    if case.get("weight_dtype") is not None:
        roles["weight_dtype"] = roles["base_dtype"] = Dtype(str(case["weight_dtype"]))
    if case.get("adapter_dtype") is not None:
        roles["adapter_dtype"] = Dtype(str(case["adapter_dtype"]))
    if "autocast" in case:
        roles["autocast"] = Autocast(str(case["autocast"] or "none"))
    return roles


def plan_for_case(
    case: Mapping[str, Any],
    model_config: Mapping[str, Any] | None = None,
    torch_version: TorchVersion = MEASURED_TORCH,
) -> Plan:
    """The Plan describing a measured case (micro-batch, sequence, method, precision...) under the PyTorch
    release it ran (``Measurement.torch_version``, from the file's ``versions``)."""
    try:
        if model_config:
            spec = model_from_hf_config(model_config, name=str(case.get("model", "measured model")))
            model_id = str(case.get("model", ""))
        else:
            entry = find_model(str(case["model"]))
            spec, model_id = entry.spec, entry.id
        method = Method(case.get("method", "full"))
        lora_doc = case.get("lora") or {}
        lora = LoraSettings(
            rank=int(lora_doc.get("rank", 8)),
            alpha=float(lora_doc.get("alpha", 16)),
            targets=tuple(lora_doc.get("targets", ("q_proj", "v_proj"))),
        )
        plan = Plan(
            model=spec,
            model_id=model_id,
            method=method,
            lora=lora,
            frozen_layers=int(case.get("frozen_layers", 0)) if method is Method.FROZEN else 0,
            **precision_fields(_PRECISIONS[str(case.get("precision", "fp32"))]),
            optimizer=_OPTIMIZERS[str(case.get("optimizer", "adamw"))],
            optimizer_impl=OptimizerImpl(str(case.get("optimizer_impl") or "foreach")),
            attention=Attention(case.get("attention", "sdpa")),
            checkpointing=bool(case.get("checkpointing", False)),
            checkpoint_policy=CheckpointPolicy(str(case.get("checkpoint_policy", "full"))),
            checkpoint_every=int(case.get("checkpoint_every", 1)),
            workload=Workload(micro_batch=int(case.get("micro_batch", 1)), seq_len=int(case.get("seq_len", 1024))),
            hardware=Hardware(gpu="h100-sxm", torch_version=torch_version),
            # A hybrid is served on vLLM only (core.plan.serving_on); its case says which path its Mamba-2 mixers
            # ran (tools/measure on fake tensors: the torch path, ``"mamba_kernels": false``).
            inference=serving_on(spec, Inference()),
            mamba_kernels=bool(case.get("mamba_kernels", True)),
        )
        roles = _case_roles(case)
        return plan.with_changes(**roles) if roles else plan
    except PlanError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(
            "case", dict(case), "a measured case with model, method, precision, optimizer", str(exc)
        ) from None


@dataclass(frozen=True)
class Comparison:
    """An estimate beside a measurement of the same run."""

    measured_bytes: int
    estimated_bytes: float  # the estimate's figure of the same kind (estimated_peak)
    error_bytes: float  # estimated - measured
    error_pct: float  # relative to the measurement
    same_plan: bool  # whether the measured case describes the estimated plan
    figure: str = "allocated peak"  # which of the estimate's figures: "allocated peak" or "tensor peak"


def estimated_peak(estimate: Estimate, measurement: Measurement) -> tuple[float, str]:
    """The estimate's figure a measured peak is of, and its name: on a card (backend "cuda"), the
    allocated peak (the peak phase's tensors and the libraries' workspaces, as
    max_memory_allocated counts them); on a fake-tensor or CPU backend, which takes no workspace,
    the tensor peak (Estimate.tensor_peak_bytes). ``estimate`` is the rank's view
    (Estimate.for_rank) that was measured."""
    if measurement.on_real_gpu:
        return estimate.peak_bytes, "allocated peak"
    return estimate.tensor_peak_bytes, "tensor peak"


def measured_tensor_level(estimate: Estimate, measurement: Measurement) -> float:
    """The measured peak on the scale of the peak phase's tensors (the chart's peak-phase bar):
    a run on a card less the workspaces the estimate counts beside those tensors, so that the
    level stands against the bar as the measurement stands against its figure (estimated_peak)."""
    if measurement.on_real_gpu:
        return measurement.peak_allocated_bytes - (estimate.peak_bytes - estimate.tensor_peak_bytes)
    return float(measurement.peak_allocated_bytes)


def compare(estimate: Estimate, measurement: Measurement, same_plan: bool = True) -> Comparison:
    """Signed error of the estimate's matching figure (:func:`estimated_peak`) against a measured peak."""
    estimated, figure = estimated_peak(estimate, measurement)
    measured = measurement.peak_allocated_bytes
    error = estimated - measured
    pct = error / measured * 100 if measured else 0.0
    return Comparison(measured, estimated, error, pct, same_plan, figure)

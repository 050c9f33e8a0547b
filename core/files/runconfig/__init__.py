"""Open the training configs people already have: PEFT, transformers/TRL, axolotl, LLaMA-Factory,
torchtune, torchtitan, Megatron-Bridge.

``load_run_config(path)`` reads a file as data and returns a :class:`RunConfig`: the run's
settings, every field read with its source, and every key not understood.
``resolve_model(run)`` finds the model it names (a local folder, the local Hugging Face
cache, or the catalogue by name); ``plan_from_run`` turns both into a Plan through the one mapping function.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from core.catalogue import load_models
from core.errors import PlanError, PlanFileError
from core.files.fileio import other_door_of
from core.files.hfcache import CachedModel, resolve_hub_id
from core.files.importer import _read_config, import_model
from core.files.model_source import cached_how, is_hub_id
from core.files.runconfig.axolotl import read_axolotl
from core.files.runconfig.hf import read_hf
from core.files.runconfig.launchers import launcher_config_reason
from core.files.runconfig.llamafactory import read_llamafactory
from core.files.runconfig.llamafactory_v1 import read_llamafactory_v1
from core.files.runconfig.mapping import DTYPES, apply_settings
from core.files.runconfig.megatron import read_megatron_bridge
from core.files.runconfig.peft import read_peft
from core.files.runconfig.reading import MAX_CONFIG_BYTES, parse_text, read_config_file
from core.files.runconfig.result import CONFIG_KIND_LABELS, ConfigKind, FieldRead, RunConfig, RunSettings
from core.files.runconfig.torchtitan import read_torchtitan
from core.files.runconfig.torchtune import read_torchtune
from core.hub_names import catalogue_model_of_name, name_key, nearest_by_name
from core.model import ModelSpec
from core.plan import Plan, serving_on

__all__ = [
    "CONFIG_KIND_LABELS",
    "MAX_CONFIG_BYTES",
    "ConfigKind",
    "FieldRead",
    "ModelChoice",
    "RunConfig",
    "RunSettings",
    "choice_from_cache",
    "detect_kind",
    "load_run_config",
    "model_choice",
    "name_key",
    "parse_run_config",
    "plan_from_run",
    "read_run_config",
    "resolve_model",
]

READERS: Final[dict[ConfigKind, Callable[[dict[str, Any], str], RunConfig]]] = {
    ConfigKind.PEFT: read_peft,
    ConfigKind.HF: read_hf,
    ConfigKind.AXOLOTL: read_axolotl,
    ConfigKind.LLAMA_FACTORY: read_llamafactory,
    ConfigKind.TORCHTUNE: read_torchtune,
    ConfigKind.TORCHTITAN: read_torchtitan,
    ConfigKind.MEGATRON_BRIDGE: read_megatron_bridge,
}

# Keys that only one framework writes, checked in this order (LLaMA-Factory also writes
# TrainingArguments keys, so it is recognised before plain transformers/TRL).
_SIGNS: Final = (
    (ConfigKind.PEFT, ("peft_type",)),
    (ConfigKind.AXOLOTL, ("base_model", "micro_batch_size", "sequence_len", "adapter", "lora_target_linear")),
    (ConfigKind.LLAMA_FACTORY, ("finetuning_type", "cutoff_len", "lora_target", "quantization_bit", "stage")),
    (
        ConfigKind.HF,
        ("per_device_train_batch_size", "model_name_or_path", "optim", "gradient_accumulation_steps", "bf16", "fp16"),
    ),
)


# Tables only a torchtitan job config has (torchtitan/config/job_config.py, commit 238fa995).
_TORCHTITAN_TABLES: Final = ("activation_checkpoint", "parallelism", "job")


# A Megatron-Bridge ConfigContainer's sections and keys only Megatron-Core names
# (NVIDIA-NeMo/Megatron-Bridge 067f987d, src/megatron/bridge/training/config.py).
_MEGATRON_KEYS: Final = {
    "train": ("micro_batch_size", "global_batch_size", "train_iters"),
    "model": (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "recompute_granularity",
        "seq_length",
        "gradient_accumulation_fusion",
    ),
    "optimizer": ("use_distributed_optimizer", "optimizer_cpu_offload"),
    "ddp": ("use_distributed_optimizer", "grad_reduce_in_fp32", "overlap_grad_reduce", "use_megatron_fsdp"),
    "dist": ("use_megatron_fsdp", "use_torch_fsdp2"),
    "peft": ("dim", "_target_", "target_modules"),
}


def _is_megatron_bridge(document: Mapping[str, Any]) -> bool:
    """A section with a Megatron-Core key, or one a run's dump names by its Megatron class."""
    targets = (v.get("_target_") for v in document.values() if isinstance(v, Mapping))
    if any(isinstance(t, str) and t.startswith("megatron.") for t in targets):
        return True
    return any(
        isinstance(document.get(section), Mapping) and any(k in document[section] for k in keys)
        for section, keys in _MEGATRON_KEYS.items()
    )


# LLaMA-Factory v1 (hiyouga/LLaMA-Factory ff6d4d1, src/llamafactory/v1/config/model_args.py and
# training_args.py; examples/v1/): the model is a top-level string ``model`` and the method, sharding,
# kernels and quantisation are plugin tables. Its ``micro_batch_size`` made it read as axolotl, which
# found no model, no adapter and no bf16 in it: a LoRA run on Qwen3-4B was estimated as full fp32
# training of the plan's model. Read by :mod:`core.files.runconfig.llamafactory_v1` (branch h89lf).
_LLAMAFACTORY_V1_KEYS: Final = (
    "model_class", "peft_config", "dist_config", "kernel_config", "quant_config", "init_config",
    "optim_config", "train_dataset", "batching_strategy", "cp_mode", "cp_size", "dp_size", "mp_shard_size",
    "mp_replicate_size", "enable_activation_checkpointing",
)  # fmt: skip


def _is_llamafactory_v1(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("model"), str) and any(key in document for key in _LLAMAFACTORY_V1_KEYS)


def detect_kind(document: Mapping[str, Any]) -> ConfigKind | None:
    if any(isinstance(document.get(t), Mapping) for t in _TORCHTITAN_TABLES):
        return ConfigKind.TORCHTITAN
    if any(isinstance(v, Mapping) and "_component_" in v for v in document.values()):
        return ConfigKind.TORCHTUNE
    if _is_megatron_bridge(document):
        return ConfigKind.MEGATRON_BRIDGE
    if "r" in document and "target_modules" in document:
        return ConfigKind.PEFT
    for kind, keys in _SIGNS:
        if any(key in document for key in keys):
            return kind
    return None


def parse_run_config(document: dict[str, Any], where: str, kind: ConfigKind | None = None) -> RunConfig:
    launcher = launcher_config_reason(document, where) if kind is None else None
    if launcher is not None:
        raise PlanFileError(where, launcher)
    if kind is None and _is_llamafactory_v1(document):
        try:
            return read_llamafactory_v1(document, where)
        except PlanError as exc:
            raise PlanFileError(where, str(exc)) from None
    found = kind or detect_kind(document)
    mine = other_door_of(document, "a training config") if found is None else ""  # `estimate --from plan.json`
    if mine:
        raise PlanFileError(where, mine)
    if found is None:
        raise PlanFileError(
            where,
            "is not a training config the planner reads (PEFT adapter_config.json, transformers/TRL, "
            "axolotl, LLaMA-Factory, torchtune, torchtitan or Megatron-Bridge)",
        )
    try:
        return READERS[found](document, where)
    except PlanError as exc:  # a value the plan's own checks refuse (a target list, ...)
        raise PlanFileError(where, str(exc)) from None


def load_run_config(path: str | os.PathLike[str], kind: ConfigKind | None = None) -> RunConfig:
    """Read a training config; every problem is a one-line :class:`PlanFileError`."""
    return parse_run_config(read_config_file(path), str(path), kind)


def read_run_config(path: str) -> tuple[RunConfig, ModelChoice | None]:
    """A config and the model it names, in one call (the window runs it off its thread)."""
    run = load_run_config(path)
    return run, resolve_model(run)


def loads_run_config(raw: bytes, where: str = "(text)", kind: ConfigKind | None = None) -> RunConfig:
    return parse_run_config(parse_text(raw, where, Path(where).suffix), where, kind)


# ---- the model the config names ------------------------------------------------------
@dataclass(frozen=True)
class ModelChoice:
    spec: ModelSpec | None  # None: not found; ask the user, offering ``candidates``
    model_id: str  # catalogue id, "" for a local folder
    how: str  # how it was found, in words
    torch_dtype: str | None  # the dtype the model's own config.json gives
    candidates: tuple[str, ...] = ()


def _dtype_of(config: Mapping[str, Any]) -> str | None:
    value = config.get("torch_dtype", config.get("dtype"))
    return DTYPES.get(value.lower()) if isinstance(value, str) else None


def _local(path: Path) -> ModelChoice | None:
    folder = path if path.is_dir() else path.parent
    config_path = folder / "config.json" if path.is_dir() else path
    if not config_path.is_file() or config_path.name != "config.json":
        return None
    imported = import_model(folder if path.is_dir() else config_path)
    return ModelChoice(imported.spec, "", f"local model {config_path}", _dtype_of(_read_config(config_path)))


def _cached(ref: str) -> ModelChoice | None:
    """The model a Hub id names when the local Hugging Face cache holds it (read offline, as
    ``--model`` reads one: :mod:`core.files.model_source`); None otherwise."""
    if not is_hub_id(ref):
        return None
    found = resolve_hub_id(ref.strip())
    return choice_from_cache(found) if isinstance(found, CachedModel) else None


def choice_from_cache(model: CachedModel, why: str = "") -> ModelChoice:
    """A model of the local Hugging Face cache, with the dtype its config.json gives."""
    try:
        dtype = _dtype_of(_read_config(Path(model.path) / "config.json"))
    except PlanFileError:
        dtype = None
    return ModelChoice(model.spec, "", cached_how(model) + (f" ({why})" if why else ""), dtype)


def resolve_model(run: RunConfig) -> ModelChoice | None:
    """The model a config names: a local folder first, then a Hub id the local Hugging Face
    cache holds, then the catalogue by name.

    Returns a choice with ``spec=None`` and the closest catalogue ids when the name is
    neither; None when the config names no model at all.
    """
    base = Path(run.path).parent
    if run.model_dir:
        found = _local_ref(run.model_dir, base)
        if found is not None:
            return found
    return model_choice(run.model_ref, base) if run.model_ref else None


def _local_ref(ref: str, base: Path) -> ModelChoice | None:
    path = Path(os.path.expanduser(ref))
    for candidate in (path,) if path.is_absolute() else (base / path, path):
        try:
            if candidate.exists():
                found = _local(candidate)
                if found is not None:
                    return found
        except OSError:
            continue
    return None


def model_choice(ref: str, base: Path) -> ModelChoice:
    """The model ``ref`` names: a local folder (relative to ``base`` too), then a Hub id the local Hugging Face
    cache holds, then the catalogue by name; else a choice with ``spec=None`` and the closest catalogue ids.
    (The training configs' importer and the launch-command reader, core.files.launch.serve_command, both ask.)"""
    local = _local_ref(ref, base)
    if local is not None:
        return local
    cached = _cached(ref)
    if cached is not None:
        return cached
    matched = catalogue_model_of_name(ref)
    if matched is not None:
        entry = matched.entry
        how = f"catalogue: {entry.name}" + (f" ({matched.how})" if matched.how else "")
        return ModelChoice(entry.spec, entry.id, how, _dtype_of(entry.config))
    models = load_models()
    keys = {name_key(m.id): m.id for m in models}
    close = [keys[k] for k in difflib.get_close_matches(name_key(ref), list(keys), n=3, cutoff=0.6)]
    near = nearest_by_name(ref)  # another organisation's upload of a catalogue model: asked, that entry first
    if near is not None:
        close = [near.id, *(c for c in close if c != near.id)][:3]
    return ModelChoice(None, "", f"'{ref}' is not a local folder or a catalogue model", None, tuple(close))


def choice_from_catalogue(model_id: str, why: str = "chosen") -> ModelChoice:
    from core.catalogue import find_model

    entry = find_model(model_id)
    return ModelChoice(entry.spec, entry.id, f"catalogue: {entry.name} ({why})", _dtype_of(entry.config))


def _plan_model_dtype(plan: Plan) -> str | None:
    """The torch_dtype of the plan's own model when it is a catalogue model."""
    for entry in load_models():
        if plan.model_id and entry.id == plan.model_id:
            return _dtype_of(entry.config)
    return None


def plan_from_run(run: RunConfig, base: Plan, model: ModelChoice | None = None) -> Plan:
    """``base`` with the config's model (when found) and every setting the config gives."""
    plan = base
    try:
        if model is not None and model.spec is not None:
            frozen = min(plan.frozen_layers, model.spec.num_layers)
            inference = serving_on(model.spec, plan.inference)  # Llama 4: served on vLLM only
            plan = replace(plan, model=model.spec, model_id=model.model_id, frozen_layers=frozen, inference=inference)
        plan = plan.targets_for(plan.model)  # a latent-attention model's targets it has (Plan.targets_for)
        dtype = model.torch_dtype if model is not None and model.spec is not None else _plan_model_dtype(plan)
        return apply_settings(plan, run.settings, model_dtype=dtype)
    except PlanError as exc:
        raise PlanFileError(run.path, str(exc)) from None

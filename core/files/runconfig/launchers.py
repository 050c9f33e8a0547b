"""Launcher configs opened as if they were training configs: a DeepSpeed JSON on its own and an accelerate
``config_file``. Neither names the model, the method or (with DeepSpeed's ``"auto"``) the batch: the Trainer or
script they launch decides those. They are refused with one line that says what the file sets and which plan
settings match it, instead of being read as a TrainingArguments file (a DeepSpeed JSON's
``"gradient_accumulation_steps": "auto"`` was refused as "'auto' is not allowed; expected an integer") or called
"not a training config" with no word on what it is.

Keys read: DeepSpeed's ``zero_optimization.stage`` / ``offload_optimizer.device`` / ``offload_param.device``,
``train_micro_batch_size_per_gpu`` and ``gradient_accumulation_steps`` (deepspeedai/DeepSpeed edaa7221,
deepspeed/runtime/zero/config.py, runtime/constants.py); accelerate's ``distributed_type``,
``num_processes``, ``num_machines``, ``deepspeed_config.zero_stage`` / ``offload_optimizer_device`` /
``offload_param_device`` and ``fsdp_config.fsdp_offload_params`` (huggingface/accelerate 16cb6eb8,
commands/config/config_args.py and the configs TRL ships: huggingface/trl f2cd577,
examples/accelerate_configs/).

An accelerate config whose ``deepspeed_config.deepspeed_config_file`` names a DeepSpeed JSON runs that file: accelerate
passes the path unchanged (16cb6eb8 utils/launch.py lines 580-581, ``ACCELERATE_DEEPSPEED_CONFIG_FILE``),
``DeepSpeedPlugin.__post_init__`` builds ``HfDeepSpeedConfig`` from it (utils/dataclasses.py lines 1264-1273), which
opens it with ``os.path.exists`` / ``open`` (utils/deepspeed.py lines 141-143) — relative to the directory
``accelerate launch`` runs in — and takes the stage and offload from it (dataclasses.py lines 1278-1300); the YAML's
own ``zero_stage``, ``offload_*_device``, ``gradient_accumulation_steps`` and ``gradient_clipping`` beside it make
``_deepspeed_config_checks`` raise (lines 1507-1530; launch.py line 1388 lists the section's keys). The planner has no
launch directory: it reads the file relative to the YAML's folder, only in or below it (common.confined), as it
reads a training config's ``deepspeed:`` file, and says so where it finds none there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from core.errors import PlanFileError
from core.files.runconfig.common import MAX_DEEPSPEED_BYTES, OddValues, confined
from core.files.runconfig.deepspeed_optimizer import deepspeed_optimizer
from core.files.runconfig.reading import Taker, read_json_document

# A DeepSpeed config's top-level keys that no training config of the readers has at its top level.
_DEEPSPEED_SIGNS: Final = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size")
_OFFLOAD_DEVICES: Final = ("cpu", "nvme")


# accelerate's DistributedType names (utils/dataclasses.py lines 625-638): a file of them needs no
# compute_environment, which load_config_from_file takes as LOCAL_MACHINE when absent (commands/config/config_args.py
# line 66; examples/config_yaml_templates/ write none).
_DISTRIBUTED_TYPES: Final = frozenset((
    "NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "DEEPSPEED",
    "FSDP", "XLA", "MEGATRON_LM", "MULTI_HPU", "MULTI_NEURON",
))  # fmt: skip
# The accelerate keys _deepspeed_config_checks refuses beside deepspeed_config_file (utils/dataclasses.py
# lines 1508-1521, less the ACCELERATE_ / DEEPSPEED_ prefixes; mixed_precision is a top-level key).
_IGNORED_BESIDE_FILE: Final = (
    "gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
    "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path", "zero3_save_16bit_model",
)  # fmt: skip


def launcher_config_reason(document: Mapping[str, Any], where: str = "") -> str | None:
    """Why ``document`` (read from ``where``) is not read, with the plan settings it asks for; None when it is no
    launcher config."""
    kind = document.get("distributed_type")
    if isinstance(kind, str) and ("compute_environment" in document or kind.strip().upper() in _DISTRIBUTED_TYPES):
        return _accelerate(document, where)
    if any(key in document for key in _DEEPSPEED_SIGNS):
        return _deepspeed(document)
    return None


def _deepspeed(document: Mapping[str, Any]) -> str:
    said: list[str] = []
    flags: list[str] = []
    _deepspeed_settings(document, said, flags)
    return _reason("a DeepSpeed config", said, flags, "the training config that names it (its `deepspeed:` key)")


def _deepspeed_settings(document: Mapping[str, Any], said: list[str], flags: list[str]) -> None:
    """What a DeepSpeed config sets (stage, offload, batch, optimizer section) and the plan options that match."""
    zero = document.get("zero_optimization")
    zero = zero if isinstance(zero, Mapping) else {}
    _stage(zero.get("stage"), said, flags)
    for key, offload in (("offload_param", "params"), ("offload_optimizer", "optimizer")):  # as common.sharding
        target = zero.get(key)
        if isinstance(target, Mapping) and target.get("device") in _OFFLOAD_DEVICES:
            said.append(f"{key} to {target['device']}")
            flags.append(f"--offload {offload}")
            break
    for key, flag in (("train_micro_batch_size_per_gpu", "--micro-batch"), ("gradient_accumulation_steps", "--accum")):
        value = document.get(key)
        if _count(value):
            said.append(f"{key} {value}")
            flags.append(f"{flag} {value}")
    _optimizer(document, said, flags)


def _optimizer(document: Mapping[str, Any], said: list[str], flags: list[str]) -> None:
    """The optimizer a DeepSpeed config's ``optimizer`` section builds, as the trainer importers read it
    (core.files.runconfig.deepspeed_optimizer), with the plan options that match it."""
    if not isinstance(document, dict) or not isinstance(document.get("optimizer"), dict):
        return
    found = deepspeed_optimizer(Taker(document, ""), OddValues(), document, "deepspeed")
    if "optimizer" not in found:
        return
    said.append(f"optimizer {str(document['optimizer'].get('type'))[:40]}")
    flags.append(f"--optimizer {found['optimizer']}")
    if "optimizer_impl" in found:
        flags.append(f"--optimizer-impl {found['optimizer_impl']}")
    if "weight_decay" in found:
        flags.append(f"--weight-decay {found['weight_decay']:g}")


def _accelerate(document: Mapping[str, Any], where: str) -> str:
    kind = str(document.get("distributed_type")).strip().upper()[:40]
    said = [f"distributed_type {kind}"]
    flags: list[str] = []
    section = document.get("deepspeed_config")
    section = section if isinstance(section, Mapping) else {}
    if kind == "MULTI_GPU":
        flags.append("--strategy ddp")
    elif kind == "DEEPSPEED" and isinstance(section.get("deepspeed_config_file"), str):
        _deepspeed_file(section, where, said, flags)
    elif kind == "DEEPSPEED":
        _stage(section.get("zero_stage"), said, flags)
        for key, offload in (("offload_param_device", "params"), ("offload_optimizer_device", "optimizer")):
            if section.get(key) in _OFFLOAD_DEVICES:
                said.append(f"{key} {section[key]}")
                flags.append(f"--offload {offload}")
                break
    elif kind == "FSDP":
        flags.append("--strategy fsdp")
        section = document.get("fsdp_config")
        if isinstance(section, Mapping) and section.get("fsdp_offload_params") is True:
            said.append("fsdp_offload_params")
            flags.append("--offload params")
    processes = _counted(document.get("num_processes"))
    machines = _counted(document.get("num_machines")) or 1
    if processes:
        said.append(f"{processes} process" + ("es" if processes > 1 else ""))
        if machines > 1 and processes % machines == 0:
            said[-1] += f" on {machines} machines"
            flags.append(f"--nodes {machines} --gpus-per-node {processes // machines}")
        else:
            flags.append(f"--gpus {processes}")
    return _reason("an accelerate config", said, flags, "the training config it launches")


def _deepspeed_file(section: Mapping[str, Any], where: str, said: list[str], flags: list[str]) -> None:
    """The DeepSpeed JSON an accelerate config's ``deepspeed_config_file`` names, read as accelerate runs it."""
    name = section["deepspeed_config_file"]
    shown = name[:80]
    found, why = confined(Path(where).parent, name)
    if found is None:
        launch = " (accelerate opens it from the directory it is launched in)" if "not found" in why else ""
        said.append(f"deepspeed_config_file {shown} not read: {why}{launch}")
        return
    try:
        file = read_json_document(found, MAX_DEEPSPEED_BYTES, "a DeepSpeed config")
    except PlanFileError as error:
        said.append(f"deepspeed_config_file {shown} not read: {error.reason}")
        return
    if not isinstance(file, Mapping):
        said.append(f"deepspeed_config_file {shown} not read: it holds no JSON object")
        return
    sets: list[str] = []
    _deepspeed_settings(file, sets, flags)
    said.append(f"deepspeed_config_file {shown} with {', '.join(sets)}" if sets else f"deepspeed_config_file {shown}")
    beside = [key for key in _IGNORED_BESIDE_FILE if key in section]
    if beside:
        said.append(f"accelerate refuses {', '.join(beside)} beside deepspeed_config_file")


def _stage(stage: Any, said: list[str], flags: list[str]) -> None:
    # JSON has one number type: 3.0 is stage 3; true == 1 in Python, but it is no stage (as common._deepspeed_stage).
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        return
    said.append(f"ZeRO stage {int(stage)}")
    flags.append("--strategy ddp" if stage == 0 else f"--strategy zero{int(stage)}")


def _count(value: Any) -> bool:
    return _counted(value) is not None


def _counted(value: Any) -> int | None:
    """A count a launcher would take (1 to a million), else None: not a bool, a string, 0 or 10⁴⁰⁰."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1_000_000 else None


def _reason(what: str, said: list[str], flags: list[str], instead: str) -> str:
    sets = f" ({', '.join(said)})" if said else ""
    match = f"; the plan settings that match it: {' '.join(flags)}" if flags else ""
    return (
        f"is {what}{sets}, not a training config: it names no model or method. Open {instead}, "
        f"or give the model and method with the plan's options{match}"
    )

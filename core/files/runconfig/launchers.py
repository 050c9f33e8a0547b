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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from core.files.runconfig.common import OddValues
from core.files.runconfig.deepspeed_optimizer import deepspeed_optimizer
from core.files.runconfig.reading import Taker

# A DeepSpeed config's top-level keys that no training config of the readers has at its top level.
_DEEPSPEED_SIGNS: Final = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size")
_OFFLOAD_DEVICES: Final = ("cpu", "nvme")


def launcher_config_reason(document: Mapping[str, Any]) -> str | None:
    """Why ``document`` is not read, with the plan settings it asks for; None when it is no launcher config."""
    if isinstance(document.get("distributed_type"), str) and "compute_environment" in document:
        return _accelerate(document)
    if any(key in document for key in _DEEPSPEED_SIGNS):
        return _deepspeed(document)
    return None


def _deepspeed(document: Mapping[str, Any]) -> str:
    zero = document.get("zero_optimization")
    zero = zero if isinstance(zero, Mapping) else {}
    said: list[str] = []
    flags: list[str] = []
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
    return _reason("a DeepSpeed config", said, flags, "the training config that names it (its `deepspeed:` key)")


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


def _accelerate(document: Mapping[str, Any]) -> str:
    kind = str(document.get("distributed_type")).strip().upper()[:40]
    said = [f"distributed_type {kind}"]
    flags: list[str] = []
    if kind == "MULTI_GPU":
        flags.append("--strategy ddp")
    elif kind == "DEEPSPEED":
        section = document.get("deepspeed_config")
        section = section if isinstance(section, Mapping) else {}
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

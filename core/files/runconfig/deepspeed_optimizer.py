"""The optimizer a DeepSpeed config's own ``optimizer`` section builds, for every trainer importer that reads a
DeepSpeed config (transformers / TRL, axolotl and LLaMA-Factory 0.9 through TrainingArguments' ``deepspeed``).

With an ``optimizer`` section the trainer builds none of its own: transformers hands DeepSpeed accelerate's
``DummyOptim`` (huggingface/transformers 5.25.0 src/transformers/integrations/deepspeed.py
``deepspeed_optim_sched``: ``if "optimizer" in config: ... optimizer = DummyOptim(params=model_parameters)``; with
``args.adafactor`` it raises "--adafactor was passed, but also found `optimizer` configured in the DeepSpeed config"),
so ``optim`` is not used, and DeepSpeed builds the section's type (deepspeedai/DeepSpeed v0.18.3
deepspeed/runtime/engine.py ``_configure_basic_optimizer``, lines 1533-1611; the same at v0.18.9 lines 1649-1727):

- the name is lower-cased when it is one of DeepSpeed's (runtime/config.py lines 83-86 ``DEEPSPEED_OPTIMIZERS``,
  line 799), else kept as typed and looked up in ``torch.optim`` (engine.py ``getattr(torch.optim, name)``);
- ``adam`` / ``adamw`` (lines 1543-1572): ``torch_adam`` (default False) and ``adam_w_mode`` (default True,
  config.py line 93) are popped; AdamW when the type is ``adamw`` or ``adam_w_mode`` is true, so ``Adam`` alone is
  AdamW (line 1548). ``torch_adam``: ``torch.optim.Adam`` / ``AdamW`` with the other params (torch's own default
  step, foreach on CUDA unless the params say ``fused`` or ``foreach``); else with ``offload_optimizer`` on cpu or
  nvme (``zero_use_cpu_optimizer``, lines 919-922) ``DeepSpeedCPUAdam`` and without it ``FusedAdam`` (one
  multi-tensor CUDA kernel, the plan's fused step);
- ``adagrad`` (1574-1579): ``DeepSpeedCPUAdagrad`` offloaded, else ``torch.optim.Adagrad``;
- ``lion`` (1605-1611): ``DeepSpeedCPULion`` offloaded, else ``FusedLion``: one float32 ``exp_avg`` either way, the
  plan's 32-bit Lion;
- ``lamb`` (FusedLamb), ``onebitadam`` / ``zerooneadam`` / ``onebitlamb`` (each asserts "not compatible with ZeRO"),
  ``muadam`` / ``muadamw`` / ``musgd`` (the mup package) and ``muon`` (DeepSpeed's MuonWithAuxAdam): not modelled,
  listed;
- a torch.optim name: ``SGD`` (``momentum`` > 0: a momentum buffer) and ``RMSprop`` are the plan's; other names are
  listed. Under ZeRO-Offload the plan models only DeepSpeed's CPU kernels (core.optimizer_stacks), so a torch class
  stepped on the host is listed there.

The weight decay is the section's: a number, or ``"auto"`` (TrainingArguments.weight_decay, filled by
transformers' ``trainer_config_process``); absent, the built class's default: 0 for FusedAdam, DeepSpeedCPUAdam,
DeepSpeedCPUAdagrad, the Lions, torch's Adam, Adagrad, SGD and RMSprop, 0.01 for torch's AdamW.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from core.files.runconfig.reading import Taker
from core.files.runconfig.result import FieldRead

if TYPE_CHECKING:  # common imports this module: the class is only named here
    from core.files.runconfig.common import OddValues

# deepspeedai/DeepSpeed v0.18.3 deepspeed/runtime/config.py lines 70-86: the names DeepSpeed builds itself.
NOT_MODELLED: Final = {
    "lamb": "DeepSpeed's FusedLamb is not modelled",
    "onebitadam": "DeepSpeed's 1-bit Adam asserts it is not compatible with ZeRO, and is not modelled",
    "zerooneadam": "DeepSpeed's 0/1 Adam asserts it is not compatible with ZeRO, and is not modelled",
    "onebitlamb": "DeepSpeed's 1-bit Lamb asserts it is not compatible with ZeRO, and is not modelled",
    "muadam": "mup's MuAdam is not modelled",
    "muadamw": "mup's MuAdamW is not modelled",
    "musgd": "mup's MuSGD is not modelled",
    "muon": "DeepSpeed's MuonWithAuxAdam is not modelled (the plan's Muon is torch.optim.Muon, refused under ZeRO)",
}
# torch.optim classes the plan models, by the name DeepSpeed looks up (case as typed: getattr(torch.optim, name)).
TORCH_NAMES: Final = ("SGD", "RMSprop")
# Weight decay of each class when the section gives none (torch 2.13.0 torch/optim/adamw.py weight_decay=1e-2;
# deepspeed v0.18.3 ops/adam/fused_adam.py, cpu_adam.py, ops/adagrad/cpu_adagrad.py, ops/lion/*.py: 0).
TORCH_ADAMW_DECAY: Final = 0.01
REPLACES_OPTIM: Final = (
    "not used: the DeepSpeed config has an optimizer section, so the Trainer hands DeepSpeed a DummyOptim and "
    "DeepSpeed builds that one (transformers integrations/deepspeed.py deepspeed_optim_sched)"
)
# What the trainer's own optimizer choice set, which an optimizer section replaces.
TRAINER_OPTIMIZER_SETTINGS: Final = ("galore_rank", "galore_update_proj_gap", "optimizer_in_backward")


def deepspeed_optimizer(taker: Taker, odd: OddValues, document: dict[str, Any], where: str) -> dict[str, Any]:
    """The plan's optimizer (RunSettings ``optimizer``, ``optimizer_impl``, ``weight_decay``) from the
    ``optimizer`` section of the DeepSpeed config ``document`` (read from ``where``); {} when it has none or
    names one the plan cannot express (listed)."""
    section = document.get("optimizer")
    if section is None:
        return {}
    kind = section.get("type") if isinstance(section, dict) else None
    # A null params is DeepSpeed's empty one (engine.py line 1535: ``if optimizer_parameters is None``).
    params = (section.get("params") or {}) if isinstance(section, dict) else None
    if not isinstance(kind, str) or not isinstance(params, dict):
        odd.add(f"{where}: optimizer", section, "a section with a type and a params table")
        return {}
    zero = document.get("zero_optimization")
    target = zero.get("offload_optimizer") if isinstance(zero, dict) else None
    offload = isinstance(target, dict) and target.get("device") in ("cpu", "nvme")
    name = kind.lower()
    if name in ("adam", "adamw"):
        found = _adam(odd, name, params, offload, where)
    elif name in ("adagrad", "lion"):
        found = {"optimizer": name, "class": _OFFLOADED[name] if offload else _ON_GPU[name]}
        if name == "adagrad" and not offload:
            found["optimizer_impl"] = "foreach"  # torch's default step on CUDA
    elif name in NOT_MODELLED:
        odd.add(f"{where}: optimizer.type", kind, NOT_MODELLED[name])
        return {}
    elif kind in TORCH_NAMES and not offload:
        found = _torch_named(kind, params)
    else:
        why = (
            "under ZeRO-Offload the plan models DeepSpeed's CPU Adam / Adagrad / Lion only"
            if kind in TORCH_NAMES
            else "a torch.optim class the plan does not model"
        )
        odd.add(f"{where}: optimizer.type", kind, why)
        return {}
    if not found:
        return {}
    built = found.pop("class")
    source = f"{where}: optimizer.type {kind} (DeepSpeed builds {built})"
    taker.record("optimizer", found["optimizer"], source)
    if "optimizer_impl" in found:
        taker.record("optimizer_impl", found["optimizer_impl"], source)
    found.update(_weight_decay(taker, odd, params, built, where))
    if params.get("amsgrad") is True:
        odd.add(f"{where}: optimizer.params.amsgrad", True, "AMSGrad's extra state is not modelled")
    return found


_OFFLOADED: Final = {"adagrad": "DeepSpeedCPUAdagrad", "lion": "DeepSpeedCPULion"}
_ON_GPU: Final = {"adagrad": "torch.optim.Adagrad", "lion": "FusedLion"}


def _adam(odd: OddValues, name: str, params: dict[str, Any], offload: bool, where: str) -> dict[str, Any]:
    """Adam or AdamW as engine.py lines 1543-1572 build it, and which class steps it."""
    torch_adam = params.get("torch_adam", False)
    w_mode = params.get("adam_w_mode", True)
    for key, value in (("torch_adam", torch_adam), ("adam_w_mode", w_mode)):
        if not isinstance(value, bool):
            odd.add(f"{where}: optimizer.params.{key}", value, "true or false")
            return {}
    optimizer = "adamw" if name == "adamw" or w_mode else "adam"
    torch_class = "torch.optim.AdamW" if optimizer == "adamw" else "torch.optim.Adam"
    if torch_adam:
        found: dict[str, Any] = {"optimizer": optimizer, "class": torch_class}
        if offload:
            odd.add(f"{where}: optimizer.params.torch_adam", True, f"{torch_class} stepped on the host is not modelled")
            return {}
        impl = "fused" if params.get("fused") is True else "forloop" if params.get("foreach") is False else "foreach"
        found["optimizer_impl"] = impl
        return found
    if offload:
        return {"optimizer": optimizer, "class": f"DeepSpeedCPUAdam adamw_mode={optimizer == 'adamw'}"}
    return {"optimizer": optimizer, "optimizer_impl": "fused", "class": f"FusedAdam adam_w_mode={optimizer == 'adamw'}"}


def _torch_named(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """torch.optim.SGD (with or without momentum) or RMSprop, built by name (engine.py's last branch)."""
    impl = "forloop" if params.get("foreach") is False else "foreach"  # torch's default step on CUDA: foreach
    if kind == "RMSprop":
        return {"optimizer": "rmsprop", "optimizer_impl": impl, "class": "torch.optim.RMSprop"}
    momentum = params.get("momentum", 0)
    moving = isinstance(momentum, int | float) and not isinstance(momentum, bool) and momentum > 0
    return {"optimizer": "sgd-momentum" if moving else "sgd", "optimizer_impl": impl, "class": "torch.optim.SGD"}


def _weight_decay(taker: Taker, odd: OddValues, params: dict[str, Any], built: str, where: str) -> dict[str, Any]:
    """The section's weight decay: a number, "auto" (TrainingArguments', read with the trainer's keys) or
    absent (the built class's default)."""
    decay = params.get("weight_decay")
    if decay == "auto":
        return {}
    key = f"{where}: optimizer.params.weight_decay"
    if decay is None:
        default = TORCH_ADAMW_DECAY if built == "torch.optim.AdamW" else 0.0
        name = built.split()[0]
        taker.record("weight_decay", default, f"default: {name}'s weight_decay (the section gives none)")
        return {"weight_decay": default}
    if isinstance(decay, bool) or not isinstance(decay, int | float) or not 0 <= decay <= 10:
        odd.add(key, decay, "a number from 0 to 10, or auto")
        return {}
    taker.record("weight_decay", float(decay), key)
    return {"weight_decay": float(decay)}


def replaced_trainer_optimizer(
    taker: Taker, odd: OddValues, s: dict[str, Any], found: dict[str, Any], key: str
) -> None:
    """Where the DeepSpeed section chose the optimizer (``found``), drop what the trainer's own ``key`` (optim)
    set beside it (its optimizer, GaLore's settings; its implementation where the section sets one) from the
    settings, the fields read and the values listed as not modelled, and say that the key is not used."""
    if "optimizer" not in found:
        return
    odd.items[:] = [item for item in odd.items if not item.startswith(f"{key} = ")]
    dropped = {"optimizer", "galore targets", *TRAINER_OPTIMIZER_SETTINGS}
    if "optimizer_impl" in found:
        dropped.add("optimizer_impl")
    for name in TRAINER_OPTIMIZER_SETTINGS:
        s.pop(name, None)
    trainer_said = (key, f"{key}_args", "optim_target_modules", "default: ")
    taker.fields[:] = [f for f in taker.fields if not (f.setting in dropped and f.source.startswith(trainer_said))]
    value = taker.raw(key)
    if value is not None:
        taker.notes.append(FieldRead("note", value, f"{key}: {REPLACES_OPTIM}"))

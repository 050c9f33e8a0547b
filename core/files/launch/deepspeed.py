"""DeepSpeed config (JSON), standalone or inside a trainer's config.

Keys read from deepspeed v0.17 (``deepspeed/runtime/config.py``, ``deepspeed/runtime/zero/config.py``,
``offload_config.py``): ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``,
``bf16.enabled`` / ``fp16.enabled``, ``zero_optimization.stage`` with ``offload_optimizer`` /
``offload_param`` (``device``: none | cpu | nvme; parameters offload only under stage 3),
``reduce_bucket_size`` and ``allgather_bucket_size`` (elements, default 5e8), ``overlap_comm``
(default True for stage 3 only: ``zero/config.py overlap_comm_valid``; written as the plan's
``parallel.zero_overlap_comm`` for stages 1-2 and ``parallel.zero3_overlap_comm`` for stage 3),
``stage3_prefetch_bucket_size`` (5e7) and ``stage3_max_live_parameters`` (1e9),
``gradient_clipping`` (default 0.0: no clipping; 1.0 is written for a plan that clips),
``bf16.bf16_master_weights_and_grads`` and ``bf16.bf16_optimizer_states`` (default False: deepspeedai/DeepSpeed
edaa7221 runtime/precision_config.py ``DeepSpeedBF16Config``; PR #7700, v0.18.3; the plan's
``parallel.bf16_master_weights`` / ``parallel.bf16_optimizer_states``, written where they apply). Inside a
transformers / TRL / axolotl / LLaMA-Factory config the batch and precision keys are "auto"
(transformers ``integrations/deepspeed.py`` fills them from TrainingArguments). The
``train_batch_size`` is left to DeepSpeed (micro-batch × accumulation × ranks), so the file
runs on any GPU count.
"""

from __future__ import annotations

import json
from typing import Any, Final

from core.dtypes import Autocast
from core.files.launch.common import (
    ENV_SETTINGS,
    GPU_COUNT,
    LAUNCHER_WHY,
    RECIPE_WHY,
    TRAINING_NAMES,
    Draft,
    Export,
    Target,
    deepspeed_section_builds,
)
from core.inputs import deepspeed_bf16_master, deepspeed_bf16_states
from core.optimizer_stacks import DEEPSPEED_TYPES
from core.plan import Offload, Optimizer, Plan, Strategy

STAGES: Final = {Strategy.DDP: 0, Strategy.ZERO1: 1, Strategy.ZERO2: 2, Strategy.ZERO3: 3}
STRATEGIES: Final = {stage: strategy for strategy, stage in STAGES.items()}
EXPRESSED: Final = (
    "method.grad_clip",
    "parallel.strategy",
    "parallel.offload",
    "parallel.zero_bucket_elements",
    "parallel.zero_overlap_comm",
    "parallel.zero3_overlap_comm",
    "parallel.bf16_master_weights",
    "parallel.bf16_optimizer_states",
    "parallel.zero3_prefetch_elements",
    "parallel.zero3_max_live_elements",
    "parallel.zero3_max_reuse_elements",
    "workload.micro_batch",
    "workload.grad_accum",
    "method.autocast",
)
_CPU: Final = {"device": "cpu", "pin_memory": True}


def zero_section(draft: Draft) -> dict[str, Any]:
    """``zero_optimization`` for the plan's strategy, offload and buckets."""
    par = draft.plan.parallel
    stage = STAGES.get(par.strategy)
    if stage is None:
        draft.cannot(
            "parallel.strategy", "DeepSpeed runs ZeRO, not FSDP: ZeRO-3, which shards the same state, is written"
        )
        stage = 3
    zero: dict[str, Any] = {"stage": stage}
    if par.offload is Offload.PARAMS:
        if stage == 3:
            zero["offload_param"] = dict(_CPU)
            zero["offload_optimizer"] = dict(_CPU)
        else:
            draft.cannot("parallel.offload", "DeepSpeed offloads parameters only under ZeRO-3")
    elif par.offload is Offload.OPTIMIZER:
        if stage == 0:
            draft.cannot("parallel.offload", "ZeRO-Offload needs ZeRO stage 1 or more")
        else:
            zero["offload_optimizer"] = dict(_CPU)
    if stage >= 1:
        zero.update(
            reduce_bucket_size=par.zero_bucket_elements,
            allgather_bucket_size=par.zero_bucket_elements,
            # Each stage's own setting (parallel.zero3_overlap_comm, on by default, as DeepSpeed's at stage 3).
            overlap_comm=par.zero3_overlap_comm if stage == 3 else par.zero_overlap_comm,
            contiguous_gradients=True,
        )
    if stage == 3:
        zero.update(
            stage3_prefetch_bucket_size=par.zero3_prefetch_elements,
            stage3_max_live_parameters=par.zero3_max_live_elements,
            stage3_max_reuse_distance=par.zero3_max_reuse_elements,
            stage3_gather_16bit_weights_on_model_save=True,
        )
    return zero


def bf16_section(draft: Draft, enabled: object, zero: dict[str, Any]) -> dict[str, Any]:
    """``bf16``: ``enabled`` and, where the plan keeps them in bf16, the low-precision master keys. A bf16 master
    with float32 states needs ``offload_optimizer`` in the file (base_optimizer.py ``_configure_master_weights``):
    where ``zero`` has none (parameter offload below stage 3, which this file cannot write) the keys are left out
    and the setting listed, rather than a file DeepSpeed refuses."""
    plan = draft.plan
    section: dict[str, Any] = {"enabled": enabled}
    if not deepspeed_bf16_master(plan):
        return section
    states = deepspeed_bf16_states(plan)
    if not states and "offload_optimizer" not in zero:
        draft.cannot(
            "parallel.bf16_master_weights",
            "DeepSpeed takes a bf16 master with float32 optimizer states only with offload_optimizer, "
            "which this file does not write for this layout",
        )
        return section
    section["bf16_master_weights_and_grads"] = True
    section["bf16_optimizer_states"] = states
    return section


def optimizer_section(draft: Draft, auto: bool) -> dict[str, Any]:
    """``{"optimizer": ...}`` under ZeRO-Offload: DeepSpeed steps an offloaded optimizer only in its own CPU kernels,
    built from this section's type (core.optimizer_stacks DEEPSPEED_TYPES; without it the trainer's client optimizer
    raises ZeRORuntimeException, deepspeedai/DeepSpeed edaa7221 runtime/engine.py lines 2040-2044); empty otherwise,
    the trainer's own optimizer being ZeRO's client. ``auto`` leaves lr and weight decay to transformers
    (integrations/deepspeed.py fills "auto")."""
    plan = draft.plan
    if not deepspeed_section_builds(plan):
        return {}
    params: dict[str, Any] = {"lr": "auto", "weight_decay": "auto"} if auto else {"weight_decay": plan.weight_decay}
    if plan.optimizer is Optimizer.ADAM:
        params["adam_w_mode"] = False  # engine.py line 2100: "Adam" alone is AdamW
    return {"optimizer": {"type": DEEPSPEED_TYPES[plan.optimizer], "params": params}}


def inline_config(draft: Draft) -> dict[str, Any]:
    """The DeepSpeed config a transformers-based trainer takes in its ``deepspeed`` key."""
    zero = zero_section(draft)
    return {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
        "bf16": bf16_section(draft, "auto", zero),
        "fp16": {"enabled": "auto"},
        "gradient_clipping": "auto",  # transformers fills it from max_grad_norm
        "zero_optimization": zero,
        **optimizer_section(draft, auto=True),
    }


def export_deepspeed(plan: Plan) -> Export:
    draft = Draft(plan)
    zero = zero_section(draft)
    document = {
        "train_micro_batch_size_per_gpu": plan.workload.micro_batch,
        "gradient_accumulation_steps": plan.workload.grad_accum,
        "bf16": bf16_section(draft, plan.autocast is Autocast.BF16, zero),
        "fp16": {"enabled": plan.autocast is Autocast.FP16},
        "zero_optimization": zero,
        "gradient_clipping": 1.0 if plan.grad_clip else 0.0,
        **(optimizer := optimizer_section(draft, auto=False)),
    }
    expressed = EXPRESSED + (("method.optimizer", "method.weight_decay") if optimizer else ())
    draft.outside(GPU_COUNT, LAUNCHER_WHY)
    for name in ENV_SETTINGS:
        draft.outside([name], RECIPE_WHY[name])
    rest = [n for n in TRAINING_NAMES if n not in expressed and n not in GPU_COUNT]
    draft.outside(
        rest, "not DeepSpeed's: the trainer's config carries it (see the TRL, axolotl or LLaMA-Factory export)"
    )
    return draft.finish(Target.DEEPSPEED, json.dumps(document, indent=2) + "\n")


def _read_optimizer(section: object) -> dict[str, Any]:
    """``optimizer.type`` and its weight decay as DeepSpeed builds them (engine.py ``_configure_basic_optimizer``:
    the type lower-cased; "Adam" is AdamW unless ``adam_w_mode`` is false)."""
    if not isinstance(section, dict) or not isinstance(section.get("type"), str):
        return {}
    given = section.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    kind = section["type"].lower()
    found: dict[str, Any] = {}
    if kind == "adam" and params.get("adam_w_mode") is False:
        found["method.optimizer"] = Optimizer.ADAM
    else:
        by_type = {name.lower(): o for o, name in DEEPSPEED_TYPES.items() if o is not Optimizer.ADAM}
        chosen = Optimizer.ADAMW if kind == "adam" else by_type.get(kind)
        if chosen is not None:
            found["method.optimizer"] = chosen
    decay = params.get("weight_decay")
    if isinstance(decay, (int, float)) and not isinstance(decay, bool):
        found["method.weight_decay"] = float(decay)
    return found


def read_deepspeed(document: dict[str, Any]) -> dict[str, Any]:
    """The plan fields a DeepSpeed config gives (the inverse of :func:`export_deepspeed`)."""
    found: dict[str, Any] = {}
    for key, name in (
        ("train_micro_batch_size_per_gpu", "workload.micro_batch"),
        ("gradient_accumulation_steps", "workload.grad_accum"),
    ):
        if isinstance(document.get(key), int):
            found[name] = document[key]
    bf16_keys = document.get("bf16") or {}
    bf16 = bf16_keys.get("enabled") is True
    # Absent: False, DeepSpeed's default (runtime/precision_config.py DeepSpeedBF16Config).
    found["parallel.bf16_master_weights"] = bf16_keys.get("bf16_master_weights_and_grads") is True
    found["parallel.bf16_optimizer_states"] = bf16_keys.get("bf16_optimizer_states") is True
    fp16 = (document.get("fp16") or {}).get("enabled") is True
    found["method.autocast"] = Autocast.BF16 if bf16 else Autocast.FP16 if fp16 else Autocast.NONE
    clipping = document.get("gradient_clipping")
    if isinstance(clipping, (int, float)) and not isinstance(clipping, bool):
        found["method.grad_clip"] = clipping > 0
    found.update(_read_optimizer(document.get("optimizer")))
    zero = document.get("zero_optimization") or {}
    found["parallel.strategy"] = STRATEGIES[int(zero.get("stage", 0))]
    devices = {k: (zero.get(k) or {}).get("device") for k in ("offload_param", "offload_optimizer")}
    found["parallel.offload"] = (
        Offload.PARAMS
        if devices["offload_param"] == "cpu"
        else Offload.OPTIMIZER
        if devices["offload_optimizer"] == "cpu"
        else Offload.NONE
    )
    if found["parallel.strategy"] in (Strategy.ZERO1, Strategy.ZERO2):
        # Absent: DeepSpeed's default below stage 3, off (zero/config.py overlap_comm_valid).
        found["parallel.zero_overlap_comm"] = zero.get("overlap_comm") is True
    elif found["parallel.strategy"] is Strategy.ZERO3:
        # Absent: DeepSpeed's default at stage 3, on (zero/config.py overlap_comm_valid).
        found["parallel.zero3_overlap_comm"] = zero.get("overlap_comm") is not False
    for key, name in (
        ("reduce_bucket_size", "parallel.zero_bucket_elements"),
        ("stage3_prefetch_bucket_size", "parallel.zero3_prefetch_elements"),
        ("stage3_max_live_parameters", "parallel.zero3_max_live_elements"),
        ("stage3_max_reuse_distance", "parallel.zero3_max_reuse_elements"),
    ):
        if isinstance(zero.get(key), int):
            found[name] = zero[key]
    return found

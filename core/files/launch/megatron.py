"""Megatron-Bridge config overrides (YAML), for a recipe of NVIDIA-NeMo/Megatron-Bridge.

Keys of the ``ConfigContainer`` as NVIDIA-NeMo/Megatron-Bridge 067f987d names them
(``src/megatron/bridge/training/config.py``; the model's fields are Megatron-Core's
TransformerConfig / ModelParallelConfig, NVIDIA/Megatron-LM d98e8a64), read back by
:mod:`core.files.runconfig.megatron`: ``model`` (the parallel sizes, ``sequence_parallel``,
``seq_length``, ``recompute_granularity`` / ``recompute_method`` / ``recompute_num_layers`` /
``recompute_modules``, ``fp8``, ``gradient_accumulation_fusion``), ``train`` (``micro_batch_size``,
``global_batch_size`` = micro × data-parallel × accumulation, ``train_iters``),
``dataset.seq_length``, ``mixed_precision`` (the registered recipe ``bf16_mixed`` / ``fp16_mixed``:
16-bit parameters, float32 main copies in the optimizer), ``optimizer`` (``optimizer`` adam | sgd,
``use_distributed_optimizer``, ``optimizer_cpu_offload``, ``clip_grad``),
``ddp.use_distributed_optimizer``, ``dist.use_torch_fsdp2``, ``peft``
(``megatron.bridge.peft.lora.LoRA`` / ``dora.DoRA``: ``dim``, ``alpha``, ``dropout``,
``target_modules`` over Megatron's fused projections) and ``comm_overlap.tp_comm_overlap``.

The header gives the launch: ``scripts/training/run_recipe.py`` with the model's recipe stem
and mode, every key below as a ``KEY=VALUE`` override (the runner reads no YAML); a recipe script
that takes ``--config-file`` (``tutorials/recipes/llama/03_finetune_with_yaml.py``) reads the file.
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from core.catalogue import catalogue_entry
from core.dtypes import Autocast, Dtype
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    dump_yaml,
    header,
    model_reference,
    one_model_dtype,
    optimizer_steps,
    recipes_outside,
)
from core.inputs import Float8, MegatronCeFusion, MoeDispatcher, Stack, megatron_dispatcher
from core.model import HEAD_TARGET
from core.optimizer_stacks import MEGATRON_NAMES, STACK_RULES, optimizer_refusal, optimizer_stack
from core.plan import CheckpointPolicy, Method, Offload, Optimizer, OptimizerImpl, PipelineSchedule, Plan, Strategy

# Catalogue models with a Megatron-Bridge recipe (the stems its recipes' __init__ export at
# 067f987d: src/megatron/bridge/recipes/*/__init__.py, "<stem>_sft_config" / "_peft_config").
RECIPES: Final = {
    "llama-3.1-8b": "llama31_8b",
    "llama-3.1-70b": "llama31_70b",
    "llama-3.1-405b": "llama31_405b",
    "llama-3.2-1b": "llama32_1b",
    "llama-3.2-3b": "llama32_3b",
    "gemma-2-2b": "gemma2_2b",
    "gemma-2-9b": "gemma2_9b",
    "gemma-2-27b": "gemma2_27b",
    "gemma-3-1b": "gemma3_1b",
    "qwen2.5-0.5b": "qwen25_500m",
    "qwen2.5-1.5b": "qwen25_1p5b",
    "qwen2.5-7b": "qwen25_7b",
    "qwen2.5-14b": "qwen25_14b",
    "qwen2.5-32b": "qwen25_32b",
    "qwen2.5-72b": "qwen25_72b",
    "qwen3-0.6b": "qwen3_600m",
    "qwen3-1.7b": "qwen3_1p7b",
    "qwen3-4b": "qwen3_4b",
    "qwen3-8b": "qwen3_8b",
    "qwen3-14b": "qwen3_14b",
    "qwen3-32b": "qwen3_32b",
    "qwen3-30b-a3b": "qwen3_30b_a3b",
    "gpt-oss-20b": "gpt_oss_20b",
    "gpt-oss-120b": "gpt_oss_120b",
}
# Megatron-Bridge v0.6.0 src/megatron/bridge/training/comm_overlap.py:377.
COMM_OVERLAP_TARGET: Final = "megatron.bridge.training.comm_overlap.CommOverlapConfig"
# The planner's matrices -> Megatron-Core's fused projections (the inverse of the importer's).
FUSED: Final = {
    "linear_qkv": ("q_proj", "k_proj", "v_proj"),
    "linear_proj": ("o_proj",),
    "linear_fc1": ("gate_proj", "up_proj"),
    "linear_fc2": ("down_proj",),
}
PRECISION: Final = {Dtype.BF16: "bf16_mixed", Dtype.FP16: "fp16_mixed"}
# Transformer Engine's recipes as Megatron-Core's TransformerConfig.fp8_recipe names them, and the
# Megatron-Bridge precision recipe that runs each (NVIDIA-NeMo/Megatron-Bridge v0.2.0 .. v0.5.0
# src/megatron/bridge/training/mixed_precision.py). The named recipe must carry the fp8 setting:
# MixedPrecisionConfig.setup copies every field it has over the model's
# (update_config_with_precision_overrides), so bf16_mixed beside model.fp8 would switch fp8 off.
FP8_RECIPES: Final = {Float8.TE: "delayed", Float8.TE_CURRENT: "tensorwise", Float8.TE_MXFP8: "mxfp8"}
FP8_PRECISION: Final = {
    Float8.TE: "{}_with_fp8_delayed_scaling_mixed",
    Float8.TE_CURRENT: "{}_with_fp8_current_scaling_mixed",
    Float8.TE_MXFP8: "{}_with_mxfp8_mixed",
}


def _mode(draft: Draft) -> str:
    plan = draft.plan
    if plan.method is Method.QLORA:
        draft.cannot("method.kind", "Megatron-Bridge's PEFT adapts a 16-bit base: no 4-bit base (LoRA is written)")
        for name in ("method.quant", "method.double_quant"):
            draft.cannot(name, "Megatron-Bridge has no bitsandbytes base")
        return "lora"
    if plan.method is Method.FROZEN:
        draft.cannot("method.kind", "Megatron-Bridge trains every weight or adapters (full is written)")
        draft.cannot("method.frozen_layers", "no frozen-layers setting in Megatron-Bridge")
        return "sft"
    return {Method.LORA: "lora", Method.DORA: "dora"}.get(plan.method, "sft")


def _peft(draft: Draft, mode: str) -> dict[str, Any] | None:
    plan = draft.plan
    if mode == "sft":
        return None
    chosen = set(plan.lora.targets)
    if plan.all_linear_reaches_more:
        draft.cannot("method.lora.targets", "Megatron-Bridge's target_modules reach no MoE router (all-linear does)")
    if HEAD_TARGET in chosen:
        draft.cannot(
            "method.lora.targets", "the output head's LoRA is not written: target_modules names the blocks' linears"
        )
    modules = [name for name, ours in FUSED.items() if chosen & set(ours)]
    if any(not set(ours) <= chosen for name, ours in FUSED.items() if name in modules):
        draft.cannot(
            "method.lora.targets",
            "Megatron-Core fuses q/k/v into linear_qkv and gate/up into linear_fc1: all of a fused group or none",
        )
    if not modules:
        draft.cannot("method.lora.targets", "Megatron-Bridge's LoRA adapts its fused projections (all are written)")
        modules = list(FUSED)
    scheme = "dora.DoRA" if mode == "dora" else "lora.LoRA"
    alpha = plan.lora.alpha
    if not float(alpha).is_integer():
        draft.cannot("method.lora.alpha", "Megatron-Bridge's LoRA alpha is an integer")
    return {
        "_target_": f"megatron.bridge.peft.{scheme}",
        "dim": plan.lora.rank,
        "alpha": max(1, round(alpha)),
        "dropout": plan.lora.dropout,
        "target_modules": modules,
    }


def _precision(draft: Draft) -> str:
    """Megatron-Core keeps the model (adapters included) in one 16-bit dtype and no autocast."""
    plan = draft.plan
    written = one_model_dtype(
        draft,
        PRECISION,
        lambda _, kept: f"Megatron-Core keeps every weight, adapters too, in one 16-bit dtype ({kept.value})",
    )
    if plan.autocast is not Autocast.NONE:
        draft.cannot("method.autocast", "Megatron-Core casts the model itself (Float16Module): no torch autocast")
    if plan.float8 is Float8.TE_CURRENT:
        # bf16_with_fp8_current_scaling_mixed keeps the first and last blocks in bf16
        # (first_last_layers_bf16 = True); the plan times every block in fp8, as NVIDIA's performance
        # scripts run it (scripts/performance/utils/precision.py sets it False).
        draft.cannot(
            "method.float8",
            "the current-scaling recipe keeps the first and last blocks in bf16: set "
            "cfg.mixed_precision.first_last_layers_bf16 = False in the recipe script",
        )
    if plan.float8 in FP8_PRECISION:
        return FP8_PRECISION[plan.float8].format(PRECISION[written].split("_")[0])
    return PRECISION[written]


def _recompute(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    if not plan.checkpointing:
        return {"recompute_granularity": None}
    if plan.checkpoint_policy is CheckpointPolicy.ATTENTION:
        return {"recompute_granularity": "selective", "recompute_modules": ["core_attn"]}
    if plan.checkpoint_policy is not CheckpointPolicy.FULL:
        draft.cannot(
            "method.checkpoint_policy", "Megatron-Core recomputes whole blocks or core attention (full is written)"
        )
    return {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}


def _model(draft: Draft) -> dict[str, Any]:
    plan, par = draft.plan, draft.plan.parallel
    section: dict[str, Any] = {
        "tensor_model_parallel_size": par.tensor_parallel,
        "pipeline_model_parallel_size": par.pipeline_parallel,
        "virtual_pipeline_model_parallel_size": par.virtual_stages if par.virtual_stages > 1 else None,
        "context_parallel_size": par.context_parallel,
        "expert_model_parallel_size": par.expert_parallel,
        "sequence_parallel": par.tensor_parallel > 1 and par.sequence_parallel,
        "seq_length": plan.workload.seq_len,
        **_recompute(draft),
    }
    # Megatron-Core's cross-entropy (language_module.py compute_language_model_loss, NVIDIA/Megatron-LM
    # d98e8a64): written either way, since Megatron-Bridge's GPTModelProvider turns the fusion on by default.
    section["cross_entropy_loss_fusion"] = plan.megatron_ce_fusion is not MegatronCeFusion.OFF
    if plan.megatron_ce_fusion is not MegatronCeFusion.OFF:
        section["cross_entropy_fusion_impl"] = plan.megatron_ce_fusion.value
    if megatron_dispatcher(plan) is not None:
        # Megatron-Bridge's apply_flex_dispatcher_backend (NVIDIA-NeMo/Megatron-Bridge v0.3.1
        # src/megatron/bridge/training/flex_dispatcher_backend.py): "flex" with the backend named.
        flex = par.moe_dispatcher in (MoeDispatcher.DEEPEP, MoeDispatcher.HYBRIDEP)
        section["moe_token_dispatcher_type"] = "flex" if flex else par.moe_dispatcher.value
        if flex:
            section["moe_flex_dispatcher_backend"] = par.moe_dispatcher.value
    if plan.model.num_experts > 1:
        section["moe_grouped_gemm"] = plan.moe_grouped_gemm
    if plan.model.num_experts > 1 and par.capacity_factor > 0:
        # TransformerConfig.moe_expert_capacity_factor / moe_pad_expert_input_to_capacity (NVIDIA/Megatron-LM
        # d98e8a64); dropless (None, the default) is not written.
        section["moe_expert_capacity_factor"] = par.capacity_factor
        section["moe_pad_expert_input_to_capacity"] = par.pad_to_capacity
    section["gradient_accumulation_fusion"] = _grad_accum_fusion(plan)
    if plan.float8 in FP8_RECIPES:
        section["fp8"] = "hybrid"
        section["fp8_recipe"] = FP8_RECIPES[plan.float8]  # Megatron-Core TransformerConfig.fp8_recipe
    elif plan.float8 is not Float8.NONE:
        draft.cannot("method.float8", "Megatron's fp8 is Transformer Engine's, not torchao's Float8Linear")
    if par.pipeline_parallel > 1 and par.schedule is PipelineSchedule.GPIPE:
        draft.cannot("parallel.schedule", "Megatron-Core runs 1F1B, interleaved with virtual stages")
    return section


def _grad_accum_fusion(plan: Plan) -> bool:
    """``model.gradient_accumulation_fusion``: the plan's, written either way (Megatron-Bridge's
    GPTModelProvider turns it on where the fused kernel is installed, NVIDIA-NeMo/Megatron-Bridge
    067f987d src/megatron/bridge/models/gpt_provider.py). Off under FSDP, whose gradients are not
    in Megatron's buffer: Megatron-LM refuses it with torch FSDP2 (NVIDIA/Megatron-LM d98e8a64
    megatron/training/arguments.py: "--use-torch-fsdp2 is not supported with gradient accumulation
    fusion") and Megatron-Bridge's Megatron-FSDP turns it off (training/config.py)."""
    return plan.parallel.grad_accum_fusion and plan.parallel.strategy is not Strategy.FSDP


def _optimizer(draft: Draft) -> dict[str, Any]:
    """``optimizer`` as Megatron-Core builds the plan's (core.optimizer_stacks MEGATRON_NAMES): Adam's L2 as
    ``decoupled_weight_decay: false``, plain SGD as ``sgd_momentum: 0`` (optimizer_config.py defaults True, 0.9)."""
    plan, par = draft.plan, draft.plan.parallel
    stack = optimizer_stack(Stack.MEGATRON, par.strategy, par.offload)  # with its CPU offload: Adam or SGD
    name = None if optimizer_refusal(plan.optimizer, stack) else MEGATRON_NAMES.get(plan.optimizer)
    if name is None:
        draft.cannot("method.optimizer", f"{STACK_RULES[stack]} (adam written)")
    if (name or "adam") == "adam" and plan.optimizer_impl is not OptimizerImpl.FUSED:
        draft.cannot("method.optimizer_impl", "Megatron-Core's Adam is Transformer Engine / Apex FusedAdam")
    if par.strategy in (Strategy.ZERO2, Strategy.ZERO3):
        draft.cannot(
            "parallel.strategy",
            "Megatron's distributed optimizer shards the optimizer state (ZeRO-1); FSDP shards the rest",
        )
    if par.offload is Offload.PARAMS:
        draft.cannot("parallel.offload", "Megatron-Core offloads the optimizer only (optimizer_cpu_offload)")
    chosen: dict[str, Any] = {"optimizer": name or "adam"}
    if name and plan.optimizer is Optimizer.ADAM:
        chosen["decoupled_weight_decay"] = False
    elif name and plan.optimizer is Optimizer.SGD:
        chosen["sgd_momentum"] = 0.0
    return {
        **chosen,
        "use_distributed_optimizer": par.strategy is Strategy.ZERO1,
        "optimizer_cpu_offload": par.offload is Offload.OPTIMIZER,
        "clip_grad": 1.0 if plan.grad_clip else 0.0,
        "weight_decay": plan.weight_decay,
    }


def _grad_reduce(draft: Draft, recipe: str) -> dict[str, Any]:
    """``ddp.grad_reduce_in_fp32``, Megatron-Core's gradient buffer dtype. The precision recipe
    written beside it copies its own value over ``ddp``'s when the run starts (NVIDIA-NeMo/
    Megatron-Bridge 067f987d training/config.py: ``cfg.mixed_precision.setup(..., cfg.ddp)``;
    training/mixed_precision.py: ``bf16_mixed`` True, ``fp16_mixed`` False), so a value the
    recipe does not hold is written and listed: the recipe script must set
    ``cfg.mixed_precision.grad_reduce_in_fp32`` too, as NVIDIA's performance scripts do."""
    value = draft.plan.parallel.grad_reduce_in_fp32
    if value != recipe.startswith("bf16"):
        draft.cannot(
            "parallel.grad_reduce_in_fp32",
            f"written to ddp, but the {recipe} precision recipe sets grad_reduce_in_fp32 = "
            f"{not value} over it: set cfg.mixed_precision.grad_reduce_in_fp32 = {value} in the recipe script",
        )
    return {"grad_reduce_in_fp32": value}


def _stack(draft: Draft) -> None:
    if draft.plan.stack is not Stack.MEGATRON:
        draft.cannot("method.stack", "Megatron-Bridge runs Megatron-Core's fused kernels (the Megatron stack)")


def export_megatron_bridge(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    par, work = plan.parallel, plan.workload
    entry = catalogue_entry(plan)
    stem = RECIPES.get(entry.id) if entry is not None else None
    if stem is None:
        draft.cannot("model", "Megatron-Bridge has no recipe for this model here: <recipe stem> is a placeholder")
    mode = _mode(draft)
    _stack(draft)
    precision = _precision(draft)
    document: dict[str, Any] = {
        "model": {"hf_model_id": model_reference(draft, model_ref), **_model(draft)},
        "train": {
            "micro_batch_size": work.micro_batch,
            "global_batch_size": work.micro_batch * par.data_parallel * work.grad_accum,
        },
        "dataset": {"seq_length": work.seq_len},
        "mixed_precision": precision,
        "optimizer": _optimizer(draft),
        "ddp": {"use_distributed_optimizer": par.strategy is Strategy.ZERO1, **_grad_reduce(draft, precision)},
        "dist": {"use_torch_fsdp2": par.strategy is Strategy.FSDP},
        "peft": _peft(draft, mode),
    }
    if par.tensor_parallel > 1 and par.tp_overlap:
        # The recipes leave comm_overlap None (NVIDIA-NeMo/Megatron-Bridge v0.6.0 src/megatron/bridge/recipes/common.py
        # lines 128, 228, 327), so Hydra's struct mode refuses comm_overlap.tp_comm_overlap=… ("Could not override",
        # training/utils/omegaconf_utils.py:180, hydra-core 1.3.2): the whole CommOverlapConfig is written, with
        # its _target_, which _apply_overrides instantiates. Off, nothing is written: None is no overlap.
        document["comm_overlap"] = {"_target_": COMM_OVERLAP_TARGET, "tp_comm_overlap": True}
    steps = optimizer_steps(plan)
    if steps is not None:
        document["train"]["train_iters"] = steps
    if par.strategy is Strategy.FSDP and not par.reshard_after_forward:
        draft.cannot("parallel.reshard_after_forward", "Megatron-Bridge's FSDP2 reshards after the forward")
    for name, why in (
        ("method.attention", "Megatron-Core picks Transformer Engine's fused attention"),
        ("method.chunked_loss", "Megatron's loss is its vocabulary-parallel cross-entropy"),
        ("workload.eval_batch", "Megatron-Bridge validates with the training micro-batch"),
        ("parallel.dp_replicate", "Megatron-Bridge's FSDP shards over every data-parallel rank here"),
    ):
        draft.outside([name], why)
    draft.outside(
        ["parallel.ddp_bucket_mb", "parallel.ddp_bucket_view", "parallel.zero_bucket_elements"],
        "Megatron-Core's DDP sizes its own buckets",
    )
    draft.outside(
        ["parallel.zero3_prefetch_elements", "parallel.zero3_max_live_elements", "parallel.zero3_max_reuse_elements"],
        "DeepSpeed's, not Megatron's",
    )
    draft.outside(["parallel.fsdp_param_dtype", "parallel.fsdp_reduce_dtype"], "the precision recipe sets them")
    recipes_outside(
        draft,
        ("method.stack", "method.float8", "method.grad_clip", "method.weight_decay", "method.lora.dropout",
         "parallel.tp_overlap",
         "parallel.expert_parallel", "parallel.grad_reduce_in_fp32", "parallel.grad_accum_fusion",
         "method.megatron_ce_fusion",
         "parallel.moe_dispatcher", "method.moe_grouped_gemm", "parallel.capacity_factor",
         "parallel.pad_to_capacity"),
    )  # fmt: skip
    overrides = " ".join(_flat(document))
    nodes, gpus = par.nodes, par.gpus_per_node
    lines = [
        f"Megatron-Bridge config overrides written by VRAM Planner for {nodes} node(s) x {gpus} GPU(s).",
        f"torchrun --nnodes={nodes} --nproc_per_node={gpus} scripts/training/run_recipe.py "
        f"--model {stem or '<recipe stem>'} --mode {mode} --dataset <dataset> {overrides}",
        "or pass this file to a recipe script that takes --config-file "
        "(tutorials/recipes/llama/03_finetune_with_yaml.py)",
    ]
    if document["peft"] is not None:
        lines.append(
            "the command runs the recipe's own adapter (--mode); this file's peft section (dim, alpha, dropout, "
            "target_modules) is read through --config-file only"
        )
    return draft.finish(Target.MEGATRON_BRIDGE, header(lines) + dump_yaml(document))


def _flat(document: dict[str, Any], prefix: str = "") -> list[str]:
    """``KEY=VALUE`` overrides, as run_recipe.py takes them. The PEFT scheme is its --mode and the adapter's settings
    are the file's only: the recipe's PEFT object is callable (Megatron-Bridge v0.6.0 peft/base.py:84 ``__call__``), so
    ``create_omegaconf_dict_config`` leaves it out of the struct config (training/utils/omegaconf_utils.py:215
    ``_is_omegaconf_problematic``) and Hydra refuses ``peft.dim=…`` ("Could not override 'peft.dim'"). A mapping with a
    ``_target_`` is written whole, in Hydra's dict syntax."""
    words: list[str] = []
    for key, value in document.items():
        if prefix == "" and key == "peft":
            continue
        if isinstance(value, dict) and "_target_" in value:
            fields = ",".join(f"{k}:{_value(v)}" for k, v in value.items())
            words.append(shlex.quote(f"{prefix}{key}={{{fields}}}"))
        elif isinstance(value, dict):
            words.extend(_flat(value, f"{prefix}{key}."))
        else:
            # Shell-quoted: a model id from a config.json's _name_or_path ("/data/my models/x",
            # "a#b") split the printed command or cut it at a comment (2026-12-04).
            words.append(shlex.quote(f"{prefix}{key}={_value(value)}"))
    return words


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)

"""torchtune recipe config overrides (YAML): the keys a plan sets, to merge over a recipe's config
(``tune run <recipe> --config <config>``, then these keys or their ``key=value`` spellings).

Keys read from torchtune v0.7 (``recipes/configs/*/*.yaml``, ``recipes/*_finetune_*.py``,
``torchtune/models/*/_model_builders.py``): ``model._component_`` (the builder: ``llama3_1_8b``,
``lora_llama3_1_8b``), ``model.lora_attn_modules`` (q_proj, k_proj, v_proj, output_proj),
``model.apply_lora_to_mlp`` (all three MLP matrices), ``model.lora_rank``, ``model.lora_alpha``,
``model.use_dora``, ``model.quantize_base`` (torchao NF4, whose scales are quantised again),
``batch_size``, ``batch_size_val``, ``gradient_accumulation_steps``, ``tokenizer.max_seq_len``,
``dtype`` (bf16 | fp32: every weight, adapters too; no autocast; the recipes refuse fp16),
``optimizer._component_`` (+ ``fused``, ``momentum``), ``enable_activation_checkpointing``,
``loss._component_`` (``LinearCrossEntropyLoss`` never holds the full logits),
``max_steps_per_epoch`` with ``epochs``, ``compile`` (the model and the loss:
``training.compile_loss``), ``optimizer_in_bwd``, ``enable_activation_offloading``,
``clip_grad_norm`` (null: no clipping), ``model.lora_dropout``, and for ``*_distributed`` recipes
(FSDP2) ``fsdp_reshard_after_forward`` and ``fsdp_cpu_offload``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from core.catalogue import catalogue_entry
from core.dtypes import Autocast, Dtype, Quant
from core.files.launch.common import (
    GPU_COUNT,
    Draft,
    Export,
    Target,
    dump_yaml,
    header,
    one_model_dtype,
    recipes_outside,
)
from core.files.launch.fields import FIELDS_BY_NAME
from core.files.runconfig.torchtune import BUILDERS
from core.inputs import Stack
from core.model import HEAD_TARGET
from core.plan import Attention, CheckpointPolicy, Method, Offload, Optimizer, OptimizerImpl, Plan, Strategy

DTYPES: Final = {Dtype.BF16: "bf16", Dtype.FP32: "fp32"}
OPTIMIZERS: Final = {
    Optimizer.ADAMW: "torch.optim.AdamW",
    Optimizer.ADAMW_8BIT: "bitsandbytes.optim.AdamW8bit",
    Optimizer.PAGED_ADAMW_8BIT: "bitsandbytes.optim.PagedAdamW8bit",
    Optimizer.PAGED_ADAMW: "bitsandbytes.optim.PagedAdamW",
    Optimizer.SGD: "torch.optim.SGD",
    Optimizer.SGD_MOMENTUM: "torch.optim.SGD",
    # torchao's low-bit AdamW (pytorch/ao 36027d82 torchao/optim/__init__.py) and bitsandbytes' Lion
    Optimizer.AO_ADAMW_8BIT: "torchao.optim.AdamW8bit",
    Optimizer.AO_ADAMW_4BIT: "torchao.optim.AdamW4bit",
    Optimizer.AO_ADAMW_FP8: "torchao.optim.AdamWFp8",
    Optimizer.LION: "bitsandbytes.optim.Lion",
    Optimizer.LION_8BIT: "bitsandbytes.optim.Lion8bit",
    Optimizer.PAGED_LION: "bitsandbytes.optim.PagedLion",
    Optimizer.PAGED_LION_8BIT: "bitsandbytes.optim.PagedLion8bit",
    # torch 2.13.0 torch/optim/adagrad.py, rmsprop.py; bitsandbytes 0.50.2 optim/rmsprop.py, optim/ademamix.py
    Optimizer.ADAGRAD: "torch.optim.Adagrad",
    Optimizer.RMSPROP: "torch.optim.RMSprop",
    Optimizer.RMSPROP_BNB: "bitsandbytes.optim.RMSprop32bit",
    Optimizer.RMSPROP_BNB_8BIT: "bitsandbytes.optim.RMSprop8bit",
    Optimizer.ADEMAMIX: "bitsandbytes.optim.AdEMAMix32bit",
    Optimizer.ADEMAMIX_8BIT: "bitsandbytes.optim.AdEMAMix8bit",
    Optimizer.PAGED_ADEMAMIX: "bitsandbytes.optim.PagedAdEMAMix32bit",
    Optimizer.PAGED_ADEMAMIX_8BIT: "bitsandbytes.optim.PagedAdEMAMix8bit",
}
ATTENTION_MODULES: Final = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
MLP: Final = ("gate_proj", "up_proj", "down_proj")
CHUNKED_LOSS: Final = "torchtune.modules.loss.LinearCrossEntropyLoss"
PLAIN_LOSS: Final = "torch.nn.CrossEntropyLoss"


def _builder(draft: Draft) -> str:
    plan = draft.plan
    entry = catalogue_entry(plan)
    builder = BUILDERS.get(entry.id) if entry is not None else None
    if builder is None:
        name = re.sub(r"[^a-z0-9]+", "_", plan.model.name.lower()).strip("_")[:60] or "model"
        draft.cannot("model", f"torchtune has no builder for '{name}': the builder named is a placeholder")
        builder = f"UNSUPPORTED.{name}"
    package, name = builder.rsplit(".", 1)
    prefix = "lora_" if plan.adapter_based else ""
    return f"torchtune.models.{package}.{prefix}{name}"


def _model(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    model: dict[str, Any] = {"_component_": _builder(draft)}
    if plan.method is Method.FROZEN:
        draft.cannot("method.kind", "torchtune's recipes train every weight or LoRA adapters (written as full)")
        draft.cannot("method.frozen_layers", "torchtune has no frozen-layers setting")
    if not plan.adapter_based:
        return model
    targets = plan.lora.targets
    if plan.all_linear_reaches_more:
        draft.cannot("method.lora.targets", "torchtune names its LoRA modules: the MoE router all-linear adapts is not")
    mlp = [t for t in targets if t in MLP]
    if mlp and len(mlp) != len(MLP):
        draft.cannot("method.lora.targets", "torchtune adapts all three MLP matrices or none (apply_lora_to_mlp)")
    attention = [ATTENTION_MODULES[t] for t in targets if t in ATTENTION_MODULES]
    if not attention:  # lora_llama3_self_attention: "ValueError: If lora_modules arg is an empty list"
        # A latent-attention model has no q_proj with a q_lora_rank: its output projection is written instead.
        first = "q_proj" if "q_proj" in plan.model.adapter_targets() else "o_proj"
        written = ATTENTION_MODULES[first]
        draft.cannot(
            "method.lora.targets", f"torchtune's LoRA adapts at least one attention matrix ({written} is written)"
        )
        attention = [written]
    model.update(
        lora_attn_modules=attention,
        apply_lora_to_mlp=bool(mlp),
        apply_lora_to_output=HEAD_TARGET in targets,
        lora_rank=plan.lora.rank,
        lora_alpha=plan.lora.alpha,
        lora_dropout=plan.lora.dropout,
        use_dora=plan.method is Method.DORA,
    )
    if plan.method is Method.QLORA:
        model["quantize_base"] = True
        if plan.quant is not Quant.NF4:
            draft.cannot("method.quant", "torchtune's quantised base is torchao NF4 (written)")
        elif not plan.double_quant:
            draft.cannot("method.double_quant", "torchao's NF4 always quantises its scales")
    return model


def _precision(draft: Draft) -> str:
    """torchtune casts the whole model, adapters included, to ``dtype`` and runs no autocast."""
    plan = draft.plan

    def why(dtype: Dtype, written: Dtype) -> str:
        kept = "bf16 or fp32, not fp16" if dtype not in DTYPES else f"one dtype, {dtype.value}"
        return f"torchtune keeps every weight, adapters too, in {kept} ({written.value} is written)"

    written = one_model_dtype(draft, DTYPES, why)
    if plan.autocast is not Autocast.NONE:
        draft.cannot("method.autocast", "torchtune runs no autocast: the model computes in its dtype")
    return DTYPES[written]


def _optimizer(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    component = OPTIMIZERS.get(plan.optimizer)
    if component is None:
        draft.cannot(
            "method.optimizer",
            "not one of torchtune's optimizers here (AdamW, bitsandbytes' and torchao's low-bit AdamW, Lion, RMSprop, "
            "AdEMAMix, torch's Adagrad, RMSprop and SGD)",
        )
        component = OPTIMIZERS[Optimizer.ADAMW]
    section: dict[str, Any] = {"_component_": component}
    if component == "torch.optim.AdamW":
        section["fused"] = plan.optimizer_impl is OptimizerImpl.FUSED
        if plan.optimizer_impl is OptimizerImpl.FORLOOP:
            draft.cannot("method.optimizer_impl", "the planner reads torchtune's AdamW as fused or foreach")
    if plan.optimizer in (Optimizer.ADAGRAD, Optimizer.RMSPROP) and plan.optimizer_impl is not OptimizerImpl.FOREACH:
        draft.cannot("method.optimizer_impl", "the planner reads torchtune's Adagrad and RMSprop as foreach")
    if plan.optimizer is Optimizer.SGD_MOMENTUM:
        section["momentum"] = 0.9
    section["weight_decay"] = plan.weight_decay
    return section


def _recipes(draft: Draft) -> dict[str, Any]:
    """torch.compile (which compiles the loss with the model), optimizer-in-backward, activation
    offloading and gradient clipping, as the recipes' configs name them."""
    plan = draft.plan
    compiled = plan.stack is Stack.COMPILE
    if plan.stack is Stack.MEGATRON:
        draft.cannot("method.stack", "torchtune runs PyTorch kernels, eager or compiled (eager is written)")
    if FIELDS_BY_NAME["method.compiled_loss"].relevant(plan) and plan.compiled_loss is not compiled:
        draft.cannot("method.compiled_loss", "torchtune's compile covers the model and the loss together")
    recipes_outside(
        draft,
        (
            "method.stack",
            "method.compiled_loss",
            "method.optimizer_in_backward",
            "method.activation_offload",
            "method.grad_clip",
            "method.weight_decay",
            "method.lora.dropout",
        ),
        {"method.fused_loss": "torchtune's memory-saving loss is the chunked one (--chunked-loss)"},
    )
    # The recipes refuse optimizer_in_bwd with clip_grad_norm or with gradient accumulation
    # (recipes/full_finetune_single_device.py: "Gradient clipping is not supported with optimizer in bwd").
    in_backward, clip = plan.optimizer_in_backward, plan.grad_clip
    if in_backward and plan.workload.grad_accum > 1:
        draft.cannot("method.optimizer_in_backward", "torchtune refuses it with gradient accumulation")
        in_backward = False
    if clip and in_backward:
        draft.cannot("method.grad_clip", "torchtune refuses gradient clipping with the optimizer in the backward")
        clip = False
    return {
        "compile": compiled,
        "optimizer_in_bwd": in_backward,
        "enable_activation_offloading": plan.activation_offload,
        "clip_grad_norm": 1.0 if clip else None,
    }


def _distributed(draft: Draft) -> dict[str, Any]:
    plan, par = draft.plan, draft.plan.parallel
    draft.outside(GPU_COUNT, "the GPU count is tune run's: --nnodes and --nproc_per_node")
    for name in ("parallel.tensor_parallel", "parallel.pipeline_parallel", "parallel.context_parallel"):
        draft.outside([name], "the planner's torchtune export sets no model split")
    draft.outside(["parallel.fsdp_param_dtype", "parallel.fsdp_reduce_dtype"], "torchtune's FSDP2 keeps dtype")
    if par.strategy not in (Strategy.DDP, Strategy.FSDP) or (par.strategy is Strategy.DDP and plan.world_size > 1):
        draft.cannot("parallel.strategy", "torchtune's distributed recipes shard with FSDP2")
    if par.offload is Offload.OPTIMIZER or (par.offload is Offload.PARAMS and par.strategy is not Strategy.FSDP):
        draft.cannot("parallel.offload", "fsdp_cpu_offload (FSDP2) moves parameters, gradients and optimizer state")
    if par.strategy is not Strategy.FSDP:
        return {}
    return {"fsdp_reshard_after_forward": par.reshard_after_forward, "fsdp_cpu_offload": par.offload is Offload.PARAMS}


def export_torchtune(plan: Plan, model_ref: str | None = None) -> Export:
    """``model_ref`` is not used: torchtune names the model by its builder (the checkpoint folder
    is the recipe's ``checkpointer.checkpoint_dir``)."""
    draft = Draft(plan)
    work = plan.workload
    if plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.FULL:
        draft.cannot("method.checkpoint_policy", "torchtune checkpoints every block")
    if plan.attention is not Attention.SDPA:
        draft.cannot("method.attention", "torchtune's attention is PyTorch SDPA (or flex attention when packing)")
    document: dict[str, Any] = {
        "model": _model(draft),
        "tokenizer": {"max_seq_len": work.seq_len},
        "batch_size": work.micro_batch,
        "batch_size_val": work.eval_batch or work.micro_batch,
        "gradient_accumulation_steps": work.grad_accum,
        "dtype": _precision(draft),
        "optimizer": _optimizer(draft),
        "loss": {"_component_": CHUNKED_LOSS if plan.chunked_loss else PLAIN_LOSS},
        "enable_activation_checkpointing": plan.checkpointing,
        **_recipes(draft),
        **_distributed(draft),
    }
    if work.tokens > 0:
        per_step = work.micro_batch * work.seq_len * work.grad_accum * plan.parallel.data_parallel
        document.update(epochs=1, max_steps_per_epoch=math.ceil(work.tokens / per_step))
    recipe = "lora_finetune" if plan.adapter_based else "full_finetune"
    recipe += "_distributed" if plan.world_size > 1 else "_single_device"
    lines = [f"torchtune overrides written by VRAM Planner: merge over the {recipe} recipe's config,",
             f"then: tune run {recipe} --config <that config>"]  # fmt: skip
    return draft.finish(Target.TORCHTUNE, header(lines) + dump_yaml(document))

"""transformers ``TrainingArguments`` with TRL's ``SFTConfig`` and ``ModelConfig``, as one JSON file
for ``trl sft --config run.json`` (or ``HfArgumentParser.parse_json_file``).

Keys read from TRL v1.9 (``trl/trainer/model_config.py``: ``model_name_or_path``, ``dtype`` (the
name since TRL 0.23; :mod:`core.files.runconfig.hf` reads it and the older ``torch_dtype``),
``attn_implementation``, ``use_peft``, ``lora_r``, ``lora_alpha`` (an int), ``lora_target_modules``,
``use_dora``, ``load_in_8bit``, ``load_in_4bit``, ``bnb_4bit_quant_type``, ``use_bnb_nested_quant``;
``sft_config.py``: ``max_length``) and transformers v4.57 / v5 ``training_args.py``
(``per_device_train_batch_size``, ``per_device_eval_batch_size``, ``gradient_accumulation_steps``,
``bf16``, ``fp16``, ``optim``, ``gradient_checkpointing``, ``use_liger_kernel``, ``max_steps``,
``fsdp`` words with ``fsdp_config.version`` 2 (FSDP2; full_shard reshards after forward,
shard_grad_op does not) or 1 with ``cpu_ram_efficient_loading`` and ``sync_module_states`` (FSDP1
over a model held on the CPU: the plan's FSDP1 wrap), ``deepspeed`` (a dict is accepted),
``ddp_bucket_cap_mb``, ``torch_compile``, ``max_grad_norm`` (default 1.0; the Trainer clips only
when it is above 0)); TRL's ``lora_dropout`` (default 0.05, so it is always written).
The dataset and output folder are the user's to add.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from core.dtypes import Autocast, Quant
from core.files.launch.common import (
    GPU_COUNT,
    HF_DTYPES,
    LAUNCHER_WHY,
    Draft,
    Export,
    Target,
    hf_galore_keys,
    hf_galore_written,
    hf_optim,
    integer_alpha,
    loaded_dtype,
    lora_target_names,
    model_reference,
    modules_to_save_names,
    optimizer_steps,
    recipes_outside,
)
from core.files.launch.deepspeed import inline_config
from core.inputs import Stack, input_at
from core.parallel.layout import fsdp_no_sync
from core.plan import Attention, CheckpointPolicy, Method, ModulesToSave, Offload, Plan, Strategy

# transformers 5 has no FlashAttention 1 / Triton kernel: a plan that names it gets FlashAttention-2,
# the same memory and a faster kernel.
ATTENTION: Final = {
    Attention.EAGER: "eager",
    Attention.SDPA: "sdpa",
    Attention.FLASH: "flash_attention_2",
    Attention.FLASH1: "flash_attention_2",
    Attention.FLASH3: "flash_attention_3",
}
FSDP_WORDS: Final = {True: "full_shard auto_wrap", False: "shard_grad_op auto_wrap"}
SPLIT_WHY: Final = {
    "parallel.tensor_parallel": "the Trainer's config has no tensor-parallel degree: set it in accelerate's config",
    "parallel.context_parallel": "the Trainer's config has no context-parallel degree: set it in accelerate's config",
    "parallel.pipeline_parallel": "transformers' Trainer has no pipeline parallelism",
}


def hf_fsdp(draft: Draft) -> dict[str, Any]:
    """FSDP2 as TrainingArguments takes it: strategy words and ``fsdp_config.version``."""
    par = draft.plan.parallel
    words = FSDP_WORDS[par.reshard_after_forward]
    if par.offload is Offload.PARAMS:
        words += " offload"
    elif par.offload is Offload.OPTIMIZER:
        draft.cannot("parallel.offload", "FSDP's CPU offload moves parameters, gradients and optimizer state together")
    keys: dict[str, Any] = {"fsdp": words, "fsdp_config": {"version": 2}}
    if par.fsdp1_wrap:
        # FSDP1 over the model held on the CPU (rank 0) or the meta device (the others), as the
        # plan's FSDP1 wrap assumes: accelerate forces sync_module_states on with it.
        keys["fsdp_config"] = {"version": 1, "cpu_ram_efficient_loading": True, "sync_module_states": True}
    if input_at("parallel.grad_sync").matters(draft.plan):
        # Said either way: accelerate's default differs between FSDP1 (no_sync) and FSDP2 (before
        # v1.11 each micro-batch, from it no_sync; core.parallel.layout.fsdp_no_sync).
        each = not fsdp_no_sync(par, draft.plan.workload.grad_accum)
        keys["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": each}}
    return keys


def sharding(draft: Draft, fsdp: Callable[[Draft], dict[str, Any]] = hf_fsdp) -> dict[str, Any]:
    """The data-parallel strategy as a transformers-based trainer takes it: ``fsdp`` (as the
    framework spells it), an inline ``deepspeed`` config, or DDP's bucket size."""
    plan, par = draft.plan, draft.plan.parallel
    keys: dict[str, Any] = {}
    if par.strategy is Strategy.FSDP:
        keys.update(fsdp(draft))
    elif par.strategy is Strategy.DDP:
        if par.offload is not Offload.NONE:
            draft.cannot("parallel.offload", "DDP keeps everything on the GPU: offload needs ZeRO or FSDP")
        if plan.world_size > 1:
            keys["ddp_bucket_cap_mb"] = ddp_bucket(draft)
    else:
        keys["deepspeed"] = inline_config(draft)
    for name, why in SPLIT_WHY.items():
        draft.outside([name], why)
    draft.outside(
        ["parallel.sequence_parallel", "parallel.schedule", "parallel.virtual_stages"],
        "no tensor or pipeline split here to configure",
    )
    draft.outside(["parallel.fsdp_param_dtype", "parallel.fsdp_reduce_dtype"], "FSDP2's dtypes follow bf16 / fp16")
    draft.outside(GPU_COUNT, LAUNCHER_WHY)
    return keys


def ddp_bucket(draft: Draft) -> float | int:
    par = draft.plan.parallel
    if par.ddp_bucket_view:
        draft.cannot("parallel.ddp_bucket_view", "TrainingArguments has no gradient_as_bucket_view setting")
    if not float(par.ddp_bucket_mb).is_integer():
        draft.cannot("parallel.ddp_bucket_mb", "ddp_bucket_cap_mb is a whole number of MiB")
        return par.ddp_bucket_mb
    return int(par.ddp_bucket_mb)


def batch_keys(draft: Draft) -> dict[str, Any]:
    """TrainingArguments keys for the workload, the optimizer and the token budget (as max_steps)."""
    work = draft.plan.workload
    keys: dict[str, Any] = {
        "per_device_train_batch_size": work.micro_batch,
        "per_device_eval_batch_size": work.eval_batch or work.micro_batch,
        "gradient_accumulation_steps": work.grad_accum,
        "optim": hf_optim(draft),
        **hf_galore_keys(draft.plan),
    }
    steps = optimizer_steps(draft.plan)
    if steps is not None:
        keys["max_steps"] = steps
    return keys


# The recipes TrainingArguments carries (and the trainers built on it: TRL, axolotl, LLaMA-Factory).
# parallel.zero_overlap_comm / zero3_overlap_comm: the inline DeepSpeed config's zero_optimization.overlap_comm;
# parallel.bf16_master_weights / bf16_optimizer_states: its bf16 section.
HF_RECIPES: Final = (
    "method.stack",
    "method.grad_clip",
    "method.weight_decay",
    "parallel.fsdp1_wrap",
    "parallel.grad_sync",
    "parallel.zero_overlap_comm",
    "parallel.zero3_overlap_comm",
    "parallel.bf16_master_weights",
    "parallel.bf16_optimizer_states",
)
MEGATRON_WHY: Final = "Megatron-LM / NeMo's fused kernels are not a setting here (eager PyTorch is written)"


def recipe_keys(draft: Draft) -> dict[str, Any]:
    """``torch_compile``, ``max_grad_norm`` (0 turns clipping off; the default 1.0 clips) and
    ``weight_decay`` (TrainingArguments' default 0.0)."""
    plan = draft.plan
    if plan.stack is Stack.MEGATRON:
        draft.cannot("method.stack", MEGATRON_WHY)
    return {
        "torch_compile": plan.stack is Stack.COMPILE,
        "max_grad_norm": 1.0 if plan.grad_clip else 0.0,
        "weight_decay": plan.weight_decay,
    }


def full_checkpointing(draft: Draft) -> None:
    plan = draft.plan
    if plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.FULL:
        draft.cannot("method.checkpoint_policy", "transformers checkpoints every block (full); no selective policy")


def trainer_keys(draft: Draft) -> dict[str, Any]:
    """TrainingArguments keys: workload, AMP flags, optimizer, memory savers and sharding."""
    plan = draft.plan
    full_checkpointing(draft)
    if plan.chunked_loss and not plan.fused_loss:
        draft.cannot(
            "method.chunked_loss", "transformers has no chunked cross-entropy; Liger's fused one is --fused-loss"
        )
    keys = {
        **batch_keys(draft),
        "bf16": plan.autocast is Autocast.BF16,
        "fp16": plan.autocast is Autocast.FP16,
        "gradient_checkpointing": plan.checkpointing,
        "use_liger_kernel": plan.fused_loss,
        **recipe_keys(draft),
        **sharding(draft),
    }
    written = (*HF_RECIPES, "method.fused_loss", "method.lora.dropout", "method.lora.modules_to_save")
    recipes_outside(draft, (*written, *hf_galore_written(plan)))
    return keys


def peft_keys(draft: Draft) -> dict[str, Any]:
    """TRL ModelConfig's PEFT and bitsandbytes keys."""
    plan = draft.plan
    if plan.method is Method.FROZEN:
        draft.cannot("method.kind", "TRL trains every weight or adapters; freezing bottom blocks is not a setting")
        draft.cannot("method.frozen_layers", "TRL has no frozen-layers setting (written as full fine-tuning)")
    if not plan.adapter_based:
        return {"use_peft": False}
    if plan.adapter_dtype.value != "fp32":
        draft.cannot("method.adapter_dtype", "PEFT keeps adapters in float32 under TRL (autocast_adapter_dtype)")
    keys: dict[str, Any] = {
        "use_peft": True,
        "lora_r": plan.lora.rank,
        "lora_alpha": integer_alpha(draft),
        # TRL's ModelConfig hands a one-name list to PEFT as that name (huggingface/trl f2cd5771
        # trl/trainer/model_config.py __post_init__, lines 177-178), so ["all-linear"] is PEFT's shorthand.
        "lora_target_modules": lora_target_names(draft, "all-linear")[1],
        "lora_dropout": plan.lora.dropout,
        "use_dora": plan.method is Method.DORA,
    }
    if plan.lora.modules_to_save is not ModulesToSave.NONE:  # TRL ModelConfig.lora_modules_to_save
        keys["lora_modules_to_save"] = modules_to_save_names(plan)
    if plan.method is Method.QLORA:
        if plan.quant is Quant.INT8:
            keys["load_in_8bit"] = True
        else:
            keys.update(load_in_4bit=True, bnb_4bit_quant_type=plan.quant.value, use_bnb_nested_quant=plan.double_quant)
    return keys


def export_trl(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    document: dict[str, Any] = {
        "model_name_or_path": model_reference(draft, model_ref),
        "dtype": HF_DTYPES[loaded_dtype(draft)],
        "attn_implementation": ATTENTION[plan.attention],
        **peft_keys(draft),
        "max_length": plan.workload.seq_len,
        **trainer_keys(draft),
    }
    return draft.finish(Target.TRL, json.dumps(document, indent=2) + "\n")

"""LLaMA-Factory config (YAML), for ``llamafactory-cli train run.yaml``.

Keys read from LLaMA-Factory v0.9.4 (``src/llamafactory/hparams/``: ``finetuning_args.py``
``finetuning_type`` (lora | freeze | full), ``freeze_trainable_layers`` (the last N blocks
train), ``lora_rank``, ``lora_alpha`` (an int), ``lora_target`` (names joined by commas, or
``all``), ``use_dora``, ``pure_bf16``; ``model_args.py`` ``quantization_bit`` (4 | 8),
``quantization_method``, ``quantization_type`` (nf4 | fp4), ``double_quantization``,
``flash_attn`` (disabled | sdpa | fa2), ``enable_liger_kernel``, ``use_unsloth``, ``disable_gradient_checkpointing``;
``data_args.py`` ``cutoff_len``, ``lora_dropout``) and the transformers TrainingArguments it passes
through (``torch_compile``, ``max_grad_norm``, ``fsdp`` / ``fsdp_config``).
``parser.py`` loads the model in bf16 under ``bf16`` or ``pure_bf16`` and in fp16 under ``fp16``;
with neither it infers the dtype from the card, so float32 training has no key. Gradient
checkpointing is on unless disabled. Dataset, template and output folder are the user's.
"""

from __future__ import annotations

from typing import Any, Final

from core.dtypes import Autocast, Dtype, Quant
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    dump_yaml,
    header,
    hf_galore_written,
    integer_alpha,
    loaded_dtype,
    lora_target_names,
    model_reference,
    modules_to_save_names,
    recipes_outside,
)
from core.files.launch.fields import FIELDS_BY_NAME
from core.files.launch.hf_trainer import HF_RECIPES, batch_keys, full_checkpointing, recipe_keys, sharding
from core.plan import Attention, CheckpointPolicy, Method, ModulesToSave, Plan, Strategy

# No FlashAttention 1 in LLaMA-Factory: a plan that names it gets fa2 (same memory, faster).
FLASH_ATTN: Final = {
    Attention.EAGER: "disabled",
    Attention.SDPA: "sdpa",
    Attention.FLASH: "fa2",
    Attention.FLASH1: "fa2",
    Attention.FLASH3: "fa3",  # configure_attn_implementation asks transformers for flash_attention_3 (ff6d4d1)
}


def _method(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    if plan.method is Method.FULL:
        return {"finetuning_type": "full"}
    if plan.method is Method.FROZEN:
        trainable = plan.model.num_layers - plan.frozen_layers
        if trainable < 1:
            draft.cannot("method.frozen_layers", "freeze_trainable_layers trains at least one block")
        return {"finetuning_type": "freeze", "freeze_trainable_layers": max(1, trainable)}
    keys: dict[str, Any] = {
        "finetuning_type": "lora",
        "lora_rank": plan.lora.rank,
        "lora_alpha": integer_alpha(draft),
        "lora_dropout": plan.lora.dropout,
        # A Gated DeltaNet hybrid's in_proj: its input projections by name (ModelSpec.peft_target_names). "all" is
        # every module whose class name holds "Linear" but the head (hiyouga/LLaMA-Factory ff6d4d12
        # src/llamafactory/model/model_utils/misc.py find_all_linear_modules; model/adapter.py: only a lone "all"):
        # the plan's all-linear, the MoE routers included.
        "lora_target": ",".join(lora_target_names(draft, "all")[1]),
        "use_dora": plan.method is Method.DORA,
    }
    if plan.lora.modules_to_save is not ModulesToSave.NONE:  # LLaMA-Factory additional_target: names, commas
        keys["additional_target"] = ",".join(modules_to_save_names(plan))
    if plan.method is Method.QLORA:
        keys.update(quantization_bit=8 if plan.quant is Quant.INT8 else 4, quantization_method="bitsandbytes")
        if plan.quant is not Quant.INT8:
            keys.update(quantization_type=plan.quant.value, double_quantization=plan.double_quant)
    return keys


def _precision(draft: Draft) -> dict[str, Any]:
    """bf16 AMP on a bf16 model, pure bf16 (adapters too), or fp16 AMP on an fp16 model."""
    plan = draft.plan
    dtype = loaded_dtype(draft)
    if dtype is Dtype.BF16 and plan.autocast is Autocast.NONE:
        if plan.adapter_based and plan.adapter_dtype is not Dtype.BF16:
            draft.cannot("method.adapter_dtype", "pure_bf16 keeps the adapters in bf16 too")
        if plan.parallel.strategy is Strategy.ZERO3:
            # LLaMA-Factory v0.9.4 hparams/parser.py:331 refuses pure_bf16 under ZeRO-3 ("`pure_bf16` is incompatible
            # with DeepSpeed ZeRO-3"; found by tools/measure/export_check.py). bf16 is written instead: DeepSpeed's
            # bf16 engine, which the plan models as bf16 autocast under ZeRO (core.roles.deepspeed_engine_dtype) --
            # another plan, whose bf16 master-weight options then count, so the pure-bf16 setting is listed as
            # not expressed (the round trip through the importer found the two apart).
            draft.cannot(
                "method.autocast",
                "LLaMA-Factory refuses pure_bf16 under DeepSpeed ZeRO-3; bf16 (DeepSpeed's bf16 engine) is written",
            )
            return {"bf16": True, "fp16": False}
        return {"bf16": False, "fp16": False, "pure_bf16": True}
    if plan.adapter_based and plan.adapter_dtype is not Dtype.FP32:
        draft.cannot("method.adapter_dtype", "under AMP PEFT keeps the adapters in float32")
    if (dtype, plan.autocast) in ((Dtype.BF16, Autocast.BF16), (Dtype.FP16, Autocast.FP16)):
        return {"bf16": dtype is Dtype.BF16, "fp16": dtype is Dtype.FP16}
    for name in ("method.weight_dtype", "method.base_dtype"):
        field = FIELDS_BY_NAME[name]
        if field.relevant(plan) and field.value(plan) is not Dtype.BF16:
            draft.cannot(
                name, "LLaMA-Factory loads the model in bf16, or in fp16 only under fp16 AMP (bf16 is written)"
            )
    if plan.autocast is not Autocast.BF16:
        draft.cannot(
            "method.autocast", "LLaMA-Factory's AMP runs in the dtype it loads the model in (bf16 AMP is written)"
        )
    return {"bf16": True, "fp16": False}


def _unsloth(draft: Draft) -> dict[str, Any]:
    """``use_unsloth``: LLaMA-Factory loads through Unsloth's FastLanguageModel and always asks for
    use_gradient_checkpointing="unsloth" (hiyouga/LLaMA-Factory@1212919,
    src/llamafactory/model/model_utils/unsloth.py): the plan's Unsloth switch with that policy."""
    plan = draft.plan
    if not plan.unsloth:
        if plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.UNSLOTH:
            draft.cannot("method.checkpoint_policy", "Unsloth's checkpointing comes with use_unsloth only")
        return {}
    if plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.UNSLOTH:
        draft.cannot("method.checkpoint_policy", 'use_unsloth always asks for use_gradient_checkpointing="unsloth"')
    return {"use_unsloth": True}


def export_llamafactory(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    if not plan.unsloth:
        full_checkpointing(draft)
    if plan.chunked_loss and not plan.fused_loss:
        draft.cannot(
            "method.chunked_loss", "LLaMA-Factory has no chunked cross-entropy; Liger's fused one is --fused-loss"
        )
    document: dict[str, Any] = {
        "model_name_or_path": model_reference(draft, model_ref),
        "stage": "sft",
        "do_train": True,
        **_method(draft),
        "cutoff_len": plan.workload.seq_len,
        **batch_keys(draft),
        **_precision(draft),
        "disable_gradient_checkpointing": not plan.checkpointing,
        "flash_attn": FLASH_ATTN[plan.attention],
        "enable_liger_kernel": plan.fused_loss,
        **_unsloth(draft),
        **recipe_keys(draft),
        **sharding(draft),
    }
    written = (
        *HF_RECIPES,
        "method.fused_loss",
        "method.lora.dropout",
        "method.unsloth",
        "method.lora.modules_to_save",
        *hf_galore_written(plan),
    )
    recipes_outside(draft, written)
    lines = ["LLaMA-Factory config written by VRAM Planner. Add dataset, template and output_dir, then:",
             "llamafactory-cli train <this file>"]  # fmt: skip
    return draft.finish(Target.LLAMA_FACTORY, header(lines) + dump_yaml(document))

"""LLaMA-Factory config (YAML), for ``llamafactory-cli train run.yaml``.

Keys read from LLaMA-Factory v0.9.4 (``src/llamafactory/hparams/``: ``finetuning_args.py``
``finetuning_type`` (lora | freeze | full), ``freeze_trainable_layers`` (the last N blocks
train), ``lora_rank``, ``lora_alpha`` (an int), ``lora_target`` (names joined by commas, or
``all``), ``use_dora``, ``pure_bf16``; ``model_args.py`` ``quantization_bit`` (4 | 8),
``quantization_method``, ``quantization_type`` (nf4 | fp4), ``double_quantization``,
``flash_attn`` (disabled | sdpa | fa2), ``enable_liger_kernel``, ``use_unsloth``, ``disable_gradient_checkpointing``;
``data_args.py`` ``cutoff_len``, ``lora_dropout``) and the transformers TrainingArguments it passes
through (``torch_compile``, ``max_grad_norm``, ``fsdp`` / ``fsdp_config``).
``model/loader.py`` line 160 loads the checkpoint's own dtype (``torch_dtype="auto"``) whatever ``bf16`` /
``fp16`` / ``pure_bf16`` say (they set the compute dtype: autocast and bitsandbytes'), and the file has no key for
it: a plan that holds the loaded weights in another dtype than the catalogue checkpoint's is listed (:data:`LOADS_WHY`).
``model/adapter.py`` ``init_adapter`` then casts full and freeze tuning's trained weights to float32 unless
``pure_bf16`` or ZeRO-3 (lines 340-353), so float32 full training has no key and bf16 AMP trains float32 weights.
Gradient checkpointing is on unless disabled. Dataset, template and output folder are the user's.
"""

from __future__ import annotations

from typing import Any, Final

from core.dtypes import Autocast, Dtype, Quant
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    checkpoint_dtype,
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


# v0.9.4 model/adapter.py init_adapter, lines 340-353 (core.files.runconfig.llamafactory.FLOAT32_CAST): full and
# freeze tuning's trained weights are cast to float32 unless pure_bf16 or DeepSpeed ZeRO-3; the frozen blocks keep
# the dtype the model is loaded in.
CAST_WHY: Final = (
    "LLaMA-Factory 0.9.4 casts the trained weights to float32 unless pure_bf16 or ZeRO-3 (model/adapter.py:347-353)"
)
# PEFT v0.17.1 peft_model.py:132-134 (get_peft_model's autocast_adapter_dtype=True, which adapter.py leaves on).
ADAPTERS_WHY: Final = "PEFT's get_peft_model keeps the adapters in float32 (autocast_adapter_dtype=True)"

AMP_WHY: Final = "LLaMA-Factory's mixed precision is bf16 or fp16 autocast (bf16 AMP is written)"
# v0.9.4 model/loader.py:160 (core.files.runconfig.llamafactory.LOADED_AS): no key sets the loaded dtype.
LOADS_WHY: Final = "LLaMA-Factory 0.9.4 loads the checkpoint's own dtype (model/loader.py:160, torch_dtype auto)"


def _as_loaded(draft: Draft, name: str, dtype: Dtype) -> None:
    """``name`` (a role held as loaded) listed unless it is the catalogue checkpoint's own dtype (:data:`LOADS_WHY`)."""
    stored = checkpoint_dtype(draft.plan)
    if stored is None:
        draft.cannot(name, f"{LOADS_WHY}, which the planner does not know for this model")
    elif dtype is not stored:
        draft.cannot(name, f"{LOADS_WHY}, {stored.value}")


def _precision(draft: Draft) -> dict[str, Any]:
    """bf16 or fp16 AMP, pure bf16 or neither over the checkpoint's own dtype (:data:`LOADS_WHY`); full and freeze
    tuning's trained weights in float32 where LLaMA-Factory casts them (:data:`CAST_WHY`), the adapters in float32
    throughout (ADAPTERS_WHY)."""
    plan = draft.plan
    if plan.adapter_based and plan.adapter_dtype is not Dtype.FP32:
        draft.cannot("method.adapter_dtype", ADAPTERS_WHY)
    if not plan.adapter_based and plan.parallel.strategy is not Strategy.ZERO3:
        return _cast_precision(draft)
    dtype = loaded_dtype(draft)
    # No cast here: every weight as loaded (the weights' role for full and freeze, the base's for the rest).
    for name, held in (("method.weight_dtype", plan.weight_dtype), ("method.base_dtype", plan.base_dtype)):
        if FIELDS_BY_NAME[name].relevant(plan):
            _as_loaded(draft, name, held)
    if dtype is Dtype.BF16 and plan.autocast is Autocast.NONE:
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
    if plan.autocast is Autocast.NONE:  # neither key: no autocast, the model as loaded
        return {"bf16": False, "fp16": False}
    amp = _amp_dtype(draft)
    return {"bf16": amp is Autocast.BF16, "fp16": amp is Autocast.FP16}


def _amp_dtype(draft: Draft) -> Autocast:
    """The AMP written: the plan's bf16 or fp16 autocast, else bf16 (listed)."""
    autocast = draft.plan.autocast
    if autocast in (Autocast.BF16, Autocast.FP16):
        return autocast
    draft.cannot("method.autocast", AMP_WHY)
    return Autocast.BF16


def _cast_precision(draft: Draft) -> dict[str, Any]:
    """Full or freeze tuning outside ZeRO-3: the model loaded in the checkpoint's dtype (:data:`LOADS_WHY`), its
    trained weights cast to float32 (:data:`CAST_WHY`) except under pure_bf16.
    Float32 full training is the cast with no AMP key; a freeze run has no float32 counterpart (its float32 blocks
    would meet the frozen 16-bit head without autocast), so bf16 AMP is written for it."""
    plan = draft.plan
    # Frozen blocks, or a full run's frozen vision tower (get_forbidden_modules: not cast, v0.9.4 adapter.py 50-56).
    frozen = FIELDS_BY_NAME["method.base_dtype"].relevant(plan)
    if frozen:  # frozen blocks, or the vision tower, stay as loaded
        _as_loaded(draft, "method.base_dtype", plan.base_dtype)
    if (
        plan.autocast is Autocast.NONE
        and plan.weight_dtype is Dtype.BF16
        and (not frozen or plan.base_dtype is Dtype.BF16)
    ):  # no cast under pure_bf16: every weight as loaded
        _as_loaded(draft, "method.weight_dtype", plan.weight_dtype)
        return {"bf16": False, "fp16": False, "pure_bf16": True}
    if plan.autocast is Autocast.NONE and plan.weight_dtype is Dtype.FP32 and plan.method is not Method.FROZEN:
        return {"bf16": False, "fp16": False}
    if plan.weight_dtype is not Dtype.FP32:
        draft.cannot("method.weight_dtype", f"{CAST_WHY} (float32 is written)")
    amp = _amp_dtype(draft)
    return {"bf16": amp is Autocast.BF16, "fp16": amp is Autocast.FP16}


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

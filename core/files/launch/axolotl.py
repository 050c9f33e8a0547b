"""axolotl config (YAML), for ``axolotl train run.yaml``.

Keys read from axolotl v0.12 (``src/axolotl/utils/schemas/``: ``model.py`` ``base_model``;
``peft.py`` ``adapter`` (lora | qlora), ``load_in_4bit``, ``load_in_8bit``, ``lora_r``,
``lora_alpha`` (int), ``lora_target_modules``, ``lora_target_linear``, ``peft_use_dora``;
``training.py`` ``micro_batch_size``, ``eval_batch_size``, ``optimizer`` (transformers' names);
``config.py`` ``sequence_len``, ``gradient_accumulation_steps``, ``bf16`` / ``fp16`` (AMP) and
``bfloat16`` / ``float16`` (the model in that dtype, no AMP), ``gradient_checkpointing``,
``flash_attention`` / ``sdp_attention`` / ``eager_attention``, ``chunked_cross_entropy``,
``max_steps``, ``deepspeed`` (a path or a dict), ``fsdp_version`` with ``fsdp_config``
(``reshard_after_forward``, ``offload_params``), ``ddp_bucket_cap_mb``, ``torch_compile``,
``max_grad_norm``, ``activation_offloading``, ``lora_dropout``; Liger's fused linear
cross-entropy is a plugin: ``plugins: [axolotl.integrations.liger.LigerPlugin]`` with
``liger_fused_linear_cross_entropy``). axolotl builds its
QLoRA base as NF4 with double quantisation (``bnb_4bit_use_double_quant``) and loads an
8-bit base with float16 around it unless bf16 is on (``utils/config/__init__.py``
``normalize_config``). Datasets, the output folder and the learning rate (required) are the user's to add;
``lora_mlp_kernel`` / ``lora_qkv_kernel`` / ``lora_o_kernel`` are written false (axolotl's own LoRA kernels).
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
from core.files.launch.hf_trainer import HF_RECIPES, batch_keys, full_checkpointing, recipe_keys, sharding
from core.inputs import input_at
from core.parallel.layout import fsdp_no_sync
from core.plan import Attention, Method, ModulesToSave, Offload, Plan

ATTENTION: Final = {
    Attention.FLASH: "flash_attention",
    Attention.FLASH1: "flash_attention",  # axolotl's flash-attn is version 2: same memory, faster
    Attention.SDPA: "sdp_attention",
    Attention.EAGER: "eager_attention",
    Attention.FLASH3: "flash_attention",  # v0.12's flags name flash-attn 2 only: said by the draft (below)
}
LIGER_PLUGIN: Final = "axolotl.integrations.liger.LigerPlugin"
LORA_KERNELS: Final = ("lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel")
# (dtype the model is loaded in, AMP) -> axolotl's precision keys.
PRECISION: Final = {
    (Dtype.BF16, Autocast.BF16): {"bf16": True},
    (Dtype.BF16, Autocast.NONE): {"bf16": False, "bfloat16": True},
    (Dtype.FP16, Autocast.FP16): {"bf16": False, "fp16": True},
    (Dtype.FP16, Autocast.NONE): {"bf16": False, "float16": True},
    (Dtype.FP32, Autocast.NONE): {"bf16": False, "fp16": False},
}


def _fsdp(draft: Draft) -> dict[str, Any]:
    par = draft.plan.parallel
    if par.offload is Offload.OPTIMIZER:
        draft.cannot("parallel.offload", "FSDP's CPU offload moves parameters, gradients and optimizer state together")
    table = {
        "reshard_after_forward": par.reshard_after_forward,
        "offload_params": par.offload is Offload.PARAMS,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "state_dict_type": "SHARDED_STATE_DICT",
    }
    return {"fsdp_version": 2, "fsdp_config": table}


def _adapter(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    if plan.method is Method.FROZEN:
        draft.cannot("method.kind", "axolotl freezes parameters by name, not the bottom blocks (written as full)")
        draft.cannot("method.frozen_layers", "axolotl freezes parameters by name (unfrozen_parameters)")
    if not plan.adapter_based:
        return {}
    if plan.adapter_dtype is not Dtype.FP32:
        draft.cannot("method.adapter_dtype", "PEFT keeps adapters in float32 under axolotl")
    keys: dict[str, Any] = {"adapter": "lora"}
    if plan.method is Method.QLORA:
        if plan.quant is Quant.INT8:
            keys["load_in_8bit"] = True
        else:
            keys.update(adapter="qlora", load_in_4bit=True)
            if plan.quant is Quant.FP4:
                draft.cannot("method.quant", "axolotl's 4-bit base is NF4 (an NF4 base is written)")
            if not plan.double_quant:
                draft.cannot("method.double_quant", "axolotl always quantises the 4-bit scales (double quantisation)")
    keys.update(lora_r=plan.lora.rank, lora_alpha=integer_alpha(draft), lora_dropout=plan.lora.dropout)
    # axolotl-ai-cloud/axolotl b78dab1e src/axolotl/loaders/adapter.py find_all_linear_names: lora_target_linear adds
    # every nn.Linear's last name (an MoE router's among them) to lora_target_modules: the plan's all-linear.
    linear, names = lora_target_names(draft, None)
    if linear:
        keys["lora_target_linear"] = True
    if names or not linear:
        keys["lora_target_modules"] = names
    keys["peft_use_dora"] = plan.method is Method.DORA
    # axolotl 0.12.2 utils/schemas/config.py:1076 check_auto_enable_lora_kernels turns its Triton LoRA kernels on
    # for lora / qlora with lora_dropout 0 unless a file sets them; they are not the PEFT LoRA layers the plan
    # estimates, and with DoRA the turned-on kernels are refused (utils/schemas/validation.py:621
    # check_lora_kernels_dora): "not compatible with DoRA at the moment". Found by tools/measure/export_check.py.
    keys.update(dict.fromkeys(LORA_KERNELS, False))
    if plan.lora.modules_to_save is not ModulesToSave.NONE:  # axolotl hands lora_modules_to_save to LoraConfig
        keys["lora_modules_to_save"] = modules_to_save_names(plan)
    return keys


def _precision(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    dtype = loaded_dtype(draft)
    keys = PRECISION.get((dtype, plan.autocast))
    if keys is None:
        draft.cannot(
            "method.autocast", f"axolotl's AMP runs in the dtype the model is loaded in ({dtype.value}): no AMP"
        )
        keys = PRECISION[(dtype, Autocast.NONE)]
    if plan.method is Method.QLORA and plan.quant is Quant.INT8 and dtype is Dtype.FP32:
        draft.cannot("method.base_dtype", "axolotl loads an 8-bit base with float16 around it")
    return dict(keys)


def _activation_offloading(draft: Draft) -> bool:
    """axolotl 0.12.2 utils/schemas/validation.py:1119 check_activation_offloading_wo_gc refuses offloading without
    gradient_checkpointing ("activation_offloading requires gradient_checkpointing"; found by
    tools/measure/export_check.py): such a plan is written without offloading, and says so."""
    plan = draft.plan
    if plan.activation_offload and not plan.checkpointing:
        draft.cannot("method.activation_offload", "axolotl offloads activations only with gradient_checkpointing")
        return False
    return plan.activation_offload


def export_axolotl(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    if plan.attention is Attention.FLASH3:
        draft.cannot("method.attention", "axolotl v0.12's flags offer flash-attn 2, not 3: flash_attention is written")
    work = plan.workload
    batch = batch_keys(draft)
    document: dict[str, Any] = {
        "base_model": model_reference(draft, model_ref),
        **_adapter(draft),
        "sequence_len": work.seq_len,
        "micro_batch_size": work.micro_batch,
        "gradient_accumulation_steps": work.grad_accum,
        "eval_batch_size": batch["per_device_eval_batch_size"],
        **_precision(draft),
        "optimizer": batch["optim"],
        **{key: batch[key] for key in ("optim_target_modules", "optim_args") if key in batch},
        "gradient_checkpointing": plan.checkpointing,
        ATTENTION[plan.attention]: True,
        "chunked_cross_entropy": plan.chunked_loss,
        "activation_offloading": _activation_offloading(draft),
        **recipe_keys(draft),
    }
    if plan.fused_loss:
        document.update(plugins=[LIGER_PLUGIN], liger_fused_linear_cross_entropy=True)
    full_checkpointing(draft)
    if "max_steps" in batch:
        document["max_steps"] = batch["max_steps"]
    document.update(sharding(draft, _fsdp))
    if input_at("parallel.grad_sync").matters(plan) and not fsdp_no_sync(plan.parallel, work.grad_accum):
        draft.cannot(
            "parallel.grad_sync",
            "axolotl trains through accelerate, which reduces FSDP's gradients in the last micro-batch only "
            "(no_sync; FSDP2 so from accelerate 1.11) unless GradientAccumulationPlugin(sync_each_batch=True): "
            "this export writes no key for it",
        )
    written = (
        *HF_RECIPES,
        "method.fused_loss",
        "method.activation_offload",
        "method.lora.dropout",
        "method.lora.modules_to_save",
        *hf_galore_written(plan),
    )
    recipes_outside(draft, [n for n in written if n not in ("parallel.fsdp1_wrap", "parallel.grad_sync")])
    # learning_rate is required (axolotl 0.12.2 utils/schemas/training.py:71, no default) and not the plan's.
    lines = [
        "axolotl config written by VRAM Planner. Add datasets, output_dir and learning_rate, then: "
        "axolotl train <this file>"
    ]
    return draft.finish(Target.AXOLOTL, header(lines) + dump_yaml(document))

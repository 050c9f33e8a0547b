"""Framework names onto the planner's, and :func:`apply_settings`: the one place settings become a Plan.

Every importer produces :class:`~core.runconfig.result.RunSettings`; only
:func:`apply_settings` knows which Plan fields exist. When the plan gains fields
(separate weight/base/adapter dtypes, autocast, the optimizer implementation, DoRA),
this function is the only one that changes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from core.plan import Attention, LoraSettings, Method, Optimizer, Plan, Precision, Quant, Sharding
from core.runconfig.result import RunSettings

# transformers ``OptimizerNames`` (training_args.py / trainer_utils.py, v4.57) -> (optimizer, implementation).
# adamw_torch builds torch.optim.AdamW, which picks the foreach path on CUDA; adamw_torch_fused
# passes fused=True (the Trainer default once torch >= 2.8); adamw_hf was transformers' own
# AdamW, a Python loop over parameters. bitsandbytes' 8-bit and paged variants keep their names.
HF_OPTIMIZERS: Final[dict[str, tuple[Optimizer, str | None]]] = {
    "adamw_torch": (Optimizer.ADAMW, "foreach"),
    "adamw_torch_fused": (Optimizer.ADAMW, "fused"),
    "adamw_apex_fused": (Optimizer.ADAMW, "fused"),
    "adamw_torch_npu_fused": (Optimizer.ADAMW, "fused"),
    "adamw_hf": (Optimizer.ADAMW, "forloop"),
    "adamw_torch_xla": (Optimizer.ADAMW, None),
    "adamw_bnb_8bit": (Optimizer.ADAMW_8BIT, None),
    "adamw_8bit": (Optimizer.ADAMW_8BIT, None),
    "adamw_torch_8bit": (Optimizer.ADAMW_8BIT, None),  # torchao's AdamW8bit
    "paged_adamw_8bit": (Optimizer.PAGED_ADAMW_8BIT, None),
    "paged_adamw": (Optimizer.PAGED_ADAMW, None),
    "paged_adamw_32bit": (Optimizer.PAGED_ADAMW, None),
    "adafactor": (Optimizer.ADAFACTOR, None),
    "sgd": (Optimizer.SGD, None),  # torch.optim.SGD with momentum 0 unless optim_args say otherwise
}
# Default of TrainingArguments.optim: "adamw_torch_fused" when torch >= 2.8, else "adamw_torch"
# (transformers training_args.py, default_optim). We plan for a current torch.
HF_DEFAULT_OPTIM: Final = "adamw_torch_fused"

# torch_dtype / dtype strings as configs write them.
DTYPES: Final[dict[str, str]] = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
}

# attn_implementation values (transformers) -> the planner's kernels.
ATTENTION_KERNELS: Final[dict[str, Attention]] = {
    "eager": Attention.EAGER,
    "sdpa": Attention.SDPA,
    "flash_attention_2": Attention.FLASH,
    "flash_attention_3": Attention.FLASH,
}


def precision_for(method: Method, model_dtype: str, autocast: str) -> Precision:
    """Today's single precision field from how the model is loaded and whether autocast runs.

    Loaded in float32: autocast gives the mixed presets (float32 master weights), none gives
    float32. Loaded in 16 bits: the stored weights are 16-bit whatever autocast does, so the
    pure preset; for LoRA that is bf16/fp16 base with float32 adapters (PEFT's default).
    """
    del method  # the same rule for every method today; kept for the per-method dtypes to come
    if model_dtype == "bf16":
        return Precision.BF16
    if model_dtype == "fp16":
        return Precision.FP16
    if autocast == "bf16":
        return Precision.BF16_MIXED
    if autocast == "fp16":
        return Precision.FP16_MIXED
    return Precision.FP32


def apply_settings(plan: Plan, settings: RunSettings, *, model_dtype: str | None = None) -> Plan:
    """``plan`` with every setting the file gave; ``model_dtype`` is the model's own torch_dtype,
    used when the file does not say how the model is loaded. Raises PlanError on a value
    the plan refuses (a rank of 0, ...)."""
    s = settings
    method = plan.method
    if s.method is not None:
        # DoRA: PEFT's use_dora adds a magnitude vector per adapted matrix (out_features
        # values); it is estimated as LoRA until the plan has its own method for it.
        method = {"full": Method.FULL, "lora": Method.LORA, "dora": Method.LORA, "qlora": Method.QLORA}[s.method]
    changes: dict[str, object] = {"method": method}
    if s.trainable_layers is not None:
        layers = plan.model.num_layers
        changes["method"] = method = Method.FROZEN
        changes["frozen_layers"] = max(1, layers - min(s.trainable_layers, layers))
    elif method is not Method.FROZEN:
        changes["frozen_layers"] = 0
    if s.quant is not None:
        changes["quant"] = Quant(s.quant)
    if s.double_quant is not None:
        changes["double_quant"] = s.double_quant
    lora: dict[str, object] = {}
    if s.lora_rank is not None:
        lora["rank"] = s.lora_rank
    if s.lora_alpha is not None:
        lora["alpha"] = float(s.lora_alpha)
    if s.lora_targets is not None:
        lora["targets"] = s.lora_targets
    if lora:
        changes["lora"] = replace(plan.lora, **lora) if plan.lora else LoraSettings(**lora)  # type: ignore[arg-type]
    dtype = s.model_dtype or model_dtype
    if dtype is not None or s.autocast is not None:
        changes["precision"] = precision_for(method, dtype or "fp32", s.autocast or "none")
    if s.optimizer is not None:
        changes["optimizer"] = Optimizer(s.optimizer)
    if s.checkpointing is not None:
        changes["checkpointing"] = s.checkpointing
    if s.attention is not None:
        changes["attention"] = Attention(s.attention)
    if s.chunked_loss is not None:
        changes["chunked_loss"] = s.chunked_loss
    workload = {
        name: getattr(s, name)
        for name in ("micro_batch", "seq_len", "grad_accum", "eval_batch")
        if getattr(s, name) is not None
    }
    if workload:
        changes["workload"] = replace(plan.workload, **workload)
    if s.sharding is not None:
        # The GPU count is the launcher's (torchrun, accelerate), not the config's: kept.
        changes["hardware"] = replace(plan.hardware, sharding=Sharding(s.sharding))
    return replace(plan, **changes)  # type: ignore[arg-type]

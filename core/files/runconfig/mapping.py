"""Framework names onto the planner's, and :func:`apply_settings`: the one place settings become a Plan.

Every importer produces :class:`~core.files.runconfig.result.RunSettings`; only
:func:`apply_settings` knows which Plan fields exist: the precision roles (weights, frozen
base, adapters, autocast) with the preset they match, the optimizer and its
implementation, DoRA.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from core.dtypes import Autocast, Dtype, MpDtype, Quant
from core.files.runconfig.result import RunSettings
from core.plan import (
    ROLE_FIELDS,
    Attention,
    CheckpointPolicy,
    CpRotate,
    Float8,
    FsdpUnits,
    GradSync,
    LoraSettings,
    MegatronCeFusion,
    Method,
    ModulesToSave,
    Offload,
    Optimizer,
    OptimizerImpl,
    Parallelism,
    Plan,
    PrecisionRoles,
    RoadVariant,
    Stack,
    Strategy,
    ia3_feedforward_within,
    lora_on,
    preset_matching,
)

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
    # torchao's AdamW8bit / AdamW4bit (transformers trainer.py: ``from torchao.optim import AdamW4bit, AdamW8bit``),
    # not bitsandbytes': their small tensors keep the parameter's dtype, 4-bit codes come in blocks of 128.
    "adamw_torch_8bit": (Optimizer.AO_ADAMW_8BIT, None),
    "adamw_torch_4bit": (Optimizer.AO_ADAMW_4BIT, None),
    # bitsandbytes' Lion (OptimizerNames LION = "lion_32bit", LION_8BIT, PAGED_LION = "paged_lion_32bit", ...)
    "lion_32bit": (Optimizer.LION, None),
    "lion_8bit": (Optimizer.LION_8BIT, None),
    "paged_lion_32bit": (Optimizer.PAGED_LION, None),
    "paged_lion_8bit": (Optimizer.PAGED_LION_8BIT, None),
    "paged_adamw_8bit": (Optimizer.PAGED_ADAMW_8BIT, None),
    "paged_adamw": (Optimizer.PAGED_ADAMW, None),
    "paged_adamw_32bit": (Optimizer.PAGED_ADAMW, None),
    "adafactor": (Optimizer.ADAFACTOR, None),
    "sgd": (Optimizer.SGD, None),  # torch.optim.SGD with momentum 0 unless optim_args say otherwise
    # transformers 5.25 trainer_optimizer.py: _get_adagrad / _get_rmsprop build torch.optim.Adagrad / RMSprop with no
    # foreach or fused argument (torch's default on CUDA: foreach); RMSprop momentum 0, not centered, unless optim_args
    # say otherwise. _get_bitsandbytes_optimizer: rmsprop_bnb and rmsprop_bnb_32bit optim_bits=32, rmsprop_bnb_8bit 8,
    # never paged; ademamix / ademamix_8bit / paged_ademamix_32bit / paged_ademamix_8bit bitsandbytes' AdEMAMix.
    "adagrad": (Optimizer.ADAGRAD, "foreach"),
    "rmsprop": (Optimizer.RMSPROP, "foreach"),
    "rmsprop_bnb": (Optimizer.RMSPROP_BNB, None),
    "rmsprop_bnb_32bit": (Optimizer.RMSPROP_BNB, None),
    "rmsprop_bnb_8bit": (Optimizer.RMSPROP_BNB_8BIT, None),
    "ademamix": (Optimizer.ADEMAMIX, None),
    "ademamix_8bit": (Optimizer.ADEMAMIX_8BIT, None),
    "paged_ademamix_32bit": (Optimizer.PAGED_ADEMAMIX, None),
    "paged_ademamix_8bit": (Optimizer.PAGED_ADEMAMIX_8BIT, None),
    # _get_schedule_free_optimizer: schedulefree's AdamWScheduleFree / RAdamScheduleFree / SGDScheduleFree
    "schedule_free_adamw": (Optimizer.SCHEDULE_FREE_ADAMW, None),
    "schedule_free_radam": (Optimizer.SCHEDULE_FREE_RADAM, None),
    "schedule_free_sgd": (Optimizer.SCHEDULE_FREE_SGD, None),
    # transformers 5.25 trainer_optimizer.py _get_galore_optimizer: galore_torch.GaLoreAdamW, its own for-loop (no
    # implementation to choose); the layer-wise name is the same optimizer stepped per parameter in the backward.
    "galore_adamw": (Optimizer.GALORE_ADAMW, None),
    "galore_adamw_layerwise": (Optimizer.GALORE_ADAMW, None),
}
# _setup_low_rank_optimizer: a name ending in "layerwise" registers one optimizer per parameter, stepped and zeroed
# in a post-accumulate-grad hook (the plan's optimizer_in_backward), refusing DDP and gradient accumulation.
HF_GALORE_LAYERWISE: Final = "galore_adamw_layerwise"
# transformers' adamw_anyprecision builds torchdistx's AnyPrecisionAdamW with float32 moments unless optim_args
# name others (trainer.py: ``optim_args.get("momentum_dtype", "float32")``, the same for variance_dtype): not the
# planner's AnyPrecisionAdamW (llama-recipes' bf16 moments), and optim_args are not read: listed, not guessed.
HF_ANYPRECISION: Final = "adamw_anyprecision"
HF_ANYPRECISION_WHY: Final = (
    "transformers' AnyPrecisionAdamW keeps float32 moments unless optim_args set momentum_dtype / variance_dtype "
    "(not read); the planner's anyprecision-adamw is llama-recipes' bf16 moments"
)
# transformers 5.25 OptimizerNames the planner does not model, each with the reason (trainer_optimizer.py builds them;
# the libraries' state read where named): listed as not understood with it, never guessed as AdamW.
# GaLore AdamW and its layer-wise form are planned (Optimizer.GALORE_ADAMW; layer-wise with the step in the backward:
# HF_GALORE_LAYERWISE, core.files.runconfig.common.hf_galore reads optim_args and optim_target_modules). Its 8-bit
# and Adafactor forms keep their own state (bitsandbytes' 8-bit on the projection; factored rows and columns):
# not modelled yet.
_GALORE_WHY: Final = (
    "GaLore's {} keeps its state on each target's rank-r projection (galore-torch {}): not modelled; galore_adamw is"
)
_LAYERWISE: Final = " (layer-wise: the step runs in the backward, per parameter)"
HF_NOT_MODELLED: Final = {
    "galore_adamw_8bit": _GALORE_WHY.format("AdamW8bit", "adamw8bit.py, bitsandbytes' 8-bit state"),
    "galore_adafactor": _GALORE_WHY.format("Adafactor", "adafactor.py, factored second moment"),
    "galore_adamw_8bit_layerwise": _GALORE_WHY.format("AdamW8bit", "adamw8bit.py, bitsandbytes' 8-bit state")
    + _LAYERWISE,
    "galore_adafactor_layerwise": _GALORE_WHY.format("Adafactor", "adafactor.py, factored second moment") + _LAYERWISE,
    "apollo_adamw": "APOLLO keeps AdamW's state on a random rank-r projection of each target matrix (apollo-torch): "
    "not modelled",
    "apollo_adamw_layerwise": "APOLLO keeps AdamW's state on a random rank-r projection of each target matrix, the "
    "step in the backward (apollo-torch): not modelled",
    "lomo": "LOMO updates each parameter in the backward as its gradient forms, keeping no gradients, through its own "
    "trainer path (transformers trainer.py: optimizer.fused_backward): not modelled",
    "adalomo": "AdaLOMO updates in the backward with factored second moments (lomo-optim): not modelled",
    "grokadamw": "GrokAdamW (grokadamw package) keeps a gradient EMA beside Adam's moments: not read, not modelled",
    "stable_adamw": "StableAdamW (torch-optimi) is not read: not modelled",
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
    "flash_attention_3": Attention.FLASH3,
}


def roles_for(plan: Plan, model_dtype: str | None, settings: RunSettings) -> PrecisionRoles | None:
    """The precision roles a run uses, from how the model is loaded and whether autocast runs.

    The model is loaded in ``model_dtype`` (the file's ``torch_dtype``, else the model's own
    config dtype, which transformers 5 loads by default); its trainable weights and the frozen
    base both live there. Adapters are float32 unless the framework says otherwise (PEFT's
    ``autocast_adapter_dtype=True``). Freeze tuning's trained blocks are held in ``trainable_dtype`` where the
    framework casts them (LLaMA-Factory's ``cast_trainable_params_to_fp32``), the frozen ones where loaded; full
    tuning's whole model there.
    None: the file says nothing about precision.
    """
    if (
        model_dtype is None
        and settings.autocast is None
        and settings.adapter_dtype is None
        and not settings.trainable_dtype
    ):
        return None
    stored = Dtype(model_dtype) if model_dtype is not None else plan.weight_dtype
    trained = Dtype(settings.trainable_dtype) if settings.trainable_dtype else stored
    # Full tuning casts every weight it trains, which is all of them: no frozen base is left in the loaded dtype,
    # so the roles are the preset the run is. An image-text checkpoint's frozen vision tower is the exception: the
    # cast leaves it as loaded (LLaMA-Factory v0.9.4 model/adapter.py _setup_full_tuning lines 50-56), and a full
    # plan stores the tower in its base dtype (core.training.storage.vision_weight_term).
    whole = settings.method == "full" and settings.trainable_layers is None
    tower_as_loaded = whole and bool(settings.trainable_dtype) and plan.model.vision_params > 0
    return PrecisionRoles(
        weight_dtype=trained,
        base_dtype=trained if whole and not tower_as_loaded else stored,
        adapter_dtype=Dtype(settings.adapter_dtype) if settings.adapter_dtype else Dtype.FP32,
        autocast=Autocast(settings.autocast) if settings.autocast else plan.autocast,
    )


# The recipe switches a config file may turn on, each a plan input of the same name.
_RECIPES: Final = (
    "fused_loss",
    "compiled_loss",
    "grad_clip",
    "weight_decay",
    "optimizer_in_backward",
    "galore_rank",
    "galore_update_proj_gap",
    "activation_offload",
    "kbit_upcast",
    "unsloth",
    "moe_grouped_gemm",
)


# Run settings that set the Parallelism field of the same name: as given, or as the enum they name.
_PARALLEL_KNOBS: Final = (
    "reshard_after_forward",
    "tp_overlap",
    "fsdp_float8_all_gather",
    "fsdp1_wrap",
    "grad_reduce_in_fp32",
    "grad_accum_fusion",
    "zero_overlap_comm",
    "bf16_master_weights",
    "bf16_optimizer_states",
    "zero3_overlap_comm",
    "capacity_factor",
    "pad_to_capacity",
    "ddp_bucket_mb",
)
_PARALLEL_ENUMS: Final = {
    "offload": Offload,
    "grad_sync": GradSync,
    "cp_rotate_method": CpRotate,
    "fsdp_units": FsdpUnits,
    "fsdp_param_dtype": MpDtype,
    "fsdp_reduce_dtype": MpDtype,
}


def _parallel(plan: Plan, s: RunSettings) -> Parallelism | None:
    """The plan's Parallelism with what the file set (None: nothing)."""
    parallel: dict[str, Any] = {}
    if s.sharding is not None:
        # The GPU count is the launcher's (torchrun, accelerate), not the config's: kept.
        parallel["strategy"] = Strategy(s.sharding)
    for knob in _PARALLEL_KNOBS:
        if getattr(s, knob) is not None:
            parallel[knob] = getattr(s, knob)
    for name, enum in _PARALLEL_ENUMS.items():
        if getattr(s, name) is not None:
            parallel[name] = enum(getattr(s, name))
    return replace(plan.parallel, **parallel) if parallel else None


def _lora_settings(plan: Plan, s: RunSettings, method: Method) -> LoraSettings | None:
    """The adapter settings the file gave, on the plan's (None: the file gave none)."""
    lora: dict[str, object] = {}
    if s.lora_rank is not None:
        lora["rank"] = s.lora_rank
    if s.lora_alpha is not None:
        lora["alpha"] = float(s.lora_alpha)
    if s.lora_targets is not None:
        lora["targets"] = s.lora_targets
    if s.lora_dropout is not None:
        lora["dropout"] = float(s.lora_dropout)
    if s.virtual_tokens is not None:
        lora["virtual_tokens"] = s.virtual_tokens
    if s.lokr_factor is not None:
        lora["lokr_factor"] = s.lokr_factor
    if s.oft_block_size is not None:
        lora["oft_block_size"] = s.oft_block_size
    if s.road_variant is not None:
        lora["road_variant"] = RoadVariant(s.road_variant)
    if s.modules_to_save is not None:
        lora["modules_to_save"] = ModulesToSave(s.modules_to_save)
    if s.trainable_tokens is not None:
        lora["trainable_tokens"] = s.trainable_tokens
    if s.ia3_feedforward is not None:
        lora["ia3_feedforward"] = s.ia3_feedforward
    elif method is Method.IA3:  # the file gives no feedforward modules: the plan's among the targets
        lora["ia3_feedforward"] = ia3_feedforward_within(plan.lora, s.lora_targets or plan.lora.targets)
    if not lora:
        return None
    settings = replace(plan.lora, **lora) if plan.lora else LoraSettings(**lora)  # type: ignore[arg-type]
    return lora_on(plan.model, settings)  # MLA: the targets it has


def apply_settings(plan: Plan, settings: RunSettings, *, model_dtype: str | None = None) -> Plan:
    """``plan`` with every setting the file gave; ``model_dtype`` is the model's own torch_dtype,
    used when the file does not say how the model is loaded. Raises PlanError on a value
    the plan refuses (a rank of 0, ...)."""
    s = settings
    method = plan.method
    if s.method is not None:
        method = Method(s.method)
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
    lora = _lora_settings(plan, s, method)
    if lora is not None:
        changes["lora"] = lora
    roles = roles_for(plan, s.model_dtype or model_dtype, s)
    if roles is not None:
        # A named preset when the roles are one (Trainer(bf16=True) on a bf16 model, ...).
        changes.update(preset=preset_matching(roles), **{name: getattr(roles, name) for name in ROLE_FIELDS})
    if s.optimizer is not None:
        changes["optimizer"] = Optimizer(s.optimizer)
    if s.optimizer_impl is not None:
        changes["optimizer_impl"] = OptimizerImpl(s.optimizer_impl)
    if s.checkpointing is not None:
        changes["checkpointing"] = s.checkpointing
    if s.checkpoint_policy is not None:
        changes["checkpoint_policy"] = CheckpointPolicy(s.checkpoint_policy)
    if s.checkpoint_every is not None:
        changes["checkpoint_every"] = s.checkpoint_every
    if s.attention is not None:
        changes["attention"] = Attention(s.attention)
    if s.chunked_loss is not None:
        changes["chunked_loss"] = s.chunked_loss
    if s.stack is not None:
        changes["stack"] = Stack(s.stack)
    if s.float8 is not None:
        changes["float8"] = Float8(s.float8)
    if s.megatron_ce_fusion is not None:
        changes["megatron_ce_fusion"] = MegatronCeFusion(s.megatron_ce_fusion)
    for recipe in _RECIPES:
        if getattr(s, recipe) is not None:
            changes[recipe] = getattr(s, recipe)
    workload = {
        name: getattr(s, name)
        for name in ("micro_batch", "seq_len", "grad_accum", "eval_batch")
        if getattr(s, name) is not None
    }
    if workload:
        changes["workload"] = replace(plan.workload, **workload)
    parallel = _parallel(plan, s)
    if parallel is not None:
        changes["parallel"] = parallel
    return plan.with_changes(**changes)

"""LLaMA-Factory v1 YAML configs (``examples/v1/``, ``llamafactory.v1``).

Read at hiyouga/LLaMA-Factory ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30. v1 parses four dataclasses
(``src/llamafactory/v1/config/``: ModelArguments, DataArguments, TrainingArguments, SampleArguments),
none of them transformers' TrainingArguments: the model is a top-level ``model`` string, and the method,
quantisation, kernels, sharding and optimizer are plugin tables (``peft_config``, ``quant_config``,
``kernel_config``, ``dist_config``, ``optim_config``) with a ``name``. What each sets, from the source:

- ``core/model_engine.py``: the model loads with ``dtype="auto"`` (its own config dtype); with no
  ``peft_config`` (full tuning) it is cast to float32 (``model.to(torch.float32)``).
- ``core/base_trainer.py``: no ``torch.autocast`` anywhere; ``bf16`` (default true) only reaches the
  sharding plugin. FSDP2 (``plugins/trainer_plugins/distributed/fsdp2.py`` ``get_mp_policy``) then gathers
  parameters in bf16 and reduces in float32; FSDPTurbo (``fsdpturbo.py``) casts a full model to bf16; with
  no ``dist_config`` the model trains in the dtype it holds (DDP when launched on several GPUs).
- ``enable_activation_checkpointing`` (default true): ``gradient_checkpointing_enable`` non-reentrant.
- no ``optim_config``: ``torch.optim.AdamW`` (torch's default implementation, foreach on CUDA); ``muon``:
  its own Muon (``optimizers/muon_optimizer.py``: a momentum buffer on the matrices, AdamW's two moments
  on the rest).
- ``global_batch_size`` (default: GPUs × micro-batch) sets the micro-batches per step
  (``core/utils/batching.py``: ``global_batch_size // dp_size // micro_batch_size``).
- ``peft_config: freeze`` (``plugins/model_plugins/peft.py`` ``get_freeze_model``): the trained blocks are cast to
  float32 (``cast_trainable_params_to_fp32``, true by default), the frozen ones stay as loaded. FSDP2 then gathers
  them in bf16; DeepSpeed's bf16 engine casts them back to bf16; with neither, nothing casts them for the forward
  and, on a 16-bit model, the float32 output of the top block meets the frozen 16-bit head: the forward fails
  (measured on CPU, torch 2.13.0 and transformers 5.25.0, a 4-layer bf16 Qwen3: "expected m1 and m2 to have the
  same dtype").
- ``dist_config: deepspeed``: accelerate's DeepSpeedPlugin with the mixed precision
  ``plugins/model_plugins/deepspeed_utils.py`` ``infer_deepspeed_mixed_precision`` reads from the file's own
  ``bf16`` / ``fp16`` sections (v1's ``bf16`` key does not reach it): DeepSpeed's bf16 engine, which the plan's bf16
  autocast stands for under a ZeRO stage (core.roles.deepspeed_engine_dtype), or none; ``fp16.enabled: true`` is
  refused.
- ``launcher.py``: ``llamafactory-cli sft | dpo | rm`` picks the trainer; no key of the file does, so the import
  says which stage it estimates (the supervised step) and why it thinks the file may be meant for another.
- ``kernel_config`` ``liger_kernel``: applied with ``require_logits=True`` in training
  (``model_engine.py``; ``kernels/liger_kernel_ops.py`` then turns ``fused_linear_cross_entropy`` off),
  so the loss keeps its logits; ``auto`` applies kernels only on Ascend NPUs.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any, Final

from core.files.runconfig.common import (
    OddValues,
    deepspeed_config,
    finish,
    lora_targets,
    modules_to_save,
    rank_and_alpha,
)
from core.files.runconfig.llamafactory import FROZEN_HEAD
from core.files.runconfig.mapping import ATTENTION_KERNELS
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, FieldRead, RunConfig

# Defaults of the v1 dataclasses (ff6d4d1): TrainingArguments micro_batch_size 1, cutoff_len 2048, bf16
# True, enable_activation_checkpointing True; ModelArguments flash_attn sdpa; peft.py LoraParams r 8,
# lora_alpha 16, target_modules "all"; FreezeParams freeze_trainable_layers 2; quantization.py BnbParams
# quantization_bit 4 when absent, quantization_type nf4, double_quantization True.
DEFAULT_MICRO_BATCH: Final = 1
DEFAULT_CUTOFF: Final = 2048
DEFAULT_RANK: Final = 8
DEFAULT_ALPHA: Final = 16
DEFAULT_FREEZE_LAYERS: Final = 2
DEFAULT_QUANT_BITS: Final = 4

# Keys with no effect on memory or time per step (paths, logging, schedule, seeds, sampling).
IRRELEVANT: Final = (
    "output_dir", "learning_rate", "num_train_epochs", "max_steps", "lr_scheduler_config", "seed",
    "full_determinism", "resume_from_checkpoint", "save_steps", "save_epochs", "save_total_limit",
    "logging_steps", "dist_timeout", "batching_workers", "train_dataset", "eval_dataset", "custom_chat_template",
    "trust_remote_code", "sample_backend", "max_new_tokens", "init_config", "dist_config.name",
    "dist_config.dcp_path", "dist_config.pin_memory", "peft_config.name", "peft_config.use_rslora",
    "peft_config.lora_dropout", "quant_config.name", "quant_config.compute_dtype", "kernel_config.name",
    "optim_config.name", "optim_config.lr", "optim_config.wd", "optim_config.weight_decay",
    "optim_config.momentum", "optim_config.nesterov", "optim_config.ns_steps", "optim_config.adamw_betas",
    "optim_config.adamw_eps", "model_class",
)  # fmt: skip
# Preference-loss keys (TrainingArguments pref_*): read by v1's DPO trainer only.
PREFERENCE: Final = ("pref_loss", "pref_beta", "pref_ftx", "simpo_gamma", "dpo_label_smoothing", "ld_alpha")
# A dataset path that names preference data (examples/v1/train_lora/train_lora_dpo.yaml: data/v1_dpo_demo.yaml).
_PREFERENCE_DATA: Final = re.compile(r"dpo|pref|pair|chosen|reject", re.IGNORECASE)
STAGE_SFT: Final = (
    "stage: the command's, not the file's (llamafactory-cli sft, dpo or rm): estimated as llamafactory-cli sft, "
    "the supervised step"
)
STAGE_DPO: Final = (
    "stage: the command's, not the file's; this file looks like preference training, which llamafactory-cli dpo "
    "runs: estimated as the supervised step. DPO's rejected sequences beside the chosen ones in each step and, under "
    "full tuning, its reference model (a frozen deep copy; LoRA reuses the base with the adapter off) are not modelled"
)
FREEZE_WITHOUT_SHARDING: Final = (
    "peft_config freeze without dist_config: the trained blocks are float32 and nothing casts them back, so on a "
    "16-bit model their output meets the frozen 16-bit head without autocast and the forward fails (unless the "
    "model is float32 or cast_trainable_params_to_fp32 is false); the plan is what the run would hold"
)
FREEZE_UNDER_FSDPTURBO: Final = (
    "peft_config freeze under fsdpturbo with bf16: the trained blocks' float32 cast is undone, FSDPTurbo's "
    "shard_model casts the whole model to bf16 (fsdpturbo.py FSDPTurboFSDP2Engine.shard_model)"
)
BF16_UNDER_DEEPSPEED: Final = (
    "bf16: not read under dist_config deepspeed; the DeepSpeed file's own bf16 / fp16 sections decide (v1's "
    "deepspeed.py hands accelerate the precision infer_deepspeed_mixed_precision reads from the file)"
)
# The LoRA plugin's export / inference keys (peft.py LoraParams): a merge-and-export run, not training.
EXPORT: Final = (
    "peft_config.adapter_name_or_path", "peft_config.export_dir", "peft_config.export_size",
    "peft_config.export_hub_model_id", "peft_config.infer_dtype", "peft_config.export_legacy_format",
)  # fmt: skip


def read_llamafactory_v1(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    model_ref = taker.text("model")
    if model_ref:
        taker.record("model", model_ref, "model")
    s: dict[str, Any] = {}
    s.update(_workload(taker))
    dist = taker.word("dist_config.name", "fsdp2, fsdpturbo or deepspeed")
    turbo_bf16 = dist == "fsdpturbo" and taker.flag("bf16") is not False  # fsdpturbo.py shard_model: model.to(bf16)
    s.update(_method(taker, odd, turbo_bf16))
    sharding = _sharding(taker, odd, dist)
    engine = sharding.pop("autocast", None)  # DeepSpeed's own precision, read from its file
    full = not taker.has("peft_config")
    s.update(_precision(taker, full=full, dist=dist, engine=engine, method=s["method"]))
    s.update(sharding)
    if s.get("trainable_dtype") and dist is None:
        taker.notes.append(FieldRead("note", "freeze", FREEZE_WITHOUT_SHARDING))
    s.update(_optimizer(taker, odd, sharded=dist is not None))
    s.update(_kernels(taker, odd))
    _not_modelled(taker)
    _stage(taker)
    taker.irrelevant(*IRRELEVANT)
    return finish(ConfigKind.LLAMA_FACTORY, taker, odd, model_ref, s)


def _workload(taker: Taker) -> dict[str, Any]:
    """Micro-batch, sequence length, accumulation (from ``global_batch_size``) and checkpointing."""
    s: dict[str, Any] = {}
    batch = taker.integer("micro_batch_size", "micro_batch")
    if batch is None:
        batch = DEFAULT_MICRO_BATCH
        taker.record("micro_batch", batch, "default: micro_batch_size = 1")
    s["micro_batch"] = batch
    cutoff = taker.integer("cutoff_len", "seq_len", 1, 100_000_000)
    if cutoff is None:
        cutoff = DEFAULT_CUTOFF
        taker.record("seq_len", cutoff, "default: cutoff_len = 2048")
    s["seq_len"] = cutoff
    total = taker.integer("global_batch_size", None)
    dp = taker.integer("dp_size", None)
    if total is None:
        s["grad_accum"] = 1
        taker.record("grad_accum", 1, "default: global_batch_size = GPUs × micro_batch_size, one micro-batch a step")
    elif dp is not None and total % (dp * batch) == 0:
        s["grad_accum"] = total // (dp * batch)
        taker.record("grad_accum", s["grad_accum"], "global_batch_size / (dp_size × micro_batch_size)")
    else:
        taker.note(
            "global_batch_size",
            "micro-batches per step are global_batch_size / (GPUs × micro_batch_size), the GPU count the "
            "launcher's: set the plan's gradient accumulation",
        )
    checkpointing = taker.flag("enable_activation_checkpointing", "checkpointing")
    if checkpointing is None:
        checkpointing = True
        taker.record("checkpointing", True, "default: enable_activation_checkpointing = true")
    s["checkpointing"] = checkpointing
    return s


def _method(taker: Taker, odd: OddValues, turbo_bf16: bool = False) -> dict[str, Any]:
    """``peft_config`` (none: full tuning; ``lora``; ``freeze``) and ``quant_config`` (a bitsandbytes base).
    ``turbo_bf16``: FSDPTurbo with bf16, which casts the whole model to bf16 before sharding it."""
    name = taker.word("peft_config.name", "lora or freeze")
    s: dict[str, Any] = {}
    if name is None:
        s["method"] = "full"
        taker.record("method", "full", "no peft_config: full tuning")
    elif name == "lora":
        s.update(_lora(taker, odd))
    elif name == "freeze":
        s.update(_freeze(taker, odd, cast_back=turbo_bf16))
    else:
        raise taker.fail("peft_config.name", name, "lora or freeze")
    quant = taker.word("quant_config.name", "bnb or auto")
    if quant is not None:
        bits = taker.raw("quant_config.quantization_bit")
        bits = DEFAULT_QUANT_BITS if bits is None else bits
        if quant not in ("bnb", "auto") or bits not in (4, 8):
            odd.add("quant_config", f"{quant}, {bits}-bit", "a 4- or 8-bit bitsandbytes base (bnb or auto)")
        elif s["method"] != "lora":
            odd.add("quant_config", quant, "a quantised base is modelled under LoRA only")
        else:
            s["method"] = "qlora"
            kind = taker.word("quant_config.quantization_type", "nf4 or fp4") or "nf4"
            s["quant"] = "int8" if bits == 8 else kind if kind in ("nf4", "fp4") else "nf4"
            if bits == 4 and kind not in ("nf4", "fp4"):
                odd.add("quant_config.quantization_type", kind, "nf4 or fp4")
            taker.record("method", "qlora", "quant_config")
            taker.record("quant", s["quant"], "quant_config.quantization_bit / quantization_type")
            double = taker.flag("quant_config.double_quantization", None)
            s["double_quant"] = True if double is None else double
            taker.record("double_quant", s["double_quant"], "quant_config.double_quantization")
    return s


def _lora(taker: Taker, odd: OddValues) -> dict[str, Any]:
    s: dict[str, Any] = {"method": "lora"}
    taker.record("method", "lora", "peft_config.name")
    if taker.flag("peft_config.use_dora"):
        s["method"] = "dora"
        taker.record("method", "dora", "peft_config.use_dora")
    s["lora_rank"], s["lora_alpha"] = rank_and_alpha(
        taker, "peft_config.r", "peft_config.lora_alpha", DEFAULT_RANK, DEFAULT_ALPHA
    )
    targets = taker.names("peft_config.target_modules") or ("all",)
    s["lora_targets"] = lora_targets(taker, "peft_config.target_modules", targets, odd)
    s.update(modules_to_save(taker, "peft_config.modules_to_save"))
    if any(taker.has(key) for key in EXPORT):
        taker.note("peft_config.adapter_name_or_path", "an existing adapter is loaded (or merged and exported)")
        taker.note("peft_config.export_dir", "a merge-and-export run, not training: estimated as LoRA training")
        taker.irrelevant(*EXPORT)
    return s


def _freeze(taker: Taker, odd: OddValues, *, cast_back: bool = False) -> dict[str, Any]:
    """The top ``freeze_trainable_layers`` blocks train (a negative number: the bottom ones), in float32 unless
    ``cast_trainable_params_to_fp32`` is false or ``cast_back`` (FSDPTurbo with bf16 casts them back to bf16)."""
    s: dict[str, Any] = {"method": "full"}
    layers = taker.integer("peft_config.freeze_trainable_layers", None, -100_000, 100_000)
    if layers is None:
        layers = DEFAULT_FREEZE_LAYERS
        taker.record("trainable_layers", layers, "default: peft_config.freeze_trainable_layers = 2")
    elif layers > 0:
        taker.record("trainable_layers", layers, "peft_config.freeze_trainable_layers")
    if layers > 0:
        s["trainable_layers"] = layers
    else:
        odd.add("peft_config.freeze_trainable_layers", layers, "the planner trains the top blocks only")
    taker.record("method", "frozen", "peft_config.name: freeze")
    modules = taker.names("peft_config.freeze_trainable_modules")
    if modules not in (None, ("all",)):
        odd.add("peft_config.freeze_trainable_modules", ", ".join(modules or ()), "the planner trains whole blocks")
    extra = taker.raw("peft_config.freeze_extra_modules")
    if extra:
        odd.add("peft_config.freeze_extra_modules", extra, "extra trained modules outside the blocks")
    if "lm_head" not in (extra if isinstance(extra, (str, list)) else ()):  # a name, a list or "a,b" (line 222)
        taker.notes.append(FieldRead("note", "freeze", FROZEN_HEAD))
    cast = taker.flag("peft_config.cast_trainable_params_to_fp32")
    if cast is not False and cast_back:
        taker.notes.append(FieldRead("note", "freeze", FREEZE_UNDER_FSDPTURBO))
    elif cast is not False:  # FreezeParams.cast_trainable_params_to_fp32 = True
        s["trainable_dtype"] = "fp32"
        where = "peft_config.cast_trainable_params_to_fp32" if cast else "default: cast_trainable_params_to_fp32 = true"
        taker.record("trainable_dtype", "fp32", f"{where} (get_freeze_model: param.data.to(torch.float32))")
    return s


def _precision(taker: Taker, *, full: bool, dist: str | None, engine: str | None = None, method: str) -> dict[str, Any]:
    """How the model is held and computed: no autocast anywhere; bf16 reaches only the sharding plugin.
    ``full``: no ``peft_config`` (a freeze run keeps the loaded dtype and casts only its trained blocks).
    ``engine``: DeepSpeed's precision as v1 infers it from the DeepSpeed file (bf16 or none), which decides.
    ``method``: the tuning read, whose weights and adapters FSDPTurbo's cast reaches (:func:`_fsdpturbo_cast`)."""
    bf16 = taker.flag("bf16")
    if engine is not None:
        if bf16 is not None:
            taker.notes.append(FieldRead("note", bf16, BF16_UNDER_DEEPSPEED))
        bf16 = engine == "bf16"
    bf16 = True if bf16 is None else bf16
    s: dict[str, Any] = {"autocast": engine or "none"}
    if dist == "fsdpturbo":
        s.update(_fsdpturbo_cast(taker, method, bf16))
    elif full:
        s["model_dtype"] = "fp32"  # model_engine.py: model.to(torch.float32) without peft_config
        taker.record("model_dtype", "fp32", "no peft_config: the model is cast to float32")
    if engine is None:
        taker.record("autocast", "none", "LLaMA-Factory v1 runs no torch.autocast")
    if dist == "fsdp2":
        s["fsdp_param_dtype"] = "bf16" if bf16 else "fp32"
        s["fsdp_reduce_dtype"] = "fp32"
        source = "dist_config fsdp2, bf16" if bf16 else "dist_config fsdp2, bf16: false"
        taker.record("fsdp_param_dtype", s["fsdp_param_dtype"], f"{source} (MixedPrecisionPolicy)")
        taker.record("fsdp_reduce_dtype", "fp32", f"{source} (MixedPrecisionPolicy)")
    elif dist is None and bf16:
        taker.note("bf16", "without dist_config bf16 changes nothing: the model trains in the dtype it is held in")
    return s


def _fsdpturbo_cast(taker: Taker, method: str, bf16: bool) -> dict[str, Any]:
    """FSDPTurbo casts the whole model before sharding it, whatever the tuning
    (``trainer_plugins/distributed/fsdpturbo.py`` ``FSDPTurboFSDP2Engine.shard_model``, lines 302-307:
    ``model.to(param_dtype)``, bf16 with ``bf16`` else float32): the weights, and PEFT's adapters, which
    ``get_lora_model`` (``plugins/model_plugins/peft.py`` line 198: ``get_peft_model`` with PEFT 0.18's
    ``autocast_adapter_dtype=True``) made float32 first. A bitsandbytes base keeps its 4- or 8-bit codes
    (``nn.Module.to`` casts floating tensors only)."""
    dtype = "bf16" if bf16 else "fp32"
    source = f"dist_config.name: fsdpturbo{' with bf16' if bf16 else ', bf16: false'} (shard_model: model.to({dtype}))"
    s: dict[str, Any] = {}
    if method != "qlora":
        s["model_dtype"] = dtype
        taker.record("model_dtype", dtype, source)
    if method in ("lora", "dora", "qlora"):
        s["adapter_dtype"] = dtype
        taker.record("adapter_dtype", dtype, source)
    return s


def _sharding(taker: Taker, odd: OddValues, dist: str | None) -> dict[str, Any]:
    """``dist_config``: FSDP2 (and FSDPTurbo, its expert-parallel form) or DeepSpeed's JSON; none: DDP."""
    s: dict[str, Any] = {}
    if dist is None:
        s["sharding"] = "ddp"
        taker.record("sharding", "ddp", "no dist_config: DistributedDataParallel on several GPUs")
    elif dist in ("fsdp2", "fsdpturbo"):
        s["sharding"] = "fsdp"
        taker.record("sharding", "fsdp", "dist_config.name")
        reshard = taker.flag("dist_config.reshard_after_forward", "reshard_after_forward")
        if reshard is not None:
            s["reshard_after_forward"] = reshard
        if taker.flag("dist_config.offload_params"):
            s["offload"] = "params"  # CPUOffloadPolicy: parameters, gradients and optimizer state
            taker.record("offload", "params", "dist_config.offload_params")
        if dist == "fsdpturbo":
            for key in ("ep_size", "ep_dispatcher", "fsdp_ignored_modules", "hook_modules", "fsdp_implementation"):
                taker.note(f"dist_config.{key}", "FSDPTurbo's expert parallelism is not modelled")
    elif dist == "deepspeed":
        s.update(deepspeed_config(taker, odd, "dist_config.config_file", partial(_deepspeed_sections, taker, odd)))
    else:
        odd.add("dist_config.name", dist, "fsdp2, fsdpturbo or deepspeed")
    return s


# v1 builds its own torch optimizer and hands it to accelerate (core/base_trainer.py lines 112-116,
# trainer_plugins/distributed/deepspeed.py DeepSpeedEngine.prepare), which refuses it beside an optimizer section
# (huggingface/accelerate 16cb6eb8 src/accelerate/accelerator.py line 2246, _prepare_deepspeed).
OPTIMIZER_SECTION_REFUSED: Final = (
    "accelerate refuses it beside the optimizer v1 builds: 'You cannot specify an optimizer in the config file and "
    "in the code at the same time'"
)


def _deepspeed_sections(taker: Taker, odd: OddValues, document: dict[str, Any], where: str) -> dict[str, Any]:
    """What v1 reads of its DeepSpeed file beyond the ZeRO stage: the precision, and an optimizer section listed
    (the run stops at accelerate's prepare)."""
    if "optimizer" in document:
        section = document["optimizer"]
        shown = section.get("type", section) if isinstance(section, dict) else section
        odd.add(f"{where}: optimizer", shown, OPTIMIZER_SECTION_REFUSED)
    return _deepspeed_precision(taker, odd, document, where)


def _deepspeed_precision(taker: Taker, odd: OddValues, document: dict[str, Any], where: str) -> dict[str, Any]:
    """DeepSpeed's mixed precision as v1 infers it from the file (deepspeed_utils.py
    ``infer_deepspeed_mixed_precision``): ``fp16.enabled`` true refused; ``bf16.enabled`` true → bf16, false →
    none; else ``fp16.enabled`` false → none; else (both auto or absent) → bf16. Under a ZeRO stage the plan's bf16
    autocast is DeepSpeed's bf16 engine (the module cast, float32 master weights, no torch.autocast)."""
    fp16, bf16 = (_enabled(document.get(section)) for section in ("fp16", "bf16"))
    if fp16 is True:
        odd.add(f"{where}: fp16.enabled", True, "LLaMA-Factory v1 refuses fp16 under DeepSpeed: bf16 or none")
        return {}
    if bf16 is True or (bf16 == "auto" and fp16 is not False):
        shown = "true" if bf16 is True else "auto or absent"
        taker.record("autocast", "bf16", f"{where}: bf16.enabled {shown} (v1 infers bf16: DeepSpeed's bf16 engine)")
        return {"autocast": "bf16"}
    why = "bf16.enabled false" if bf16 is False else "fp16.enabled false with bf16.enabled auto"
    taker.record("autocast", "none", f"{where}: {why} (v1 infers no mixed precision: float32)")
    return {"autocast": "none"}


def _enabled(section: Any) -> bool | str:
    """A DeepSpeed precision section's ``enabled``: True, False or "auto" (absent, "auto"; "true" / "false" as
    strings too, as deepspeed_utils.py ``_normalize_precision_enabled`` reads them)."""
    value = section.get("enabled", "auto") if isinstance(section, dict) else "auto"
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower(), "auto")
    return bool(value) if isinstance(value, bool) else "auto"


def _optimizer(taker: Taker, odd: OddValues, *, sharded: bool) -> dict[str, Any]:
    """AdamW, or LLaMA-Factory's Muon: the plan models Muon on whole matrices (DDP) only, so under a
    ``dist_config`` it is listed and the plan's optimizer kept rather than refusing the file."""
    name = taker.word("optim_config.name", "muon")
    if name is None:
        taker.record("optimizer", "adamw", "default: no optim_config, torch.optim.AdamW")
        return {"optimizer": "adamw", "optimizer_impl": "foreach"}
    if name == "muon" and sharded:
        odd.add("optim_config.name", name, "Muon over sharded matrices is not modelled (the plan's Muon runs on DDP)")
        return {}
    if name == "muon":
        taker.record("optimizer", "muon", "optim_config.name (LLaMA-Factory's Muon, AdamW on the rest)")
        return {"optimizer": "muon", "optimizer_impl": None}
    odd.add("optim_config.name", name, "muon, or no optim_config for AdamW")
    return {}


def _kernels(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """``flash_attn`` (eager, sdpa, flash_attention_2; sdpa by default) and ``kernel_config``."""
    s: dict[str, Any] = {}
    attention = taker.word("flash_attn", "eager, sdpa or flash_attention_2") or "sdpa"
    if attention in ATTENTION_KERNELS:
        s["attention"] = ATTENTION_KERNELS[attention].value
        taker.record("attention", s["attention"], "flash_attn" if taker.has("flash_attn") else "default: sdpa")
    else:
        odd.add("flash_attn", attention, "eager, sdpa or flash_attention_2")
    names = [n.strip() for n in (taker.word("kernel_config.name") or "").split(",") if n.strip()]
    for name in names:
        if name == "liger_kernel":
            taker.note(
                "kernel_config.name",
                "Liger's kernels without its fused loss (training sets require_logits): the logits are kept",
            )
        elif name != "auto":
            odd.add("kernel_config.name", name, "auto or liger_kernel")
    for key in ("include_kernels", "chunk_size", "use_kernels", "require_logits"):
        taker.note(f"kernel_config.{key}", "kernel options are not modelled")
    return s


def _stage(taker: Taker) -> None:
    """The stage is the command's (launcher.py: ``llamafactory-cli sft | dpo | rm``), never the file's: the import
    says it estimates the supervised step, and why it thinks the file may be meant for DPO where it does."""
    hints = [key for key in PREFERENCE if taker.has(key)]
    dataset = taker.raw("train_dataset")
    if isinstance(dataset, str) and _PREFERENCE_DATA.search(dataset):
        hints.append(f"train_dataset: {dataset}")
    if hints:
        taker.notes.append(FieldRead("note", ", ".join(hints), STAGE_DPO))
    else:
        taker.notes.append(FieldRead("note", "sft", STAGE_SFT))


def _not_modelled(taker: Taker) -> None:
    if taker.word("batching_strategy", "normal, padding_free, dynamic_batching or dynamic_padding_free") not in (
        None,
        "normal",
    ):
        taker.note("batching_strategy", "padding-free and dynamic batching pack tokens; the plan assumes full rows")
    for key in ("cp_size", "cp_mode", "dp_size", "mp_replicate_size", "mp_shard_size"):
        taker.note(key, "the parallel degrees are the plan's (context parallel and the GPU count)")
    for key in PREFERENCE:
        taker.note(key, "preference training (chosen and rejected sequences, a reference model): not modelled")
    taker.note("save_ckpt_as_hf", "saving a full Hugging Face checkpoint gathers the model: not modelled")

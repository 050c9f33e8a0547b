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
- ``kernel_config`` ``liger_kernel``: applied with ``require_logits=True`` in training
  (``model_engine.py``; ``kernels/liger_kernel_ops.py`` then turns ``fused_linear_cross_entropy`` off),
  so the loss keeps its logits; ``auto`` applies kernels only on Ascend NPUs.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import (
    OddValues,
    deepspeed_config,
    finish,
    lora_targets,
    modules_to_save,
    rank_and_alpha,
)
from core.files.runconfig.mapping import ATTENTION_KERNELS
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig

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
    s.update(_method(taker, odd))
    dist = taker.word("dist_config.name", "fsdp2, fsdpturbo or deepspeed")
    s.update(_precision(taker, full=not taker.has("peft_config"), dist=dist))
    s.update(_sharding(taker, odd, dist))
    s.update(_optimizer(taker, odd, sharded=dist is not None))
    s.update(_kernels(taker, odd))
    _not_modelled(taker)
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


def _method(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """``peft_config`` (none: full tuning; ``lora``; ``freeze``) and ``quant_config`` (a bitsandbytes base)."""
    name = taker.word("peft_config.name", "lora or freeze")
    s: dict[str, Any] = {}
    if name is None:
        s["method"] = "full"
        taker.record("method", "full", "no peft_config: full tuning")
    elif name == "lora":
        s.update(_lora(taker, odd))
    elif name == "freeze":
        s.update(_freeze(taker, odd))
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


def _freeze(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """The top ``freeze_trainable_layers`` blocks train (a negative number: the bottom ones)."""
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
    taker.note(
        "peft_config.cast_trainable_params_to_fp32",
        "the trained blocks are cast to float32 (true by default); the plan keeps them in the model's dtype",
    )
    return s


def _precision(taker: Taker, *, full: bool, dist: str | None) -> dict[str, Any]:
    """How the model is held and computed: no autocast anywhere; bf16 reaches only the sharding plugin.
    ``full``: no ``peft_config`` (a freeze run keeps the loaded dtype and casts only its trained blocks)."""
    bf16 = taker.flag("bf16")
    bf16 = True if bf16 is None else bf16
    s: dict[str, Any] = {"autocast": "none"}
    if full and dist == "fsdpturbo" and bf16:
        s["model_dtype"] = "bf16"  # fsdpturbo.py: model.to(torch.bfloat16) for full tuning
        taker.record("model_dtype", "bf16", "dist_config.name: fsdpturbo with bf16 (the model cast to bf16)")
    elif full:
        s["model_dtype"] = "fp32"  # model_engine.py: model.to(torch.float32) without peft_config
        taker.record("model_dtype", "fp32", "no peft_config: the model is cast to float32")
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
        s.update(deepspeed_config(taker, odd, "dist_config.config_file"))
    else:
        odd.add("dist_config.name", dist, "fsdp2, fsdpturbo or deepspeed")
    return s


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

"""torchtune recipe configs (recipes/configs/*.yaml, torchtune 0.4-0.6).

``_component_`` names are read as text, never imported. The model builder's name says
the method (``lora_llama3_1_8b``, ``qlora_llama3_1_8b``, ``llama3_1_8b``) and the model;
``dtype`` is the storage of every weight, adapters included (torchtune casts the whole
model and does not autocast); ``CEWithChunkedOutputLoss`` and ``LinearCrossEntropyLoss``
never hold the full float32 logits. :data:`BUILDERS` lists the builders of catalogue models
(torchtune v0.7 ``torchtune/models/*/_model_builders.py``): the model a builder names is found
through it, and the torchtune export writes it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from core.files.runconfig.common import OddValues, finish, lora_targets, recipe_numbers
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig
from core.model import HEAD_TARGET
from core.units import finite_number

TORCHTUNE_DTYPES: Final = {"bf16": "bf16", "fp32": "fp32", "fp16": "fp16"}
# optimizer._component_ -> the planner's optimizer.
OPTIMIZERS: Final = {
    "torch.optim.AdamW": "adamw",
    "torch.optim.Adam": "adamw",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw",
    "bitsandbytes.optim.PagedAdamW32bit": "paged-adamw",
    # torchao's low-bit AdamW (pytorch/ao 36027d82 torchao/optim/__init__.py; torchao.prototype.low_bit_optim
    # before it moved): its own blockwise states (core.training.optimizer.AO_LOW_BIT), not bitsandbytes'.
    "torchao.optim.AdamW8bit": "ao-adamw-8bit",
    "torchao.prototype.low_bit_optim.AdamW8bit": "ao-adamw-8bit",
    "torchao.optim.AdamW4bit": "ao-adamw-4bit",
    "torchao.prototype.low_bit_optim.AdamW4bit": "ao-adamw-4bit",
    "torchao.optim.AdamWFp8": "ao-adamw-fp8",
    "torchao.prototype.low_bit_optim.AdamWFp8": "ao-adamw-fp8",
    "bitsandbytes.optim.Lion": "lion",
    "bitsandbytes.optim.Lion32bit": "lion",
    "bitsandbytes.optim.Lion8bit": "lion-8bit",
    "bitsandbytes.optim.PagedLion": "paged-lion",
    "bitsandbytes.optim.PagedLion32bit": "paged-lion",
    "bitsandbytes.optim.PagedLion8bit": "paged-lion-8bit",
    "torch.optim.SGD": "sgd",
    # torch 2.13.0 torch/optim/adagrad.py, rmsprop.py (RMSprop read as momentum 0, not centered); bitsandbytes 0.50.2
    # optim/rmsprop.py (RMSprop: optim_bits 32 by default) and optim/ademamix.py (AdEMAMix: 32 bits by default)
    "torch.optim.Adagrad": "adagrad",
    "torch.optim.RMSprop": "rmsprop",
    "bitsandbytes.optim.RMSprop": "rmsprop-bnb",
    "bitsandbytes.optim.RMSprop32bit": "rmsprop-bnb",
    "bitsandbytes.optim.RMSprop8bit": "rmsprop-bnb-8bit",
    "bitsandbytes.optim.AdEMAMix": "ademamix",
    "bitsandbytes.optim.AdEMAMix32bit": "ademamix",
    "bitsandbytes.optim.AdEMAMix8bit": "ademamix-8bit",
    "bitsandbytes.optim.PagedAdEMAMix": "paged-ademamix",
    "bitsandbytes.optim.PagedAdEMAMix32bit": "paged-ademamix",
    "bitsandbytes.optim.PagedAdEMAMix8bit": "paged-ademamix-8bit",
}
# Catalogue model -> torchtune builder (torchtune/models/<package>/_model_builders.py, v0.7).
BUILDERS: Final = {
    "llama-2-7b": "llama2.llama2_7b",
    "llama-2-13b": "llama2.llama2_13b",
    "llama-2-70b": "llama2.llama2_70b",
    "llama-3.1-8b": "llama3_1.llama3_1_8b",
    "llama-3.1-70b": "llama3_1.llama3_1_70b",
    "llama-3.2-1b": "llama3_2.llama3_2_1b",
    "llama-3.2-3b": "llama3_2.llama3_2_3b",
    "llama-3.3-70b-instruct": "llama3_3.llama3_3_70b",
    "mistral-7b-v0.1": "mistral.mistral_7b",
    "qwen2.5-0.5b": "qwen2_5.qwen2_5_0_5b",
    "qwen2.5-1.5b": "qwen2_5.qwen2_5_1_5b_base",
    "qwen2.5-3b": "qwen2_5.qwen2_5_3b",
    "qwen2.5-7b": "qwen2_5.qwen2_5_7b_base",
    "qwen2.5-14b": "qwen2_5.qwen2_5_14b_base",
    "qwen2.5-32b": "qwen2_5.qwen2_5_32b_base",
    "qwen2.5-72b": "qwen2_5.qwen2_5_72b_base",
    "qwen3-0.6b": "qwen3.qwen3_0_6b_base",
    "qwen3-1.7b": "qwen3.qwen3_1_7b_base",
    "qwen3-4b": "qwen3.qwen3_4b_base",
    "qwen3-8b": "qwen3.qwen3_8b_base",
    "qwen3-14b": "qwen3.qwen3_14b_base",
    "qwen3-32b": "qwen3.qwen3_32b",
    "gemma-2-2b": "gemma2.gemma2_2b",
    "gemma-2-9b": "gemma2.gemma2_9b",
    "gemma-2-27b": "gemma2.gemma2_27b",
    "phi-3-mini-4k-instruct": "phi3.phi3_mini",
    "phi-4": "phi4.phi4_14b",
    "smollm2-135m": "smol.smollm2_135m",
    "smollm2-360m": "smol.smollm2_360m",
    "smollm2-1.7b": "smol.smollm2_1_7b",
}
# A builder's name (without lora_ / qlora_) -> the catalogue model it builds, for the names that
# do not match the catalogue's by themselves (mistral_7b, phi3_mini, phi4_14b).
CATALOGUE_BY_BUILDER: Final = {builder.rsplit(".", 1)[1]: model for model, builder in BUILDERS.items()}
CHUNKED_LOSSES: Final = ("CEWithChunkedOutputLoss", "LinearCrossEntropyLoss")

IRRELEVANT: Final = (
    "output_dir", "tokenizer._component_", "tokenizer.path", "checkpointer", "resume_from_checkpoint",
    "save_adapter_weights_only", "save_last_epoch_only", "epochs_to_save", "dataset", "seed", "shuffle",
    "lr_scheduler", "optimizer.lr", "optimizer.betas", "optimizer.eps",
    "epochs", "max_steps_per_epoch", "metric_logger", "log_every_n_steps",
    "log_peak_memory_stats", "log_level", "device", "profiler", "low_cpu_ram",
    "tokenizer.prompt_template", "valid_data_files", "run_val_every_n_steps", "dataset_val",
)  # fmt: skip


def _component(taker: Taker, key: str) -> str | None:
    value = taker.raw(key)
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value):
        raise taker.fail(key, value, "a dotted Python name")
    return value


def _memory_savers(taker: Taker) -> dict[str, Any]:
    """Activation checkpointing and offloading, the chunked loss, optimizer-in-backward, gradient
    clipping and the adapters' dropout, as torchtune's recipes name them."""
    s: dict[str, Any] = {"checkpointing": taker.flag("enable_activation_checkpointing", "checkpointing")}
    loss = _component(taker, "loss._component_")
    if loss is not None:
        s["chunked_loss"] = loss.rsplit(".", 1)[-1] in CHUNKED_LOSSES
        taker.record("chunked_loss", s["chunked_loss"], "loss._component_")
    if taker.flag("enable_activation_offloading", "activation_offload"):
        s["activation_offload"] = True
    if taker.flag("compile"):  # torch.compile: the blocks save less (core.training.activations, COMPILE_NOTE)
        s["stack"] = "compile"
        taker.record("stack", "compile", "compile")
        # The recipes compile the loss with the model (pytorch/torchtune recipes/
        # full_finetune_*.py and lora_finetune_*.py: ``if self._compile:
        # training.compile_loss(self._loss_fn, ...)``).
        s["compiled_loss"] = True
        taker.record("compiled_loss", True, "compile: the recipe compiles the loss too")
    if taker.flag("optimizer_in_bwd", "optimizer_in_backward"):
        s["optimizer_in_backward"] = True
    s.update(recipe_numbers(taker, "clip_grad_norm", "model.lora_dropout", "optimizer.weight_decay"))
    return s


def _fsdp_keys(taker: Taker) -> dict[str, Any]:
    """``fsdp_cpu_offload`` and ``fsdp_reshard_after_forward``: only the distributed recipes' configs carry
    them, and those recipes shard with FSDP2 (pytorch/torchtune bd2a0fc, recipes/full_finetune_distributed.py:
    ``cfg.get("fsdp_cpu_offload", False)``, ``reshard_after_forward=cfg.get("fsdp_reshard_after_forward",
    True)`` into ``training.shard_model``). The offload was noted as "not modelled" though the plan models
    FSDP2's CPU offload of parameters, gradients and optimizer state."""
    offload = taker.flag("fsdp_cpu_offload")
    reshard = taker.flag("fsdp_reshard_after_forward")
    if offload is None and reshard is None:
        return {}
    key = "fsdp_cpu_offload" if offload is not None else "fsdp_reshard_after_forward"
    s: dict[str, Any] = {"sharding": "fsdp"}
    taker.record("sharding", "fsdp", f"{key}: a distributed recipe's key (FSDP2)")
    if reshard is not None:
        s["reshard_after_forward"] = reshard
        taker.record("reshard_after_forward", reshard, "fsdp_reshard_after_forward")
    if offload:
        s["offload"] = "params"
        taker.record("offload", "params", "fsdp_cpu_offload")
    return s


def read_torchtune(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    s: dict[str, Any] = {}
    builder = _component(taker, "model._component_") or ""
    name = builder.rsplit(".", 1)[-1]
    model_ref = None
    if name.startswith("qlora_"):
        s["method"], s["quant"], model_ref = "qlora", "nf4", name.removeprefix("qlora_")
    elif name.startswith("lora_"):
        s["method"], model_ref = "lora", name.removeprefix("lora_")
    elif name:
        s["method"], model_ref = "full", name
    if name:
        taker.record("method", s["method"], "model._component_")
        taker.record("model", model_ref, "model._component_")
    if model_ref is not None:  # shown as the file names it, found through the builders table
        model_ref = CATALOGUE_BY_BUILDER.get(model_ref, model_ref)
    if s.get("quant"):
        taker.record("quant", "nf4", "model._component_ (torchao NF4 base)")
    if taker.flag("model.quantize_base") and s.get("method") == "lora":
        s["method"], s["quant"] = "qlora", "nf4"
        taker.record("method", "qlora", "model.quantize_base")
    if s.get("method") in ("lora", "qlora"):
        if taker.flag("model.use_dora"):
            s["method"] = "dora"
            taker.record("method", "dora", "model.use_dora")
        s["lora_rank"] = taker.integer("model.lora_rank", "lora_rank", 1, 65_536)
        s["lora_alpha"] = taker.number("model.lora_alpha", "lora_alpha", 0.0, 1e6)
        attn = taker.names("model.lora_attn_modules") or ()
        mlp = ("gate_proj", "up_proj", "down_proj") if taker.flag("model.apply_lora_to_mlp") else ()
        # apply_lora_to_output: the output projection gets a LoRALinear (pytorch/torchtune ff594c23
        # torchtune/models/llama2/_component_builders.py lora_llama2), the plan's lm_head target.
        head = (HEAD_TARGET,) if taker.flag("model.apply_lora_to_output") else ()
        key = "model.lora_attn_modules + apply_lora_to_mlp" + (" + apply_lora_to_output" if head else "")
        s["lora_targets"] = lora_targets(taker, key, attn + mlp + head, odd)
    s["micro_batch"] = taker.integer("batch_size", "micro_batch")
    s["grad_accum"] = taker.integer("gradient_accumulation_steps", "grad_accum")
    s["seq_len"] = taker.integer("tokenizer.max_seq_len", "seq_len", 1, 100_000_000)
    if s["seq_len"] is None:
        taker.missing("seq_len", "tokenizer.max_seq_len is null: the longest sample decides; the plan's value is kept")
    dtype = taker.raw("dtype")
    if dtype is not None:
        if not isinstance(dtype, str) or dtype not in TORCHTUNE_DTYPES:
            raise taker.fail("dtype", dtype, "bf16, fp32 or fp16")
        s["model_dtype"] = s["adapter_dtype"] = TORCHTUNE_DTYPES[dtype]
        s["autocast"] = "none"
        taker.record("model_dtype", s["model_dtype"], "dtype")
        taker.record("adapter_dtype", s["adapter_dtype"], "dtype (torchtune casts adapters too)")
    optimizer = _component(taker, "optimizer._component_")
    if optimizer is not None:
        if optimizer not in OPTIMIZERS:
            odd.add("optimizer._component_", optimizer, "an optimizer the planner does not model")
        else:
            s["optimizer"] = OPTIMIZERS[optimizer]
            momentum = finite_number(taker.raw("optimizer.momentum"))
            if s["optimizer"] == "sgd" and momentum:
                s["optimizer"] = "sgd-momentum"
            taker.record("optimizer", s["optimizer"], "optimizer._component_")
            if s["optimizer"] in ("adagrad", "rmsprop"):  # no fused argument read: torch's foreach on CUDA
                s["optimizer_impl"] = "foreach"
                taker.record("optimizer_impl", "foreach", "default: torch.optim takes the foreach path on CUDA")
            if s["optimizer"] == "adamw":
                fused = taker.flag("optimizer.fused")
                s["optimizer_impl"] = "fused" if fused else "foreach"
                taker.record(
                    "optimizer_impl",
                    s["optimizer_impl"],
                    "optimizer.fused"
                    if fused is not None
                    else "default: torch.optim.AdamW takes the foreach path on CUDA",
                )
    s.update(_memory_savers(taker))
    taker.note("dataset.packed", "packing fills every sequence to max_seq_len")
    s.update(_fsdp_keys(taker))
    model_dir = taker.text("checkpointer.checkpoint_dir")
    taker.irrelevant(*IRRELEVANT)
    return finish(ConfigKind.TORCHTUNE, taker, odd, model_ref, s, model_dir=model_dir)

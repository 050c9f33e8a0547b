"""axolotl YAML configs (keys of axolotl's config schema, 0.8-0.12).

How axolotl loads the model decides the precision: ``normalize_config`` in
axolotl/utils/config/__init__.py sets ``torch_dtype`` to bfloat16 when ``bf16`` or
``bfloat16`` is set, to float16 when ``fp16``, ``float16`` or ``load_in_8bit`` is, else
float32; ``bf16: auto`` means bf16 on cards that support it (assumed here). ``bf16`` and
``fp16`` run the Trainer's AMP, ``bfloat16`` and ``float16`` do not. FSDP is the ``fsdp``
word list (before 0.10) or the ``fsdp_config`` table with ``fsdp_version``. The optimizer
names are transformers' ``optim``.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import (
    OddValues,
    accelerate_grad_sync,
    finish,
    hf_galore,
    hf_optimizer,
    lora_targets,
    modules_to_save,
    recipe_numbers,
    sharding,
)
from core.files.runconfig.deepspeed_optimizer import replaced_trainer_optimizer
from core.files.runconfig.hf import ddp_bucket
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig

IRRELEVANT: Final = (
    "model_type", "tokenizer_type", "tokenizer_config", "base_model_config", "strict", "datasets",
    "test_datasets", "dataset_prepared_path", "val_set_size", "output_dir", "lora_model_dir",
    "lora_fan_in_fan_out", "wandb_project", "wandb_entity", "wandb_watch", "wandb_name",
    "wandb_log_model", "num_epochs", "max_steps", "lr_scheduler", "learning_rate", "train_on_inputs",
    "group_by_length", "early_stopping_patience", "resume_from_checkpoint", "local_rank", "logging_steps",
    "warmup_steps", "warmup_ratio", "evals_per_epoch", "eval_table_size", "saves_per_epoch", "save_steps",
    "debug", "special_tokens", "hub_model_id", "eval_sample_packing", "pad_to_sequence_len",
    "seed", "chat_template", "trust_remote_code", "save_total_limit",
    "eval_steps", "save_strategy", "eval_strategy", "adam_beta1", "adam_beta2", "adam_epsilon",
    "lr_scheduler_kwargs", "cosine_min_lr_ratio", "gradient_checkpointing_kwargs", "dataset_processes",
    "shuffle_merged_datasets", "tokens", "auto_resume_from_checkpoints", "save_safetensors",
    "hub_strategy", "use_wandb", "mlflow_experiment_name", "default_system_message",
)  # fmt: skip


# FSDP1 sharding strategies as axolotl's fsdp_config spells them -> reshard after forward.
_RESHARD_BY_STRATEGY: Final = {"FULL_SHARD": True, "HYBRID_SHARD": True, "SHARD_GRAD_OP": False}


def _fsdp_config(taker: Taker) -> dict[str, Any]:
    """FSDP as axolotl >= 0.10 configures it: a ``fsdp_config`` table (with ``fsdp_version``) whose
    keys drop the ``fsdp_`` prefix (``reshard_after_forward``, ``offload_params``,
    ``sharding_strategy``); the prefixed spellings are still accepted (schemas/validation.py)."""
    table = taker.raw("fsdp_config")
    if not isinstance(table, dict) or not table:
        return {}

    def key(name: str) -> str:
        return f"fsdp_config.{name if name in table else 'fsdp_' + name}"

    found: dict[str, Any] = {"sharding": "fsdp"}
    taker.record("sharding", "fsdp", "fsdp_config")
    reshard = taker.flag(key("reshard_after_forward"))
    strategy = taker.raw(key("sharding_strategy"))
    if reshard is None and isinstance(strategy, str):
        reshard = _RESHARD_BY_STRATEGY.get(strategy.upper())
    if reshard is not None:
        found["reshard_after_forward"] = reshard
        taker.record("reshard_after_forward", reshard, key("reshard_after_forward"))
    if taker.flag(key("offload_params")):
        found["offload"] = "params"
        taker.record("offload", "params", key("offload_params"))
    return found


def _fsdp_table_offload(taker: Taker) -> dict[str, Any]:
    """``fsdp_config.offload_params`` (or ``fsdp_offload_params``) beside the ``fsdp`` word list: axolotl
    067b021 hands it to accelerate whichever way FSDP was turned on (utils/trainer.py ``setup_fsdp_envs``:
    ``FSDP_OFFLOAD_PARAMS``), as examples/llama-3/qlora-fsdp-70b.yaml does. The word list's reader skipped the
    table, and its ``irrelevant`` dropped the offload unsaid."""
    table = taker.raw("fsdp_config")
    if not isinstance(table, dict):
        return {}
    key = "offload_params" if "offload_params" in table else "fsdp_offload_params"
    if not taker.flag(f"fsdp_config.{key}"):
        return {}
    taker.record("offload", "params", f"fsdp_config.{key}")
    return {"offload": "params"}


def _fsdp_checkpointing(taker: Taker, s: dict[str, Any]) -> None:
    """``fsdp_config.activation_checkpointing`` (or ``fsdp_activation_checkpointing``): checkpointing
    of every wrapped block, whatever ``gradient_checkpointing`` says. axolotl 067b021:
    utils/schemas/fsdp.py FSDPConfig.activation_checkpointing; utils/trainer.py setup_fsdp_envs sets
    FSDP_ACTIVATION_CHECKPOINTING for accelerate; monkeypatch/accelerate/fsdp2.py fsdp2_prepare_model
    applies torch's apply_activation_checkpointing (non-reentrant) with the transformer-layer wrap
    policy, i.e. each decoder block, before fully_shard. It was skipped with the rest of the table."""
    table = taker.raw("fsdp_config")
    if not isinstance(table, dict):
        return
    name = "activation_checkpointing" if "activation_checkpointing" in table else "fsdp_activation_checkpointing"
    if taker.flag(f"fsdp_config.{name}"):
        s["checkpointing"] = True
        taker.record("checkpointing", True, f"fsdp_config.{name}")


# axolotl-ai-cloud/axolotl 067b021: integrations/cut_cross_entropy/args.py CutCrossEntropyArgs has
# ``cut_cross_entropy: Optional[bool] = True``, so listing the plugin turns CCE on unless the key says false
# (CutCrossEntropyPlugin.pre_model_load patches the model when cfg.cut_cross_entropy).
CCE_PLUGIN: Final = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"


def _compile_and_plugins(taker: Taker, s: dict[str, Any]) -> None:
    """torch.compile (the blocks save less: core.training.activations, COMPILE_NOTE) and Cut Cross
    Entropy switched on by its plugin alone. ``torch_compile: auto`` is true on torch >= 2.5.1
    (067b021 utils/schemas/config.py check_torch_compile_auto), assumed here as ``bf16: auto`` is."""
    value = taker.raw("torch_compile")
    if isinstance(value, str) and value.strip() == "auto":
        s["stack"] = "compile"
        taker.record("stack", "compile", "torch_compile: auto (assumes torch 2.5.1 or newer)")
    elif taker.flag("torch_compile"):
        s["stack"] = "compile"
        taker.record("stack", "compile", "torch_compile")
    plugins = taker.raw("plugins")
    listed = isinstance(plugins, list) and CCE_PLUGIN in plugins
    if listed and "fused_loss" not in s and taker.flag("cut_cross_entropy") is not False:
        s["fused_loss"] = True
        taker.record("fused_loss", True, "plugins: CutCrossEntropyPlugin (cut_cross_entropy defaults to true)")


def _precision(taker: Taker, eight: bool) -> dict[str, str]:
    """The dtype the model is loaded in and the AMP, as normalize_config resolves them."""
    found: dict[str, str] = {}
    bf16 = taker.raw("bf16")
    if bf16 not in (None, True, False, "auto", "full"):
        raise taker.fail("bf16", bf16, "true, false, auto or full")
    fp16 = taker.flag("fp16")
    bfloat16, float16 = taker.flag("bfloat16"), taker.flag("float16")
    bf16_on = bf16 in (True, "auto", "full") or bool(bfloat16)
    if bf16_on:
        found["model_dtype"] = "bf16"
        source = "bf16: auto (assumes a card with bf16: Ampere or newer)" if bf16 == "auto" else "bf16"
        source = source if bf16 in (True, "auto", "full") else "bfloat16"
    elif fp16 or eight or float16:
        found["model_dtype"], source = "fp16", "fp16" if fp16 else "load_in_8bit"
    else:
        found["model_dtype"], source = "fp32", "bf16 / fp16 not set"
    taker.record("model_dtype", found["model_dtype"], source)
    # bf16 / fp16 turn the Trainer's AMP on; bfloat16 / float16 load the model in that dtype
    # with no AMP (axolotl v0.12 schemas/config.py: "No AMP (automatic mixed precision)").
    found["autocast"] = "bf16" if bf16 in (True, "auto") else "fp16" if fp16 else "none"
    if found["autocast"] == "none" and bf16 == "full":
        source = "bf16: full (pure bf16, no AMP)"
    elif found["autocast"] == "none" and (bfloat16 or float16):
        source = "bfloat16 / float16 (no AMP)"
    taker.record("autocast", found["autocast"], source)
    return found


def read_axolotl(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    model_ref = taker.text("base_model")
    if model_ref:
        taker.record("model", model_ref, "base_model")
    s = _method(taker, odd)
    s.update(_batch(taker))
    s.update(_precision(taker, bool(taker.flag("load_in_8bit"))))
    s["optimizer"], s["optimizer_impl"] = hf_optimizer(taker, "optimizer", odd, "axolotl")
    s.update(hf_galore(taker, odd, "optimizer"))
    s.update(_memory_savers(taker, odd))
    _adapter_offload_note(taker, s)
    taker.note("sample_packing", "packing fills every micro-batch row to sequence_len, as the plan assumes")
    taker.note("tf32", "TF32 matmuls change speed, not memory")
    _compile_and_plugins(taker, s)
    strategy = sharding(taker, odd)
    replaced_trainer_optimizer(taker, odd, s, strategy, "optimizer")
    s.update(strategy)
    if "sharding" not in s:
        s.update(_fsdp_config(taker))
    elif s["sharding"] == "fsdp" and "offload" not in s:
        s.update(_fsdp_table_offload(taker))
    _fsdp_checkpointing(taker, s)
    s.update(accelerate_grad_sync(taker, s))
    # axolotl 067b021 core/builders/causal.py lines 229-230 pass it on as TrainingArguments' ddp_bucket_cap_mb.
    s.update(ddp_bucket(taker, "ddp_bucket_cap_mb"))
    taker.irrelevant("fsdp_config", "fsdp_version")
    taker.note("plugins", "plugins may change memory; only Cut Cross Entropy's default and the loss flags are read")
    # Was listed as irrelevant: a DPO / ORPO / KTO / GRPO run is not the supervised step the plan models (TRL
    # f2cd577, trl/trainer/dpo_trainer.py: the collator stacks each row's chosen and rejected sequences, and
    # without PEFT or precompute_ref_log_probs the trainer loads a frozen reference model), as LLaMA-Factory's
    # `stage` says.
    taker.note("rl", "preference and RL trainers run more than the supervised step the plan models (chosen and "
               "rejected sequences, a reference or reward model, generation): not modelled")
    taker.note("unfrozen_parameters", "partly frozen training by parameter name is not modelled")
    for kernel in ("lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel"):  # false: PEFT's own LoRA layers
        taker.note(kernel, "axolotl's Triton LoRA kernels are not modelled: the estimate is PEFT's LoRA layers")
    taker.irrelevant(*IRRELEVANT)
    return finish(ConfigKind.AXOLOTL, taker, odd, model_ref, s)


def _method(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """Full training, or adapters (LoRA, QLoRA on a 4- or 8-bit base, DoRA) with their rank and targets."""
    s: dict[str, Any] = {}
    adapter = taker.word("adapter", "lora or qlora")
    four = taker.flag("load_in_4bit")
    eight = taker.flag("load_in_8bit")
    if adapter is None:
        s["method"] = "full"
        taker.record("method", "full", "no adapter: every weight trains")
        return s
    if adapter not in ("lora", "qlora"):
        odd.add("adapter", adapter, "lora or qlora")
        return s
    quantised = adapter == "qlora" or four or eight
    s["method"] = "qlora" if quantised else "lora"
    if quantised:
        s["quant"] = "int8" if eight and not four else "nf4"
        s["double_quant"] = True  # axolotl's BitsAndBytesConfig sets bnb_4bit_use_double_quant
        taker.record("quant", s["quant"], "load_in_8bit" if s["quant"] == "int8" else "adapter / load_in_4bit")
    taker.record("method", s["method"], "adapter")
    if taker.flag("peft_use_dora"):
        s["method"] = "dora"
        taker.record("method", "dora", "peft_use_dora")
    s["lora_rank"] = taker.integer("lora_r", "lora_rank", 1, 65_536)
    s["lora_alpha"] = taker.number("lora_alpha", "lora_alpha", 0.0, 1e6)
    if taker.flag("lora_target_linear"):
        # axolotl-ai-cloud/axolotl 067b021 src/axolotl/loaders/adapter.py _build_peft_lora_config: the linear names
        # (find_all_linear_names, the output embedding removed) are added to lora_target_modules, which stay
        # targets: lm_head named there is adapted too.
        named = taker.names("lora_target_modules") or ()
        key = "lora_target_linear + lora_target_modules" if named else "lora_target_linear"
        s["lora_targets"] = lora_targets(taker, key, ("all-linear", *named), odd)
    else:
        s["lora_targets"] = lora_targets(taker, "lora_target_modules", taker.names("lora_target_modules"), odd)
    s.update(modules_to_save(taker, "lora_modules_to_save"))  # PEFT modules_to_save (branch h60mts)
    return s


def _batch(taker: Taker) -> dict[str, Any]:
    """Sequence length, micro-batch, accumulation and eval batch (axolotl's defaults where absent)."""
    s: dict[str, Any] = {"seq_len": taker.integer("sequence_len", "seq_len", 1, 100_000_000)}
    if s["seq_len"] is None:
        taker.missing("seq_len", "no sequence_len in the file: the plan's sequence length is kept")
    s["micro_batch"] = taker.integer("micro_batch_size", "micro_batch")
    if s["micro_batch"] is None:
        s["micro_batch"] = 1
        taker.record("micro_batch", 1, "default: axolotl micro_batch_size = 1")
    s["grad_accum"] = taker.integer("gradient_accumulation_steps", "grad_accum") or 1
    s["eval_batch"] = taker.integer("eval_batch_size", "eval_batch")
    return s


# axolotl's attention switches and the kernel each selects.
ATTENTION_KEYS: Final = (
    ("flash_attention", "flash"),
    ("sdp_attention", "sdpa"),
    ("xformers_attention", "sdpa"),  # memory-efficient attention: no score matrix kept
    ("flex_attention", "sdpa"),
    ("eager_attention", "eager"),
)
# attn_implementation, the canonical field at axolotl-ai-cloud/axolotl 067b021 (utils/schemas/config.py
# normalize_attn_implementation turns the flags above into it; utils/schemas/enums.py CANONICAL_ATTN_IMPLS,
# LEGACY_ATTN_FLAG_TO_IMPL, and ATTN_IMPLS_USING_FLASH_LIB for the Hub's flash-attn kernels), read as the
# flags are. sage, fp8 and other Hub kernels are listed as not modelled.
ATTN_IMPLEMENTATIONS: Final = {
    "eager": "eager",
    "sdpa": "sdpa",
    "flash_attention_2": "flash",
    "flash_attention_3": "flash3",
    "kernels-community/flash-attn2": "flash",
    "kernels-community/flash-attn3": "flash3",
    "flex_attention": "sdpa",
    "xformers": "sdpa",
}
# chunked_cross_entropy computes the loss in chunks; Liger's fused linear cross-entropy and
# Cut Cross-Entropy run the head and the loss together, never making the logits whole.
CHUNKED_LOSS_KEYS: Final = ("chunked_cross_entropy",)
FUSED_LOSS_KEYS: Final = ("liger_fused_linear_cross_entropy", "cut_cross_entropy")


# What axolotl did with the offloading spellings of gradient_checkpointing, and what the plan reads:
# to 7fa1089 (2025-05) "unsloth" was a deprecated alias of "offload" (utils/schemas/config.py,
# check_offload_grad_checkpointing), which swapped transformers' checkpoint for Unsloth's legacy
# Unsloth_Offloaded_Gradient_Checkpointer (utils/gradient_checkpointing/unsloth.py: each decoder
# layer's input hidden states moved to the CPU); c0a0c75 (2025-05-13) dropped "unsloth" from the
# schema. At axolotl-ai-cloud/axolotl 067b021 (utils/schemas/validation.py,
# check_gradient_checkpointing_w_offload) "offload" becomes gradient_checkpointing: true +
# activation_offloading: true and "offload_disk" becomes gradient_checkpointing: true +
# activation_offloading: "disk"; core/trainers/mixins/activation_checkpointing.py
# ActivationOffloadingMixin runs both under TRL's OffloadActivations with CUDA streams (saved tensors
# to pinned host memory), the plan's activation offloading. The disk checkpointer
# (monkeypatch/gradient_checkpointing/offload_disk.py) is patched in only when activation_offloading
# == "offload_disk" (loaders/patch_manager.py, _apply_gradient_checkpointing_patches), a value the
# schema's Literal does not admit: unreachable since 99187cd (2025-07-14). docs/UNSLOTH.md.
CHECKPOINT_OFFLOAD_NOTES: Final = {
    "unsloth": (
        "read as Unsloth's offloaded checkpointing (the plan's policy 'unsloth'); axolotl took 'unsloth' as "
        "'offload' (Unsloth's older checkpointer: every block input moved to the CPU, none kept) until "
        "c0a0c75 and rejects it since, so the estimate is high by at most three block inputs "
        "(docs/UNSLOTH.md)"
    ),
    "offload": (
        "read as checkpointing with activation offloading: axolotl (067b021, check_gradient_checkpointing_w_"
        "offload) turns it into activation_offloading: true, TRL's offloader to pinned host memory"
    ),
    "offload_disk": (
        "read as checkpointing with activation offloading to host memory: axolotl (067b021, check_gradient_"
        "checkpointing_w_offload) turns it into activation_offloading: disk, which runs TRL's offloader to "
        "pinned host memory like true; its disk checkpointer is unreachable since 99187cd (from c0a0c75 to "
        "then it wrote block inputs to disk, which the plan cannot express)"
    ),
}
# activation_offloading's words at 067b021 (utils/schemas/config.py: Literal["legacy", "disk",
# "hidden_states"] | bool | None), each read as the plan's activation offloading, with what differs.
ACTIVATION_OFFLOAD_NOTES: Final = {
    "legacy": (
        "read as activation offloading; 'legacy' runs TRL's offloader without CUDA streams "
        "(activation_checkpointing.py, use_streams=False), keeping fewer tensors on the GPU than the "
        "plan's stash of the last few, so the estimate may be a little high"
    ),
    "disk": (
        "read as activation offloading to host memory: at 067b021 'disk' runs the same TRL offloader "
        "with streams as true (activation_checkpointing.py); nothing is written to disk"
    ),
    "hidden_states": (
        "read as activation offloading of the checkpointed blocks' inputs "
        "(monkeypatch/checkpoint_activation_offload.py, CheckpointHiddenStatesOffload) with HF "
        "checkpointing kept; how many inputs stay on the GPU is the plan's stash, not this manager's"
    ),
}


def _checkpointing(taker: Taker) -> dict[str, Any]:
    """gradient_checkpointing (with its offloading words) and activation_offloading."""
    s: dict[str, Any] = {}
    checkpointing = taker.raw("gradient_checkpointing")
    if checkpointing is not None:
        # Not ``in (True, False, ...)``: 0 == False and 1 == True there, and ``0 is not False``
        # below read `gradient_checkpointing: 0` as checkpointing on (axolotl's schema at 067b021,
        # utils/schemas/config.py: ``Literal["offload", "offload_disk"] | bool | None``).
        if not isinstance(checkpointing, bool | str) or checkpointing not in (True, False, *CHECKPOINT_OFFLOAD_NOTES):
            raise taker.fail("gradient_checkpointing", checkpointing, "true, false, offload, offload_disk or unsloth")
        s["checkpointing"] = checkpointing is not False
        taker.record("checkpointing", s["checkpointing"], "gradient_checkpointing")
        if checkpointing in CHECKPOINT_OFFLOAD_NOTES:
            taker.note("gradient_checkpointing", CHECKPOINT_OFFLOAD_NOTES[checkpointing])
        if checkpointing == "unsloth":
            s["checkpoint_policy"] = "unsloth"
            taker.record("checkpoint_policy", "unsloth", "gradient_checkpointing")
        elif checkpointing in ("offload", "offload_disk"):
            s["activation_offload"] = True
            taker.record("activation_offload", True, "gradient_checkpointing")
    mode = taker.raw("activation_offloading")
    if isinstance(mode, str) and mode.strip() in ACTIVATION_OFFLOAD_NOTES:
        s["activation_offload"] = True
        taker.record("activation_offload", True, "activation_offloading")
        taker.note("activation_offloading", ACTIVATION_OFFLOAD_NOTES[mode.strip()])
    elif isinstance(mode, str) and mode.strip().lower() not in ("true", "false"):
        raise taker.fail("activation_offloading", mode, "true, false, legacy, disk or hidden_states")
    elif taker.flag("activation_offloading", "activation_offload"):
        s["activation_offload"] = True
    return s


# Since 277d524 (2026-06-15), on an adapter run activation offloading other than "hidden_states"
# replaces recompute: axolotl 067b021 core/builders/base.py _configure_gradient_checkpointing passes
# gradient_checkpointing=False to the trainer, loaders/model.py _apply_activation_checkpointing wraps
# blocks in checkpointing only without an adapter ("LoRA/QLoRA: offload *replaces* recompute"), and
# utils/schemas/validation.py check_hidden_states_offloading says so ("activation_offloading: true can
# be faster because it avoids recompute"). The plan keeps checkpointing as the file gives it, so
# plans, exports and round trips agree; the note says what the run does instead.
ADAPTER_OFFLOAD_NOTE: Final = (
    "with activation offloading on an adapter run, axolotl since 277d524 skips the recompute (TRL's "
    "offloader moves every saved activation to the host instead); the plan keeps checkpointing on, so "
    "the time includes a recompute the run does not do and the GPU holds block inputs rather than the "
    "offloader's last few tensors"
)


def _adapter_offload_note(taker: Taker, s: dict[str, Any]) -> None:
    mode = taker.raw("activation_offloading")
    hidden_states = isinstance(mode, str) and mode.strip() == "hidden_states"
    adapter = s.get("method") in ("lora", "qlora", "dora")
    if s.get("activation_offload") and s.get("checkpointing") and adapter and not hidden_states:
        taker.note("adapter", ADAPTER_OFFLOAD_NOTE)


def _memory_savers(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """Gradient checkpointing, the attention kernel and a chunked loss."""
    s = _checkpointing(taker)
    for key, kernel in ATTENTION_KEYS:
        if taker.flag(key):
            s["attention"] = kernel
            taker.record("attention", kernel, key)
    implementation = taker.word("attn_implementation", "an attention backend's name")
    if implementation in ATTN_IMPLEMENTATIONS:
        s["attention"] = ATTN_IMPLEMENTATIONS[implementation]
        taker.record("attention", s["attention"], "attn_implementation")
    elif implementation is not None:
        odd.add("attn_implementation", implementation, "an attention backend the planner does not model")
    for key in CHUNKED_LOSS_KEYS:
        if taker.flag(key):
            s["chunked_loss"] = True
            taker.record("chunked_loss", True, key)
    for key in FUSED_LOSS_KEYS:
        if taker.flag(key):
            s["fused_loss"] = True
            taker.record("fused_loss", True, key)
    s.update(recipe_numbers(taker, "max_grad_norm", "lora_dropout", "weight_decay"))
    return s

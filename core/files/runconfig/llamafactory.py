"""LLaMA-Factory YAML/JSON configs (hparams/*_args.py of LLaMA-Factory 0.9).

LLaMA-Factory passes the training keys to transformers' Seq2SeqTrainingArguments (read
as :mod:`core.files.runconfig.hf` reads them) and adds its own: ``finetuning_type``,
``lora_rank``/``lora_alpha``/``lora_target``, ``quantization_bit``, ``cutoff_len``. From 0.9.4 it loads
the model in the checkpoint's own dtype whatever ``bf16`` / ``fp16`` / ``pure_bf16`` say (:data:`LOADED_AS`) and,
unless ``disable_gradient_checkpointing`` is set, turns gradient checkpointing on.

``init_adapter`` then casts the trained parameters to float32 (:data:`FLOAT32_CAST`): full and freeze tuning's
trained weights (``RunSettings.trainable_dtype``), and the LoRA adapters, which PEFT holds in float32 anyway.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import OddValues, finish, lora_targets, modules_to_save, rank_and_alpha
from core.files.runconfig.hf import take_trainer_args
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, FieldRead, RunConfig

# Defaults in LLaMA-Factory's hparams: lora_rank 8 (FinetuningArguments), lora_alpha
# None meaning 2 × rank, cutoff_len 2048 (DataArguments), freeze_trainable_layers 2.
DEFAULT_RANK: Final = 8
DEFAULT_CUTOFF: Final = 2048
DEFAULT_FREEZE_LAYERS: Final = 2
# flash_attn (AttentionFunction: auto, disabled, sdpa, fa2, fa3; hiyouga/LLaMA-Factory ff6d4d1
# src/llamafactory/model/model_utils/attention.py configure_attn_implementation: fa3 asks for
# flash_attention_3, auto leaves the model's own choice). Any other word is listed.
FLASH_ATTN: Final = {"fa2": "flash", "fa3": "flash3", "sdpa": "sdpa", "disabled": "eager"}
# use_unsloth_gc (ff6d4d1 src/llamafactory/model/model_utils/checkpointing.py,
# get_unsloth_gradient_checkpointing_func, copied from Unsloth's July-2024 _utils.py): each
# checkpointed layer's input goes to the CPU (``hidden_states.to("cpu", non_blocking=True)``) and
# comes back in the backward: Unsloth's older offloaded checkpointer, read as the policy "unsloth"
# as axolotl's ``gradient_checkpointing: unsloth`` is (docs/UNSLOTH.md).
USE_UNSLOTH_GC_NOTE: Final = (
    "read as Unsloth's offloaded checkpointing (the plan's policy 'unsloth'); LLaMA-Factory's copy of "
    "Unsloth's older checkpointer moves every layer input to the CPU and keeps none, so the estimate is "
    "high by at most three block inputs (docs/UNSLOTH.md)"
)

IRRELEVANT: Final = (
    "stage", "do_train", "dataset", "eval_dataset", "dataset_dir", "template", "max_samples",
    "overwrite_cache", "preprocessing_num_workers", "plot_loss", "val_size", "trust_remote_code",
    "use_rslora", "quantization_method", "flash_attn", "packing", "neat_packing",
    "tokenized_path", "streaming", "buffer_size", "mix_strategy", "interleave_probs", "media_dir",
    "image_max_pixels", "video_max_pixels", "adapter_name_or_path", "export_dir",
)  # fmt: skip


# LLaMA-Factory loads through FastLanguageModel with use_gradient_checkpointing="unsloth"
# (hiyouga/LLaMA-Factory@1212919:src/llamafactory/model/model_utils/unsloth.py,
# _get_unsloth_kwargs / get_unsloth_peft_model): read as the plan's Unsloth setting and its
# offloaded checkpointing (docs/UNSLOTH.md). What the plan still does not model is said.
USE_UNSLOTH_NOTE: Final = (
    "read as Unsloth's FastLanguageModel with its offloaded checkpointing; Unsloth's padding-free batches "
    "(real tokens rather than batch × cutoff_len) are not modelled, so the estimate stays an upper bound "
    "there (docs/UNSLOTH.md)"
)


# hiyouga/LLaMA-Factory v0.9.4 (95ac3f2373b82662c1bd855c284d3379e6a763d3) src/llamafactory/model/adapter.py
# init_adapter, lines 340-353: the trained parameters are cast to float32 unless ``pure_bf16`` or ``use_badam``
# (line 347) or DeepSpeed ZeRO-3 without ``quantization_bit`` (line 349); _setup_full_tuning (line 54) and
# _setup_freeze_tuning (line 136) run ``param.data = param.data.to(torch.float32)`` on every trained parameter,
# _setup_lora_tuning (lines 315-316) on every parameter with requires_grad (the adapters and PEFT's modules_to_save
# copies). The frozen blocks keep the dtype the model was loaded in. The same rule in v0.9.3 (adapter.py:287-293)
# and v0.9.5 (:319-325); v0.9.0-v0.9.2 skipped the cast under FSDP too (adapter.py:288).
# hiyouga/LLaMA-Factory v0.9.4 (95ac3f23) src/llamafactory/model/loader.py line 160: ``init_kwargs["torch_dtype"] =
# "auto"`` for every run (commit 55590f5e, 2025-12-27, moved it there from patcher.py), so transformers loads the
# checkpoint's own config dtype; ``bf16`` / ``fp16`` / ``pure_bf16`` set only ``model_args.compute_dtype``
# (hparams/parser.py lines 454-457), which reaches autocast (the Trainer's own flags), bitsandbytes' compute dtype
# (model_utils/quantization.py lines 175-178) and Qwen-1's config (patcher.py lines 128-131), not the loaded
# weights. v0.9.3 (ca75f1ed) patcher.py line 144 loaded in the compute dtype except under ZeRO-3 without
# quantization_bit. The plan takes the model's own dtype (core.files.runconfig.plan_from_run: its config.json's
# torch_dtype, else the catalogue's), as it does for LLaMA-Factory v1's LoRA runs.
LOADED_AS: Final = (
    'LLaMA-Factory 0.9.4 model/loader.py:160 torch_dtype="auto" (bf16 / fp16 / pure_bf16 set the compute dtype only; '
    "0.9.0-0.9.3 loaded that: patcher.py:144)"
)
CHECKPOINT_OWN: Final = "the checkpoint's own"
FLOAT32_CAST: Final = "LLaMA-Factory 0.9.4 model/adapter.py:353 init_adapter casts the trained parameters to float32"
# PEFT v0.17.1 (LLaMA-Factory 0.9.4's pin) peft_model.py:132-134: PeftModel.__init__ calls _cast_adapter_dtype with
# autocast_adapter_dtype=True (mapping_func.py:36, get_peft_model's default; adapter.py calls get_peft_model(model,
# peft_config)), which casts bf16 / fp16 adapter weights to float32 (tuners/tuners_utils.py:353-395): the adapters
# are float32 under pure_bf16 too, where LLaMA-Factory's own cast is off.
PEFT_FLOAT32_ADAPTERS: Final = "PEFT get_peft_model(autocast_adapter_dtype=True): float32 adapters under pure_bf16 too"
SAVED_COPIES_FLOAT32: Final = (
    "LLaMA-Factory casts every trained parameter to float32 (model/adapter.py:315-316), the additional_target copies "
    "among them; the plan holds those copies in the base's dtype, so their weights, gradients and optimizer states "
    "are low by up to half"
)
# v0.9.4 model/adapter.py _setup_freeze_tuning: a parameter trains only if its name holds ".{i}." of a trained block
# (lines 107-114) or one of freeze_extra_modules (117-124, names without a layer index: lm_head, embed_tokens, norm);
# the rest, output head and final norm included, get requires_grad_(False) (line 138). v1 the same
# (hiyouga/LLaMA-Factory ff6d4d12 src/llamafactory/v1/plugins/model_plugins/peft.py get_freeze_model, lines 266-285).
# The plan's frozen-layers method trains an untied head (core.params.frozen_params); no plan setting freezes it.
FROZEN_HEAD: Final = (
    "LLaMA-Factory freezes the output head and final norm unless freeze_extra_modules names them (adapter.py "
    "_setup_freeze_tuning); the plan's frozen-layers method trains an untied head, so the estimate counts its "
    "float32 copy, gradient and optimizer state too: high by about 14 bytes × vocabulary × hidden (7.4 GB of "
    "33.1 GB on Llama 3 8B); a tied head is frozen in both"
)
FREEZE_WITHOUT_AMP: Final = (
    "freeze without bf16 / fp16: the trained blocks are cast to float32 and no autocast casts them back, so on a "
    "16-bit model their output meets the frozen 16-bit head and the forward fails (as measured for LLaMA-Factory "
    "v1's same cast, docs/CONFIGS.md); the plan is what the run would hold"
)


def read_llamafactory(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    s = take_trainer_args(taker, odd, "LLaMA-Factory")
    model_ref = taker.text("model_name_or_path")
    if model_ref:
        taker.record("model", model_ref, "model_name_or_path")
    s.update(_finetuning(taker, odd))
    s.update(_quantisation(taker, odd, s["method"]))
    if s["method"] in ("lora", "qlora"):
        s.update(_adapters(taker, odd))
    cutoff = taker.integer("cutoff_len", "seq_len", 1, 100_000_000)
    if cutoff is None:
        cutoff = DEFAULT_CUTOFF
        taker.record("seq_len", cutoff, "default: cutoff_len = 2048")
    s["seq_len"] = cutoff
    s.update(_model_dtype(taker))
    s.update(_float32_cast(taker, s))
    s.update(_memory_savers(taker, odd))
    _multimodal_freezing(taker, odd)
    s.update(_unsloth(taker, s["checkpointing"]))
    if taker.word("stage", "sft, pt, rm, ppo, dpo or kto") not in (None, "sft", "pt"):
        taker.note("stage", "preference and RL stages keep a reference or reward model: not modelled")
    taker.irrelevant(*IRRELEVANT)
    return finish(ConfigKind.LLAMA_FACTORY, taker, odd, model_ref, s)


def _unsloth(taker: Taker, checkpointing: bool) -> dict[str, Any]:
    """``use_unsloth``: Unsloth's FastLanguageModel, whose PEFT model LLaMA-Factory always asks for
    ``use_gradient_checkpointing="unsloth"`` (the offloaded policy, when checkpointing is on)."""
    s: dict[str, Any] = {}
    if taker.flag("use_unsloth", "unsloth"):
        s["unsloth"] = True
        taker.note("use_unsloth", USE_UNSLOTH_NOTE)
        if checkpointing:
            s["checkpoint_policy"] = "unsloth"
            taker.record("checkpoint_policy", "unsloth", 'use_unsloth: use_gradient_checkpointing="unsloth"')
    return s


def _finetuning(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """``finetuning_type``: full, freeze (the top layers train) or lora (the default)."""
    kind = taker.word("finetuning_type", "lora, freeze or full")
    if kind is None:
        kind = "lora"  # FinetuningArguments.finetuning_type default
    s: dict[str, Any] = {}
    if kind == "full":
        s["method"] = "full"
    elif kind == "freeze":
        s["method"] = "full"
        layers = taker.integer("freeze_trainable_layers", "trainable_layers", 1, 100_000)
        s["trainable_layers"] = layers or DEFAULT_FREEZE_LAYERS
        if layers is None:
            taker.record("trainable_layers", DEFAULT_FREEZE_LAYERS, "default: freeze_trainable_layers = 2")
        _freeze_modules(taker, odd)
    elif kind == "lora":
        s["method"] = "lora"
    else:
        raise taker.fail("finetuning_type", kind, "lora, freeze or full")
    taker.record("method", s["method"] if kind != "freeze" else "frozen", "finetuning_type")
    return s


def _freeze_modules(taker: Taker, odd: OddValues) -> None:
    """``freeze_trainable_modules`` (whole blocks: ``all``, the default) and ``freeze_extra_modules``: the head trains
    only when named there (:data:`FROZEN_HEAD`); other parts of blocks, or other extra modules, are listed."""
    modules = taker.names("freeze_trainable_modules")
    if modules not in (None, ("all",)):
        odd.add("freeze_trainable_modules", ", ".join(modules or ()), "the planner trains whole blocks")
    extra = taker.names("freeze_extra_modules") or ()
    others = [name for name in extra if name != "lm_head"]
    if others:
        odd.add("freeze_extra_modules", ", ".join(others), "the plan trains no module outside the blocks but the head")
    if "lm_head" not in extra:
        taker.notes.append(FieldRead("note", "freeze", FROZEN_HEAD))


def _quantisation(taker: Taker, odd: OddValues, method: str) -> dict[str, Any]:
    """``quantization_bit`` on LoRA makes it QLoRA on a 4- or 8-bit bitsandbytes base."""
    s: dict[str, Any] = {}
    bits = taker.raw("quantization_bit")
    if bits is not None:
        if bits not in (4, 8):
            odd.add("quantization_bit", bits, "the planner models 4- and 8-bit bitsandbytes bases")
        elif method == "lora":
            s["method"] = "qlora"
            s["quant"] = "int8" if bits == 8 else "nf4"
            qtype = taker.word("quantization_type", "nf4 or fp4")
            if bits == 4 and qtype in ("nf4", "fp4"):
                s["quant"] = qtype
            taker.record("method", "qlora", "quantization_bit")
            taker.record("quant", s["quant"], "quantization_type" if qtype else "quantization_bit")
            double = taker.flag("double_quantization", "double_quant")
            s["double_quant"] = True if double is None else double
    method_ = taker.word("quantization_method", "bitsandbytes")
    if method_ not in (None, "bitsandbytes", "bnb"):
        odd.add("quantization_method", method_, "only bitsandbytes bases are modelled")
    return s


def _adapters(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """DoRA or not, the rank, alpha and target modules (LLaMA-Factory's defaults where absent)."""
    s: dict[str, Any] = {}
    if taker.flag("use_dora"):
        s["method"] = "dora"
        taker.record("method", "dora", "use_dora")
    s["lora_rank"], s["lora_alpha"] = rank_and_alpha(taker, "lora_rank", "lora_alpha", DEFAULT_RANK, None)
    target = taker.names("lora_target")
    s["lora_targets"] = lora_targets(taker, "lora_target", target or ("all",), odd)
    s.update(modules_to_save(taker, "additional_target"))  # PEFT modules_to_save (branch h60mts)
    return s


def _model_dtype(taker: Taker) -> dict[str, Any]:
    """The model is loaded in the checkpoint's own dtype (:data:`LOADED_AS`); pure_bf16 trains without autocast."""
    s: dict[str, Any] = {}
    taker.record("model_dtype", CHECKPOINT_OWN, LOADED_AS)
    if taker.flag("pure_bf16"):
        s["autocast"] = "none"
    return s


def _float32_cast(taker: Taker, s: dict[str, Any]) -> dict[str, Any]:
    """init_adapter's float32 cast of the trained parameters (:data:`FLOAT32_CAST`): full and freeze tuning's
    trained weights; the adapters are float32 whether it runs or not (:data:`PEFT_FLOAT32_ADAPTERS`)."""
    out: dict[str, Any] = {}
    pure = taker.flag("pure_bf16")
    badam = taker.document.get("use_badam") is True  # listed as not modelled; it still keeps the dtype
    zero3 = s.get("sharding") == "zero3" and s["method"] != "qlora"
    if s["method"] in ("lora", "dora", "qlora"):
        if pure:
            taker.record("adapter_dtype", "fp32", PEFT_FLOAT32_ADAPTERS)
        if not (pure or badam or zero3) and s.get("modules_to_save"):
            taker.note("additional_target", SAVED_COPIES_FLOAT32)
        return out
    if pure or badam or zero3:
        return out
    out["trainable_dtype"] = "fp32"
    taker.record("trainable_dtype", "fp32", f"{FLOAT32_CAST} (no pure_bf16, use_badam or ZeRO-3)")
    if "trainable_layers" in s and s["autocast"] == "none" and s.get("model_dtype") != "fp32":
        taker.notes.append(FieldRead("note", "freeze", FREEZE_WITHOUT_AMP))
    return out


# FinetuningArguments (v0.9.4 hparams/finetuning_args.py lines 493-504) and what the plan holds: the vision tower and
# projector of an image-text model frozen, the language model trained (core.training.storage.vision_weight_term).
# model/model_utils/visual.py get_forbidden_modules (lines 159-179) freezes what each names, for registered models.
MULTIMODAL_FREEZING: Final = (
    ("freeze_vision_tower", True, "LLaMA-Factory trains the vision tower; the plan holds it frozen"),
    ("freeze_multi_modal_projector", True, "LLaMA-Factory trains the projector; the plan holds it frozen"),
    ("freeze_language_model", False, "LLaMA-Factory freezes the language model; the plan trains it"),
)


def _multimodal_freezing(taker: Taker, odd: OddValues) -> None:
    """What an image-text run freezes: LLaMA-Factory's defaults are the plan's; another choice is listed."""
    for key, default, why in MULTIMODAL_FREEZING:
        value = taker.flag(key)
        if value is not None and value is not default:
            odd.add(key, value, why)


def _memory_savers(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """Gradient checkpointing (on unless disabled), the attention kernel and Liger's chunked loss."""
    s: dict[str, Any] = {}
    if taker.flag("disable_gradient_checkpointing"):
        s["checkpointing"] = False
        taker.record("checkpointing", False, "disable_gradient_checkpointing")
    else:
        s["checkpointing"] = True
        taker.record("checkpointing", True, "default: LLaMA-Factory enables gradient checkpointing")
    flash = taker.word("flash_attn", "auto, fa2, fa3, sdpa or disabled")
    if flash in FLASH_ATTN:
        s["attention"] = FLASH_ATTN[flash]
        taker.record("attention", s["attention"], "flash_attn")
    elif flash not in (None, "auto"):
        odd.add("flash_attn", flash, "auto, fa2, fa3, sdpa or disabled")
    if taker.flag("use_unsloth_gc") and s["checkpointing"]:
        s["checkpoint_policy"] = "unsloth"
        taker.record("checkpoint_policy", "unsloth", "use_unsloth_gc")
        taker.note("use_unsloth_gc", USE_UNSLOTH_GC_NOTE)
    if taker.flag("enable_liger_kernel"):
        s["fused_loss"] = True  # Liger's fused linear cross-entropy: no logits tensor
        taker.record("fused_loss", True, "enable_liger_kernel")
    return s

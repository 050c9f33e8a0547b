"""PEFT ``adapter_config.json`` (LoraConfig, peft 0.13-0.17 keys).

The file describes the adapter only: rank, alpha, target modules, DoRA, the modules
trained in full beside it, and the base model's name. It does not record batch, sequence,
precision or whether the base was quantised; those stay as the plan has them.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import (
    OddValues,
    finish,
    lora_targets,
    modules_to_save,
    recipe_numbers,
    trainable_tokens,
)
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig
from core.params import OFT_NEUMANN_TERMS
from core.plan import (
    ADALORA_DEFAULT_RANK,
    BOFT_DEFAULT_BLOCK,
    FOURIERFT_DEFAULT_FREQUENCIES,
    MISS_DEFAULT_RANK,
    RANDLORA_DEFAULT_RANK,
    SHIRA_DEFAULT_RANK,
    VBLORA_DEFAULT_RANK,
    VBLORA_NUM_VECTORS,
    VBLORA_TOPK,
    VBLORA_VECTOR_LENGTH,
    VERA_DEFAULT_RANK,
)

# LoraConfig defaults (peft/tuners/lora/config.py): r=8, lora_alpha=8.
DEFAULT_RANK: Final = 8
DEFAULT_ALPHA: Final = 8

IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "init_lora_weights", "revision", "fan_in_fan_out",
    "auto_mapping", "peft_version", "megatron_config", "megatron_core", "use_rslora",
    "loftq_config", "eva_config", "corda_config", "lora_ga_config", "layers_pattern", "use_qalora",
    "qalora_group_size", "ensure_weight_tying", "use_bdlora",
)  # fmt: skip


_KINDS: Final = (
    "LORA, IA3, PROMPT_TUNING, P_TUNING, PREFIX_TUNING, LN_TUNING, LOHA, LOKR, VERA, OFT, ADALORA, MISS, "
    "TRAINABLE_TOKENS, FOURIERFT, ROAD, VBLORA, RANDLORA, SHIRA or BOFT (the planner models LoRA, DoRA, QLoRA and "
    "IA3 adapters, prompt tuning, P-tuning, prefix tuning, LN tuning, LoHa, LoKr, VeRA, OFT, AdaLoRA, MiSS, trainable "
    "tokens, FourierFT, RoAd, VB-LoRA, RandLoRA, SHiRA and BOFT)"
)
# VBLoRAConfig keys with no effect on memory (branch h78peft; huggingface/peft 51c2ff66
# src/peft/tuners/vblora/config.py): save_only_topk_weights changes the saved file, the init_* keys the starting values,
# fan_in_fan_out a Conv1D's view.
VBLORA_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "save_only_topk_weights", "init_vector_bank_bound", "init_logits_std", "fan_in_fan_out",
)  # fmt: skip
# RandLoraConfig keys with no effect on memory (src/peft/tuners/randlora/config.py): randlora_alpha scales the update,
# projection_prng_key seeds the bases, save_projection changes the saved file, sparse / very_sparse fill the same
# dense bases with -1 / 0 / 1 (model.py ``_init_randlora_A_randlora_B_sparse``: "does [not] take into consideration
# the sparsity to reduce memory usage"), init_weights the starting values.
RANDLORA_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "randlora_alpha", "projection_prng_key", "save_projection", "sparse", "very_sparse", "init_weights",
    "fan_in_fan_out",
)  # fmt: skip
# ShiraConfig keys with no effect on memory (src/peft/tuners/shira/config.py): random_seed picks the mask's entries,
# init_weights their starting values.
SHIRA_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "random_seed",
    "init_weights", "fan_in_fan_out",
)  # fmt: skip
# BOFTConfig keys with no effect on memory (branch h80boft; huggingface/peft 51c2ff66 src/peft/tuners/boft/config.py):
# init_weights fills boft_R and boft_s, fan_in_fan_out a Conv1D's view.
BOFT_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "init_weights", "fan_in_fan_out",
)  # fmt: skip
# FourierFTConfig keys with no effect on memory (branch h76peft; huggingface/peft 51c2ff66
# src/peft/tuners/fourierft/config.py): scaling multiplies the delta, random_loc_seed picks which entries train,
# init_weights fills the spectrum (zeros or randn), fan_in_fan_out transposes a Conv1D's view.
FOURIERFT_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "scaling", "random_loc_seed", "init_weights", "fan_in_fan_out",
)  # fmt: skip
# RoadConfig keys with no effect on memory (src/peft/tuners/road/config.py): group_size pairs features within groups
# (PEFT refuses an output width it does not divide), init_weights fills the angles and scales.
ROAD_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "group_size", "init_weights",
)  # fmt: skip
# RoadConfig.variant's words (src/peft/tuners/road/config.py: road_1 by default).
ROAD_VARIANTS: Final = ("road_1", "road_2", "road_4")
# MissConfig keys with no effect on memory (branch h58peft; huggingface/peft 51c2ff66 src/peft/tuners/miss/config.py):
# mini_r is read by init_weights "mini" only, which is refused.
MISS_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "layers_pattern",
    "mini_r",
)  # fmt: skip
# IA3Config keys with no effect on memory (huggingface/peft 51c2ff66 src/peft/tuners/ia3/config.py).
IA3_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "init_ia3_weights", "revision", "fan_in_fan_out",
    "auto_mapping", "peft_version",
)  # fmt: skip


# PEFT's prompt learning (branch h41soft): peft_type -> the planner's method.
_PROMPT_KINDS: Final = {"PROMPT_TUNING": "prompt-tuning", "P_TUNING": "p-tuning", "PREFIX_TUNING": "prefix-tuning"}
# PromptTuningConfig / PromptEncoderConfig keys with no effect on memory (huggingface/peft 51c2ff66
# src/peft/config.py PromptLearningConfig, src/peft/tuners/prompt_tuning/config.py, p_tuning/config.py):
# the base model's shape (token_dim, num_attention_heads, num_layers) is the plan's model's.
PROMPT_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "token_dim",
    "num_attention_heads", "num_layers", "prompt_tuning_init", "prompt_tuning_init_text", "tokenizer_name_or_path",
    "tokenizer_kwargs", "encoder_dropout", "encoder_num_layers",
)  # fmt: skip
# PrefixTuningConfig keys with no effect on memory (src/peft/tuners/prefix_tuning/config.py): init_weights
# only fills the embedding; encoder_hidden_size is read only with prefix_projection (refused when true).
PREFIX_IRRELEVANT: Final = ("init_weights", "encoder_hidden_size")
# LNTuningConfig (branch h52pfx; src/peft/tuners/ln_tuning/config.py): target_modules left out means PEFT's
# default for the family (TRANSFORMERS_MODELS_TO_LNTUNING_TARGET_MODULES_MAPPING); these names are the norms
# of the families modelled (core.plan.LN_TUNING_FAMILIES), so a list of them is that default spelt out.
LN_TUNING_NORMS: Final = frozenset({
    "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm", "norm",
    "ln_1", "ln_2", "ln_f",
})  # fmt: skip
LN_IRRELEVANT: Final = ("peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version")
# LoHaConfig / LoKrConfig (branch h53lyco; huggingface/peft 51c2ff66 src/peft/tuners/loha/config.py,
# lokr/config.py): r and alpha default to 8; these keys do not change what a Linear keeps (init_weights
# only fills the factors, use_effective_conv2d concerns convolutions, rank_dropout_scale the mask's scale).
LYCORIS_KINDS: Final = {"LOHA": "loha", "LOKR": "lokr"}
LYCORIS_DEFAULT_RANK: Final = 8
LYCORIS_DEFAULT_ALPHA: Final = 8
LYCORIS_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "init_weights",
    "use_effective_conv2d", "rank_dropout_scale", "layers_pattern",
)  # fmt: skip
# VeraConfig (branch h53vera; huggingface/peft 51c2ff66 src/peft/tuners/vera/config.py): r defaults to
# core.plan.VERA_DEFAULT_RANK (256, the one the window's method switch takes too); these keys do not change
# what a Linear keeps or trains (the projections' seed and whether they are saved with the adapter,
# lambda_d's first value, init_weights filling the vectors, fan_in_fan_out transposing a Conv1D's view).
VERA_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "projection_prng_key",
    "save_projection", "d_initial", "init_weights", "fan_in_fan_out", "layers_pattern",
)  # fmt: skip
# OFTConfig (branch h54oft; huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py): r 0 and oft_block_size 32 by
# default, exactly one of them non-zero (its __post_init__). These keys do not change what a Linear keeps or trains
# (eps scales coft's projection only; init_weights fills the blocks; OFT has no alpha: alpha_pattern is empty).
OFT_DEFAULT_BLOCK: Final = 32
OFT_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "revision", "auto_mapping", "peft_version", "init_weights",
    "fan_in_fan_out", "layers_pattern", "eps", "alpha_pattern",
)  # fmt: skip


# AdaLoraConfig (branch h54ada; huggingface/peft 51c2ff66 src/peft/tuners/adalora/config.py, a LoraConfig): init_r
# defaults to core.plan.ADALORA_DEFAULT_RANK (12); LoraConfig's r is not used (model.py _create_and_replace passes
# init_r). These keys do not change what is kept or trained: the rank schedule (target_r, tinit, tfinal, deltaT,
# total_step) and the sensitivity's averages (beta1, beta2) only choose which singular values the RankAllocator
# masks, nothing is resized; orth_reg_weight scales a loss term; lora_bias, use_rslora and the initialisers are
# LoraConfig's, which SVDLinear never reads.
ADALORA_IRRELEVANT: Final = (
    *IRRELEVANT, "r", "target_r", "tinit", "tfinal", "deltaT", "beta1", "beta2", "orth_reg_weight", "lora_bias",
    "init_lora_weights",
)  # fmt: skip


def read_peft(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    kind = taker.word("peft_type", _KINDS)
    if kind is not None and kind.upper() == "IA3":
        return _read_ia3(taker, odd)
    if kind is not None and kind.upper() == "LN_TUNING":
        return _read_ln_tuning(taker, odd)
    if kind is not None and kind.upper() in _PROMPT_KINDS:
        return _read_prompt(taker, odd, _PROMPT_KINDS[kind.upper()])
    if kind is not None and kind.upper() in LYCORIS_KINDS:
        return _read_lycoris(taker, odd, LYCORIS_KINDS[kind.upper()])
    if kind is not None and kind.upper() == "VERA":
        return _read_vera(taker, odd)
    if kind is not None and kind.upper() == "ADALORA":
        return _read_adalora(taker, odd)
    if kind is not None and kind.upper() == "OFT":
        return _read_oft(taker, odd)
    if kind is not None and kind.upper() == "MISS":
        return _read_miss(taker, odd)
    if kind is not None and kind.upper() == "TRAINABLE_TOKENS":
        return _read_trainable_tokens(taker, odd)
    if kind is not None and kind.upper() == "FOURIERFT":
        return _read_fourierft(taker, odd)
    if kind is not None and kind.upper() == "ROAD":
        return _read_road(taker, odd)
    if kind is not None and kind.upper() == "VBLORA":
        return _read_vblora(taker, odd)
    if kind is not None and kind.upper() == "RANDLORA":
        return _read_randlora(taker, odd)
    if kind is not None and kind.upper() == "SHIRA":
        return _read_shira(taker, odd)
    if kind is not None and kind.upper() == "BOFT":
        return _read_boft(taker, odd)
    if kind is not None and kind.upper() != "LORA":
        raise taker.fail("peft_type", kind, _KINDS)
    s: dict[str, Any] = {"method": "lora"}
    taker.record("method", "lora", "peft_type" if kind else "r / target_modules")
    if taker.flag("use_dora"):
        s["method"] = "dora"
        taker.record("method", "dora", "use_dora")
    rank = _or_default(taker, taker.integer("r", "lora_rank", 1, 65_536), "lora_rank", DEFAULT_RANK, "LoraConfig.r")
    alpha = taker.number("lora_alpha", "lora_alpha", 0.0, 1e6)
    alpha = _or_default(taker, alpha, "lora_alpha", DEFAULT_ALPHA, "LoraConfig.lora_alpha")
    s["lora_rank"], s["lora_alpha"] = rank, alpha
    s.update(recipe_numbers(taker, None, "lora_dropout"))
    model_ref = _targets_and_model(taker, odd, s)
    _note_adapter_keys(taker, "rank_pattern", "alpha_pattern", "layers_to_transform", "layer_replication")
    _note_adapter_keys(taker, "exclude_modules")
    taker.note("target_parameters", "adapters on parameters (MoE experts) are not modelled")
    if taker.word("bias", "none, all or lora_only") not in (None, "none"):
        taker.note("bias", "trainable biases are not in the estimate")
    if taker.flag("lora_bias"):
        taker.note("lora_bias", "a LoRA bias on B is not in the estimate")
    return _finish(taker, odd, model_ref, s, IRRELEVANT, f"{_NO_QUANT}: choose QLoRA if it was")


# What an adapter config may set that the estimate leaves out, in the words each reader notes it with
# (LoRA, LoHa / LoKr and AdaLoRA share them; VeRA, OFT and the prompt methods word their own).
_ADAPTER_NOTES: dict[str, str] = {
    "rank_pattern": "per-module ranks: the estimate uses r everywhere",
    "alpha_pattern": "per-module alphas change scaling only",
    "layers_to_transform": "adapters on some layers only: the estimate adapts every layer",
    "layer_replication": "replicated layers are not modelled",
    "exclude_modules": "excluded modules: the estimate adapts every listed target",
}


def _note_adapter_keys(taker: Taker, *keys: str) -> None:
    for key in keys:
        taker.note(key, _ADAPTER_NOTES[key])


def _targets_and_model(taker: Taker, odd: OddValues, s: dict[str, Any]) -> str | None:
    """``target_modules`` into ``s``; the base model's name, as the file gives it."""
    s["lora_targets"] = lora_targets(taker, "target_modules", taker.names("target_modules"), odd)
    return _base_model(taker)


def _base_model(taker: Taker) -> str | None:
    """The base model's name, as the file gives it (``base_model_name_or_path``)."""
    model_ref = taker.text("base_model_name_or_path")
    if model_ref:
        taker.record("model", model_ref, "base_model_name_or_path")
    return model_ref


_NO_QUANT: Final = "adapter_config.json does not say whether the base was quantised"


def _finish(
    taker: Taker, odd: OddValues, model_ref: str | None, s: dict[str, Any], irrelevant: tuple[str, ...], quant: str
) -> RunConfig:
    """What every PEFT reader ends with: modules_to_save and trainable_token_indices (every PeftConfig may
    name them; branch h60mts), the base's quantisation asked for, the keys that do not matter."""
    s.update(modules_to_save(taker, "modules_to_save"))
    s.update(trainable_tokens(taker, "trainable_token_indices"))
    # peft 0.18.0 LoraModel._add_modules_to_tie: with the embedding alone listed on a tied model, the head shares
    # its copy (no second copy); the head's kept input and weight-gradient matmul are then not in the estimate.
    taker.note("ensure_weight_tying", "a tied head sharing the embedding's copy trains through it (not modelled)")
    taker.missing("quant", quant)
    taker.irrelevant(*irrelevant)
    return finish(ConfigKind.PEFT, taker, odd, model_ref, s)


def _read_ia3(taker: Taker, odd: OddValues) -> RunConfig:
    """An IA3Config (huggingface/peft 51c2ff66 src/peft/tuners/ia3/config.py): target_modules,
    and feedforward_modules, the targets whose input the vector scales."""
    s: dict[str, Any] = {"method": "ia3"}
    taker.record("method", "ia3", "peft_type")
    model_ref = _targets_and_model(taker, odd, s)
    if taker.raw("feedforward_modules") == []:  # PEFT's mt5 default: no feedforward module
        s["ia3_feedforward"] = ()
        taker.record("ia3_feedforward", "", "feedforward_modules")
    else:
        feedforward = taker.names("feedforward_modules")
        s["ia3_feedforward"] = lora_targets(taker, "feedforward_modules", feedforward, odd, "ia3_feedforward")
    taker.note("exclude_modules", "excluded modules: the estimate scales every listed target")
    taker.note("layers_to_transform", "vectors on some layers only: the estimate scales every layer")
    return _finish(taker, odd, model_ref, s, IA3_IRRELEVANT, _NO_QUANT)


def _read_prompt(taker: Taker, odd: OddValues, method: str) -> RunConfig:
    """A PromptTuningConfig or PromptEncoderConfig (huggingface/peft 51c2ff66 src/peft/config.py
    PromptLearningConfig: num_virtual_tokens, num_transformer_submodules; src/peft/tuners/p_tuning/config.py:
    encoder_reparameterization_type, encoder_hidden_size). P-tuning is modelled with PEFT's MLP encoder
    of the model's width (its default, src/peft/utils/other.py ``_prepare_prompt_learning_config``);
    an LSTM encoder, another width, or two submodules (encoder-decoder models) are refused."""
    s: dict[str, Any] = {"method": method}
    taker.record("method", method, "peft_type")
    tokens = taker.integer("num_virtual_tokens", "virtual_tokens", 1, 100_000)
    if tokens is not None:
        s["virtual_tokens"] = tokens
    submodules = taker.integer("num_transformer_submodules", None, 1, 2)
    if submodules not in (None, 1):
        raise taker.fail("num_transformer_submodules", submodules, "1 (a decoder-only model)")
    if method == "p-tuning":
        encoder = taker.word("encoder_reparameterization_type", "MLP")
        if encoder is not None and encoder.upper() != "MLP":
            raise taker.fail("encoder_reparameterization_type", encoder, "MLP (the planner models PEFT's MLP encoder)")
        hidden, width = taker.integer("encoder_hidden_size", None), taker.integer("token_dim", None)
        if hidden is not None and width is not None and hidden != width:
            raise taker.fail("encoder_hidden_size", hidden, f"the model's width, token_dim ({width:,})")
    if method == "prefix-tuning":
        # PrefixEncoder with prefix_projection (an Embedding, Linear, Tanh, Linear) is not modelled;
        # PrefixTuningConfig's default, False, trains the keys and values directly.
        if taker.flag("prefix_projection"):
            raise taker.fail("prefix_projection", True, "false (the planner models PEFT's default, no projection MLP)")
        taker.irrelevant(*PREFIX_IRRELEVANT)
        # src/peft/peft_model.py: "PREFIX_TUNING does not work with gradient checkpointing" (a ValueError).
        s["checkpointing"] = False
        taker.record("checkpointing", False, "peft_type PREFIX_TUNING (PEFT refuses gradient checkpointing)")
    model_ref = _base_model(taker)
    return _finish(taker, odd, model_ref, s, PROMPT_IRRELEVANT, _NO_QUANT)


def _read_ln_tuning(taker: Taker, odd: OddValues) -> RunConfig:
    """An LNTuningConfig (huggingface/peft 51c2ff66 src/peft/tuners/ln_tuning/config.py: target_modules,
    exclude_modules, modules_to_save). The planner models PEFT's default targets, every norm of the
    families in core.plan.LN_TUNING_FAMILIES; a list of other modules, or exclusions, is refused."""
    s: dict[str, Any] = {"method": "ln-tuning"}
    taker.record("method", "ln-tuning", "peft_type")
    targets = taker.names("target_modules")
    if targets is not None and not set(targets) <= LN_TUNING_NORMS:
        raise taker.fail("target_modules", list(targets), "null or norms only (PEFT's default: every norm)")
    excluded = taker.names("exclude_modules")
    if excluded:
        raise taker.fail("exclude_modules", list(excluded), "null (every norm trains)")
    model_ref = _base_model(taker)
    return _finish(taker, odd, model_ref, s, LN_IRRELEVANT, _NO_QUANT)


# TrainableTokensConfig (branch h61mts2; huggingface/peft 5d602fdb src/peft/tuners/trainable_tokens/config.py):
# init_weights only fills the delta (zeros, or random rows), which changes no memory.
TRAINABLE_TOKENS_IRRELEVANT: Final = (*LN_IRRELEVANT, "init_weights")
# The input embedding's names TrainableTokensConfig.target_modules may give (its default "embed_tokens"; the PEFT
# method comparison's results name "model.embed_tokens").
_TOKEN_TARGETS: Final = frozenset({"embed_tokens", "model.embed_tokens", "wte", "transformer.wte"})


def _read_trainable_tokens(taker: Taker, odd: OddValues) -> RunConfig:
    """A TrainableTokensConfig: ``token_indices`` (the rows that train; their count is what the memory needs) and
    ``target_modules``, which the planner models as the input embedding (PEFT's default); another layer is refused."""
    s: dict[str, Any] = {"method": "trainable-tokens"}
    taker.record("method", "trainable-tokens", "peft_type")
    targets = taker.names("target_modules")
    if targets is not None and not set(targets) <= _TOKEN_TARGETS:
        raise taker.fail("target_modules", list(targets), "the input embedding (PEFT's default, embed_tokens)")
    rows = trainable_tokens(taker, "token_indices")
    if not rows:
        raise taker.fail("token_indices", taker.raw("token_indices"), "a list of at least one token index")
    s.update(rows)
    model_ref = _base_model(taker)
    return _finish(taker, odd, model_ref, s, TRAINABLE_TOKENS_IRRELEVANT, _NO_QUANT)


def _or_default(taker: Taker, value: Any, path: str, default: Any, where: str) -> Any:
    """``value`` as read, or the config class's ``default`` for a key the file leaves out (recorded as such)."""
    if value is None:
        value = default
        taker.record(path, value, f"default: {where} = {default}")
    return value


def _read_lycoris(taker: Taker, odd: OddValues, method: str) -> RunConfig:
    """A LoHaConfig or LoKrConfig (huggingface/peft 51c2ff66 src/peft/tuners/loha/config.py, lokr/config.py): r,
    alpha, target_modules, and LoKr's decompose_factor. LoKr's decompose_both (w1 as a product too) is not
    modelled: true is refused. rank_dropout (an out-long mask a step) and module_dropout (the adapter skipped
    some steps) are noted: the estimate runs every adapter every step."""
    s: dict[str, Any] = {"method": method}
    taker.record("method", method, "peft_type")
    rank = _or_default(taker, taker.integer("r", "lora_rank", 1, 65_536), "lora_rank", LYCORIS_DEFAULT_RANK, "r")
    alpha = taker.number("alpha", "lora_alpha", 0.0, 1e6)
    alpha = _or_default(taker, alpha, "lora_alpha", LYCORIS_DEFAULT_ALPHA, "alpha")
    s["lora_rank"], s["lora_alpha"] = rank, alpha
    if method == "lokr":
        factor = taker.integer("decompose_factor", "lokr_factor", -1, 1_000_000)
        if factor is not None:
            s["lokr_factor"] = factor
        if taker.flag("decompose_both"):
            raise taker.fail("decompose_both", True, "false (PEFT's default; w1 as a rank-r product is not modelled)")
    model_ref = _targets_and_model(taker, odd, s)
    taker.note("rank_dropout", "a dropped row mask each step: the estimate keeps the whole delta")
    taker.note("module_dropout", "adapters skipped some steps: the estimate runs every adapter every step")
    _note_adapter_keys(taker, "rank_pattern", "alpha_pattern", "layers_to_transform")
    _note_adapter_keys(taker, "exclude_modules")
    return _finish(taker, odd, model_ref, s, LYCORIS_IRRELEVANT, _NO_QUANT)


def _refuse_dropout(taker: Taker, key: str, why: str) -> None:
    """A PEFT method's dropout above 0 refused with ``why`` (each target would keep a dropped copy of its input)."""
    dropout = taker.raw(key)
    if dropout is not None and (isinstance(dropout, bool) or dropout != 0):
        raise taker.fail(key, dropout, f"0 ({why})")


def _refuse_bias(taker: Taker, own: str, why: str) -> None:
    """A trained bias (PEFT's ``bias`` other than "none": "all" or the method's ``own`` word) refused with ``why``."""
    if taker.word("bias", f"none, all or {own}") not in (None, "none"):
        raise taker.fail("bias", taker.raw("bias"), f"none ({why})")


def _read_vera(taker: Taker, odd: OddValues) -> RunConfig:
    """A VeraConfig (huggingface/peft 51c2ff66 src/peft/tuners/vera/config.py): r and target_modules. vera_dropout
    above 0 is refused (each target would keep its dropped copy of the input and a mask: not modelled), as a
    trained bias is (bias other than "none"); VeRA has no alpha."""
    s: dict[str, Any] = {"method": "vera"}
    taker.record("method", "vera", "peft_type")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", VERA_DEFAULT_RANK, "VeraConfig.r")
    _refuse_dropout(taker, "vera_dropout", "VeRA's dropout copies are not modelled")
    _refuse_bias(taker, "vera_only", "VeRA's trained biases are not modelled")
    model_ref = _targets_and_model(taker, odd, s)
    taker.note("layers_to_transform", "vectors on some layers only: the estimate adapts every layer")
    return _finish(taker, odd, model_ref, s, VERA_IRRELEVANT, _NO_QUANT)


def _read_miss(taker: Taker, odd: OddValues) -> RunConfig:
    """A MissConfig (huggingface/peft 51c2ff66 src/peft/tuners/miss/config.py): r (64 by default) and
    target_modules. init_weights true (zeros) or false (random) train the same r × out block through the same
    forward; "bat" (a whole weight built every forward) and "mini" (an r × mini_r block repeated) are other rules,
    refused with the reason, as are miss_dropout above 0 (a dropped copy of each target's input, not modelled) and a
    trained bias."""
    s: dict[str, Any] = {"method": "miss"}
    taker.record("method", "miss", "peft_type")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", MISS_DEFAULT_RANK, "MissConfig.r")
    init = taker.raw("init_weights")
    if init is not None and not isinstance(init, bool):
        why = "true or false (MiSS's bat and mini forwards are not modelled: bat builds the whole weight every step)"
        raise taker.fail("init_weights", init, why)
    _refuse_dropout(taker, "miss_dropout", "MiSS's dropped copies of the input are not modelled")
    _refuse_bias(taker, "MiSS_only", "MiSS's trained biases are not modelled")
    return _finish_per_target(taker, odd, s, "blocks", MISS_IRRELEVANT)


def _finish_per_target(
    taker: Taker, odd: OddValues, s: dict[str, Any], what: str, irrelevant: tuple[str, ...]
) -> RunConfig:
    """The end of a reader of a method with one adapter (``what``) per target: the targets and the base model, the
    layer and module choices it notes (the estimate adapts every layer and every listed target), :func:`_finish`."""
    model_ref = _targets_and_model(taker, odd, s)
    taker.note("layers_to_transform", f"{what} on some layers only: the estimate adapts every layer")
    taker.note("exclude_modules", "excluded modules: the estimate adapts every listed target")
    return _finish(taker, odd, model_ref, s, irrelevant, _NO_QUANT)


def _read_fourierft(taker: Taker, odd: OddValues) -> RunConfig:
    """A FourierFTConfig (huggingface/peft 51c2ff66 src/peft/tuners/fourierft/config.py): n_frequency (1000 by
    default; the plan's ``lora.rank``) and target_modules. Per-target counts (n_frequency_pattern: the plan has one
    count) and a trained bias are refused with the reason."""
    s: dict[str, Any] = {"method": "fourierft"}
    taker.record("method", "fourierft", "peft_type")
    n = taker.integer("n_frequency", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, n, "lora_rank", FOURIERFT_DEFAULT_FREQUENCIES, "FourierFTConfig.n_frequency")
    pattern = taker.raw("n_frequency_pattern")
    if pattern:
        raise taker.fail("n_frequency_pattern", pattern, "empty (the plan has one n_frequency for every target)")
    _refuse_bias(taker, "fourier_only", "FourierFT's trained biases are not modelled")
    return _finish_per_target(taker, odd, s, "spectra", FOURIERFT_IRRELEVANT)


def _read_road(taker: Taker, odd: OddValues) -> RunConfig:
    """A RoadConfig (huggingface/peft 51c2ff66 src/peft/tuners/road/config.py): variant (road_1 by default) and
    target_modules; group_size changes which features pair up, not what is kept or trained."""
    s: dict[str, Any] = {"method": "road"}
    taker.record("method", "road", "peft_type")
    variant = taker.word("variant", "road_1, road_2 or road_4")
    if variant is not None and variant not in ROAD_VARIANTS:
        raise taker.fail("variant", variant, "road_1, road_2 or road_4 (RoadConfig's variants)")
    s["road_variant"] = _or_default(taker, variant, "road_variant", ROAD_VARIANTS[0], "RoadConfig.variant")
    if variant is not None:
        taker.record("road_variant", variant, "variant")
    return _finish_per_target(taker, odd, s, "rotations", ROAD_IRRELEVANT)


def _read_vblora(taker: Taker, odd: OddValues) -> RunConfig:
    """A VBLoRAConfig (huggingface/peft 51c2ff66 src/peft/tuners/vblora/config.py): r (4 by default) and
    target_modules. The planner models the default bank (num_vectors 256, vector_length 256, topk 2: core.plan's
    VBLORA_* constants); other values, vblora_dropout above 0 and a trained bias are refused with the reason."""
    s: dict[str, Any] = {"method": "vblora"}
    taker.record("method", "vblora", "peft_type")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", VBLORA_DEFAULT_RANK, "VBLoRAConfig.r")
    for key, modelled in (("num_vectors", VBLORA_NUM_VECTORS), ("vector_length", VBLORA_VECTOR_LENGTH),
                          ("topk", VBLORA_TOPK)):  # fmt: skip
        value = taker.integer(key, None, 1)
        if value is not None and value != modelled:
            raise taker.fail(key, value, f"{modelled} (VBLoRAConfig's default, the bank the planner models)")
    _refuse_dropout(taker, "vblora_dropout", "VB-LoRA's dropped copies of the input are not modelled")
    _refuse_bias(taker, "vblora_only", "VB-LoRA's trained biases are not modelled")
    return _finish_per_target(taker, odd, s, "adapters", VBLORA_IRRELEVANT)


def _read_randlora(taker: Taker, odd: OddValues) -> RunConfig:
    """A RandLoraConfig (huggingface/peft 51c2ff66 src/peft/tuners/randlora/config.py): r (32 by default, the bases'
    rank) and target_modules. randlora_dropout above 0 and a trained bias are refused with the reason."""
    s: dict[str, Any] = {"method": "randlora"}
    taker.record("method", "randlora", "peft_type")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", RANDLORA_DEFAULT_RANK, "RandLoraConfig.r")
    _refuse_dropout(taker, "randlora_dropout", "RandLoRA's dropped copies of the input are not modelled")
    _refuse_bias(taker, "randlora_only", "RandLoRA's trained biases are not modelled")
    return _finish_per_target(taker, odd, s, "bases", RANDLORA_IRRELEVANT)


def _read_shira(taker: Taker, odd: OddValues) -> RunConfig:
    """A ShiraConfig (huggingface/peft 51c2ff66 src/peft/tuners/shira/config.py): r (32 by default: r·(in + out)
    trained entries a target), mask_type and target_modules. A mask_type other than PEFT's one built-in, "random", is a
    user function whose entries the planner cannot count: refused with the reason."""
    s: dict[str, Any] = {"method": "shira"}
    taker.record("method", "shira", "peft_type")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", SHIRA_DEFAULT_RANK, "ShiraConfig.r")
    mask = taker.word("mask_type", "random")
    if mask is not None and mask != "random":
        raise taker.fail("mask_type", mask, "random (PEFT's built-in mask; a custom mask function is not modelled)")
    return _finish_per_target(taker, odd, s, "sparse weights", SHIRA_IRRELEVANT)


def _blocks(taker: Taker, s: dict[str, Any], count: tuple[int, str], size: tuple[int, str]) -> None:
    """OFT's r / oft_block_size and BOFT's boft_block_num / boft_block_size, (value, key) each: exactly one non-zero
    (each config's __post_init__); the number of blocks as the plan's rank, the size as its block size."""
    (n, n_key), (b, b_key) = count, size
    if (n == 0) == (b == 0):
        raise taker.fail(n_key, n, f"{n_key} or {b_key} non-zero, not both ({b_key} is {b}; PEFT's rule)")
    if n:
        s["lora_rank"] = n
        taker.record("lora_rank", n, f"{n_key} (blocks per target)")
    s["oft_block_size"] = b
    if taker.raw(b_key) is not None:
        taker.record("oft_block_size", b, b_key)


def _read_boft(taker: Taker, odd: OddValues) -> RunConfig:
    """A BOFTConfig (huggingface/peft 51c2ff66 src/peft/tuners/boft/config.py): boft_block_size (4 by default) or
    boft_block_num (0), exactly one non-zero as its __post_init__ demands, and target_modules. Refused with the reason:
    more than one butterfly factor (the fbd_cuda extension's path: more permutations and factors, not modelled; PEFT
    itself falls back to one where the extension does not build), boft_dropout above 0 (MultiplicativeDropoutLayer's
    identity blocks and masks, not modelled) and a trained bias."""
    s: dict[str, Any] = {"method": "boft"}
    taker.record("method", "boft", "peft_type")
    size = taker.integer("boft_block_size", None, 0, 65_536)
    size = _or_default(taker, size, "oft_block_size", BOFT_DEFAULT_BLOCK, "BOFTConfig.boft_block_size")
    num = taker.integer("boft_block_num", None, 0, 65_536) or 0  # BOFTConfig.boft_block_num defaults to 0
    _blocks(taker, s, (num, "boft_block_num"), (size, "boft_block_size"))
    factor = taker.integer("boft_n_butterfly_factor", None, 0, 64)
    if factor not in (None, 1):
        why = "1 (BOFTConfig's default; more factors run the fbd_cuda extension's path, not modelled)"
        raise taker.fail("boft_n_butterfly_factor", factor, why)
    _refuse_dropout(taker, "boft_dropout", "BOFT's multiplicative dropout (identity blocks swapped in) is not modelled")
    _refuse_bias(taker, "boft_only", "BOFT's trained biases are not modelled")
    return _finish_per_target(taker, odd, s, "rotations", BOFT_IRRELEVANT)


def _read_adalora(taker: Taker, odd: OddValues) -> RunConfig:
    """An AdaLoraConfig (huggingface/peft 51c2ff66 src/peft/tuners/adalora/config.py): init_r (the rank of every
    tensor for the whole run), lora_alpha, lora_dropout and target_modules. Refused with PEFT's reason or the
    plan's: a schedule AdaLoraConfig itself refuses (no total_step, no budgeting phase), DoRA or LoftQ (refused
    by AdaLoraConfig), per-target ranks of a trained adapter (rank_pattern: the plan has one rank) and trained
    biases (bias other than "none")."""
    s: dict[str, Any] = {"method": "adalora"}
    taker.record("method", "adalora", "peft_type")
    rank = taker.integer("init_r", "lora_rank", 1, 65_536)
    s["lora_rank"] = _or_default(taker, rank, "lora_rank", ADALORA_DEFAULT_RANK, "AdaLoraConfig.init_r")
    alpha = taker.number("lora_alpha", "lora_alpha", 0.0, 1e6)
    s["lora_alpha"] = _or_default(taker, alpha, "lora_alpha", DEFAULT_ALPHA, "LoraConfig.lora_alpha")
    s.update(recipe_numbers(taker, None, "lora_dropout"))
    total = taker.integer("total_step", None, 1, 1_000_000_000)
    if total is None:
        raise taker.fail("total_step", None, "a step count above 0 (AdaLoraConfig: AdaLoRA does not work without)")
    tinit, tfinal = taker.integer("tinit", None, 0) or 0, taker.integer("tfinal", None, 0) or 0
    if tinit >= total - tfinal:
        why = f"below total_step - tfinal ({total - tfinal:,}): AdaLoraConfig refuses a schedule without budgeting"
        raise taker.fail("tinit", tinit, why)
    if taker.flag("use_dora"):
        raise taker.fail("use_dora", True, "false (AdaLoraConfig: ADALORA does not support DoRA)")
    if taker.raw("loftq_config"):
        raise taker.fail("loftq_config", taker.raw("loftq_config"), "{} (AdaLoraConfig: no LoftQ)")
    if taker.raw("rank_pattern"):
        why = "null (a trained adapter's per-target ranks: the plan has one rank, init_r, for every target)"
        raise taker.fail("rank_pattern", taker.raw("rank_pattern"), why)
    _refuse_bias(taker, "lora_only", "trained biases beside AdaLoRA are not modelled")
    model_ref = _targets_and_model(taker, odd, s)
    _note_adapter_keys(taker, "alpha_pattern", "layers_to_transform", "layer_replication")
    _note_adapter_keys(taker, "exclude_modules")
    return _finish(taker, odd, model_ref, s, ADALORA_IRRELEVANT, _NO_QUANT)


def _read_oft(taker: Taker, odd: OddValues) -> RunConfig:
    """An OFTConfig (huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py): r or oft_block_size (exactly one
    non-zero, as its __post_init__ demands) and target_modules. What the plan cannot state is refused with the
    reason: the exact Cayley solve (use_cayley_neumann false) and Neumann series other than 5 terms keep other
    factors, block_share one shared block, a trained bias. coft's projection runs under no_grad and module_dropout
    is never applied by Linear.forward at 51c2ff66: both noted, no effect on memory."""
    s: dict[str, Any] = {"method": "oft"}
    taker.record("method", "oft", "peft_type")
    r = taker.integer("r", None, 0, 65_536) or 0  # OFTConfig.r defaults to 0
    block = taker.integer("oft_block_size", None, 0, 65_536)
    block = _or_default(taker, block, "oft_block_size", OFT_DEFAULT_BLOCK, "OFTConfig.oft_block_size")
    _blocks(taker, s, (r, "r"), (block, "oft_block_size"))
    if taker.flag("use_cayley_neumann") is False:
        raise taker.fail("use_cayley_neumann", False, "true (the exact Cayley solve's saved factors are not modelled)")
    terms = taker.integer("num_cayley_neumann_terms", None, 0, 1_000)
    if terms not in (None, OFT_NEUMANN_TERMS):
        raise taker.fail("num_cayley_neumann_terms", terms, f"{OFT_NEUMANN_TERMS} (OFTConfig's default; the model)")
    if taker.flag("block_share"):
        raise taker.fail("block_share", True, "false (one block shared by a whole target is not modelled)")
    _refuse_bias(taker, "oft_only", "OFT's trained biases are not modelled")
    model_ref = _targets_and_model(taker, odd, s)
    taker.note("coft", "the constrained projection runs under no_grad each step: nothing kept, not in the time")
    taker.note("module_dropout", "PEFT's OFT Linear.forward never applies it (51c2ff66): no effect on memory")
    taker.note("rank_pattern", "per-module r: the estimate uses r everywhere")
    taker.note("layers_to_transform", "rotations on some layers only: the estimate adapts every layer")
    _note_adapter_keys(taker, "exclude_modules")
    return _finish(taker, odd, model_ref, s, OFT_IRRELEVANT, _NO_QUANT)

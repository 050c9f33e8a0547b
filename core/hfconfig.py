"""Reading a Hugging Face ``config.json`` into a :class:`~core.model.ModelSpec`.

Only values are read: nothing in the config is executed (``auto_map`` and remote code are
ignored). Each family's rules follow the matching ``modeling_<family>.py`` in transformers.
Every failure is a :class:`PlanError` naming the offending key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from core.errors import PlanError
from core.hybrid import HYBRID_MODEL_TYPES, MOE, WRAPPED_HYBRID_TYPES, hybrid_from_hf_config
from core.model import MAX_NAME_CHARS, ModelSpec, is_int
from core.units import finite_number
from core.vision import TEXT_MODEL_TYPES, vision_tower

SUPPORTED_MODEL_TYPES: Final = (
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
    "granite",
    "smollm3",
    "gpt_oss",
    "gpt_neox",
    "phi",
    "falcon",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "glm4_moe",
    "olmoe",
    "starcoder2",
    "seed_oss",
    "olmo3",
    "ernie4_5",
    "ernie4_5_moe",
    "phimoe",
    "granitemoe",
    "exaone4",
    "hunyuan_v1_dense",
    "cohere",
    "cohere2",
    "llama4_text",
)

# Families whose layers keep a recurrent state (a state-space or linear-attention layer's convolution and
# state tensors, fixed in size whatever the context) besides, or instead of, a KV cache, and whose config the
# planner does not read: each is refused with what it lacks rather than planned as a transformer. Layer kinds
# as transformers 5.25.0 builds them (models/<type>/modeling_<type>.py). The hybrids core.hybrid reads
# exactly (Granite 4.0-H, Bamba, Nemotron-H, Falcon-H1, Qwen3-Next, and Qwen3.5 / Qwen3.6 inside their image-text
# wrapper) are planned (:func:`_hybrid_model`), for serving on vLLM and llama.cpp only (core.plan.serving_refusal
# says why the rest is refused).
RECURRENT_MODEL_TYPES: Final[dict[str, str]] = {
    "lfm2": "LFM2's short-convolution layers (Lfm2ShortConv)",
    "jamba": "Jamba's Mamba layers (JambaMambaMixer)",
    "mamba": "Mamba's selective state-space layers (MambaMixer)",
    "mamba2": "Mamba-2's state-space layers (Mamba2Mixer)",
}


# Attention families read but not planned: each has a tensor or an attention pattern the planner's ModelSpec
# cannot express exactly (transformers 5.25.0 models/<type>/modeling_<type>.py), so the config is refused with
# what is missing rather than planned approximately.
UNMODELLED_MODEL_TYPES: Final[dict[str, str]] = {}


def _whole_number(value: object) -> bool:
    """An int, or a float without a fraction (configs write 4096.0); never NaN or infinity."""
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer()
    return is_int(value)


@dataclass(frozen=True)
class _Reader:
    """Typed access to a config dict; every failure names the key."""

    config: Mapping[str, Any]
    where: str
    missing: list[str] = field(default_factory=list)

    def get_int(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            if key in self.config and self.config[key] is not None:
                value = self.config[key]
                if not _whole_number(value):
                    raise PlanError(f"{self.where}.{key}", value, "an integer")
                return int(value)
        if default is None:
            raise PlanError(f"{self.where}.{keys[0]}", None, "an integer (the key is missing)")
        return default

    def get_bool(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise PlanError(f"{self.where}.{key}", value, "true or false")
        return value

    def get_str(self, key: str, default: str) -> str:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise PlanError(f"{self.where}.{key}", value, "a string")
        return value

    def get_float(self, key: str, default: float) -> float:
        value = self.config.get(key)
        if value is None:
            return default
        number = finite_number(value)
        if number is None or number < 0:
            raise PlanError(f"{self.where}.{key}", value, "a non-negative number")
        return number

    def get_prob(self, key: str, default: float) -> float:
        value = self.get_float(key, default)
        if value >= 1.0:
            raise PlanError(f"{self.where}.{key}", value, "a probability below 1")
        return value

    def optional_int(self, key: str) -> int | None:
        value = self.config.get(key)
        if value is None:
            return None
        if not _whole_number(value):
            raise PlanError(f"{self.where}.{key}", value, "an integer or null")
        return int(value)


def model_from_hf_config(config: Mapping[str, Any], name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from the contents of a Hugging Face ``config.json``.

    Only reads values; nothing in the config is executed (``auto_map`` and remote code are
    ignored). Raises :class:`PlanError` naming the offending key.
    """
    return _model_from_hf_config(config, name, nested=False)


def _model_from_hf_config(config: Mapping[str, Any], name: str | None, *, nested: bool) -> ModelSpec:
    if not isinstance(config, Mapping):
        raise PlanError("config", type(config).__name__, "a JSON object")
    model_type = config.get("model_type")
    # Multimodal wrappers keep the language model in text_config: one level, never nested further.
    if not nested and model_type not in SUPPORTED_MODEL_TYPES:
        wrapped = _wrapped_text(config)
        if wrapped is not None:
            return _with_vision(config, _model_from_hf_config(wrapped, name, nested=True))
    if nested and isinstance(model_type, str) and model_type in TEXT_MODEL_TYPES:
        model_type = TEXT_MODEL_TYPES[model_type]  # core.vision.TEXT_MODEL_TYPES: the same layers
        config = {**config, "model_type": model_type}
    if isinstance(model_type, str) and model_type in RECURRENT_MODEL_TYPES:
        why = f"{RECURRENT_MODEL_TYPES[model_type]} keep a recurrent state the planner does not model"
        raise PlanError("config.model_type", model_type, "a model of attention layers only", why)
    if isinstance(model_type, str) and model_type in WRAPPED_HYBRID_TYPES and not nested:
        why = (
            "vLLM loads Qwen3.5 / Qwen3.6 as the image-text Qwen3_5ForConditionalGeneration / "
            "Qwen3_5MoeForConditionalGeneration only (no Qwen3_5ForCausalLM in its registry): read the "
            "checkpoint's whole config.json (model_type qwen3_5 or qwen3_5_moe, the decoder in text_config)"
        )
        raise PlanError("config.model_type", model_type, "qwen3_5 or qwen3_5_moe (the checkpoint's wrapper)", why)
    if (
        isinstance(model_type, str)
        and model_type in HYBRID_MODEL_TYPES
        and nested == (model_type in WRAPPED_HYBRID_TYPES)
    ):
        given = config.get("_name_or_path")
        label = name or (given.strip()[:MAX_NAME_CHARS] if isinstance(given, str) and given.strip() else model_type)
        return _hybrid_model(config, model_type, label)
    if isinstance(model_type, str) and model_type in UNMODELLED_MODEL_TYPES:
        why = UNMODELLED_MODEL_TYPES[model_type]
        raise PlanError("config.model_type", model_type, "an architecture the planner models exactly", why)
    if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
        raise PlanError(
            "config.model_type", model_type, "one of " + ", ".join(SUPPORTED_MODEL_TYPES), "unknown architecture"
        )
    r = _Reader(config, "config")
    given = config.get("_name_or_path")
    label = name or (given.strip()[:MAX_NAME_CHARS] if isinstance(given, str) and given.strip() else model_type)
    if model_type == "gpt2":
        return _gpt2_model(r, label)
    if model_type == "starcoder2":
        return _starcoder2_model(r, label)
    if model_type == "llama4_text":
        return _llama4_model(r, label)
    if model_type in _PARALLEL_FAMILIES:
        return _parallel_model(r, model_type, label)
    if model_type in _LATENT_FAMILIES:
        return _latent_model(r, model_type, label)
    if model_type in ("cohere", "cohere2"):
        return _cohere_model(r, model_type, label)
    return _gated_model(r, model_type, label)


def _wrapped_text(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The language model's config of an image-text wrapper: its ``text_config``, or, for Qwen2.5-VL's
    checkpoints that keep the text fields at the top level beside ``vision_config`` (Qwen/Qwen2.5-VL-*'s
    config.json, written by transformers 4.49), the top level itself; None for any other config."""
    if isinstance(config.get("text_config"), Mapping):
        text = dict(config["text_config"])
        text.setdefault("tie_word_embeddings", config.get("tie_word_embeddings", text.get("tie_word_embeddings")))
        return text
    if config.get("model_type") == "qwen2_5_vl" and isinstance(config.get("vision_config"), Mapping):
        return {k: v for k, v in config.items() if k != "vision_config"} | {"model_type": "qwen2_5_vl_text"}
    return None


def _with_vision(config: Mapping[str, Any], spec: ModelSpec) -> ModelSpec:
    """The language model ``spec`` with the wrapper's vision tower and projector (core.vision)."""
    tower = vision_tower(config, spec.hidden_size)
    if tower is None:
        return spec
    spec = replace(spec, vision_params=tower.params, vision_linear_params=tower.linear_weights, vision_kind=tower.kind)
    spec = replace(
        spec,
        vision_family=tower.family,
        vision_config_layers=tower.config_layers,
        vision_config_hidden=tower.config_hidden,
    )
    g = tower.profile
    if g is None:
        return spec
    return replace(
        spec,
        vision_embeddings=g.embeddings,
        vision_patches=g.patches,
        vision_pixels=g.pixels,
        vision_width=g.width,
        vision_inner=g.inner,
    )


# DeepSeek-V2 (V2-Lite), DeepSeek-V3 / R1 and Kimi K2 (``kimi_k2``, DeepseekV3ForCausalLM's shapes):
# multi-head latent attention and a mixture of experts with shared experts and dense first layers.
_LATENT_FAMILIES: Final = ("deepseek_v2", "deepseek_v3", "kimi_k2")


def _latent_model(r: _Reader, model_type: str, label: str) -> ModelSpec:
    """DeepSeek's MLA + MoE model, as huggingface/transformers 00b676f8 builds it
    (models/deepseek_v3/modeling_deepseek_v3.py; deepseek_v2's attention and MoE are the same shapes
    but for the router's ``e_score_correction_bias``, which V3 registers on every MoE layer and the
    checkpoints store). config.json's ``intermediate_size`` is the dense first layers' MLP, its
    ``moe_intermediate_size`` each expert's; ``n_shared_experts`` experts of that size are one shared MLP
    without a gate. The multi-token-prediction layer (``num_nextn_predict_layers``, DeepSeek-V3's
    ``model.layers.61``) is left out, as transformers (``_keys_to_ignore_on_load_unexpected``) and vLLM
    without speculative decoding leave it: the spec is the model that serves."""
    if r.config.get("index_topk") is not None:
        why = "DeepSeek-V3.2's sparse-attention indexer is not modelled"
        raise PlanError("config.index_topk", r.config.get("index_topk"), "absent", why)
    if r.get_int("moe_layer_freq", default=1) != 1:
        raise PlanError("config.moe_layer_freq", r.config.get("moe_layer_freq"), "1 (every layer after the dense ones)")
    heads = r.get_int("num_attention_heads")
    nope, rope = r.get_int("qk_nope_head_dim"), r.get_int("qk_rope_head_dim")
    moe = r.get_int("moe_intermediate_size")
    v3 = model_type != "deepseek_v2"
    return ModelSpec(
        name=label,
        family=model_type,
        vocab_size=r.get_int("vocab_size"),
        hidden_size=r.get_int("hidden_size"),
        num_layers=r.get_int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=r.get_int("num_key_value_heads", default=heads),
        head_dim=nope + rope,
        intermediate_size=moe,
        qkv_bias=r.get_bool("attention_bias", False),
        o_bias=r.get_bool("attention_bias", False),
        num_experts=r.get_int("n_routed_experts"),
        experts_per_token=r.get_int("num_experts_per_tok"),
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096),
        activation=r.get_str("hidden_act", "silu"),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
        tie_embeddings=r.get_bool("tie_word_embeddings", False),
        shared_expert_size=r.get_int("n_shared_experts", default=0) * moe,
        shared_expert_gate=False,
        router_bias=v3,  # DeepseekV3TopkRouter.e_score_correction_bias, one per expert
        kv_lora_rank=r.get_int("kv_lora_rank"),
        q_lora_rank=r.optional_int("q_lora_rank") or 0,
        qk_rope_head_dim=rope,
        v_head_dim=r.get_int("v_head_dim"),
        first_k_dense_replace=r.get_int("first_k_dense_replace", default=3 if v3 else 0),
        dense_intermediate_size=r.get_int("intermediate_size"),
    )


def _cohere_model(r: _Reader, model_type: str, label: str) -> ModelSpec:
    """Command R (``cohere``) and Command R7B / A (``cohere2``), as huggingface/transformers 5.25.0 builds them
    (models/cohere/modeling_cohere.py, models/cohere2/modeling_cohere2.py): one CohereLayerNorm a block (a weight,
    no bias: ModelSpec.norm "layernorm_nobias") read by attention and the gated MLP in parallel (``residual +
    attention + mlp``), q/k/v/o biased by attention_bias, an MLP without biases, the final norm and an ``lm_head``
    tied to the embedding unless tie_word_embeddings is false (CohereConfig / Cohere2Config default true).
    ``logit_scale`` multiplies the logits by a number: no tensor of its own, and transformers' loss reads the
    scaled logits in place of the lm_head's output, freed on rebinding, so no counted figure moves. cohere2: the
    layers layer_types marks sliding_attention attend within sliding_window (default 4,096; null: every layer
    full); without layer_types every sliding_window_pattern-th layer (default 4) is full (Cohere2Config
    ``(i + 1) % pattern``). cohere's use_qk_norm (Command R+): CohereAttention.q_norm / k_norm =
    CohereLayerNorm((heads, head_dim)) and ((kv heads, head_dim)), a weight for every head (ModelSpec.qk_norm
    "per_head"); Cohere2Attention has none."""
    qk_norm = "per_head" if model_type == "cohere" and r.get_bool("use_qk_norm", False) else ""
    layers = r.get_int("num_hidden_layers")
    window, window_layers = (None, 0) if model_type == "cohere" else _cohere2_window(r, layers)
    return ModelSpec(
        **_biased_attention_shape(r, label, model_type, tied=True),
        norm="layernorm_nobias",
        norms_per_layer=1,
        qk_norm=qk_norm,
        parallel_residual=True,
        sliding_window=window,
        sliding_window_layers=window_layers,
        max_position_embeddings=r.get_int("max_position_embeddings", default=8192),
        activation=r.get_str("hidden_act", "silu"),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
    )


def _biased_attention_shape(r: _Reader, label: str, family: str, *, tied: bool) -> dict[str, Any]:
    """The fields of a model whose q/k/v and o_proj share one ``attention_bias`` (Cohere, Llama 4): its sizes, the
    head width (``head_dim`` or hidden ÷ heads), KV heads (default: the heads) and a head tied unless
    ``tie_word_embeddings`` says otherwise (default ``tied``)."""
    d = r.get_int("hidden_size")
    heads = r.get_int("num_attention_heads")
    bias = r.get_bool("attention_bias", False)
    return dict(
        name=label,
        family=family,
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=r.get_int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=r.get_int("num_key_value_heads", default=heads),
        head_dim=_head_dim(r, d, heads),
        intermediate_size=r.get_int("intermediate_size"),
        tie_embeddings=r.get_bool("tie_word_embeddings", tied),
        qkv_bias=bias,
        o_bias=bias,
    )


def _cohere2_window(r: _Reader, layers: int) -> tuple[int | None, int]:
    """Cohere2's windowed layers (see _cohere_model): layer_types, else an integer sliding_window_pattern."""
    pattern = r.config.get("sliding_window_pattern")
    if r.config.get("layer_types") is None and pattern is not None and not (_whole_number(pattern) and pattern > 0):
        raise PlanError("config.sliding_window_pattern", pattern, "a positive integer (every n-th layer full)")
    return _exaone_window(r, layers)


def _llama4_model(r: _Reader, label: str) -> ModelSpec:
    """Llama 4's language model (Scout, Maverick) as huggingface/transformers 5.25.0 builds it
    (models/llama4/modeling_llama4.py, configuration_llama4.py). Attention: q/k/v/o biased by attention_bias, no
    q/k norm weight (Llama4TextL2Norm is a weightless RMSNorm). The layers in ``moe_layers`` (default every
    ``interleave_moe_layer_step``-th from step - 1: Llama4TextConfig.__post_init__) hold Llama4TextMoe:
    ``num_local_experts`` experts of ``intermediate_size`` (Llama4TextExperts' gate_up_proj and down_proj), a
    Llama4Router without bias and an always-on ``shared_expert`` of the same width without a gate; the other
    layers a gated Llama4TextMLP of ``intermediate_size_mlp`` (ModelSpec's dense layers, counted whatever their
    order). Layers with RoPE (``no_rope_layers`` 1; default every layer but each ``no_rope_layer_interval``-th)
    attend within chunks of ``attention_chunk_size`` when it is set; the others attend globally (NoPE).
    ``lm_head`` untied unless tie_word_embeddings."""
    layers = r.get_int("num_hidden_layers")
    experts = r.get_int("num_local_experts", default=16)
    moe = _llama4_moe_layers(r, layers)
    chunk = r.optional_int("attention_chunk_size") or 0
    chunked = sum(_llama4_rope_layers(r, layers)) if chunk else 0
    return ModelSpec(
        **_biased_attention_shape(r, label, "llama4_text", tied=False),
        num_experts=experts,
        experts_per_token=r.get_int("num_experts_per_tok", default=1),
        shared_expert_size=r.get_int("intermediate_size") if experts > 1 and moe else 0,
        shared_expert_gate=False,
        first_k_dense_replace=layers - moe if experts > 1 else 0,
        dense_intermediate_size=r.get_int("intermediate_size_mlp") if experts > 1 and moe < layers else 0,
        attention_chunk=chunk if chunked else 0,
        chunked_layers=chunked,
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096 * 32),
        activation=r.get_str("hidden_act", "silu"),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
    )


def _llama4_moe_layers(r: _Reader, layers: int) -> int:
    """How many of Llama 4's layers hold experts: ``moe_layers`` as listed, else every
    ``interleave_moe_layer_step``-th from step - 1 (Llama4TextConfig.__post_init__)."""
    listed = r.config.get("moe_layers")
    if listed is not None:
        if not isinstance(listed, list) or not all(is_int(i) and 0 <= i < layers for i in listed):
            raise PlanError("config.moe_layers", listed, f"a list of layer indices from 0 to {layers - 1}")
        return len(set(listed))
    step = r.get_int("interleave_moe_layer_step", default=1)
    if step < 1:
        raise PlanError("config.interleave_moe_layer_step", step, "a positive integer")
    return len(range(step - 1, layers, step))


def _llama4_rope_layers(r: _Reader, layers: int) -> list[int]:
    """``no_rope_layers`` (1: the layer has RoPE), or when empty or missing the config's default: every layer
    but each ``no_rope_layer_interval``-th (Llama4TextConfig.__post_init__: ``int((i + 1) % interval != 0)``)."""
    listed = r.config.get("no_rope_layers")
    if listed:
        if not isinstance(listed, list) or len(listed) != layers or not all(v in (0, 1) for v in listed):
            raise PlanError("config.no_rope_layers", listed, f"a list of {layers} zeros and ones")
        return [int(v) for v in listed]
    interval = r.get_int("no_rope_layer_interval", default=4)
    if interval < 1:
        raise PlanError("config.no_rope_layer_interval", interval, "a positive integer")
    return [int((i + 1) % interval != 0) for i in range(layers)]


def _gpt2_model(r: _Reader, label: str) -> ModelSpec:
    """GPT-2 (modeling_gpt2.py): LayerNorm, learned positions, a plain GELU MLP, biases everywhere."""
    d = r.get_int("n_embd", "hidden_size")
    heads = r.get_int("n_head", "num_attention_heads")
    inner = r.get_int("n_inner", default=4 * d)
    positions = r.get_int("n_positions", "max_position_embeddings", default=1024)
    return ModelSpec(
        name=label,
        family="gpt2",
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=r.get_int("n_layer", "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=_divide(d, heads, "config.n_head"),
        intermediate_size=inner,
        gated_mlp=False,
        tie_embeddings=r.get_bool("tie_word_embeddings", True),
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        norm="layernorm",
        norms_per_layer=2,
        learned_positions=positions,
        max_position_embeddings=positions,
        fused_qkv=True,
        activation=r.get_str("activation_function", "gelu_new"),
        dropout=r.get_prob("resid_pdrop", 0.1),
        attention_dropout=r.get_prob("attn_pdrop", 0.1),
    )


def _starcoder2_model(r: _Reader, label: str) -> ModelSpec:
    """StarCoder2 (transformers 5.25.0 models/starcoder2/modeling_starcoder2.py): q/k/v/o and the plain MLP's
    ``c_fc`` / ``c_proj`` with a bias each when ``use_bias`` (default true), nn.LayerNorm (weight and bias)
    as ``input_layernorm``, ``post_attention_layernorm`` and the final ``norm``, rotary positions, an
    ``lm_head`` without bias tied unless ``tie_word_embeddings`` is false (Starcoder2Config's default true),
    and ``sliding_window`` on every layer when set (Starcoder2Attention passes config.sliding_window to
    each layer's attention; null: full attention)."""
    d = r.get_int("hidden_size")
    heads = r.get_int("num_attention_heads")
    head_dim = _head_dim(r, d, heads)
    layers = r.get_int("num_hidden_layers")
    bias = r.get_bool("use_bias", True)
    window = r.optional_int("sliding_window")
    return ModelSpec(
        name=label,
        family="starcoder2",
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=r.get_int("num_key_value_heads", default=heads),
        head_dim=head_dim,
        intermediate_size=r.get_int("intermediate_size"),
        gated_mlp=False,
        tie_embeddings=r.get_bool("tie_word_embeddings", True),
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        norm="layernorm",
        norms_per_layer=2,
        sliding_window=window,
        sliding_window_layers=layers if window else 0,
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096),
        activation=r.get_str("hidden_act", "gelu_pytorch_tanh"),
        dropout=r.get_prob("residual_dropout", 0.0),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
    )


_PARALLEL_FAMILIES: Final = ("gpt_neox", "phi", "falcon")


@dataclass(frozen=True)
class _Parallel:
    """What tells GPT-NeoX, Phi and Falcon blocks apart (see _parallel_block)."""

    kv_heads: int
    parallel: bool  # attention and MLP read the block input (ModelSpec.parallel_residual)
    norms: int  # LayerNorms a block: 1 shared by both branches, 2 one each
    bias: bool  # every projection's bias
    fused_qkv: bool
    head_bias: bool = False
    tie: bool = False


def _parallel_block(r: _Reader, model_type: str, heads: int) -> _Parallel:
    """The block of each family, as transformers builds it.

    - GPT-NeoX (models/gpt_neox/modeling_gpt_neox.py, GPTNeoXLayer): ``query_key_value`` fused,
      ``input_layernorm`` and ``post_attention_layernorm``, ``use_parallel_residual`` (default true)
      makes the MLP read ``post_attention_layernorm(x)`` of the block input; biases unless
      ``attention_bias`` is false; an untied ``embed_out`` without bias.
    - Phi (models/phi/modeling_phi.py at 007750f3, PhiDecoderLayer.forward): one ``input_layernorm``
      read by attention and MLP, separate q/k/v and dense with biases, ``lm_head`` with a bias.
    - Falcon (models/falcon/modeling_falcon.py at 00dcc6dd, FalconDecoderLayer): ``query_key_value``
      fused, MQA when ``multi_query`` (one KV head), ``num_kv_heads`` under ``new_decoder_architecture``
      (``num_ln_in_parallel_attn`` norms, 2 unless set: ``ln_attn`` and ``ln_mlp``, parallel); otherwise one
      ``input_layernorm`` and with
      ``parallel_attn`` the MLP reads its output; ``bias`` (false for Falcon-7B); embeddings tied by
      PretrainedConfig's default.
    """
    if model_type == "gpt_neox":
        parallel = r.get_bool("use_parallel_residual", True)
        bias = r.get_bool("attention_bias", True)
        return _Parallel(heads, parallel, 2, bias, True, tie=r.get_bool("tie_word_embeddings", False))
    if model_type == "phi":
        if r.get_bool("qk_layernorm", False):
            raise PlanError("config.qk_layernorm", True, "false (Phi's per-head q/k LayerNorms are not modelled)")
        kv = r.get_int("num_key_value_heads", default=heads)
        return _Parallel(kv, True, 1, True, False, head_bias=True, tie=r.get_bool("tie_word_embeddings", False))
    if r.get_bool("alibi", False):
        raise PlanError("config.alibi", True, "false (Falcon with ALiBi is not modelled)")
    tie = r.get_bool("tie_word_embeddings", True)
    bias = r.get_bool("bias", False)
    if r.get_bool("new_decoder_architecture", False):
        norms = r.get_int("num_ln_in_parallel_attn", default=2)  # FalconDecoderLayer: None means 2
        if norms not in (1, 2):
            raise PlanError("config.num_ln_in_parallel_attn", norms, "1 or 2")
        return _Parallel(r.get_int("num_kv_heads", default=heads), True, norms, bias, True, tie=tie)
    kv = 1 if r.get_bool("multi_query", True) else heads
    parallel = r.get_bool("parallel_attn", True)
    return _Parallel(kv, parallel, 1 if parallel else 2, bias, True, tie=tie)


def _parallel_model(r: _Reader, model_type: str, label: str) -> ModelSpec:
    """GPT-NeoX (StableLM-alpha, Pythia), Phi-1.5 / Phi-2 and Falcon: LayerNorm, rotary positions
    (on a fraction of each head: it keeps no tensor of its own, see docs/REAL_GPU_MEMORY.md), a
    plain GELU MLP and, mostly, a parallel block (ModelSpec.parallel_residual)."""
    d = r.get_int("hidden_size", "n_embd")
    heads = r.get_int("num_attention_heads", "n_head")
    block = _parallel_block(r, model_type, heads)
    falcon = model_type == "falcon"
    inner = r.get_int("ffn_hidden_size", default=4 * d) if falcon else r.get_int("intermediate_size")
    dropout = {"gpt_neox": "hidden_dropout", "phi": "resid_pdrop", "falcon": "hidden_dropout"}[model_type]
    return ModelSpec(
        name=label,
        family=model_type,
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=r.get_int("num_hidden_layers", "n_layer"),
        num_heads=heads,
        num_kv_heads=block.kv_heads,
        head_dim=_divide(d, heads, "config.num_attention_heads"),
        intermediate_size=inner,
        gated_mlp=False,
        tie_embeddings=block.tie,
        qkv_bias=block.bias,
        o_bias=block.bias,
        mlp_bias=block.bias,
        norm="layernorm",
        norms_per_layer=block.norms,
        max_position_embeddings=r.get_int("max_position_embeddings", default=2048),
        fused_qkv=block.fused_qkv,
        activation=r.get_str("activation", "gelu") if falcon else r.get_str("hidden_act", "gelu"),
        dropout=r.get_prob(dropout, 0.0),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
        parallel_residual=block.parallel,
        head_bias=block.head_bias,
    )


# Families whose config class ties the head to the embedding unless told otherwise (Ernie4_5Config and
# Ernie4_5_MoeConfig: tie_word_embeddings true, transformers 5.25.0).
_TIED_BY_DEFAULT: Final = ("gemma", "gemma2", "gemma3_text", "ernie4_5", "ernie4_5_moe")


def _gated_model(r: _Reader, model_type: str, label: str) -> ModelSpec:
    """Llama and the families built like it: RMSNorm, rotary positions, a gated MLP; each
    family's differences (biases, norms, windows, experts) decided by the helpers below."""
    d = r.get_int("hidden_size")
    heads = r.get_int("num_attention_heads")
    kv_heads = r.get_int("num_key_value_heads", default=heads)
    # SeedOssConfig.head_dim and Ernie4_5Config.head_dim default to 128 (transformers 5.25.0 configuration_*.py)
    head_dim = _head_dim(r, d, heads, 128 if model_type in ("seed_oss", "ernie4_5") else None)
    layers = r.get_int("num_hidden_layers")
    window, window_layers = _sliding_window(r, model_type, layers)
    biases = _biases(r, model_type)
    mlp = _mlp(r, model_type)
    norms = _norms(r, model_type)
    if norms.qk == "projection" and heads * head_dim != d:  # OlmoeAttention.q_norm is RMSNorm(hidden_size)
        raise PlanError("config.head_dim", head_dim, f"hidden_size / num_attention_heads ({d} / {heads})")
    fused = model_type == "phi3"  # Phi3Attention.qkv_proj, Phi3MLP.gate_up_proj
    return ModelSpec(
        name=label,
        family=model_type,
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=mlp.intermediate,
        gated_mlp=True,
        tie_embeddings=r.get_bool("tie_word_embeddings", model_type in _TIED_BY_DEFAULT),
        qkv_bias=biases.qkv,
        o_bias=biases.o,
        mlp_bias=biases.mlp,
        norm=norms.kind,
        norms_per_layer=norms.per_layer,
        head_bias=biases.head,
        num_experts=mlp.experts,
        experts_per_token=mlp.per_token,
        sliding_window=window,
        sliding_window_layers=window_layers,
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096),
        fused_qkv=fused,
        fused_gate_up=fused,
        activation=r.get_str("hidden_activation", r.get_str("hidden_act", "silu")),
        dropout=r.get_prob("resid_pdrop", 0.0),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
        attn_softcap=r.get_float("attn_logit_softcapping", 0.0),
        final_softcap=r.get_float("final_logit_softcapping", 0.0),
        qk_norm=norms.qk,
        post_norm=norms.post,
        shared_expert_size=mlp.shared_expert,
        shared_expert_gate=mlp.shared_gate,
        first_k_dense_replace=mlp.dense_layers,
        dense_intermediate_size=mlp.dense_intermediate,
        router_bias=biases.router,
        attention_sinks=model_type == "gpt_oss",  # GptOssAttention.sinks: a learned logit per head
    )


def _sliding_window(r: _Reader, model_type: str, layers: int) -> tuple[int | None, int]:
    """The attention window and how many layers use it ((None, 0): every layer attends fully)."""
    if model_type == "olmo3":
        return _layer_type_window(r, layers, default_window=4096)
    if model_type == "exaone4":
        return _exaone_window(r, layers)
    window = r.optional_int("sliding_window")
    if window is None:
        if model_type == "qwen2":
            r.get_bool("use_sliding_window", False)  # read all the same: a wrong value is refused
        return None, 0
    window_layers = 0
    if model_type == "qwen2":
        if r.get_bool("use_sliding_window", False):
            window_layers = max(0, layers - r.get_int("max_window_layers", default=layers))
    elif model_type == "gemma2":
        window_layers = layers // 2  # alternating local and global layers
    elif model_type == "gemma3_text":
        window_layers = layers - layers // 6  # five local layers to one global
    elif model_type in ("mistral", "mixtral"):
        window_layers = layers
    elif model_type in ("phi3", "phimoe"):  # PhimoeAttention passes config.sliding_window to every layer
        context = r.get_int("max_position_embeddings", default=4096)
        window_layers = layers if window < context else 0
    elif model_type == "gpt_oss":
        # Sliding-window layers alternate with full ones, as layer_types lists them.
        kinds = r.config.get("layer_types")
        if isinstance(kinds, list):
            window_layers = min(layers, sum(1 for kind in kinds if kind == "sliding_attention"))
        else:
            window_layers = layers // 2
    return (window, window_layers) if window_layers else (None, 0)


_LAYER_TYPES: Final = ("sliding_attention", "full_attention")


def _layer_type_window(r: _Reader, layers: int, default_window: int) -> tuple[int | None, int]:
    """A window on the layers ``layer_types`` marks ``sliding_attention``. OLMo 3 (transformers 5.25.0
    models/olmo3/configuration_olmo3.py): without layer_types every fourth layer is full, the rest sliding;
    ``sliding_window`` defaults to 4,096 and null leaves every layer full (Olmo3Attention.sliding_window)."""
    window = r.optional_int("sliding_window") if "sliding_window" in r.config else default_window
    kinds = r.config.get("layer_types")
    if kinds is None:
        sliding = layers - layers // 4  # every fourth full: counted, not listed (a hostile config's 10¹² layers)
    elif not isinstance(kinds, list) or len(kinds) != layers or any(k not in _LAYER_TYPES for k in kinds):
        shown = (kinds if len(kinds) <= 8 else f"{len(kinds)} entries") if isinstance(kinds, list) else kinds
        raise PlanError("config.layer_types", shown, f"{layers} entries, each sliding_attention or full_attention")
    else:
        sliding = kinds.count("sliding_attention")
    return (window, sliding) if window and sliding else (None, 0)


def _exaone_window(r: _Reader, layers: int) -> tuple[int | None, int]:
    """EXAONE 4.0 (transformers 5.25.0 models/exaone4/configuration_exaone4.py and modeling_exaone4.py): the
    layers ``layer_types`` marks sliding attend within ``sliding_window`` (default 4,096; null: every layer
    full); without layer_types, ``sliding_window_pattern`` decides: an integer p makes every p-th layer full
    (default 4), a string such as "LLLG" names each layer of the cycle, L local and G global (the config's
    own documentation: "LLLG" is the same as 4)."""
    if "layer_types" in r.config and r.config["layer_types"] is not None:
        return _layer_type_window(r, layers, default_window=4096)
    window = r.optional_int("sliding_window") if "sliding_window" in r.config else 4096
    if not window:
        return None, 0
    pattern = r.config.get("sliding_window_pattern", 4)
    if _whole_number(pattern) and int(pattern) > 0:
        period = int(pattern)
        return (window, layers - layers // period) if period > 1 else (None, 0)
    if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"} and len(pattern) <= 64:
        cycles, rest = divmod(layers, len(pattern))
        sliding = cycles * pattern.count("L") + pattern[:rest].count("L")
        return (window, sliding) if sliding else (None, 0)
    allowed = "a positive integer or a string of L (local) and G (global), at most 64"
    raise PlanError("config.sliding_window_pattern", pattern, allowed)


# Families whose MLPs (or experts) have no bias whatever the config says, q/k/v/o biased by attention_bias
# (transformers 5.25.0: OlmoeMLP / OlmoeExperts, Olmo3MLP, HunYuanDenseV1MLP, GraniteMoeExperts: bias=False or
# weights only; their configs have no mlp_bias).
_MLP_WITHOUT_BIAS: Final = ("olmoe", "olmo3", "hunyuan_v1_dense", "granitemoe")


@dataclass(frozen=True)
class _Biases:
    qkv: bool
    o: bool
    mlp: bool
    router: bool = False
    head: bool = False  # the output head's bias (PhiMoE's lm_head_bias)


def _biases(r: _Reader, model_type: str) -> _Biases:
    """Which projections carry a bias (each family's modeling_<family>.py)."""
    # gpt-oss's attention has biases unless told otherwise; every other family's only when told.
    attention = r.get_bool("attention_bias", model_type == "gpt_oss")
    if model_type == "gpt_oss":
        # GptOssAttention: q, k, v and o; its experts (gate_up_proj_bias, down_proj_bias)
        # and its router (GptOssTopKRouter.bias).
        return _Biases(qkv=attention, o=attention, mlp=True, router=True)
    if model_type == "glm4_moe":
        # Glm4MoeAttention: q/k/v with attention_bias, o_proj without; Glm4MoeTopkRouter's
        # e_score_correction_bias, one per expert (a buffer transformers does not count as a parameter,
        # stored in the checkpoints and counted here as DeepSeek-V3's is).
        return _Biases(qkv=attention, o=False, mlp=False, router=True)
    if model_type == "phimoe":
        # PhimoeAttention: q/k/v/o with attention_bias; PhimoeForCausalLM.lm_head with lm_head_bias; experts and
        # router (PhimoeTopKRouter, an nn.Linear without bias) unbiased (transformers 5.25.0 modeling_phimoe.py).
        return _Biases(qkv=attention, o=attention, mlp=False, head=r.get_bool("lm_head_bias", False))
    if model_type == "ernie4_5":  # Ernie4_5Attention and Ernie4_5MLP: every linear's bias is use_bias
        bias = r.get_bool("use_bias", False)
        return _Biases(qkv=bias, o=bias, mlp=bias)
    if model_type == "ernie4_5_moe":
        # Ernie4_5_MoeStatics.e_score_correction_bias, one per expert (a parameter transformers counts).
        if r.get_bool("use_bias", False):
            why = "the biases of ERNIE-4.5-MoE's dense and shared MLPs and its head are not modelled beside experts"
            raise PlanError("config.use_bias", True, "false", why)
        return _Biases(qkv=False, o=False, mlp=False, router=True)
    if model_type == "exaone4":  # Exaone4Attention and Exaone4MLP: bias=False on every linear, whatever the config
        return _Biases(qkv=False, o=False, mlp=False)
    if model_type in _MLP_WITHOUT_BIAS:  # mlp_bias is no key of theirs: a stray one must not add expert biases
        return _Biases(qkv=attention, o=attention, mlp=False)
    mlp = r.get_bool("mlp_bias", False)
    if model_type == "seed_oss":
        # SeedOssAttention (transformers 5.25.0 models/seed_oss/modeling_seed_oss.py): q/k/v with
        # attention_bias (SeedOssConfig default true), o_proj with attention_out_bias (default false).
        qkv = r.get_bool("attention_bias", True)
        return _Biases(qkv=qkv, o=r.get_bool("attention_out_bias", False), mlp=mlp)
    if model_type == "qwen2":
        return _Biases(qkv=True, o=False, mlp=mlp)  # Qwen2Attention: bias on q/k/v only
    if model_type == "qwen2_moe":
        # Qwen2MoeConfig.qkv_bias defaults to true; no bias on o.
        return _Biases(qkv=r.get_bool("qkv_bias", True), o=False, mlp=mlp)
    return _Biases(qkv=attention, o=attention, mlp=mlp)


@dataclass(frozen=True)
class _Mlp:
    intermediate: int  # one expert's intermediate size
    experts: int = 1
    per_token: int = 1
    shared_expert: int = 0  # Qwen2-MoE's always-on expert's intermediate size
    shared_gate: bool = True  # the shared expert's sigmoid gate (Qwen2-MoE); GLM-4.5's has none
    dense_layers: int = 0  # GLM-4.5's dense first layers (first_k_dense_replace)
    dense_intermediate: int = 0  # their MLP's intermediate size


def _glm4_moe_mlp(r: _Reader) -> _Mlp:
    """GLM-4.5 / 4.5-Air / 4.6 (transformers 5.25.0 models/glm4_moe/modeling_glm4_moe.py): Glm4MoeDecoderLayer
    builds Glm4MoeMLP(intermediate_size) for layer_idx < first_k_dense_replace and Glm4MoeMoE after it:
    n_routed_experts experts of moe_intermediate_size (Glm4MoeExperts), a router without a bias weight, and
    ``shared_experts`` = one Glm4MoeMLP of moe_intermediate_size × n_shared_experts without a gate. n_group /
    topk_group routing and routed_scaling_factor hold no tensor. The multi-token-prediction layer
    (num_nextn_predict_layers) is left out, as transformers and vLLM without speculative decoding leave it."""
    moe = r.get_int("moe_intermediate_size")
    layers = r.get_int("num_hidden_layers")
    dense = r.get_int("first_k_dense_replace", default=1)
    if dense >= layers:
        raise PlanError("config.first_k_dense_replace", dense, f"below num_hidden_layers ({layers})")
    shared = r.get_int("n_shared_experts", default=1) * moe
    return _Mlp(
        moe,
        r.get_int("n_routed_experts", default=128),  # Glm4MoeConfig's defaults
        r.get_int("num_experts_per_tok", default=8),
        shared,
        shared_gate=False,
        dense_layers=dense,
        dense_intermediate=r.get_int("intermediate_size") if dense else 0,
    )


def _ernie_moe_mlp(r: _Reader) -> _Mlp:
    """ERNIE-4.5-MoE (transformers 5.25.0 models/ernie4_5_moe/modeling_ernie4_5_moe.py): Ernie4_5_MoeDecoderLayer
    builds the sparse block where ``(layer_idx + 1) % moe_layer_interval == 0`` and moe_layer_start_index <=
    layer_idx <= moe_layer_end_index (-1: the last layer), a dense Ernie4_5_MoeMLP(intermediate_size) elsewhere;
    the sparse block has moe_num_experts experts of moe_intermediate_size (moe_k a token), a router without
    a bias weight and ``shared_experts``, one MLP of moe_intermediate_size × moe_num_shared_experts without a
    gate. The planner's MoE is dense first layers then experts on every layer: other layouts are refused.
    The multi-token-prediction layers are left out, as transformers (``_keys_to_ignore_on_load_unexpected``)
    leaves them."""
    layers = r.get_int("num_hidden_layers")
    if r.get_int("moe_layer_interval", default=1) != 1:
        raise PlanError("config.moe_layer_interval", r.config.get("moe_layer_interval"), "1 (experts on every layer)")
    end = r.get_int("moe_layer_end_index", default=-1)
    if end not in (-1, layers - 1):
        raise PlanError("config.moe_layer_end_index", end, f"-1 or {layers - 1} (experts through the last layer)")
    start = r.get_int("moe_layer_start_index", default=1)
    if start >= layers:
        raise PlanError("config.moe_layer_start_index", start, f"below num_hidden_layers ({layers})")
    moe = r.get_int("moe_intermediate_size", default=1536)  # Ernie4_5_MoeConfig's defaults
    return _Mlp(
        moe,
        r.get_int("moe_num_experts", default=64),
        r.get_int("moe_k", default=6),
        r.get_int("moe_num_shared_experts", default=2) * moe,
        shared_gate=False,
        dense_layers=start,
        dense_intermediate=r.get_int("intermediate_size") if start else 0,
    )


def _mlp(r: _Reader, model_type: str) -> _Mlp:
    """The MLP of a block: dense, or mixture-of-experts with its routing."""
    if model_type == "glm4_moe":
        return _glm4_moe_mlp(r)
    if model_type == "ernie4_5_moe":
        return _ernie_moe_mlp(r)
    intermediate = r.get_int("intermediate_size")
    if model_type == "olmoe":  # OlmoeSparseMoeBlock: num_experts of intermediate_size, no shared expert
        return _Mlp(intermediate, r.get_int("num_experts", default=64), r.get_int("num_experts_per_tok", default=8))
    # Mixtral, PhiMoE (PhimoeExperts) and Granite MoE (GraniteMoeExperts: gate_up_proj and down_proj of every
    # expert, GraniteMoeTopKRouter without bias; transformers 5.25.0 modeling_granitemoe.py): top-2 by default.
    if model_type in ("mixtral", "gpt_oss", "phimoe", "granitemoe"):
        experts = r.get_int("num_local_experts")
        per_token = r.get_int("num_experts_per_tok", default=4 if model_type == "gpt_oss" else 2)
        return _Mlp(intermediate, experts, per_token)
    if model_type not in ("qwen2_moe", "qwen3_moe"):
        return _Mlp(intermediate)
    # Every layer sparse (decoder_sparse_step 1, no mlp_only_layers), as the released
    # Qwen1.5-MoE / Qwen2-MoE / Qwen3-MoE checkpoints are; others are refused.
    if r.get_int("decoder_sparse_step", default=1) != 1:
        raise PlanError("config.decoder_sparse_step", r.config.get("decoder_sparse_step"), "1 (every layer sparse)")
    if r.config.get("mlp_only_layers"):
        raise PlanError("config.mlp_only_layers", r.config.get("mlp_only_layers"), "an empty list")
    experts = r.get_int("num_experts")
    per_token = r.get_int("num_experts_per_tok")
    moe_intermediate = r.get_int("moe_intermediate_size")
    shared = r.get_int("shared_expert_intermediate_size", default=0) if model_type == "qwen2_moe" else 0
    return _Mlp(moe_intermediate, experts, per_token, shared)


@dataclass(frozen=True)
class _Norms:
    per_layer: int = 2  # RMSNorms of a block
    qk: str = ""  # core.model.QK_NORMS
    post: bool = False  # on the sub-block outputs only (OLMo-2)
    kind: str = "rmsnorm"  # core.model.NORMS


def _norms(r: _Reader, model_type: str) -> _Norms:
    """The norms of a block: how many, on q and k or not, before or after the sub-blocks."""
    if model_type == "phimoe":  # PhimoeDecoderLayer: nn.LayerNorm (weight and bias) input and post-attention
        return _Norms(kind="layernorm")
    if model_type == "glm4_moe":  # Glm4MoeAttention.q_norm = Glm4MoeRMSNorm(head_dim) when use_qk_norm
        return _Norms(qk="head" if r.get_bool("use_qk_norm", False) else "")
    if model_type == "olmoe":
        # OlmoeAttention.q_norm = OlmoeRMSNorm(hidden_size), k_norm over (hidden / heads) × kv heads: the
        # whole projection width, before the sub-block norms (input_layernorm, post_attention_layernorm).
        return _Norms(qk="projection")
    if model_type == "gemma2":
        return _Norms(per_layer=4)  # input, post-attention, pre- and post-feedforward RMSNorms
    if model_type == "gemma3_text":
        return _Norms(per_layer=4, qk="head")  # Gemma3Attention.q_norm / k_norm = Gemma3RMSNorm(head_dim)
    if model_type in ("qwen3", "qwen3_moe"):
        return _Norms(qk="head")  # Qwen3Attention.q_norm = Qwen3RMSNorm(head_dim): "unlike olmo, only on the head dim"
    if model_type == "exaone4":
        # Exaone4Attention.q_norm / k_norm = Exaone4RMSNorm(head_dim); Exaone4DecoderLayer:
        # post_attention_layernorm, post_feedforward_layernorm only (transformers 5.25.0 modeling_exaone4.py).
        return _Norms(qk="head", post=True)
    if model_type == "hunyuan_v1_dense":
        # HunYuanDenseV1Attention.query_layernorm / key_layernorm = HunYuanDenseV1RMSNorm(head_dim), built
        # whatever use_qk_norm says (transformers 5.25.0 modeling_hunyuan_v1_dense.py).
        if r.get_bool("use_cla", False):
            why = "Hunyuan's cross-layer attention (KV shared between layers) is not modelled"
            raise PlanError("config.use_cla", True, "false", why)
        return _Norms(qk="head")
    if model_type in ("olmo2", "olmo3"):
        # Olmo2Attention.q_norm = Olmo2RMSNorm(num_heads * head_dim); Olmo2DecoderLayer:
        # post_attention_layernorm, post_feedforward_layernorm only. Olmo3Attention / Olmo3DecoderLayer
        # (transformers 5.25.0 models/olmo3/modeling_olmo3.py) build the same tensors.
        return _Norms(qk="projection", post=True)
    return _Norms()


def _head_dim(r: _Reader, d: int, heads: int, default: int | None = None) -> int:
    """config.json's ``head_dim``, else the family's default or hidden_size / heads: the division only when the
    key is absent, since a given head_dim need not divide the width (GLM-4.5-Air: hidden 4,096, 96 heads of 128)."""
    given = r.optional_int("head_dim")
    if given is not None:
        return given
    return default if default is not None else _divide(d, heads, "config.num_attention_heads")


def _divide(a: int, b: int, where: str) -> int:
    if b <= 0 or a % b:
        raise PlanError(where, b, f"a positive divisor of {a}")
    return a // b


# Each hybrid family's MLP or mixture of experts as the attention-model fields of a ModelSpec say it
# (transformers 5.25.0 models/<type>/configuration_<type>.py and modeling_<type>.py): what the serving rules
# read of it — vLLM's profile run's working memory and fused-MoE workspace, which experts a decode step reads.
# The parameters are core.hybrid's exact count, given (params_override, active_params_override).
def _hybrid_mlp(r: _Reader, model_type: str, layers: tuple[str, ...]) -> dict[str, Any]:
    # Qwen3NextSparseMoeBlock (Qwen3.5-MoE's too): routed experts, a shared expert with a sigmoid gate
    if model_type in ("qwen3_next", "qwen3_5_moe_text"):
        return {
            "num_experts": r.get_int("num_experts"),
            "experts_per_token": r.get_int("num_experts_per_tok"),
            "intermediate_size": r.get_int("moe_intermediate_size"),
            "shared_expert_size": r.get_int("shared_expert_intermediate_size", default=0),
        }
    if model_type == "granitemoehybrid":  # GraniteMoeHybridDecoderLayer: experts when any, and the shared MLP
        if not r.get_int("num_local_experts", default=0):
            return {"intermediate_size": r.get_int("shared_intermediate_size")}
        return {
            "num_experts": r.get_int("num_local_experts"),
            "experts_per_token": r.get_int("num_experts_per_tok"),
            "intermediate_size": r.get_int("intermediate_size"),
            "shared_expert_size": r.get_int("shared_intermediate_size"),
            "shared_expert_gate": False,
        }
    if model_type == "nemotron_h":  # NemotronHMLP / NemotronHMoE: up and down, relu2, no gate
        # Experts only where the pattern has MoE layers: a dense config (Nemotron Nano 2) still lists
        # NemotronHConfig's default n_routed_experts (8), which configuration_nemotron_h.py keeps.
        # Its activation: mlp_hidden_act (transformers 5.25.0 NemotronHConfig, default "relu2": ReLUSquaredActivation).
        act = r.get_str("mlp_hidden_act", "relu2")
        if MOE not in layers:
            return {"intermediate_size": r.get_int("intermediate_size"), "gated_mlp": False, "activation": act}
        return {
            "num_experts": r.get_int("n_routed_experts"),
            "experts_per_token": r.get_int("num_experts_per_tok"),
            "intermediate_size": r.get_int("moe_intermediate_size"),
            "shared_expert_size": r.get_int("moe_shared_expert_intermediate_size", default=0),
            "shared_expert_gate": False,
            "gated_mlp": False,
            "activation": act,
        }
    return {"intermediate_size": r.get_int("intermediate_size")}  # Bamba, Falcon-H1: a gated MLP


def _mamba_chunk(r: _Reader, model_type: str) -> int:
    """The Mamba-2 scan's chunk (transformers 5.25.0: NemotronHConfig.chunk_size, default 128, which also takes a
    ``mamba_chunk_size`` key; the other families' ``mamba_chunk_size``, default 256)."""
    if model_type == "nemotron_h":
        key = "mamba_chunk_size" if "mamba_chunk_size" in r.config else "chunk_size"
        return r.get_int(key, default=128)
    return r.get_int("mamba_chunk_size", default=256)


def _hybrid_model(config: Mapping[str, Any], model_type: str, label: str) -> ModelSpec:
    """A hybrid recurrent model (core.hybrid, whose count is transformers 5.25.0's own on the meta device):
    the attention layers' widths, the recurrent mixer's, and the exact parameters."""
    hybrid = hybrid_from_hf_config(config)
    r = _Reader(config, "config")
    mixer = hybrid.mixer
    return ModelSpec(
        name=label,
        family=model_type,
        vocab_size=hybrid.vocab_size,
        hidden_size=hybrid.hidden_size,
        num_layers=len(hybrid.layers),
        num_heads=hybrid.num_heads,
        num_kv_heads=hybrid.num_kv_heads,
        head_dim=hybrid.head_dim,
        tie_embeddings=r.get_bool("tie_word_embeddings", model_type == "granitemoehybrid"),
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096),
        params_override=hybrid.params,
        active_params_override=hybrid.active_params,
        recurrent_mixer=mixer.kind,
        attention_layers=hybrid.attention_layers,
        recurrent_layers=hybrid.recurrent_layers,
        recurrent_heads=mixer.heads,
        recurrent_head_dim=mixer.head_dim,
        recurrent_state=mixer.state,
        recurrent_groups=mixer.groups,
        recurrent_conv_kernel=mixer.conv_kernel,
        recurrent_inner=mixer.inner,
        recurrent_state_float32=hybrid.ssm_state_float32,
        recurrent_chunk=_mamba_chunk(r, model_type) if mixer.kind == "mamba2" else 0,
        layer_pattern=hybrid.pattern,
        **_hybrid_mlp(r, model_type, hybrid.layers),
    )

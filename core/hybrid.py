"""Hybrid recurrent models: Mamba-2 and Gated DeltaNet layers beside softmax attention.

A hybrid keeps, besides the KV cache of its attention layers, a recurrent state per sequence in each
recurrent layer: the causal convolution's last ``kernel - 1`` inputs and the state-space (or delta-rule)
matrix, fixed in size whatever the context. This module reads the five families whose rules are exact
here (Granite 4.0-H, Bamba, Nemotron-H, Falcon-H1, Qwen3-Next, and the language model of Qwen3.5 / Qwen3.6,
dense and MoE, from its ``text_config``) from their ``config.json`` — the layer
pattern, the recurrent mixer's widths, the MLP or mixture of experts — into a :class:`HybridSpec`:
parameters as transformers 5.25.0 builds the model (``models/<type>/modeling_<type>.py``; every count is
checked against the library's own count of the model built on the meta device, tests/data/hybrid/
meta_counts.json, which tools/measure/hybrid_meta_counts.py writes) and the state per sequence as vLLM
allocates it (:meth:`HybridSpec.state_elements`). core.hfconfig turns a spec into a ModelSpec (its recurrent
fields, ``ModelSpec.hybrid``), which core.plan takes for serving on vLLM and llama.cpp only;
core.serving.vllm_hybrid and core.serving.llamacpp_hybrid size it.

Read only; no code in the config is run. Every failure is a :class:`PlanError` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.errors import PlanError

# The families read here (transformers 5.25.0 model types) and the recurrent mixer each one uses.
MAMBA2: Final = "mamba2"
GATED_DELTANET: Final = "gated_deltanet"
HYBRID_MODEL_TYPES: Final[dict[str, str]] = {
    "granitemoehybrid": MAMBA2,  # GraniteMoeHybridMambaLayer
    "bamba": MAMBA2,  # BambaMixer
    "nemotron_h": MAMBA2,  # NemotronHMamba2Mixer
    "falcon_h1": MAMBA2,  # FalconH1Mixer, beside attention in every layer
    "qwen3_next": GATED_DELTANET,  # Qwen3NextGatedDeltaNet
    # Qwen3.5 / Qwen3.6: the text_config of a qwen3_5 / qwen3_5_moe image-text checkpoint (core.hfconfig reads
    # the wrapper and core.vision its tower). Qwen3_5GatedDeltaNet, Qwen3_5MoeGatedDeltaNet.
    "qwen3_5_text": GATED_DELTANET,
    "qwen3_5_moe_text": GATED_DELTANET,
}
# The decoders read only from inside an image-text wrapper's text_config: vLLM 0.17 - 0.19 register their
# checkpoints as Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration only
# (vllm/model_executor/models/registry.py of the 0.17.0, 0.18.0 and 0.19.0 wheels: no Qwen3_5ForCausalLM).
WRAPPED_HYBRID_TYPES: Final = frozenset(("qwen3_5_text", "qwen3_5_moe_text"))
MIXER_NAMES: Final[dict[str, str]] = {MAMBA2: "Mamba-2", GATED_DELTANET: "Gated DeltaNet"}

# Layer kinds of a hybrid's stack. transformers 5.25.0 names them in ``layer_types`` /
# ``layers_block_type``; configuration_utils._LEGACY_LAYER_TYPE_REMAP maps the older "mamba" and
# "attention", NemotronHConfig._pattern_to_list the ``hybrid_override_pattern`` characters.
ATTENTION: Final = "full_attention"
RECURRENT: Final = "linear_attention"
MLP: Final = "mlp"
MOE: Final = "moe"
# Falcon-H1's layers run a Mamba-2 mixer and attention side by side (FalconH1DecoderLayer): each holds a KV
# cache and a recurrent state, and vLLM registers both for it.
PARALLEL: Final = "parallel"
_LAYER_NAMES: Final[dict[str, str]] = {
    "full_attention": ATTENTION,
    "attention": ATTENTION,
    "linear_attention": RECURRENT,
    "mamba": RECURRENT,
    "mlp": MLP,
    "moe": MOE,
}
# huggingface/transformers 5.25.0 models/nemotron_h/configuration_nemotron_h.py ``_pattern_to_list``.
_PATTERN_CHARS: Final[dict[str, str]] = {"M": RECURRENT, "*": ATTENTION, "-": MLP, "E": MOE}
# One character a layer in ModelSpec.layer_pattern: Nemotron-H's hybrid_override_pattern characters (above) for
# every family, and "P" for Falcon-H1's layer that runs both mixers side by side (no config spells that one: ours).
LAYER_CHARS: Final[dict[str, str]] = {kind: char for char, kind in _PATTERN_CHARS.items()} | {PARALLEL: "P"}
PATTERN_KINDS: Final[dict[str, str]] = {char: kind for kind, char in LAYER_CHARS.items()}
# The longest stack a config may list: a bound on hostile files (Nemotron 3 Super lists 88 layers; no released
# hybrid comes near it), not a library limit.
MAX_HYBRID_LAYERS: Final = 1024


@dataclass(frozen=True)
class RecurrentMixer:
    """One recurrent layer's widths. Mamba-2: ``heads`` SSM heads of ``head_dim`` with a state of
    ``state`` per head and ``groups`` B / C groups; the convolution runs over the inner width and B, C.
    Gated DeltaNet: ``heads`` value heads of ``head_dim`` (value width) and ``key_heads`` of ``state``
    (key width); the convolution runs over q, k and v."""

    kind: str
    heads: int
    head_dim: int
    state: int
    groups: int  # Mamba-2's n_groups; Gated DeltaNet's key heads
    conv_kernel: int
    inner: int  # Mamba-2's intermediate width (heads · head_dim or expand · d); Gated DeltaNet: v heads · v dim

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise causal conv1d: Mamba-2's inner + 2 · groups · state (x, B, C);
        Gated DeltaNet's 2 · key heads · key dim + value heads · value dim (q, k, v)."""
        return self.inner + 2 * self.groups * self.state

    def conv_state(self, tensor_parallel: int = 1) -> int:
        """Elements of the convolution state per sequence on one rank: (kernel − 1) × conv channels,
        vllm-project/vllm 02d71083 vllm/model_executor/layers/mamba/mamba_utils.py
        ``mamba2_state_shape`` / ``gated_delta_net_state_shape`` (``conv_kernel - 1`` positions;
        Mamba-2 widens n_groups to the tensor-parallel size when it does not divide it,
        ``extra_groups_for_head_shards``)."""
        groups = self.groups
        if self.kind == MAMBA2 and groups % tensor_parallel:
            groups = tensor_parallel  # extra_groups_for_head_shards: ngroups + (tp - ngroups)
        return (self.conv_kernel - 1) * _divide(self.inner + 2 * groups * self.state, tensor_parallel)

    def temporal_state(self, tensor_parallel: int = 1) -> int:
        """Elements of the SSM / delta-rule state per sequence on one rank: Mamba-2's (heads / tp,
        head_dim, state); Gated DeltaNet's (value heads / tp, value dim, key dim) — the same file."""
        return _divide(self.heads, tensor_parallel) * self.head_dim * self.state


@dataclass(frozen=True)
class HybridSpec:
    """A hybrid model as its config describes it: the stack, the attention, the recurrent mixer, counts."""

    model_type: str
    layers: tuple[str, ...]  # one kind per layer, see ATTENTION / RECURRENT / MLP / MOE
    hidden_size: int
    vocab_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    mixer: RecurrentMixer
    params: int  # every parameter transformers 5.25.0 builds (meta-device count)
    active_params: int  # what one token passes through: the routed experts only
    ssm_state_float32: bool = False  # the checkpoint asks for a float32 SSM state (mamba_ssm_cache_dtype)

    @property
    def pattern(self) -> str:
        """The stack in module order, one LAYER_CHARS character a layer (ModelSpec.layer_pattern)."""
        return "".join(LAYER_CHARS[kind] for kind in self.layers)

    @property
    def attention_layers(self) -> int:
        return self.layers.count(ATTENTION) + self.layers.count(PARALLEL)

    @property
    def recurrent_layers(self) -> int:
        return self.layers.count(RECURRENT) + self.layers.count(PARALLEL)

    def state_elements(self, tensor_parallel: int = 1) -> tuple[int, int]:
        """(conv, temporal) elements of one sequence's recurrent state in one layer on one rank."""
        return self.mixer.conv_state(tensor_parallel), self.mixer.temporal_state(tensor_parallel)

    def state_bytes_per_layer(self, conv_bytes: float, temporal_bytes: float, tensor_parallel: int = 1) -> float:
        conv, temporal = self.state_elements(tensor_parallel)
        return conv * conv_bytes + temporal * temporal_bytes

    def state_bytes(self, conv_bytes: float, temporal_bytes: float, tensor_parallel: int = 1) -> float:
        """One sequence's recurrent state over every recurrent layer on one rank, whatever its context."""
        return self.recurrent_layers * self.state_bytes_per_layer(conv_bytes, temporal_bytes, tensor_parallel)


def is_hybrid(config: Mapping[str, Any]) -> bool:
    return isinstance(config.get("model_type"), str) and config["model_type"] in HYBRID_MODEL_TYPES


def hybrid_from_hf_config(config: Mapping[str, Any]) -> HybridSpec:
    """Read a hybrid family's config.json; raises PlanError naming the key for anything else."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in HYBRID_MODEL_TYPES:
        raise PlanError("config.model_type", model_type, "one of " + ", ".join(HYBRID_MODEL_TYPES))
    r = _Fields(config)
    if model_type == "nemotron_h":
        return _nemotron_h(r)
    if model_type == "qwen3_next":
        return _qwen3_next(r)
    if model_type in WRAPPED_HYBRID_TYPES:
        return _qwen3_5(r, model_type)
    if model_type == "falcon_h1":
        return _falcon_h1(r)
    return _granite_or_bamba(r, model_type)


@dataclass(frozen=True)
class _Fields:
    config: Mapping[str, Any]

    def int(self, key: str, default: int | None = None, low: int = 1) -> int:
        value = self.config.get(key, default)
        if value is None:
            raise PlanError(f"config.{key}", None, "an integer (the key is missing)")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 10**9:
            raise PlanError(f"config.{key}", value, f"an integer from {low} to 1,000,000,000")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise PlanError(f"config.{key}", value, "true or false")
        return value

    def kinds(self, key: str) -> tuple[str, ...]:
        value = self.config.get(key)
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_HYBRID_LAYERS:
            raise PlanError(f"config.{key}", value, f"a list of 1 to {MAX_HYBRID_LAYERS} layer types")
        out = []
        for item in value:
            if not isinstance(item, str) or item not in _LAYER_NAMES:
                raise PlanError(f"config.{key}", item, "one of " + ", ".join(_LAYER_NAMES))
            out.append(_LAYER_NAMES[item])
        return tuple(out)


def _divide(a: int, b: int) -> int:
    if a % b:
        raise PlanError("parallel.tensor_parallel", b, f"a divisor of {a} (vLLM's divide() asserts it)")
    return a // b


def _mamba2_params(
    d: int, m: RecurrentMixer, conv_bias: bool, proj_bias: bool, norm: bool = True, out_bias: bool | None = None
) -> int:
    """One Mamba-2 mixer as transformers 5.25.0 builds it (BambaMixer, GraniteMoeHybridMambaLayer,
    NemotronHMamba2Mixer): in_proj d → 2·inner + 2·groups·state + heads, the depthwise conv1d (kernel
    weights and a bias per channel), dt_bias, A_log and D per head, the gated RMSNorm over inner, out_proj."""
    in_width = m.inner + m.conv_dim + m.heads  # z, x·B·C (the conv's channels), dt
    conv = m.conv_dim * m.conv_kernel + (m.conv_dim if conv_bias else 0)
    out_bias = proj_bias if out_bias is None else out_bias  # Falcon-H1: out_proj's bias is projectors_bias
    proj = d * in_width + m.inner * d + (in_width if proj_bias else 0) + (d if out_bias else 0)
    return proj + conv + 3 * m.heads + (m.inner if norm else 0)


def _attention_params(d: int, heads: int, kv_heads: int, head_dim: int, bias: bool) -> int:
    q, kv = heads * head_dim, kv_heads * head_dim
    return 2 * d * q + 2 * d * kv + ((q + 2 * kv + d) if bias else 0)


def _embeddings(r: _Fields, d: int, vocab: int, default_tie: bool) -> int:
    return vocab * d * (1 if r.flag("tie_word_embeddings", default_tie) else 2)


def _mamba_mixer(r: _Fields, d: int, inner: int, keys: tuple[str, str, str, str, str]) -> RecurrentMixer:
    heads_key, head_dim_key, state_key, groups_key, kernel_key = keys
    heads, head_dim = r.int(heads_key), r.int(head_dim_key)
    if heads * head_dim != inner:
        raise PlanError(f"config.{head_dim_key}", head_dim, f"{inner} / {heads_key} (the mixer's inner width)")
    groups = r.int(groups_key)
    if heads % groups:
        raise PlanError(f"config.{groups_key}", groups, f"a divisor of {heads_key} ({heads})")
    return RecurrentMixer(MAMBA2, heads, head_dim, r.int(state_key), groups, r.int(kernel_key), inner)


def _granite_or_bamba(r: _Fields, model_type: str) -> HybridSpec:
    """Granite 4.0 (granitemoehybrid) and Bamba: every layer a Mamba-2 mixer or attention, then its MLP
    (Bamba: a gated MLP; Granite: the experts, when num_local_experts > 0, and the shared MLP), two RMSNorms.
    Both set the mixer's inner width to int(mamba_expand · hidden_size) (``self.intermediate_size``)."""
    d, vocab = r.int("hidden_size"), r.int("vocab_size")
    if model_type == "bamba":
        n = r.int("num_hidden_layers")
        attn = r.config.get("attn_layer_indices") or []
        if not isinstance(attn, list) or not all(isinstance(i, int) and 0 <= i < n for i in attn):
            raise PlanError("config.attn_layer_indices", attn, f"a list of layer indices below {n}")
        layers = tuple(ATTENTION if i in attn else RECURRENT for i in range(n))
    else:
        layers = r.kinds("layer_types") if "layer_types" in r.config else (RECURRENT,) * r.int("num_hidden_layers")
    if any(kind not in (ATTENTION, RECURRENT) for kind in layers):
        raise PlanError("config.layer_types", list(layers), "mamba / attention layers only")
    expand = r.config.get("mamba_expand", 2)
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand <= 64:
        raise PlanError("config.mamba_expand", expand, "a positive number up to 64")
    mixer = _mamba_mixer(
        r, d, int(expand * d), ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
    )
    heads, kv = r.int("num_attention_heads"), r.int("num_key_value_heads", r.int("num_attention_heads"))
    head_dim = _head_dim(d, heads)
    mamba = _mamba2_params(d, mixer, r.flag("mamba_conv_bias", True), r.flag("mamba_proj_bias", False))
    attention = _attention_params(d, heads, kv, head_dim, r.flag("attention_bias", False))
    mlp, idle = _granite_or_bamba_mlp(r, model_type, d)
    per_layer = mlp + 2 * d
    blocks = sum(per_layer + (attention if kind == ATTENTION else mamba) for kind in layers)
    total = _embeddings(r, d, vocab, model_type == "granitemoehybrid") + blocks + d
    return HybridSpec(model_type, layers, d, vocab, heads, kv, head_dim, mixer, total, total - idle * len(layers))


def _granite_or_bamba_mlp(r: _Fields, model_type: str, d: int) -> tuple[int, int]:
    """(one layer's MLP parameters, the idle experts' share of them for one token)."""
    if model_type == "bamba":  # BambaMLP: gate, up, down without bias (mlp_bias)
        i = r.int("intermediate_size")
        return 3 * d * i + ((2 * i + d) if r.flag("mlp_bias", False) else 0), 0
    # GraniteMoeHybridDecoderLayer: block_sparse_moe when num_local_experts > 0 (router d → E, experts'
    # gate_up (E, 2i, d) and down (E, d, i)), and always shared_mlp (input_linear d → 2s, output_linear s → d).
    shared = 3 * d * r.int("shared_intermediate_size")
    experts = r.int("num_local_experts", 0, low=0)
    if not experts:
        return shared, 0
    expert = 3 * d * r.int("intermediate_size")
    top = r.int("num_experts_per_tok")
    if top > experts:
        raise PlanError("config.num_experts_per_tok", top, f"at most num_local_experts ({experts})")
    return shared + experts * (expert + d), (experts - top) * expert


def _head_dim(d: int, heads: int) -> int:
    if d % heads:
        raise PlanError("config.num_attention_heads", heads, f"a divisor of hidden_size ({d})")
    return d // heads


def _nemotron_h(r: _Fields) -> HybridSpec:
    """Nemotron-H / Nemotron Nano 2 / Nemotron 3: one block per layer — a Mamba-2 mixer (M), attention (*),
    a plain MLP (-) or a mixture of experts (E) — behind one RMSNorm (NemotronHBlock); the mixer's inner
    width is mamba_num_heads · mamba_head_dim; attention has no biases (NemotronHAttention)."""
    d, vocab = r.int("hidden_size"), r.int("vocab_size")
    layers = _nemotron_layers(r)
    inner = r.int("mamba_num_heads") * r.int("mamba_head_dim")
    mixer = _mamba_mixer(
        r, d, inner, ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")
    )
    heads, kv = r.int("num_attention_heads"), r.int("num_key_value_heads", r.int("num_attention_heads"))
    head_dim = r.int("head_dim", _head_dim(d, heads))
    if r.config.get("moe_latent_size") is not None:
        raise PlanError("config.moe_latent_size", r.config["moe_latent_size"], "null (latent MoE is not modelled)")
    bias = r.flag("mlp_bias", False)
    i = r.int("intermediate_size")
    sizes = {
        RECURRENT: _mamba2_params(d, mixer, r.flag("use_conv_bias", True), r.flag("use_bias", False)),
        ATTENTION: _attention_params(d, heads, kv, head_dim, False),
        MLP: 2 * d * i + ((i + d) if bias else 0),  # NemotronHMLP: up, down (relu2, no gate)
    }
    idle = 0
    if MOE in layers:
        sizes[MOE], idle = _nemotron_moe(r, d, bias)
    blocks = sum(sizes[kind] + d for kind in layers)
    total = _embeddings(r, d, vocab, False) + blocks + d
    ssm32 = r.config.get("mamba_ssm_cache_dtype") == "float32"
    active = total - idle * layers.count(MOE)
    return HybridSpec("nemotron_h", layers, d, vocab, heads, kv, head_dim, mixer, total, active, ssm32)


def _nemotron_layers(r: _Fields) -> tuple[str, ...]:
    if isinstance(r.config.get("layers_block_type"), list):
        return r.kinds("layers_block_type")
    if isinstance(r.config.get("layer_types"), list):
        return r.kinds("layer_types")
    pattern = r.config.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not 1 <= len(pattern) <= MAX_HYBRID_LAYERS or set(pattern) - set(_PATTERN_CHARS):
        raise PlanError("config.hybrid_override_pattern", pattern, "a string of M, *, - and E, one per layer")
    return tuple(_PATTERN_CHARS[c] for c in pattern)


def _nemotron_moe(r: _Fields, d: int, bias: bool) -> tuple[int, int]:
    """NemotronHMoE: n_routed_experts experts of up (m × d) and down (d × m), relu2 without a gate; the router
    (gate.weight E × d; its e_score_correction_bias is a buffer, no parameter); shared experts, one MLP of
    moe_shared_expert_intermediate_size. Returns (the layer's parameters, the idle experts' for one token)."""
    experts, m = r.int("n_routed_experts"), r.int("moe_intermediate_size")
    top = r.int("num_experts_per_tok")
    if top > experts:
        raise PlanError("config.num_experts_per_tok", top, f"at most n_routed_experts ({experts})")
    expert = 2 * d * m
    shared = 2 * d * r.int("moe_shared_expert_intermediate_size") if r.int("n_shared_experts", 1, low=0) else 0
    del bias  # the experts are 3-D tensors without bias in 5.25.0 (NemotronHExperts)
    return experts * expert + experts * d + shared, (experts - top) * expert


def _qwen3_next(r: _Fields) -> HybridSpec:
    """Qwen3-Next: each layer Gated DeltaNet or gated attention (q_proj 2 · heads · head_dim, the output
    gate; per-head q / k RMSNorms), then a sparse MoE (router, experts' gate_up and down, a shared expert
    with its sigmoid gate), two RMSNorms (Qwen3NextDecoderLayer)."""
    if r.config.get("mlp_only_layers") or r.int("decoder_sparse_step", 1) != 1:
        raise PlanError("config.mlp_only_layers", r.config.get("mlp_only_layers"), "[] with decoder_sparse_step 1")
    mlp, idle = _qwen3_next_moe(r, r.int("hidden_size"))
    return _gated_deltanet_stack(r, "qwen3_next", mlp, idle, ssm32=False)


def _qwen3_5(r: _Fields, model_type: str) -> HybridSpec:
    """Qwen3.5 / Qwen3.6's language model (transformers 5.25.0 models/qwen3_5/modular_qwen3_5.py,
    models/qwen3_5_moe/modular_qwen3_5_moe.py): Qwen3-Next's stack with Qwen3_5GatedDeltaNet, whose
    in_proj_qkv (d → 2·hk·dk + hv·dv), in_proj_z (d → hv·dv), in_proj_b and in_proj_a (d → hv each) hold
    exactly Qwen3-Next's in_proj_qkvz and in_proj_ba split apart. The dense decoder's MLP is Qwen3NextMLP
    (gate, up, down without bias) on every layer; the MoE decoder's is Qwen3NextSparseMoeBlock on every layer
    (its config has no mlp_only_layers / decoder_sparse_step). ``mamba_ssm_dtype`` "float32" (the released
    configs') asks vLLM for a float32 delta-rule state (core.serving.vllm_hybrid)."""
    d = r.int("hidden_size")
    if model_type == "qwen3_5_moe_text":
        mlp, idle = _qwen3_next_moe(r, d)
    else:
        mlp, idle = 3 * d * r.int("intermediate_size"), 0
    ssm = r.config.get("mamba_ssm_dtype")
    if ssm is not None and ssm not in _SSM_DTYPES:
        raise PlanError("config.mamba_ssm_dtype", ssm, "one of " + ", ".join(_SSM_DTYPES))
    return _gated_deltanet_stack(r, model_type, mlp, idle, ssm32=ssm == "float32")


# vLLM's --mamba-ssm-cache-dtype choices (MambaDType, vllm/config/cache.py of the 0.17.0 and 0.19.0 wheels:
# "auto", "float32", "float16"), which Qwen3_5ForConditionalGenerationConfig copies from the checkpoint's
# mamba_ssm_dtype; any other value is refused rather than guessed.
_SSM_DTYPES: Final = ("auto", "float32", "float16")


def _qwen3_next_moe(r: _Fields, d: int) -> tuple[int, int]:
    """Qwen3NextSparseMoeBlock (Qwen3.5-MoE's too): the router (E × d), experts' gate_up and down, a shared
    expert with its sigmoid gate. Returns (the layer's parameters, the idle experts' for one token)."""
    experts, m, top = r.int("num_experts"), r.int("moe_intermediate_size"), r.int("num_experts_per_tok")
    if top > experts:
        raise PlanError("config.num_experts_per_tok", top, f"at most num_experts ({experts})")
    shared = r.int("shared_expert_intermediate_size", 0, low=0)
    moe = experts * d + experts * 3 * d * m + (3 * d * shared + d if shared else 0)
    return moe, (experts - top) * 3 * d * m


def _gated_deltanet_stack(r: _Fields, model_type: str, mlp: int, idle: int, *, ssm32: bool) -> HybridSpec:
    """Qwen3-Next's and Qwen3.5's stack: each layer Gated DeltaNet or gated attention, then ``mlp`` parameters
    (``idle`` of them not reached by one token), two RMSNorms; the embeddings, the final norm, the head."""
    d, vocab, n = r.int("hidden_size"), r.int("vocab_size"), r.int("num_hidden_layers")
    if "layer_types" in r.config:
        layers = r.kinds("layer_types")
    else:
        interval = r.int("full_attention_interval", 4)
        layers = tuple(RECURRENT if (i + 1) % interval else ATTENTION for i in range(n))
    if len(layers) != n or any(kind not in (ATTENTION, RECURRENT) for kind in layers):
        raise PlanError("config.layer_types", list(layers), f"{n} linear_attention / full_attention layers")
    hk, dk, hv, dv = (
        r.int(k)
        for k in ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim")
    )
    if hv % hk:
        raise PlanError("config.linear_num_value_heads", hv, f"a multiple of linear_num_key_heads ({hk})")
    mixer = RecurrentMixer(GATED_DELTANET, hv, dv, dk, hk, r.int("linear_conv_kernel_dim", 4), hv * dv)
    # Qwen3NextGatedDeltaNet: in_proj_qkvz d → 2·hk·dk + 2·hv·dv, in_proj_ba d → 2·hv, conv1d over q, k, v
    # without bias, dt_bias and A_log per value head, a gated RMSNorm of dv, out_proj hv·dv → d.
    delta = d * (2 * hk * dk + 2 * hv * dv) + d * 2 * hv + mixer.conv_dim * mixer.conv_kernel + 2 * hv + dv
    delta += hv * dv * d
    heads, kv, head_dim = r.int("num_attention_heads"), r.int("num_key_value_heads"), r.int("head_dim")
    if r.flag("attention_bias", False):
        raise PlanError("config.attention_bias", True, "false (the released checkpoints have none)")
    attention = d * 2 * heads * head_dim + 2 * d * kv * head_dim + heads * head_dim * d + 2 * head_dim
    blocks = sum(mlp + 2 * d + (attention if kind == ATTENTION else delta) for kind in layers)
    total = _embeddings(r, d, vocab, False) + blocks + d
    return HybridSpec(model_type, layers, d, vocab, heads, kv, head_dim, mixer, total, total - idle * n, ssm32)


def state_words(spec: HybridSpec) -> str:
    """``recurrent state (Mamba-2, 36 layers)``: the breakdown's label of the term."""
    return f"recurrent state ({MIXER_NAMES[spec.mixer.kind]}, {spec.recurrent_layers} layers)"


def _falcon_h1(r: _Fields) -> HybridSpec:
    """Falcon-H1: every layer a Mamba-2 mixer (inner mamba_d_ssm, else int(mamba_expand · d); in_proj bias
    mamba_proj_bias, out_proj bias projectors_bias, the gated RMSNorm only with mamba_rms_norm) beside
    attention, then a gated MLP, two RMSNorms (FalconH1DecoderLayer). The muP multipliers scale activations
    (FalconH1Mixer's mup_vector is a buffer, the rest scalars): no parameter changes shape."""
    d, vocab, n = r.int("hidden_size"), r.int("vocab_size"), r.int("num_hidden_layers")
    ssm = r.config.get("mamba_d_ssm")
    inner = r.int("mamba_d_ssm") if ssm is not None else int(r.int("mamba_expand", 2) * d)
    keys = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
    mixer = _mamba_mixer(r, d, inner, keys)
    heads, kv = r.int("num_attention_heads"), r.int("num_key_value_heads", r.int("num_attention_heads"))
    head_dim = r.int("head_dim", _head_dim(d, heads))
    mamba = _mamba2_params(
        d,
        mixer,
        r.flag("mamba_conv_bias", True),
        r.flag("mamba_proj_bias", False),
        r.flag("mamba_rms_norm", False),
        r.flag("projectors_bias", False),
    )
    attention = _attention_params(d, heads, kv, head_dim, r.flag("attention_bias", False))
    i = r.int("intermediate_size")
    mlp = 3 * d * i + ((2 * i + d) if r.flag("mlp_bias", False) else 0)
    total = _embeddings(r, d, vocab, False) + n * (mamba + attention + mlp + 2 * d) + d
    return HybridSpec("falcon_h1", (PARALLEL,) * n, d, vocab, heads, kv, head_dim, mixer, total, total)

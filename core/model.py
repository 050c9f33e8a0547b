"""Transformer architecture: dimensions, parameter counts and LoRA adapter counts.

Everything here is derived from the shapes of the weight matrices a Hugging Face
implementation creates for each family (``modeling_<family>.py`` in transformers), so the
counts are exact rather than the 12·L·d² rule of thumb.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from core.errors import PlanError
from core.units import finite_number

NORMS: Final = ("layernorm", "rmsnorm")

# Canonical LoRA target names (Llama naming, as PEFT's target_modules uses them).
LORA_TARGETS: Final = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ALL_LINEAR: Final = "all-linear"
# Other spellings people type or other families use for the same matrices.
_TARGET_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "q": ("q_proj",),
    "k": ("k_proj",),
    "v": ("v_proj",),
    "o": ("o_proj",),
    "gate": ("gate_proj",),
    "up": ("up_proj",),
    "down": ("down_proj",),
    "c_attn": ("q_proj", "k_proj", "v_proj"),  # GPT-2 fused qkv
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),  # Phi-3 fused qkv
    "gate_up_proj": ("gate_proj", "up_proj"),  # Phi-3 fused gate/up
    "c_fc": ("up_proj",),  # GPT-2 MLP in
    "out_proj": ("o_proj",),
    "dense": ("o_proj",),
    "w1": ("gate_proj",),  # Mixtral expert naming
    "w3": ("up_proj",),
    "w2": ("down_proj",),
    "all-linear": LORA_TARGETS,
    "all_linear": LORA_TARGETS,
    "all": LORA_TARGETS,
}


def normalise_lora_targets(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Map any accepted spelling onto the canonical names, in canonical order."""
    wanted: set[str] = set()
    for raw in names:
        name = str(raw).strip().lower()
        if name in LORA_TARGETS:
            wanted.add(name)
        elif name in _TARGET_ALIASES:
            wanted.update(_TARGET_ALIASES[name])
        else:
            raise PlanError(
                "method.lora.targets",
                raw,
                "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj or all-linear",
            )
    if not wanted:
        raise PlanError("method.lora.targets", list(names), "at least one target module")
    return tuple(t for t in LORA_TARGETS if t in wanted)


@dataclass(frozen=True)
class ModelSpec:
    """The dimensions of a decoder-only transformer that decide its memory."""

    name: str
    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool = True
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm: str = "rmsnorm"
    norms_per_layer: int = 2
    learned_positions: int = 0  # rows of a learned position table (GPT-2); 0 for RoPE
    num_experts: int = 1
    experts_per_token: int = 1
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # how many layers attend within the window
    max_position_embeddings: int = 4096
    fused_qkv: bool = False  # one q|k|v matrix (GPT-2 c_attn, Phi-3 qkv_proj)
    fused_gate_up: bool = False  # one gate|up matrix (Phi-3)
    activation: str = "silu"  # the MLP's activation as config.json names it
    dropout: float = 0.0  # embedding and residual dropout in training (GPT-2: 0.1)
    attention_dropout: float = 0.0
    attn_softcap: float = 0.0  # Gemma-2 tanh soft-capping of attention scores (0: none)
    final_softcap: float = 0.0  # Gemma-2 tanh soft-capping of the logits (0: none)
    # A parameter count given instead of derived: typed by the user (the lesson's
    # P = 6.7·10⁹) or read exactly from a checkpoint's safetensors headers. The
    # architecture-derived count stays available beside it.
    params_override: int | None = None

    def __post_init__(self) -> None:
        positive = (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "norms_per_layer",
            "num_experts",
            "experts_per_token",
            "max_position_embeddings",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIMITS[name]:
                raise PlanError(f"model.{name}", value, f"an integer from 1 to {LIMITS[name]:,}")
        if self.num_heads % self.num_kv_heads:
            raise PlanError(
                "model.num_kv_heads",
                self.num_kv_heads,
                f"a divisor of num_heads ({self.num_heads})",
            )
        if self.experts_per_token > self.num_experts:
            raise PlanError(
                "model.experts_per_token", self.experts_per_token, f"at most num_experts ({self.num_experts})"
            )
        if not isinstance(self.norm, str) or self.norm not in NORMS:
            raise PlanError("model.norm", self.norm, " or ".join(NORMS))
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise PlanError(f"model.{name}", getattr(self, name), "true or false")
        if not _is_int(self.learned_positions) or not 0 <= self.learned_positions <= LIMITS["max_position_embeddings"]:
            raise PlanError(
                "model.learned_positions",
                self.learned_positions,
                f"an integer from 0 to {LIMITS['max_position_embeddings']:,}",
            )
        if self.sliding_window is not None and (not _is_int(self.sliding_window) or self.sliding_window < 1):
            raise PlanError("model.sliding_window", self.sliding_window, "a positive integer or null")
        if not _is_int(self.sliding_window_layers) or not 0 <= self.sliding_window_layers <= self.num_layers:
            raise PlanError("model.sliding_window_layers", self.sliding_window_layers, f"0 to {self.num_layers}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise PlanError(f"model.{name}", value, "a probability from 0 to below 1")
        for name in ("attn_softcap", "final_softcap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1e6:
                raise PlanError(f"model.{name}", value, "0 (none) or a positive cap")
        if not isinstance(self.activation, str) or not self.activation:
            raise PlanError("model.activation", self.activation, "an activation name such as silu or gelu_new")
        if self.params_override is not None and (
            not _is_int(self.params_override) or not 0 <= self.params_override <= MAX_PARAMS
        ):
            raise PlanError("model.params_override", self.params_override, f"a count from 0 to {MAX_PARAMS:,} or null")
        check_text("model.name", self.name)
        check_text("model.family", self.family, allow_empty=True)
        check_text("model.activation", self.activation)

    # ---- shapes -------------------------------------------------------------------
    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each projection in one block (one expert's MLP)."""
        d, i = self.hidden_size, self.intermediate_size
        shapes = {
            "q_proj": (d, self.q_width),
            "k_proj": (d, self.kv_width),
            "v_proj": (d, self.kv_width),
            "o_proj": (self.q_width, d),
            "up_proj": (d, i),
            "down_proj": (i, d),
        }
        if self.gated_mlp:
            shapes["gate_proj"] = (d, i)
        return shapes

    # ---- parameter counts ----------------------------------------------------------
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size + self.learned_positions * self.hidden_size

    def head_params(self) -> int:
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def attention_params(self) -> int:
        d = self.hidden_size
        n = 2 * d * self.q_width + 2 * d * self.kv_width
        if self.qkv_bias:
            n += self.q_width + 2 * self.kv_width
        if self.o_bias:
            n += d
        return n

    def expert_mlp_params(self) -> int:
        d, i = self.hidden_size, self.intermediate_size
        n = (3 if self.gated_mlp else 2) * d * i
        if self.mlp_bias:
            n += (2 * i if self.gated_mlp else i) + d
        return n

    def router_params(self) -> int:
        return self.hidden_size * self.num_experts if self.num_experts > 1 else 0

    def layer_params(self) -> int:
        return (
            self.attention_params()
            + self.num_experts * self.expert_mlp_params()
            + self.router_params()
            + self.norms_per_layer * self.norm_params()
        )

    def architecture_params(self) -> int:
        """Total parameters implied by the dimensions (what ``model.num_parameters()`` says)."""
        return (
            self.embedding_params()
            + self.num_layers * self.layer_params()
            + self.norm_params()  # final norm
            + self.head_params()
        )

    def total_params(self) -> int:
        return self.params_override if self.params_override else self.architecture_params()

    @property
    def params_scale(self) -> float:
        """Given count ÷ architecture-derived count (1 without an override).

        A typed P (the lesson's 6.7·10⁹) keeps the architecture's proportions: every part
        derived from the shape (projection matrices, idle experts) scales with it, so no
        part can exceed the whole.
        """
        derived = self.architecture_params()
        return self.total_params() / derived if self.params_override and derived else 1.0

    def active_params(self) -> int:
        """Parameters one token passes through (MoE: only the routed experts)."""
        idle = (self.num_experts - self.experts_per_token) * self.expert_mlp_params() * self.num_layers
        return self.total_params() - round(idle * self.params_scale)

    def stored_matmul_params(self) -> int:
        """The projection matrices' share of the stored parameters (scaled with a given P)."""
        return min(self.total_params(), round(self.matmul_params() * self.params_scale))

    def matmul_params(self) -> int:
        """Parameters in the projection matrices of the blocks (what LoRA and quantisation touch)."""
        d, i = self.hidden_size, self.intermediate_size
        attn = 2 * d * self.q_width + 2 * d * self.kv_width
        mlp = (3 if self.gated_mlp else 2) * d * i * self.num_experts
        return self.num_layers * (attn + mlp)

    # ---- LoRA -------------------------------------------------------------------
    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Exact adapter size: r·(in + out) per adapted matrix (PEFT's lora_A and lora_B).

        Fused matrices (GPT-2's c_attn, Phi-3's qkv_proj and gate_up_proj) get one adapter
        over the fused width when any of their parts is targeted, as PEFT does when the
        fused module is named.
        """
        shapes = self.linear_shapes()
        chosen = set(normalise_lora_targets(targets))
        per_layer = 0
        mlp_names = ("gate_proj", "up_proj", "down_proj")
        if self.fused_qkv and chosen & {"q_proj", "k_proj", "v_proj"}:
            per_layer += rank * (self.hidden_size + self.q_width + 2 * self.kv_width)
            chosen -= {"q_proj", "k_proj", "v_proj"}
        if self.fused_gate_up and self.gated_mlp and chosen & {"gate_proj", "up_proj"}:
            per_expert = rank * (self.hidden_size + 2 * self.intermediate_size)
            per_layer += per_expert * self.num_experts
            chosen -= {"gate_proj", "up_proj"}
        for name in chosen:
            if name not in shapes:
                continue  # e.g. gate_proj on a plain MLP: nothing to adapt
            fan_in, fan_out = shapes[name]
            copies = self.num_experts if name in mlp_names else 1
            per_layer += copies * rank * (fan_in + fan_out)
        return self.num_layers * per_layer

    def lora_matrix_params(self, targets: tuple[str, ...]) -> int:
        """Parameters of the frozen matrices that carry an adapter (per model)."""
        shapes = self.linear_shapes()
        chosen = set(normalise_lora_targets(targets))
        if self.fused_qkv and chosen & {"q_proj", "k_proj", "v_proj"}:
            chosen |= {"q_proj", "k_proj", "v_proj"}
        if self.fused_gate_up and chosen & {"gate_proj", "up_proj"}:
            chosen |= {"gate_proj", "up_proj"}
        total = 0
        for name in chosen:
            if name in shapes:
                fan_in, fan_out = shapes[name]
                copies = self.num_experts if name in ("gate_proj", "up_proj", "down_proj") else 1
                total += copies * fan_in * fan_out
        return self.num_layers * total

    # ---- KV cache ------------------------------------------------------------------
    def kv_bytes_per_token(self, bytes_per_element: float) -> float:
        """2 (keys and values) · layers · KV heads · head width · bytes."""
        return 2 * self.num_layers * self.kv_width * bytes_per_element

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def renamed(self, name: str) -> ModelSpec:
        return replace(self, name=name)


MAX_PARAMS: Final = 10**16  # parameters a typed or imported count may claim; 10¹⁵ stays expressible
MAX_NAME_CHARS: Final = 1_000  # names, ids and families; keeps a plan file a few kB
_FLAGS: Final = ("gated_mlp", "tie_embeddings", "qkv_bias", "o_bias", "mlp_bias", "fused_qkv", "fused_gate_up")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_text(path: str, value: object, *, allow_empty: bool = False) -> None:
    """A name, id or family: a string of sensible length that a UTF-8 plan file can hold."""
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise PlanError(path, value, "a string" if allow_empty else "a non-empty name")
    if len(value) > MAX_NAME_CHARS:
        raise PlanError(path, value, f"at most {MAX_NAME_CHARS:,} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PlanError(path, value, "text without lone surrogates", "cannot be saved as UTF-8") from None


# Upper bounds: generous (a 10¹⁵-parameter model stays expressible) yet they keep every
# product in the estimator finite.
LIMITS: Final[dict[str, int]] = {
    "vocab_size": 10_000_000,
    "hidden_size": 1_000_000,
    "num_layers": 10_000,
    "num_heads": 10_000,
    "num_kv_heads": 10_000,
    "head_dim": 65_536,
    "intermediate_size": 10_000_000,
    "norms_per_layer": 8,
    "num_experts": 4_096,
    "experts_per_token": 4_096,
    "max_position_embeddings": 100_000_000,
}

MODEL_FIELDS: Final = tuple(f.name for f in fields(ModelSpec))


# ---- Hugging Face config.json ----------------------------------------------------------

SUPPORTED_MODEL_TYPES: Final = (
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
    "granite",
    "smollm3",
)


def _whole_number(value: object) -> bool:
    """An int, or a float without a fraction (configs write 4096.0); never NaN or infinity."""
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer()
    return _is_int(value)


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
    if not nested and isinstance(config.get("text_config"), Mapping) and model_type not in SUPPORTED_MODEL_TYPES:
        text = dict(config["text_config"])
        text.setdefault("tie_word_embeddings", config.get("tie_word_embeddings", text.get("tie_word_embeddings")))
        return _model_from_hf_config(text, name, nested=True)
    if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
        raise PlanError(
            "config.model_type", model_type, "one of " + ", ".join(SUPPORTED_MODEL_TYPES), "unknown architecture"
        )
    r = _Reader(config, "config")
    given = config.get("_name_or_path")
    label = name or (given.strip()[:MAX_NAME_CHARS] if isinstance(given, str) and given.strip() else model_type)
    if model_type == "gpt2":
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

    d = r.get_int("hidden_size")
    heads = r.get_int("num_attention_heads")
    kv_heads = r.get_int("num_key_value_heads", default=heads)
    head_dim = r.get_int("head_dim", default=_divide(d, heads, "config.num_attention_heads"))
    layers = r.get_int("num_hidden_layers")
    window = r.optional_int("sliding_window")
    window_layers = 0
    tie_default = model_type in ("gemma", "gemma2", "gemma3_text")
    family = model_type
    qkv_bias = r.get_bool("attention_bias", False)
    o_bias = qkv_bias
    norms_per_layer = 2
    experts, per_token = 1, 1
    intermediate = r.get_int("intermediate_size")
    fused_qkv = fused_gate_up = False

    if model_type == "qwen2":
        qkv_bias, o_bias = True, False  # Qwen2Attention: bias on q/k/v only
        use_window = r.get_bool("use_sliding_window", False)
        if window is not None and use_window:
            max_window_layers = r.get_int("max_window_layers", default=layers)
            window_layers = max(0, layers - max_window_layers)
        else:
            window = None
    elif model_type in ("gemma2", "gemma3_text"):
        norms_per_layer = 4  # input, post-attention, pre- and post-feedforward RMSNorms
        if window is not None:
            window_layers = layers // 2 if model_type == "gemma2" else layers - layers // 6
    elif model_type == "mistral" or model_type == "mixtral":
        window_layers = layers if window is not None else 0
    elif model_type == "phi3":
        fused_qkv = fused_gate_up = True
        context = r.get_int("max_position_embeddings", default=4096)
        window_layers = layers if window is not None and window < context else 0
        if not window_layers:
            window = None
    else:
        window = None
    if model_type == "mixtral":
        experts = r.get_int("num_local_experts")
        per_token = r.get_int("num_experts_per_tok", default=2)
    elif model_type == "qwen2_moe":
        raise PlanError(
            "config.model_type", model_type, "a dense or Mixtral-style model", "shared experts are not modelled"
        )

    return ModelSpec(
        name=label,
        family=family,
        vocab_size=r.get_int("vocab_size"),
        hidden_size=d,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        gated_mlp=True,
        tie_embeddings=r.get_bool("tie_word_embeddings", tie_default),
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        mlp_bias=r.get_bool("mlp_bias", False),
        norm="rmsnorm",
        norms_per_layer=norms_per_layer,
        learned_positions=0,
        num_experts=experts,
        experts_per_token=per_token,
        sliding_window=window if window_layers else None,
        sliding_window_layers=window_layers,
        max_position_embeddings=r.get_int("max_position_embeddings", default=4096),
        fused_qkv=fused_qkv,
        fused_gate_up=fused_gate_up,
        activation=r.get_str("hidden_activation", r.get_str("hidden_act", "silu")),
        dropout=r.get_prob("resid_pdrop", 0.0),
        attention_dropout=r.get_prob("attention_dropout", 0.0),
        attn_softcap=r.get_float("attn_logit_softcapping", 0.0),
        final_softcap=r.get_float("final_logit_softcapping", 0.0),
    )


def _divide(a: int, b: int, where: str) -> int:
    if b <= 0 or a % b:
        raise PlanError(where, b, f"a positive divisor of {a}")
    return a // b


def model_from_dict(data: Mapping[str, Any], where: str = "model") -> ModelSpec:
    """The inverse of :meth:`ModelSpec.to_dict`, with type checks that name the field."""
    if not isinstance(data, Mapping):
        raise PlanError(where, type(data).__name__, "a JSON object")
    unknown = set(data) - set(MODEL_FIELDS)
    if unknown:
        raise PlanError(f"{where}.{sorted(unknown)[0]}", data[sorted(unknown)[0]], "a known model field", "unknown key")
    kwargs: dict[str, Any] = {}
    for f in fields(ModelSpec):
        if f.name not in data:
            if f.name in _REQUIRED:
                raise PlanError(f"{where}.{f.name}", None, "a value (the key is missing)")
            continue
        value = data[f.name]
        expected = str(f.type)
        if expected == "str":
            ok = isinstance(value, str)
        elif expected == "bool":
            ok = isinstance(value, bool)
        elif expected == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif expected == "float":
            number = finite_number(value)
            ok = number is not None
            value = number if ok else value
        else:  # int | None
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise PlanError(f"{where}.{f.name}", value, f"a value of type {expected}")
        kwargs[f.name] = value
    return ModelSpec(**kwargs)


_REQUIRED: Final = frozenset(
    (
        "name",
        "family",
        "vocab_size",
        "hidden_size",
        "num_layers",
        "num_heads",
        "num_kv_heads",
        "head_dim",
        "intermediate_size",
    )
)

"""llama.cpp's hybrid recurrent models: their GGUF tensors, the recurrent-state ("RS") buffer, the graph.

The families core.hybrid reads run in llama.cpp under six GGUF architectures: ``granitehybrid``
(Granite 4.0-H, and Bamba, which convert_hf_to_gguf maps to it), ``nemotron_h`` (Nemotron-H / Nano 2;
``nemotron_h_moe`` for Nemotron 3), ``falcon-h1``, ``qwen3next`` and ``qwen35`` / ``qwen35moe`` (Qwen3.5 /
Qwen3.6's language model; the vision tower is a separate mmproj file the plan leaves out). Read at
ggml-org/llama.cpp (the index's stored copies; commits named where they are used):

* **Memory.** ``llama_model::create_memory`` (src/llama-model.cpp) gives a hybrid a ``llama_memory_hybrid``: a
  ``llama_kv_cache`` over the layers ``filter_attn`` keeps, ``n_ctx`` cells in the ``--cache-type-k/v`` types, and
  a ``llama_memory_recurrent`` over the layers ``filter_recr`` keeps, ``max(1, n_seq_max)`` cells (one a
  sequence: ``-np`` slots) in ``GGML_TYPE_F32`` for both tensors whatever the cache type. ``falcon-h1``: every
  layer in both; ``nemotron_h``: attention layers in the KV cache, Mamba-2 layers in the RS buffer, its MLP
  and MoE layers (``n_ff(il) > 0``) in neither; the others by ``hparams.is_recurrent(il)``.
* **The RS buffer.** src/llama-memory-recurrent.cpp (ggml-org/llama.cpp 0054ee8c): per kept layer, on that
  layer's device (``model.dev_layer(i)``, ``offload_kqv``), ``cache_r_l`` of ``n_embd_r()`` × rows and
  ``cache_s_l`` of ``n_embd_s()`` × rows, rows = cells × (1 + ``n_rs_seq``; 0 unless the rollback snapshots
  of speculative decoding are asked for: not modelled); printed as ``<dev> RS buffer size``. src/llama-hparams.cpp
  (01b77b57): ``n_embd_r = (ssm_d_conv − 1) · (ssm_d_inner + 2 · ssm_n_group · ssm_d_state)`` — the
  convolution's last inputs — and ``n_embd_s = ssm_d_state · ssm_d_inner``; for Qwen3-Next the GGUF's
  ``ssm.inner_size`` is the value width and ``ssm.group_count`` the key heads, so both are
  core.hybrid.RecurrentMixer's conv and temporal state (its ``conv_state(1)`` and ``temporal_state(1)``).
* **Tensors.** ``llama_model::load_tensors``: a Mamba-2 layer holds ``ssm_in`` {d, 2·inner + 2·G·N + H},
  ``ssm_out`` {inner, d}, ``ssm_conv1d`` {kernel, conv channels} and the small ``ssm_dt`` / ``ssm_a`` /
  ``ssm_d`` / ``ssm_norm``; a Qwen3-Next linear-attention layer (the file layout its first GGUFs have:
  ``ssm_in`` for the fused q, k, v, z projection, which later files split into ``attn_qkv`` and ``attn_gate``)
  ``ssm_in`` {d, 2·key + 2·value}, ``ssm_beta_alpha`` {d, 2·value heads}, ``ssm_out`` {value, d}; its gated
  attention's ``attn_q`` is {d, 2·heads·head_dim} (query and gate). A ``qwen35`` / ``qwen35moe`` linear-attention
  layer (src/models/qwen35.cpp, 06e514f6, ``load_arch_tensors``) holds the same values split apart: ``attn_qkv``
  {d, 2·key + value}, ``attn_gate`` {d, value}, ``ssm_beta`` and ``ssm_alpha`` {d, value heads}, ``ssm_out``
  {value, d}; its attention layer is Qwen3-Next's. src/llama-quant.cpp (007dbbf3):
  ``tensor_allows_quantization`` keeps ``ssm_conv1d`` as stored (convert_hf_to_gguf writes it in float32),
  ``ssm_a`` / ``ssm_d`` end in no ``weight`` and the norms are ``_norm.weight``: none is quantised; ``ssm_in``,
  ``ssm_out`` and ``ssm_beta_alpha`` fall in ``tensor_category::OTHER``, the file type's default (Q4_K in a
  Q4_K_M file, no bump); ``attn_v`` counts only the attention layers (``n_attention_wv``, ``i_attention_wv``),
  so ``use_more_bits`` runs over them; a dense ``ffn_down`` counts its own tensors against ``n_layer``.
  ``category_is_attn_v`` puts ``attn_qkv`` in the ``attn_v`` branch (ahead of its own, unreached one): in a
  ``qwen35`` file each layer holds one ``attn_v`` or ``attn_qkv``, so that counter runs over every layer in order;
  ``attn_gate``, ``ssm_beta`` and ``ssm_alpha`` fall in ``OTHER``.
* **The graph.** ``build_mamba2_layer`` (and the chunked delta-net of ``qwen3next``): the in-projection of
  the micro-batch, the convolution's input with the carried state, its output, the scan's output with the new
  state, beside the layer's input — all float32.

Not read: the exact order of a hybrid's layers (the plan's model keeps only how many of each kind: they are
spread evenly, the attention layers last in their stretch, as Qwen3-Next's every fourth layer is; it moves
layers between devices only with a partial offload or several GPUs), the build in which each architecture
arrived (a hybrid is planned at a current build only: core.plan), Ollama's own runners for them (core.plan), the
NextN (MTP) block later Qwen3.5 / 3.6 GGUFs append (``nextn_predict_layers``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from core.hybrid import ATTENTION, GATED_DELTANET, MLP, PARALLEL, RECURRENT
from core.model import ModelSpec

# llama_memory_recurrent: GGML_TYPE_F32 for cache_r_l and cache_s_l (llama_model::create_memory passes
# recurrent_type_k / recurrent_type_v GGML_TYPE_F32); --cache-type-k/v do not apply.
RS_ELEMENT_BYTES: Final = 4.0
# convert_hf_to_gguf's architecture for each core.hybrid family (BambaForCausalLM and
# GraniteMoeHybridForCausalLM both register the granitehybrid converter).
HYBRID_ARCH: Final = {
    "granitemoehybrid": "granitehybrid",
    "bamba": "granitehybrid",
    "nemotron_h": "nemotron_h",
    "falcon_h1": "falcon-h1",
    "qwen3_next": "qwen3next",
    "qwen3_5_text": "qwen35",
    "qwen3_5_moe_text": "qwen35moe",
}
# The families whose linear-attention layers hold llama.cpp's qwen35 / qwen35moe tensors (attn_qkv, attn_gate,
# ssm_beta, ssm_alpha: the module docstring) rather than Qwen3-Next's first layout (ssm_in, ssm_beta_alpha).
QWEN35_FAMILIES: Final = frozenset({"qwen3_5_text", "qwen3_5_moe_text"})
# Families whose gated attention's attn_q carries the output gate ({d, 2 · heads · head_dim}).
_GATED_Q: Final = frozenset({"qwen3_next"}) | QWEN35_FAMILIES


def _spread(count: int, positions: int, index: int) -> bool:
    """Whether slot ``index`` of ``positions`` holds one of ``count`` spread evenly, each last in its stretch."""
    return positions > 0 and (index + 1) * count // positions > index * count // positions


@lru_cache(maxsize=64)
def layer_kinds(model: ModelSpec) -> tuple[str, ...]:
    """Each layer's kind (core.hybrid's ATTENTION / RECURRENT / MLP / PARALLEL): the attention layers spread
    evenly, the recurrent ones evenly over the rest, the remainder (Nemotron-H's MLP layers) MLP."""
    n = model.num_layers
    if model.attention_layers == model.recurrent_layers == n:
        return (PARALLEL,) * n
    kinds = [ATTENTION if _spread(model.attention_layers, n, i) else "" for i in range(n)]
    rest = [i for i, kind in enumerate(kinds) if not kind]
    for slot, i in enumerate(rest):
        kinds[i] = RECURRENT if _spread(model.recurrent_layers, len(rest), slot) else MLP
    return tuple(kinds)


def has_attention(model: ModelSpec, layer: int) -> bool:
    return layer_kinds(model)[layer] in (ATTENTION, PARALLEL)


def has_recurrent_state(model: ModelSpec, layer: int) -> bool:
    return layer_kinds(model)[layer] in (RECURRENT, PARALLEL)


def _own_mlp(model: ModelSpec) -> bool:
    """Nemotron-H puts its MLP or experts in layers of their own; the others follow every mixer with one."""
    return model.family == "nemotron_h"


def _mixer_matrices(model: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    """(kind, row length, rows) of one recurrent layer's quantised matrices (see the module docstring). The
    projections that feed the convolution are as wide as its channels, core.hybrid.RecurrentMixer.conv_dim
    (Mamba-2's x·B·C: inner + 2·G·N; Gated DeltaNet's q·k·v: 2·key + value), beside the gate (inner) and
    Mamba-2's dt (heads)."""
    m = model.mixer
    if m is None:
        return ()
    d, conv = model.hidden_size, m.conv_dim
    if m.kind == GATED_DELTANET and model.family in QWEN35_FAMILIES:
        return (
            ("attn_qkv", d, conv),
            ("attn_gate", d, m.inner),
            ("ssm_beta", d, m.heads),
            ("ssm_alpha", d, m.heads),
            ("ssm_out", m.inner, d),
        )
    if m.kind == GATED_DELTANET:
        return (("ssm_in", d, conv + m.inner), ("ssm_beta_alpha", d, 2 * m.heads), ("ssm_out", m.inner, d))
    return (("ssm_in", d, m.inner + conv + m.heads), ("ssm_out", m.inner, d))


def _attention_matrices(model: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    d, q, kv = model.hidden_size, model.q_width, model.kv_width
    gate = 2 if model.family in _GATED_Q else 1  # Qwen3-Next's and Qwen3.5's q_proj carry the output gate
    return (("attn_q", d, gate * q), ("attn_k", d, kv), ("attn_v", d, kv), ("attn_output", q, d))


@lru_cache(maxsize=64)
def _own_mlp_params(model: ModelSpec) -> int:
    """One Nemotron-H MLP (or MoE) layer's parameters, from the exact count: what the embeddings, the norms,
    the attention and the Mamba-2 layers leave, over its MLP layers (the plan's model keeps no dense MLP
    width for it: see :func:`_moe`)."""
    d = model.hidden_size
    kinds = layer_kinds(model)
    mlp_layers = kinds.count(MLP)
    if not mlp_layers:
        return 0
    embeddings = model.vocab_size * d * (1 if model.tie_embeddings else 2)
    mixer = sum(rows * row for _, row, rows in _mixer_matrices(model)) + _mixer_small(model)
    attention = sum(rows * row for _, row, rows in _attention_matrices(model))
    rest = model.total_params() - embeddings - (model.num_layers + 1) * d
    rest -= kinds.count(ATTENTION) * attention + kinds.count(RECURRENT) * mixer
    return max(0, rest // mlp_layers)


def _mixer_small(model: ModelSpec) -> int:
    """A Mamba-2 mixer's parameters beside its two matrices: the depthwise conv1d with its bias, dt_bias, A
    and D per head, the gated norm over the inner width (core.hybrid._mamba2_params, the conv bias on as
    every family's default has it)."""
    m = model.mixer
    if m is None:
        return 0
    return m.conv_dim * (m.conv_kernel + 1) + 3 * m.heads + m.inner


def _moe(model: ModelSpec) -> bool:
    """Whether the MLP is a mixture of experts. A dense Nemotron-H's config lists the class default
    ``n_routed_experts`` (8) that core.hfconfig reads as experts: there the exact count decides, experts
    where an MLP layer's share of it is the experts' (up and down, the router, the shared expert) within 1 %."""
    if model.num_experts <= 1:
        return False
    if not _own_mlp(model):
        return True
    d, e = model.hidden_size, model.num_experts
    experts = e * 2 * d * model.intermediate_size + e * d + 2 * d * model.shared_expert_size
    return abs(_own_mlp_params(model) - experts) <= 0.01 * experts


def _dense_width(model: ModelSpec) -> int:
    """The dense MLP's width: the model's, or a dense Nemotron-H's from its count (up and down, no gate)."""
    if not _own_mlp(model):
        return model.intermediate_size
    return round(_own_mlp_params(model) / (2 * model.hidden_size))


def _mlp_matrices(model: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    """One layer's MLP or mixture of experts as llama.cpp names it: experts ``ffn_*_exps`` {d, n_ff_exp, E}
    and shared ``ffn_*_shexp``, or ``ffn_gate`` / ``ffn_up`` / ``ffn_down``; no gate where the MLP has none
    (Nemotron-H's relu²)."""
    d, i = model.hidden_size, model.intermediate_size
    gated = model.gated_mlp
    if not _moe(model):
        width = _dense_width(model)
        dense = (("ffn_up", d, width), ("ffn_down", width, d))
        return (*dense, ("ffn_gate", d, width)) if gated else dense
    e = model.num_experts
    out: tuple[tuple[str, int, int], ...] = (("ffn_up_exps", d, i * e), ("ffn_down_exps", i, d * e))
    if gated:
        out += (("ffn_gate_exps", d, i * e),)
    s = model.shared_expert_size
    if s:
        out += (("ffn_up_shexp", d, s), ("ffn_down_shexp", s, d))
        if gated:
            out += (("ffn_gate_shexp", d, s),)
    return out


def hybrid_layer_matrices(model: ModelSpec, layer: int) -> tuple[tuple[str, int, int], ...]:
    """(kind, row length ne[0], rows) of layer ``layer``'s quantised 2-D weights (``layer`` -1: a recurrent
    layer with its MLP)."""
    kind = layer_kinds(model)[layer] if layer >= 0 else RECURRENT
    own_mlp = _own_mlp(model)
    if kind == MLP:
        return _mlp_matrices(model)
    mixer: tuple[tuple[str, int, int], ...] = ()
    if kind in (ATTENTION, PARALLEL):
        mixer += _attention_matrices(model)
    if kind in (RECURRENT, PARALLEL):
        mixer += _mixer_matrices(model)
    return mixer if own_mlp else mixer + _mlp_matrices(model)


@lru_cache(maxsize=64)
def hybrid_float32_params(model: ModelSpec) -> int:
    """Values a layer keeps in float32 (norms, the conv1d, dt / A / D, the router, biases): what the exact
    count leaves beside the embeddings and every layer's matrices, spread over the layers."""
    d = model.hidden_size
    embeddings = model.vocab_size * d * (1 if model.tie_embeddings else 2)
    matrices = sum(rows * row for i in range(model.num_layers) for _, row, rows in hybrid_layer_matrices(model, i))
    left = model.total_params() - embeddings - matrices - d  # and output_norm
    return max(0, left) // model.num_layers


def quant_position(model: ModelSpec, kind: str, layer: int) -> tuple[int, int]:
    """(index, count) llama_tensor_get_type's counters give a tensor of ``kind`` in layer ``layer``: an
    ``attn_v``'s among the attention layers; a dense ``ffn_down``'s among its own tensors against ``n_layer``
    (Nemotron-H's MLP layers); else the layer's (src/llama-quant.cpp 007dbbf3, ``init_quantize_state_counters``)."""
    kinds = layer_kinds(model)
    if model.family in QWEN35_FAMILIES and kind in ("attn_v", "attn_qkv"):
        return layer, model.num_layers  # one attn_v-like tensor a layer, counted in layer order
    if kind == "attn_v":
        attention = [i for i, k in enumerate(kinds) if k in (ATTENTION, PARALLEL)]
        return (attention.index(layer) if layer in attention else 0), len(attention)
    if kind == "ffn_down" and _own_mlp(model):
        mlp = [i for i, k in enumerate(kinds) if k == MLP]
        return (mlp.index(layer) if layer in mlp else 0), model.num_layers
    return layer, model.num_layers


def state_row_elements(model: ModelSpec) -> tuple[int, int]:
    """(n_embd_r, n_embd_s): one sequence's convolution and scan state in one recurrent layer."""
    spec = model.hybrid
    if spec is None:
        return 0, 0
    return spec.mixer.conv_state(1), spec.mixer.temporal_state(1)


def rs_bytes_of_layers(model: ModelSpec, layers: tuple[int, ...], slots: int) -> float:
    """The RS buffer of ``layers``: R and S of ``max(1, slots)`` cells in float32 for each recurrent one."""
    r, s = state_row_elements(model)
    recurrent = sum(1 for i in layers if has_recurrent_state(model, i))
    return recurrent * (r + s) * max(1, slots) * RS_ELEMENT_BYTES


def state_bytes_per_sequence(model: ModelSpec) -> float:
    """One sequence's recurrent state over every recurrent layer: what a decode step reads and writes back."""
    return rs_bytes_of_layers(model, tuple(range(model.num_layers)), 1)


def recurrent_graph_bytes(model: ModelSpec, tokens: int, sequences: int) -> float:
    """A recurrent layer's widest moment in a ``tokens`` micro-batch of ``sequences`` sequences: its
    in-projection, the convolution's input (with the carried state) and output, the scan's output and the
    gathered and new states, beside the layer's input and residual (float32; module docstring)."""
    m = model.mixer
    if m is None or not model.recurrent_layers:
        return 0.0
    in_width = sum(rows for _, _, rows in _mixer_matrices(model)[:-1])
    r, s = state_row_elements(model)
    per_token = in_width + 2 * m.conv_dim + m.inner + 2 * model.hidden_size
    seqs = max(1, min(sequences, tokens))
    return 4.0 * (tokens * per_token + (m.conv_kernel - 1) * m.conv_dim * seqs + seqs * (2 * s + r))


@lru_cache(maxsize=64)
def expert_share(model: ModelSpec) -> float:
    """The share of the layers' matrix elements that sit in routed experts (``_exps`` tensors): what a decode
    step reads only in part."""
    total = experts = 0
    for i in range(model.num_layers):
        for kind, row, rows in hybrid_layer_matrices(model, i):
            total += row * rows
            experts += row * rows if kind.endswith("_exps") else 0
    return experts / total if total else 0.0

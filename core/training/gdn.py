"""What one Gated DeltaNet layer keeps for the backward pass in training, on either path transformers 5.25.0 runs.

transformers 5.25.0 (models/qwen3_next/modeling_qwen3_next.py Qwen3NextGatedDeltaNet, models/qwen3_5/
modeling_qwen3_5.py Qwen3_5GatedDeltaNet and Qwen3.5-MoE's, the same code but for the input projections) calls
``causal_conv1d_fn`` and ``chunk_gated_delta_rule`` through ``use_kernel_func_from_hub_with_fallback``: with
causal-conv1d and flash-linear-attention installed those are the packages' autograd functions, else the file's
torch fallbacks: a depthwise ``F.conv1d`` and ``torch_chunk_gated_delta_rule``, the chunked delta rule in plain
float32 torch ops (chunks of 64 positions, a loop over the chunks whose state and products autograd keeps),
then the gated RMSNorm (Qwen3NextRMSNormGated) and ``out_proj``.

The torch path (:func:`torch_path_terms`) is what autograd saves op by op: every term was counted with torch
2.13's ``saved_tensors_hooks`` on one layer under fake CUDA (tools/measure/gdn_saved.py; the sum is exact at
B·S 2 × 1,024 and 1 × 1,000, weights trained or frozen, with or without bf16 autocast) and the whole step is
held to tools.measure's fake-tensor runs (benchmarks/accuracy/cases_hybrid.json, tests/core/test_gdn_training.py).

The kernel path (:func:`kernel_path_terms`) is read from fla-org/flash-linear-attention commit bc3b101d
(2026-08-22) ``fla/ops/gated_delta_rule/chunk.py`` ``ChunkGatedDeltaRuleFunction.forward``:
``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta_raw, beta, A, ...)``: q and k after the in-kernel L2
norm (``l2norm_fwd``: the input's dtype, on the key heads) and their float32 1/norm per token and head, v, the
gate's chunk-local cumsum (``chunk_local_cumsum``, float32), beta, and A, the solved (I + βKKᵀ)⁻¹ blocks
(``chunk_gated_delta_rule_fwd_intra``: ``torch.zeros(B, T, HV, BT, dtype=k.dtype)``); the chunk states ``h`` and
``v_new`` are recomputed in the backward. causal-conv1d's function keeps its input. It was never measured here
(no GPU with those packages): core.evidence widens its range.

Not here: the input projections' input (the block norm's output, counted with its readers by
core.training.activations), ``out_proj``'s input (the same readers' rule) and the adapters.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Final

from core.breakdown import Term
from core.format import sci
from core.hybrid import RecurrentMixer

# transformers 5.25.0 torch_chunk_gated_delta_rule ``chunk_size: int = 64`` (the layer passes none), and
# flash-linear-attention bc3b101d chunk_gated_delta_rule ``kwargs.pop('chunk_size', 64)``.
CHUNK: Final = 64


@dataclass(frozen=True)
class DeltaNetShape:
    """One Gated DeltaNet layer (the model's core.hybrid.RecurrentMixer, whose widths it reads: ``heads`` value
    heads of ``v_dim``, ``key_heads`` (its groups) of ``k_dim`` (its state)) and the micro-batch it runs."""

    b: int
    s: int
    mixer: RecurrentMixer

    @property
    def heads(self) -> int:
        return self.mixer.heads

    @property
    def v_dim(self) -> int:
        return self.mixer.head_dim

    @property
    def key_heads(self) -> int:
        return self.mixer.groups

    @property
    def k_dim(self) -> int:
        return self.mixer.state

    @property
    def conv_kernel(self) -> int:
        return self.mixer.conv_kernel

    @property
    def value_width(self) -> int:
        return self.mixer.inner  # value heads · value dim

    @property
    def conv_dim(self) -> int:
        """q, k and v: the convolution's channels, 2·Hk·dk + H·dv (core.hybrid.RecurrentMixer.conv_dim, the one
        definition)."""
        return self.mixer.conv_dim

    @property
    def chunks(self) -> int:
        return ceil(self.s / CHUNK)

    @property
    def padded(self) -> int:
        """Positions of the scan after the sequence is padded to whole chunks, × batch."""
        return self.b * self.chunks * CHUNK


def torch_path_terms(m: DeltaNetShape, ca: float, autocast: bool, trainable: bool) -> list[Term]:
    """The tensors torch_chunk_gated_delta_rule and the layer around it keep, dtype by dtype (``ca``: a 16-bit
    activation's bytes). q and k are repeated to the value heads and everything in the scan is float32;
    ``autocast``: the scan's matmuls read 16-bit copies of their float32 operands, which autograd keeps.
    ``trainable``: the layer's own weights train (A_log and the gated norm's weight keep inputs of their own)."""
    n, np_, h, dk, dv = m.b * m.s, m.padded, m.heads, m.k_dim, m.v_dim
    c, nc = CHUNK, m.chunks
    t = 2 if trainable else 1
    terms = [
        Term("Gated DeltaNet: conv1d input (q, k, v projection)", "N·conv", n * m.conv_dim * ca),
        Term(
            "Gated DeltaNet: conv1d output, padded by kernel − 1 (silu's input)",
            f"B·conv·(S + {m.conv_kernel - 1})",
            m.b * m.conv_dim * (m.s + m.conv_kernel - 1) * ca,
        ),
        Term(
            "Gated DeltaNet: beta = sigmoid(b), the decay's softplus (float32) and A",
            f"N·H × {ca:g} + {t} × (N·H + H) × 4",
            n * h * ca + t * (n * h + h) * 4,
        ),
        Term(
            "Gated DeltaNet: q, k in float32 on the value heads and their L2 norms",
            "2 × N·H·dk × 4 + 2 × N·H × 4",
            2 * n * h * dk * 4 + 2 * n * h * 4,
        ),
        Term(
            "Gated DeltaNet: k, v, beta padded to whole chunks (float32) and the chunk mask",
            "Np·H·(dk + dv + 1) × 4 + 64²",
            np_ * h * (dk + dv + 1) * 4 + c * c,
        ),
    ]
    terms += _scan_terms(m, ca, autocast)
    terms += [
        Term(
            "Gated DeltaNet: the decays' cumsums (float32)",
            "3 × Np·H × 4 + B·H·chunks × 4",
            (3 * np_ + m.b * nc) * h * 4,
        ),
        _norm_term(m, ca, autocast, trainable),
    ]
    return terms


def _scan_terms(m: DeltaNetShape, ca: float, autocast: bool) -> list[Term]:
    """torch_chunk_gated_delta_rule's chunk blocks, the block matmuls' operands and the chunk loop (module
    docstring): 16-bit copies of the float32 operands under autocast, the float32 tensors themselves without."""
    np_, h, dk, dv = m.padded, m.heads, m.k_dim, m.v_dim
    c, nc = CHUNK, m.chunks
    blocks = m.b * h * nc * c * c  # (B, H, chunks, 64, 64)
    states = m.b * h * dk * dv  # one chunk's recurrent state
    if autocast:
        return [
            Term(
                "Gated DeltaNet: chunk blocks (decays, KKᵀ, QKᵀ) and their 16-bit copies",
                f"B·H·chunks·64² × (8 + 3 × {ca:g}) = {sci(blocks)} × {8 + 3 * ca:g}",
                blocks * (8 + 3 * ca),
            ),
            Term(
                "Gated DeltaNet: the block matmuls' 16-bit operands, the solves' outputs (float32)",
                f"4 × Np·H·dk × {ca:g} + 2 × Np·H·(dk + dv) × 4",
                4 * np_ * h * dk * ca + 2 * np_ * h * (dk + dv) * 4,
            ),
            Term(
                "Gated DeltaNet: the chunk loop (states and their copies, v_new and k copies)",
                f"chunks·B·H·dk·dv × (4 + 2 × {ca:g}) + (4 × Np·H·dv − 2 × B·H·64·dv + Np·H·dk) × {ca:g}",
                nc * states * (4 + 2 * ca) + (4 * np_ * h * dv - 2 * m.b * h * c * dv + np_ * h * dk) * ca,
            ),
        ]
    # The loop's first chunk reads the zero initial state, which needs no gradient, so its ``query[:, :, 0] @
    # last_recurrent_state`` keeps no view of the decayed q; the later chunks' views keep its whole storage.
    # One chunk (S ≤ 64): the decayed q is kept by nobody (tools/measure/gdn_saved.py tiny-qwen3.5 at 1 × 64
    # and 1 × 50: 32,768 B = Np·H·dk × 4 fewer than the two-chunk rule; 65,536 B at 2 × 50).
    q_views = 1 if nc > 1 else 0
    return [
        Term(
            "Gated DeltaNet: chunk blocks (decays, KKᵀ, QKᵀ; float32)",
            f"5 × B·H·chunks·64² × 4 = 5 × {sci(blocks)} × 4",
            5 * blocks * 4,
        ),
        Term(
            "Gated DeltaNet: the block matmuls' operands and the solves' outputs (float32)",
            "2 × Np·H·dk × 4 + Np·H·(dk + dv) × 4",
            2 * np_ * h * dk * 4 + np_ * h * (dk + dv) * 4,
        ),
        Term(
            "Gated DeltaNet: the chunk loop (states, v_new, decayed "
            + ("q and k" if q_views else "k; the one chunk reads no q")
            + "; float32)",
            f"chunks·B·H·dk·dv × 4 + Np·H·(dv + {1 + q_views}·dk) × 4",
            nc * states * 4 + np_ * h * (dv + (1 + q_views) * dk) * 4,
        ),
    ]


def _norm_term(m: DeltaNetShape, ca: float, autocast: bool, trainable: bool) -> Term:
    """Qwen3NextRMSNormGated (the layer's ``norm``, over each value head): its float32 input, the gate and
    silu(gate) in float32, 1/rms; the 16-bit ``weight · x`` the gate multiplies (float32 under autocast, whose
    weight is float32) and, when the weight trains, the 16-bit normalised input its gradient reads."""
    n, vw = m.b * m.s, m.value_width
    if autocast:
        return Term(
            "Gated DeltaNet: gated RMSNorm (input, gate, silu(gate), weight·x; float32) and 1/rms",
            f"4 × N·Hdv × 4 + N·H × 4{f' + N·Hdv × {ca:g}' if trainable else ''}",
            4 * n * vw * 4 + n * m.heads * 4 + (n * vw * ca if trainable else 0),
        )
    return Term(
        "Gated DeltaNet: gated RMSNorm (input, gate, silu(gate); float32), weight·x and 1/rms",
        f"3 × N·Hdv × 4 + N·H × 4 + {2 if trainable else 1} × N·Hdv × {ca:g}",
        3 * n * vw * 4 + n * m.heads * 4 + (2 if trainable else 1) * n * vw * ca,
    )


def kernel_path_terms(m: DeltaNetShape, ca: float, autocast: bool, trainable: bool) -> list[Term]:
    """What causal-conv1d and flash-linear-attention's ChunkGatedDeltaRuleFunction keep (module docstring),
    with the layer's own gate and gated norm around them as on the torch path."""
    n, h, hk = m.b * m.s, m.heads, m.key_heads
    t = 2 if trainable else 1
    return [
        Term("Gated DeltaNet kernel: conv1d input (causal-conv1d keeps x)", "N·conv", n * m.conv_dim * ca),
        Term(
            "Gated DeltaNet kernel: q, k after the L2 norm (key heads), v, and the norms' 1/‖·‖ (float32)",
            f"N·(2·Hk·dk + H·dv) × {ca:g} + 2 × N·Hk × 4",
            n * m.conv_dim * ca + 2 * n * hk * 4,
        ),
        Term(
            "Gated DeltaNet kernel: the gate's cumsum (float32), beta, A = (I + βKKᵀ)⁻¹ blocks",
            f"N·H × 4 + N·H × {ca:g} + N·H·64 × {ca:g}",
            n * h * 4 + n * h * ca + n * h * CHUNK * ca,
        ),
        Term(
            "Gated DeltaNet kernel: the decay's softplus (float32) and A", f"{t} × (N·H + H) × 4", t * (n * h + h) * 4
        ),
        _norm_term(m, ca, autocast, trainable),
    ]


def torch_path_backward(m: DeltaNetShape, trainable: bool) -> Term:
    """The torch path's transient in the backward, above what the layer keeps: measured, not derived, with
    tools/measure/gdn_saved.py ``--backward`` (live storage bytes over one layer's backward on CPU, bf16, torch
    2.13.0, transformers 5.25.0): 8,421,952 B for the tiny Qwen3.5 layer (benchmarks/accuracy/configs/
    tiny-qwen3.5.json: 4 value heads of 32, 2 key heads of 32) at B·S 2 × 1,024 and 1 × 2,048 alike, 4.02 ×
    its B·H·chunks·64² float32 blocks (4.11, 4.05 and 4.00 × at 1 × 512, 1,024 and 4,096: linear in the tokens;
    a short 1 × 128 rises 2.5 ×); 9,404,928 B (4.48 ×) with the layer's weights frozen, whose norm and gate keep
    less and free later."""
    per = BACKWARD_PER_BLOCK_TRAINED if trainable else BACKWARD_PER_BLOCK_FROZEN
    blocks = m.b * m.heads * m.chunks * CHUNK * CHUNK
    return Term(
        "Gated DeltaNet torch path: the backward's float32 gradients (chunk blocks, states)",
        f"{per:g} × B·H·chunks·64² × 4",
        per * blocks * 4,
    )


# tools/measure/gdn_saved.py tiny-qwen3.5 --backward [--frozen] (torch_path_backward's docstring): 8,421,952 and
# 9,404,928 B over 2,097,152 B of float32 blocks.
BACKWARD_PER_BLOCK_TRAINED: Final = 4.02
BACKWARD_PER_BLOCK_FROZEN: Final = 4.48


def kernel_path_backward(m: DeltaNetShape, ca: float) -> Term:
    """flash-linear-attention's chunk_gated_delta_rule_bwd (bc3b101d fla/ops/gated_delta_rule/chunk.py) at its
    high point, chunk_bwd_dqkwg / prepare_wy_repr_bwd: w and u recomputed, the chunk states h and their gradient
    dh (``k.new_empty(B, NT, HV, K, V)``), v_new, dv, dq, dk, dw on the value heads (the input dtype) and dg
    (float32). Read, never measured."""
    n, h = m.b * m.s, m.heads
    el = n * h * (4 * m.k_dim + 3 * m.v_dim) + 2 * m.b * m.chunks * h * m.k_dim * m.v_dim
    return Term(
        "Gated DeltaNet kernel backward: w, u, h, dh, v_new, dv, dq, dk, dw and dg",
        f"(N·H·(4·dk + 3·dv) + 2 × B·chunks·H·dk·dv) × {ca:g} + N·H × 4",
        el * ca + n * h * 4,
    )


# The families whose attention layers are Qwen3-Next's gated attention (transformers 5.25.0 Qwen3NextAttention,
# Qwen3_5Attention, Qwen3_5MoeAttention): q_proj's output doubled into the query and a per-channel gate, q and k
# normalised per head by Qwen3NextRMSNorm (float32, scaled by 1 + weight), ``attn_output * sigmoid(gate)``
# before o_proj.
GATED_ATTENTION: Final = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def gated_attention_terms(
    n: int, heads: int, kv_heads: int, head_dim: int, ca: float, trainable: bool, o_input: bool
) -> list[Term]:
    """What a gated attention layer keeps beyond a plain one's (core.training.activations._attention), counted
    with tools/measure/gdn_saved.py ``--attention`` (the tiny Qwen3.5 layer: 13,713,920 B besides the rotary
    cos / sin and the RNG state, 9,486,848 B of it these terms). The q and k norms keep their float32 input and
    1/rms, and the normalised float32 rows when their weight trains; the gate keeps sigmoid's output and the
    attention output's contiguous copy it multiplies; o_proj reads the product (``o_input``: when o_proj, or its
    adapter, keeps its input), not the attention kernel's output."""
    rows = n * (heads + kv_heads)
    t = 2 if trainable else 1
    terms = [
        Term(
            "gated attention: q, k norms (float32 input, normalised rows when trained) and 1/rms",
            f"{t} × N·(H + kv)·hd × 4 + N·(H + kv) × 4",
            t * rows * head_dim * 4 + rows * 4 + 2 * head_dim * 4,
        ),
        Term(
            "gated attention: sigmoid(gate) and the attention output it multiplies",
            f"2 × N·H·hd × {ca:g}",
            2 * n * heads * head_dim * ca,
        ),
    ]
    if o_input:
        terms.append(
            Term("gated attention: o_proj input (the gated product)", f"N·H·hd × {ca:g}", n * heads * head_dim * ca)
        )
    return terms

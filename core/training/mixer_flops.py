"""What a hybrid's recurrent layer computes per token beside its projections: the short causal convolution and
the chunked scan (Mamba-2's state-space duality, Gated DeltaNet's chunked delta rule).

The projections are matmuls like any other (core.training.flops.block_gemms lists them from the mixer's widths);
this module counts the rest, forward, per token and recurrent layer. Convention, as core.training.flops counts
attention: a multiply-add is 2 FLOPs; the elementwise work (decays, gates, the softplus of dt, the norms) is left
out, as it is for attention's softmax; the backward runs twice the forward (each product's two gradients).

- **The convolution**: depthwise, ``kernel`` taps over the conv channels, 2·conv_dim·kernel.
- **Mamba-2's SSD scan** (Dao & Gu 2024, "Transformers are SSMs", arXiv:2405.21060, §6: the chunked
  algorithm), per token, with chunk Q, state N, head dim P, H heads and G B/C groups:
  the intra-chunk scores C·Bᵀ (2·Q·N), the scores times x (2·Q·P), the chunk states Bᵀ·x (2·N·P) and their
  read-out C·h (2·N·P); the state passing between chunks (N·P a chunk, elementwise) is left out.
  How much of each chunk × chunk block runs depends on the path:

  - mamba_ssm's Triton kernels (state-spaces/mamba e9594ce1 mamba_ssm/ops/triton/ssd_combined.py
    ``_mamba_chunk_scan_combined_fwd``): ``_bmm_chunk_fwd(C, B)`` forms C·Bᵀ once per *group*, whole blocks;
    ``_chunk_scan_fwd`` runs the scores times x with ``IS_CAUSAL`` true (ssd_chunk_scan.py: ``K_MAX =
    min((pid_m + 1) * BLOCK_SIZE_M, chunk_size_limit)``), the causal half, (Q + 1)/2 keys a query on average;
    ``_chunk_state_fwd`` and the read-out in ``_chunk_scan_fwd`` are the two N·P products. vLLM's prefill runs
    the same kernels (its copy under vllm/model_executor/layers/mamba/ops/);
  - transformers' torch path (5.25.0 ``torch_forward`` of GraniteMoeHybridMambaLayer, BambaMixer,
    NemotronHMamba2Mixer): B and C repeated to every head, ``G = (C[..., None, :] * B[..., None, :, :]).sum(-1)``
    and ``(M[..., None] * x[..., None, :]).sum(3)`` over whole blocks: 2·H·Q·(N + P) + 4·H·N·P.

  The MFU count takes the whole-block per-head count (the algorithm as the paper writes it, whatever runs).
- **Gated DeltaNet's chunked delta rule** (Yang, Kautz, Hatamizadeh 2025, "Gated Delta Networks",
  arXiv:2412.06464, §3.3 and its WY representation), as fla-org/flash-linear-attention bc3b101d
  fla/ops/gated_delta_rule/chunk.py ``chunk_gated_delta_rule_fwd`` runs it (chunk C = 64; transformers'
  ``torch_chunk_gated_delta_rule`` the same algorithm at 64), per token and value head (key width K, value
  width V; the key heads are repeated to the value heads): k·kᵀ in the chunk (2·C·K), the triangular solve of
  (I + A) (C³/3 multiply-adds a chunk: 2·C²/3 a token), the WY products w = A·k and u = A·v (2·C·K + 2·C·V),
  the state pass v_new = u − w·S and S += kᵀ·v_new (4·K·V), and the output q·S + (q·kᵀ)·v_new
  (2·K·V + 2·C·K + 2·C·V): 6·C·K + 4·C·V + 6·K·V + 2·C²/3. fla's kernels compute whole C × C tiles and mask
  them: the count is whole blocks on every path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.format import sci
from core.model import ModelSpec

# fla's chunk size for the gated delta rule (fla-org/flash-linear-attention bc3b101d
# fla/ops/gated_delta_rule/chunk.py ``chunk_gated_delta_rule_fwd(..., chunk_size: int = 64)``), which
# transformers 5.25.0's torch fallback ``torch_chunk_gated_delta_rule(..., chunk_size=64)`` uses too.
DELTA_RULE_CHUNK: Final = 64


@dataclass(frozen=True)
class MixerFlops:
    """One recurrent layer's forward FLOPs per token beside its projections: the convolution and the scan as
    the path runs it (``scan``) and as the MFU counts it (``scan_model``, whole blocks per head)."""

    name: str  # "Mamba-2" / "Gated DeltaNet"
    conv: float
    scan: float
    scan_model: float
    formula: str  # the scan's arithmetic with the model's widths in


def mixer_flops(model: ModelSpec, kernels: bool) -> MixerFlops | None:
    """The recurrent layers' conv and scan of ``model`` (None: attention only). ``kernels``: Mamba-2 runs
    mamba_ssm's Triton kernels (training with mamba_ssm installed, vLLM's prefill), else transformers' torch path."""
    mixer = model.mixer
    if mixer is None:
        return None
    h, p, n, g = model.recurrent_heads, model.recurrent_head_dim, model.recurrent_state, model.recurrent_groups
    conv = 2.0 * mixer.conv_dim * mixer.conv_kernel  # core.hybrid.RecurrentMixer.conv_dim
    if model.recurrent_mixer == "mamba2":
        q = model.recurrent_chunk or 256  # a plan file written before the chunk was read: the config default
        whole = 2.0 * h * (q * (n + p) + 2 * n * p)
        if not kernels:
            formula = f"2·H·(Q·(N + P) + 2·N·P) = 2 × {h} × ({q} × ({n} + {p}) + 2 × {n} × {p})"
            return MixerFlops("Mamba-2", conv, whole, whole, formula)
        causal = 2.0 * g * q * n + 2.0 * h * p * (q + 1) / 2 + 4.0 * h * n * p
        formula = (
            f"2·G·Q·N + 2·H·P·(Q + 1)/2 + 4·H·N·P = 2 × {g} × {q} × {n} + 2 × {h} × {p} × {(q + 1) / 2:g} "
            f"+ 4 × {h} × {n} × {p}"
        )
        return MixerFlops("Mamba-2", conv, causal, whole, formula)
    c, k, v = DELTA_RULE_CHUNK, n, p
    per_head = 6.0 * c * k + 4.0 * c * v + 6.0 * k * v + 2.0 * c * c / 3
    formula = f"H·(6·C·K + 4·C·V + 6·K·V + 2·C²/3) = {h} × {sci(per_head)}, C = {c}, K = {k}, V = {v}"
    return MixerFlops("Gated DeltaNet", conv, h * per_head, h * per_head, formula)

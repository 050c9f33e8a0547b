"""What one Mamba-2 mixer keeps for the backward pass in training, on either path transformers 5.25.0 runs.

transformers 5.25.0 (models/granitemoehybrid, bamba and nemotron_h modeling files: GraniteMoeHybridMambaLayer,
BambaMixer, NemotronHMamba2Mixer, the same code) calls ``mamba2_split_conv1d_scan_combined`` in training; with
mamba_ssm installed that is mamba_ssm's fused autograd function (integrations/hub_kernels.py
``use_kernel_func_from_hub_with_fallback``: the package's function when it imports, on CUDA tensors), else a stub
that returns None and the mixer runs its torch path: a depthwise ``F.conv1d``, then ``mamba2_chunk_scan``, the
chunked state-space-duality scan in plain torch ops, then the gated RMSNorm and ``out_proj``.

The torch path (:func:`torch_path_terms`) is what autograd saves op by op; every term was counted with torch
2.13's ``saved_tensors_hooks`` on one mixer under fake CUDA (tools/measure/mamba_saved.py) and the whole step is
held to tools.measure's fake-tensor runs (benchmarks/accuracy/cases_hybrid.json, tests/core/test_hybrid_training.py).
A sequence of one chunk (S ≤ chunk, padded to it) keeps less: ``torch.einsum`` (torch 2.13
aten/src/ATen/native/Linear.cpp ``sumproduct_pair``) permutes each operand to (batch dims, kept, summed) and
``reshape``s the batch dims b, c, h into one, which is a view of the operand, not a copy, when the strides allow;
``bmm`` then keeps the view, so the operand's own storage is what stays (:func:`_single_chunk_views`).
A checkpointed block recomputes the torch path inside its backward, whose forward high point (the scan's last
line, every local still alive) is then the step's: :func:`torch_path_recompute`, read from the code and checked
against a live-storage trace (tools/measure/hybrid_live.py).
The kernel path (:func:`kernel_path_terms`) is read from state-spaces/mamba ``mamba_ssm/ops/triton/ssd_combined.py``
``MambaSplitConv1dScanCombinedFn.forward`` (``ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, A,
D, dt_bias, initial_states, seq_idx, rmsnorm_weight, rstd, outproj_weight, outproj_bias)``: the in_proj output,
the scan's output before the norm and the norm's 1/rms; the backward recomputes the convolution and the norm's
output) and was never measured here (no GPU with mamba_ssm): core.evidence widens its range.

Not here: the in_proj input (the block norm's output, counted with its readers by core.training.activations)
and the adapters (core.training.activations ``_adapters``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from core.breakdown import Term
from core.format import sci
from core.hybrid import RecurrentMixer


@dataclass(frozen=True)
class MixerShape:
    """One Mamba-2 mixer (the model's core.hybrid.RecurrentMixer, whose widths it reads) and the micro-batch it
    runs. The convolution's channels are the mixer's ``conv_dim`` (x, B and C: I + 2·G·S)."""

    b: int
    s: int
    mixer: RecurrentMixer
    chunk: int  # mamba_chunk_size / chunk_size: the scan's block of positions

    @property
    def heads(self) -> int:
        return self.mixer.heads

    @property
    def head_dim(self) -> int:
        return self.mixer.head_dim

    @property
    def state(self) -> int:
        return self.mixer.state

    @property
    def groups(self) -> int:
        return self.mixer.groups

    @property
    def conv_kernel(self) -> int:
        return self.mixer.conv_kernel

    @property
    def inner(self) -> int:
        return self.mixer.inner

    @property
    def conv_dim(self) -> int:
        return self.mixer.conv_dim  # core.hybrid.RecurrentMixer.conv_dim: the one definition

    @property
    def in_width(self) -> int:
        """in_proj's output: gate (inner), x·B·C (conv_dim) and dt (heads)."""
        return self.inner + self.conv_dim + self.heads

    @property
    def chunks(self) -> int:
        return ceil(self.s / self.chunk)

    @property
    def padded(self) -> int:
        """Positions of the scan after ``pad_tensor_by_size`` pads the sequence to whole chunks, × batch."""
        return self.b * self.chunks * self.chunk


def torch_path_terms(m: MixerShape, ca: float, autocast: bool, trainable: bool, mixed: bool) -> list[Term]:
    """The tensors ``torch_forward`` keeps, dtype by dtype (``ca``: a 16-bit activation's bytes).

    ``autocast``: the scan's einsums run as bmm in the autocast dtype (their operands' copies are 16-bit), and
    dt's softplus runs in float32; without it the scan's ``.float()`` casts make every einsum float32.
    ``trainable``: the mixer's own weights train (A_log, D and the gated norm's weight keep inputs of their own).
    ``mixed``: float32 weights under autocast, so the conv reads a 16-bit cast of its input rather than a view
    of in_proj's output. ``out_proj``'s input is left to the caller (the block's readers' rule)."""
    n, np_, h, i, k = m.b * m.s, m.padded, m.heads, m.inner, m.conv_kernel
    e = ca if autocast else 4.0  # the einsums' operand copies
    hn = h * m.state
    blocks = m.b * h * m.chunks * m.chunk * m.chunk  # (b, h, chunks, chunk, chunk)
    edges = m.b * h * (m.chunks + 1) ** 2  # the chunk recurrence's (chunks + 1)² decays
    dt = 4.0 if autocast else ca
    conv_in = m.b * m.conv_dim * m.s if mixed else n * m.in_width
    terms = [
        Term(
            "Mamba-2: conv1d input" + (" (autocast's cast)" if mixed else " (in_proj output)"),
            "N·conv" if mixed else "N·(2I + 2GS + H)",
            conv_in * ca,
        ),
        Term(
            "Mamba-2: conv1d output, padded by kernel − 1 (silu's input)",
            f"B·conv·(S + {k - 1})",
            m.b * m.conv_dim * (m.s + k - 1) * ca,
        ),
        Term("Mamba-2: dt + dt_bias and softplus(dt)", f"2 × N·H × {dt:g}", 2 * n * h * dt),
        Term("Mamba-2: x and dt in float32 (x·dt)", "N·I × 4 + N·H × 4", n * i * 4 + n * h * 4),
        Term(
            "Mamba-2: segment-sum masks (bool)",
            "2 × chunk² + 2 × (chunks + 1)²",
            2 * m.chunk**2 + 2 * (m.chunks + 1) ** 2,
        ),
        Term("Mamba-2: L = exp(segsum) (float32)", f"B·H·chunks·chunk² × 4 = {sci(blocks)} × 4", blocks * 4),
        Term(
            "Mamba-2: G = C·Bᵀ, its operands and M = G·L's bmm copy",
            f"2 × B·H·chunks·chunk² × {e:g} + 2 × N·HS × {e:g}",
            2 * blocks * e + 2 * np_ * hn * e,
        ),
        Term("Mamba-2: x copies for Y_diag and the chunk states", f"2 × N·I × {e:g}", 2 * np_ * i * e),
        Term("Mamba-2: decays exp(A_cumsum) (float32)", "2 × N·H × 4", 2 * np_ * h * 4),
        Term(
            "Mamba-2: B chunked (float32) and B·decay's copy", f"N·HS × 4 + N·HS × {e:g}", np_ * hn * 4 + np_ * hn * e
        ),
        Term(
            "Mamba-2: chunk recurrence (decays, states copy)",
            f"B·H·(chunks + 1)² × {4 + (ca if autocast else 0):g} + B·H·(chunks + 1)·P·S × {e:g}",
            edges * (4 + (ca if autocast else 0)) + m.b * h * (m.chunks + 1) * m.head_dim * m.state * e,
        ),
        Term(
            "Mamba-2: C·states (C's copy, the states' copy, the product)",
            f"N·HS × {e:g} + B·chunks·H·P·S × {e:g} + N·I × {e:g}",
            np_ * hn * e + m.b * m.chunks * h * m.head_dim * m.state * e + np_ * i * e,
        ),
        Term(
            "Mamba-2: gated RMSNorm (scan output, gate, silu(gate), product; float32) and 1/rms",
            "4 × N·I × 4 + N·G × 4",
            4 * n * i * 4 + n * m.groups * 4,
        ),
    ]
    if m.chunks == 1:
        terms.append(_single_chunk_views(m, e, autocast))
    if trainable:
        a_copy = 0.0 if autocast else n * h * 4  # A·dt's dt.float(): a copy unless softplus ran in float32
        terms.append(
            Term(
                "Mamba-2: D's padded x, A's dt, the norm's normalised output (float32)",
                "2 × N·I × 4 + N·H × 4",
                np_ * i * 4 + a_copy + n * i * 4,
            )
        )
    return terms


def _single_chunk_views(m: MixerShape, e: float, autocast: bool) -> Term:
    """What a one-chunk scan keeps beside the copies :func:`torch_path_terms` counts (a negative term, in bytes).

    transformers 5.25.0 ``mamba2_chunk_scan`` (modeling_granitemoehybrid.py; bamba's and nemotron_h's the same)
    with ``chunks`` = 1, the einsums' batch dims b, c, h merged by ``reshape`` (module docstring):

    * x·dt keeps the conv output's layout (b, h, p, s: ``hidden_states`` is the transposed conv output), so
      b·c·h is one stride apart when c = 1: Y_diag's and the chunk states' einsums both keep a view of x·dt
      (one N·I float32 storage) where they otherwise keep a copy each. Under autocast each einsum casts x·dt to
      16 bits first and keeps its own cast (view or copy, the same bytes): no change.
    * C and B are contiguous (b, c, l, h, n), so b·c·h merges only when b = c = 1: G = C·Bᵀ then keeps views of C
      (the storage C·states keeps) and of B (the one B·decay's product keeps) instead of two copies. Under
      autocast its operands are the einsum's own 16-bit casts: no change.
    * ``states = new_states[:, :-1]`` is a view of the recurrence's output, laid out (b, h, c + 1, p, n) by its
      bmm, whose b·c·h merges when c = 1: C·states keeps ``new_states`` whole, (c + 1) chunks of states rather
      than the copy of c (in either mode: under autocast ``new_states`` is already 16-bit).

    Counted with tools/measure/mamba_saved.py on the tiny Granite 4.0-H mixer (chunk 256): at B·S 1 × 256 and
    1 × 100, 1,441,792 B fewer than the copies; at 2 × 256 and 2 × 100, 786,432 B fewer; under autocast 65,536
    and 131,072 B more (the states' extra chunk)."""
    np_, hn = m.padded, m.heads * m.state
    one_state = m.b * m.heads * m.head_dim * m.state  # one chunk's states, every head
    fewer = 0.0
    if not autocast:
        fewer += np_ * m.inner * e  # x·dt's one view for two copies
        if m.b == 1:
            fewer += 2 * np_ * hn * e  # G's C and B operands: views of storages kept anyway
    return Term(
        "Mamba-2: one chunk: the einsums keep views (x·dt, C, B) and new_states whole",
        "B·H·P·S × " + f"{e:g}" + ("" if autocast else " − N·I × 4" + (" − 2 × N·HS × 4" if m.b == 1 else "")),
        one_state * e - fewer,
    )


def kernel_path_terms(m: MixerShape, ca: float) -> list[Term]:
    """What mamba_ssm's MambaSplitConv1dScanCombinedFn keeps (module docstring): zxbcdt, the in_proj output in
    the autocast / model dtype; out_x, the scan's output before the gated norm, in x's dtype; rstd, float32 per
    group and token. out_proj runs inside the function, which recomputes its input in the backward."""
    n = m.b * m.s
    return [
        Term("Mamba-2 kernel: in_proj output (zxbcdt)", f"N·(2I + 2GS + H) × {ca:g}", n * m.in_width * ca),
        Term("Mamba-2 kernel: scan output before the norm (out_x)", f"N·I × {ca:g}", n * m.inner * ca),
        Term("Mamba-2 kernel: the gated norm's 1/rms (float32)", "N·G × 4", n * m.groups * 4),
    ]


def torch_path_backward(m: MixerShape, trainable: bool) -> Term:
    """The torch path's transient in the backward, above what the mixer keeps: measured, not derived, with
    tools/measure/mamba_saved.py ``--backward`` (live storage bytes over one mixer's backward on CPU, bf16,
    torch 2.13.0, transformers 5.25.0): its high point is in the gated norm's and the scan output's float32
    gradients, 15,983,616 B over the saved tensors for the tiny Granite 4.0-H mixer at B·S 2,048 and I 512
    (3.8 × N·I × 4; 4.05 for the tiny Nemotron-H's), the same at chunk 128 and 256 — 5.25 × N·I × 4 with the
    mixer's weights frozen (LoRA), whose norm keeps less and frees later. Counted as 4 and 5.25 × N·I × 4."""
    per = 4.0 if trainable else 5.25
    n = m.b * m.s
    return Term(
        "Mamba-2 torch path: the backward's float32 gradients (norm, scan output)",
        f"{per:g} × N·I × 4",
        per * n * m.inner * 4,
    )


def kernel_path_backward(m: MixerShape, ca: float) -> Term:
    """mamba_ssm's backward (MambaSplitConv1dScanCombinedFn.backward, module docstring): the gradient of zxbcdt
    (``torch.empty_like``), the convolution recomputed and its input's gradient (``dxBC``), the norm's output
    recomputed for out_proj's weight gradient and out_proj's input gradient, at once; the Triton scan's own
    chunk-state buffers are left out. Read, never measured."""
    n = m.b * m.s
    el = n * m.in_width + 2 * n * m.conv_dim + 2 * n * m.inner
    return Term(
        "Mamba-2 kernel backward: dzxbcdt, conv recomputed and dxBC, norm output and dout",
        f"N·(2I + 2GS + H) + 2 × N·conv + 2 × N·I, × {ca:g}",
        el * ca,
    )


def torch_path_recompute(m: MixerShape, ca: float, autocast: bool, trainable: bool, mixed: bool) -> Term:
    """The torch path's forward high point when a checkpointed block recomputes it in the backward, over the saved
    tensors made by then (a negative part: the saved tensors :func:`torch_path_terms` counts that come after it).

    With ``torch.utils.checkpoint`` (non-reentrant) the block's forward runs again inside its backward, beside every
    gradient formed so far: the step's high point of a checkpointed hybrid is there, not in the block's backward
    (a live-storage trace of the tiny Granite 4.0-H and Nemotron-H steps, checkpointed, bf16, torch 2.13.0 CPU,
    transformers 5.25.0). transformers 5.25.0 ``mamba2_chunk_scan`` (modeling_granitemoehybrid.py; bamba's and
    nemotron_h's the same) peaks at its last line, ``output = (Y_diag + Y_off).contiguous()``; alive then and not
    saved for the backward:

    * the convolution's silu output (torch_forward's ``hidden_states_B_C``, whose views x, B and C are still
      locals), B·conv·S in the compute dtype, and dt after ``torch.clamp`` (float32 under autocast, whose softplus
      runs in float32);
    * the scan's padded float32 chunks that no op keeps: x·dt (each einsum keeps its own copy), C (the same),
      A and its cumulative sum, D's residual ``D[..., None] * pad(x)`` (added after the peak);
    * ``B_decay`` (float32; its einsum keeps a copy), Y_diag (an einsum output), the zero initial state and
      ``new_states`` (einsum outputs, in the einsums' dtype: 16-bit under autocast);
    * Y_off (C·states times the float32 decays: float32), the sum Y_diag + Y_off and its ``.contiguous()`` copy
      (the sum keeps Y_diag's permuted layout);
    * under autocast, M = G·L in float32 (G 16-bit times L float32; the einsum keeps its own 16-bit cast), and over
      float32 weights (``mixed``) in_proj's output, which the gate's view keeps alive while the convolution reads
      its own cast (`hybrid_live.py hyb-nemotron-full-bf16mixed-adamw-sdpa-b2-s1024-ckpt --phase
      F:model.layers.0.mixer.in_proj`, fake CUDA).

    One chunk (S ≤ chunk): the einsums keep views of x·dt, of C and B_decay (B = 1) and ``new_states`` whole
    (:func:`_single_chunk_views`, which counts them as saved), so they are not transient here; under autocast the
    einsums read their own 16-bit casts, x·dt, C and B_decay stay transient, ``new_states`` is still kept whole.
    Checked against the same trace at that op: the live bytes to within 136 B at B·S 1 × 300, 1 × 256 and 2 × 100
    (Granite: A = −exp(A_log) and its copies) and 3.6 KB at 1 × 300 (Nemotron-H); under autocast over float32
    weights (Nemotron-H, 2 × 1,024, fake CUDA) the mixer's storages at that op to within 62 KB of 76.8 MB.

    Made after the peak: the gated RMSNorm's saved tensors (4 × N·I × 4 + N·G × 4), the normalised output its
    weight keeps (N·I × 4, when the mixer trains) and out_proj's input (N·I in the compute dtype). The caller
    takes off what the block's MLP keeps (not recomputed yet) and adds the gradient arriving at the block."""
    n, np_, h, i = m.b * m.s, m.padded, m.heads, m.inner
    e = ca if autocast else 4.0  # the einsums' outputs
    hn = h * m.state
    one_state = m.b * h * m.head_dim * m.state
    dt = 4.0 if autocast else ca
    x_pad = np_ * i * 4.0
    c_pad = np_ * hn * 4.0
    b_decay = np_ * hn * 4.0
    new_states = one_state * (m.chunks + 1) * e
    if m.chunks == 1:
        new_states = 0.0  # kept whole by C·states
        if not autocast:
            x_pad = 0.0  # kept as a view by both einsums
            if m.b == 1:  # b·c·h merges: C·states keeps a view of C, the chunk states' einsum one of B_decay
                c_pad = b_decay = 0.0
    transient = (
        m.b * m.conv_dim * m.s * ca  # silu's output
        + n * h * dt  # dt clamped
        + np_ * i * 4  # D's residual
        + x_pad
        + 2 * np_ * h * 4  # A padded, its cumulative sum
        + c_pad
        + b_decay
        + np_ * i * e  # Y_diag
        + one_state * e  # the zero initial state
        + new_states
        + 3 * np_ * i * 4  # Y_off, Y_diag + Y_off, its contiguous copy
        + (m.b * h * m.chunks * m.chunk**2 * 4 if autocast else 0.0)  # M in float32
        + (n * m.in_width * ca if mixed else 0.0)  # in_proj's output
    )
    later = 4 * n * i * 4 + n * m.groups * 4 + (n * i * 4 if trainable else 0.0) + n * i * ca
    return Term(
        "Mamba-2 torch path: the scan's forward high point, recomputed (less the saved tensors made after it)",
        f"B·conv·S × {ca:g} + N·H × {dt:g} + padded (D·x, x·dt, 2 A, C, B_decay, Y_diag, states, 3 × Y"
        f"{', M' if autocast else ''}{', in_proj output' if mixed else ''}) − "
        f"{'5' if trainable else '4'} × N·I × 4 − N·G × 4 − N·I × {ca:g}",
        transient - later,
    )

"""The efficiency coefficients of the time model (:mod:`core.training.speed`), and where they
come from.

A coefficient multiplies the seconds a part of the step would take at the card's ideal rate
(its datasheet peak, or its memory bandwidth): 1.25 on the matmuls means large matmuls reach
80 % of the peak. ``PRIORS`` are the physical starting points, each with its source; the
values used (``FITTED``) are fitted on the published training throughput corpus
(benchmarks/realgpu/throughput_figures.json) by ``benchmarks/realgpu/throughput.py --fit``:
a least-squares fit of every record's step time, each source family weighted equally, pulled
towards the priors where the corpus says little. Every source is scored with coefficients
fitted without it (leave one source out); the tables are in docs/TRAINING_TIME.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final

from core.training.gemm_shape import shape_efficiency

# ---- priors ------------------------------------------------------------------------------
# Large matmuls reach 78 % of the dense peak on an H100, 16-bit and float8 alike, and
# pointwise kernels 92 % of the memory bandwidth (torchao's roofline model,
# torchao/testing/training/roofline_utils.py, pytorch/ao 36027d8: "pct_achievable_gemm_tops":
# 0.78, "based on experimental observation with sample large inputs"; B200 copied from it);
# an A100 about 85 % (NVIDIA's "Matrix Multiplication Background" guide: 8192² GEMMs near
# 270 of 312 TFLOP/s), Ada cards about 80 %.
_GEMM_16BIT: Final = {"ampere": 1 / 0.85, "ada": 1 / 0.80, "hopper": 1 / 0.78, "blackwell": 1 / 0.78}
# Float8 matmuls: tensorwise scaling (cuBLAS, torch._scaled_mm) reaches the same share of the
# fp8 peak as 16-bit ones of theirs (the roofline model above uses one figure for both);
# rowwise scaling runs CUTLASS kernels, slower (torchao's float8 docs list it as the more
# accurate, slower recipe): a third more assumed. Soft ties (TIES below): the fit may move them.
_FP8_OVER_16BIT: Final = {"fp8-tensorwise": 1.0, "fp8-rowwise": 1.33}
# Transformer Engine's per-tensor fp8 GEMM (cuBLASLt) on Hopper, measured against bf16 at a
# 5B model's training shapes: NVIDIA's GEMM profiling guide (NVIDIA/TransformerEngine@1609c890,
# docs/examples/gemm_profiling/gemm_profiling.rst, "Worked Example: 5B Model on H200", H200 NVL,
# hidden 4096, MLP 16384, M = 31 x 512 tokens, the 12 forward / dgrad / wgrad GEMMs of a layer):
# 31.968 ms per layer in BF16 (torch.matmul) and 16.785 ms in FP8 with pre-quantized inputs (the
# kernel alone), 1.90x on a card whose fp8 peak is 2x its bf16 one (H200 NVL datasheet: 835 /
# 1,671 dense TFLOP/s). Solved through this model's roofline (the matmul bytes at 4.8 TB/s x the
# fitted gemm_bytes 1.28; fp8 operands in 1 byte): the fp8 matmul coefficient is 1.031 x the
# 16-bit one (2 / 1.90 = 1.05 without the bytes). The same guide's B300 run (314.4 vs 163.5 ms,
# 1.92x: 2 / 1.92 = 1.04) says Blackwell's is alike, so one ratio serves both. A hard tie, not
# fitted: NVIDIA's own Megatron / NeMo figures, the corpus' only Transformer Engine runs, never
# set it for themselves.
# The casts the recipe adds are counted as bytes (core.training.speed.TE_CAST_BYTES).
FP8_TE_OVER_16BIT: Final = 1.03
# Transformer Engine's MXFP8 GEMM (Blackwell's block-scaled fp8, cuBLASLt with E8M0 scales per 1×32
# block) against its per-tensor fp8 GEMM at the same shapes on the same card: the same guide's
# B300 pre-quantized run (NVIDIA/TransformerEngine@1609c890, gemm_profiling.rst, "Autocast vs
# Pre-quantized", the kernels alone, the 5B model's 12 GEMMs a layer over 24 layers): 171.869 ms
# MXFP8 against 163.493 ms FP8 CurrentScaling, 1.051 x (its operands are the same bytes, plus
# 1/32 of scales). A hard tie, as FP8_TE_OVER_16BIT; its casts are counted apart
# (core.training.speed.TE_MXFP8_CAST_BYTES).
MXFP8_OVER_FP8_TE: Final = 171.869 / 163.493
# Coefficients that are a fixed multiple of another (name suffix -> (the other's suffix, ratio)).
# torchao's MX linears ("fp8-mxfp8": recipes mxfp8_cublas / mxfp8_cublas_rceil, MXGemmKernelChoice.CUBLAS)
# multiply through torch._scaled_mm with E8M0 block scales (torchao 0.13.0 torchao/prototype/mx_formats/
# mx_ops.py ``_addmm_mx_dispatch``), cuBLASLt's block-scaled MXFP8 GEMM, the kernel TE's MXFP8 recipe runs:
# the same ratio; their casts are counted apart (core.training.speed.MX_CAST_BYTES). No corpus row fits it.
DERIVED: Final = {
    "/fp8-te": ("/16-bit", FP8_TE_OVER_16BIT),
    "/fp8-te-mxfp8": ("/16-bit", FP8_TE_OVER_16BIT * MXFP8_OVER_FP8_TE),
    "/fp8-mxfp8": ("/16-bit", FP8_TE_OVER_16BIT * MXFP8_OVER_FP8_TE),
}
# Eager attention's QKᵀ and PV are cuBLAS batched GEMMs (torch.baddbmm / torch.bmm in
# Megatron-DeepSpeed's CoreAttention, bigscience-workshop/Megatron-DeepSpeed@8387ae1
# megatron/model/transformer.py; at::cuda::blas::bgemm, pytorch/pytorch@0040fe0
# aten/src/ATen/cuda/CUDABlas.cpp): they run at the same card's matmul coefficient of their dtype
# (their shape's waste counted in whole tiles, core.training.speed._attention_padding), not at a
# fused attention kernel's. Kernel name -> the matmul kind it takes.
EAGER_ATTENTION: Final = {"eager": "16-bit", "eager-fp32": "fp32"}


# The Megatron / NeMo stack's matmuls on Hopper, at the rate the same GEMM guide measures them in
# isolation (the "Worked Example: 5B Model on H200", pre-quantized table: a layer's 4 Fprop, 4
# Dgrad and 4 Wgrad GEMMs at M = 31 x 512 = 15,872 tokens, hidden 4,096, MLP 16,384): 31.968 ms in
# BF16 (torch.matmul) and 16.785 ms in FP8 CurrentScaling (the cuBLASLt per-tensor kernel alone;
# TE's casts are counted apart, core.training.speed.TE_CAST_BYTES). Solved through the model's
# roofline with the matmul bytes at their prior 1.0 (not the fit): time = c x FLOPs / peak +
# bytes / bandwidth, on the H200 NVL's datasheet rates (835.5 / 1,670.5 dense bf16 / fp8 TFLOP/s,
# 4.8 TB/s; NVIDIA H200 NVL datasheet). Megatron-Core's step then loses nothing to its matmuls
# beyond the kernels' own rate; PyTorch stacks keep the fitted coefficient, slower (their launch
# gaps and stream waits fold into it). Fixed (FIXED below), so NVIDIA's rows, the corpus' only
# Megatron-Core runs on Hopper, never set the rate they are scored with.
_GUIDE_M, _GUIDE_HIDDEN, _GUIDE_MLP = 31 * 512, 4096, 16384
_GUIDE_SHAPES: Final = (  # (K, N) of each forward GEMM: QKV, attention out, MLP up, MLP down
    (_GUIDE_HIDDEN, 3 * _GUIDE_HIDDEN),
    (_GUIDE_HIDDEN, _GUIDE_HIDDEN),
    (_GUIDE_HIDDEN, _GUIDE_MLP),
    (_GUIDE_MLP, _GUIDE_HIDDEN),
)
_GUIDE_LAYER_MS: Final = {"16-bit": 31.968, "fp8-te": 16.785}
_GUIDE_PEAK_TFLOPS: Final = {"16-bit": 835.5, "fp8-te": 1670.5}  # H200 NVL, dense
_GUIDE_OPERAND_BYTES: Final = {"16-bit": 2.0, "fp8-te": 1.0}  # outputs in 2 bytes either way
_GUIDE_BANDWIDTH: Final = 4.8e12  # bytes/s, H200 NVL


_GUIDE_SMS: Final = 132  # H200 NVL: the GH100 of H100 SXM5, 132 SMs (resources/gpus.json sm_count)


def guide_coefficient(kind: str) -> float:
    """The matmul coefficient the TE GEMM guide's H200 NVL layer time gives (forward, input- and
    weight-gradient GEMMs: three passes of the forward shapes, as core.training.speed counts them,
    each at its tile- and wave-quantized FLOPs, core.training.gemm_shape)."""
    m, inputs = _GUIDE_M, _GUIDE_OPERAND_BYTES[kind]
    padded = sum(
        2.0 * m * k * n * sum(1 / shape_efficiency(a, b, _GUIDE_SMS) for a, b in ((m, n), (m, k), (k, n)))
        for k, n in _GUIDE_SHAPES
    )
    moved = 3 * sum((m * k + k * n) * inputs + m * n * 2.0 for k, n in _GUIDE_SHAPES)
    at_peak = padded / (_GUIDE_PEAK_TFLOPS[kind] * 1e12)
    return (_GUIDE_LAYER_MS[kind] * 1e-3 - moved / _GUIDE_BANDWIDTH) / at_peak


# The feature names these apply to (core.training.speed.gemm_kind: the Megatron stack on Hopper).
MEGATRON_HOPPER: Final = {
    "gemm:hopper/megatron-16-bit": guide_coefficient("16-bit"),
    "gemm:hopper/megatron-fp8-te": guide_coefficient("fp8-te"),
}
# FlashAttention-2 forward + backward: ~50 % of an A100's peak (Dao 2023, arXiv:2307.08691,
# fig. 6: 187-225 TFLOP/s of 312 causal, backward slower); PyTorch's SDPA flash kernel (FA2)
# on an H100 ~35 % (FlashAttention-3, Shah et al. 2024, fig. 5: FA2 at 325-370 of 989). Both
# papers' TFLOP/s count the backward at 2.5 x the forward (its recompute of the scores), as the
# time does for a fused kernel (core.training.speed.FUSED_BACKWARD_OVER_COUNTED).
_ATTENTION: Final = {"ampere": 1 / 0.50, "ada": 1 / 0.45, "hopper": 1 / 0.35, "blackwell": 1 / 0.35}
# Transformer Engine's fused attention (cuDNN) on Hopper and Blackwell is FlashAttention-3
# class: 600-750 TFLOP/s forward on an H100 (Shah et al. 2024, fig. 5), backward slower.
_FUSED_ATTENTION: Final = {"ampere": 1 / 0.50, "ada": 1 / 0.45, "hopper": 1 / 0.55, "blackwell": 1 / 0.55}
# FlashAttention-2 (the flash-attn package) on a datacenter Blackwell card (sm_100 / sm_103: core.catalogue.tcgen05)
# runs Ampere's warp-level MMA: its kernels' atom is SM80_16x8x16_F32BF16BF16F32_TN on every card
# (Dao-AILab/flash-attention v2.8.3 = 060c9188 csrc/flash_attn/src/kernel_traits.h L29-33), built for sm_100 since
# CUDA 12.8 (setup.py L187-188), not the tcgen05 MMAs the card's datasheet peak is counted at. It issues at the rate
# per SM and clock it reaches on Hopper, where the peak is half as many FLOPs per SM and clock (4,096 against
# 8,192: core.catalogue._TCGEN05_PREFIXES' source), so its coefficient against the B200's peak is twice the H100's
# against the H100's: FA2 on a B200 at (148 SMs x 1.855 GHz) / (132 x 1.83) = 1.14 x its H100 speed, not the peaks'
# 2.27 x. Measured, the same script (benchmarks/benchmark_flash_attention.py, forward + backward, head dim 64, no
# causal mask, 512 to 16k tokens): B200 259 / 299 / 321 / 312 / 333 / 346 TFLOP/s (flash-attn 2.7.4.post1,
# Dao-AILab/flash-attention issue 1589, 2025-04-13) against H100 SXM5 215 / 254 / 274 / 288 / 294 / 296 (the
# repository's assets/flash2_h100_fwd_bwd_benchmark.png, 2023-07, panel a): 1.09-1.20 x, median 1.17. A fixed
# multiple of the H100's flash coefficient (derived below), fitted on nothing: no fitted source runs flash-attn 2 on
# such a card (prime-rl's held-out B200 rows do). The plan's "flash" feature of such a card is named FLASH_SM80.
FLASH_SM80: Final = "flash-sm80"
TCGEN05_OVER_MMA_SYNC: Final = 8192 / 4096
# PyTorch's SDPA on cuDNN's fused attention (core.training.attention.sdpa_runs_cudnn: a datacenter Blackwell card from
# PyTorch 2.14): the kernel Transformer Engine's fused attention runs, so the "fused" coefficient, fitted on
# Megatron-Bridge's B200 rows and tied to Hopper's. A name of its own only so that the Compute & time part can say
# which backend SDPA picked (core.training.compute); fitted on nothing (docs/TRAINING_TIME.md, "Which backend
# PyTorch's SDPA runs, by release and card").
SDPA_CUDNN: Final = "sdpa-cudnn"
# FlashAttention-3 (flash-attn's hopper/ package, Hopper's wgmma and TMA) against FlashAttention-2 on the same H100,
# the same script (hopper/benchmark_attn.py, head dim 128, 8k tokens, bf16; Dao-AILab/flash-attention PR 1791,
# 2025-07-31, its main-branch run), causal as a language model trains: FA2 284.1 forward / 287.1 backward TFLOP/s,
# FA3 630.0 / 531.6. Forward and backward together, the backward at 2.5 x the forward's FLOPs (the papers' count, as
# core.training.speed times a fused kernel): FA2 286 TFLOP/s, FA3 556, 1.94 x (1.87 x without the causal mask: 370 /
# 291 against 659 / 554). The FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608, fig. 5) has the forward at
# 1.5-2.0 x FlashAttention-2's by head dim and length. A fixed multiple of the H100's flash coefficient (derived below):
# prime-rl's held-out H100 / H200 rows are the corpus' only FlashAttention-3 runs.
_FA3_CAUSAL_TFLOPS: Final = {"flash": (284.1, 287.1), "flash3": (630.0, 531.6)}  # (forward, backward), PR 1791


def _forward_backward(forward: float, backward: float) -> float:
    """TFLOP/s of a forward and its backward of 2.5 x the forward's FLOPs, at their own rates."""
    return 3.5 / (1 / forward + 2.5 / backward)


FLASH3_OVER_FLASH: Final = _forward_backward(*_FA3_CAUSAL_TFLOPS["flash3"]) / _forward_backward(
    *_FA3_CAUSAL_TFLOPS["flash"]
)
# FlashAttention 1 and its Triton kernel (flash_attn_triton.py, MPT's attn_impl: triton, 2022-23)
# take about twice FlashAttention-2's time (Dao 2023, arXiv:2307.08691, checked against its text:
# abstract "around 2× speedup compared to FlashAttention"; §4's summary "1.7-3.0× faster than
# FlashAttention, 1.3-2.5× faster than FlashAttention in Triton"; §4.1, A100 80GB: "around 2×
# faster than FlashAttention", "around 1.3-1.5× faster than FlashAttention in Triton in the
# forward pass and around 2× faster in the backward pass"). With the backward's 2.5× the
# forward's FLOPs (§4.1), the Triton kernel's ratio is about (1.4 + 2 × 2.5) / 3.5 ≈ 1.8; 2.0 is
# FlashAttention 1's, kept for both (the corpus' MosaicML rows cannot tell them apart).
# A fixed multiple of the same card's flash coefficient (a tie below): the corpus' one user of
# the old kernels (MosaicML's 2023 tables) never sets it for itself.
FLASH1_OVER_FLASH: Final = 2.0
# The share of eager PyTorch's elementwise traffic each stack moves: Megatron's Transformer
# Engine fuses the chains of pointwise ops into the matmuls' neighbours. torch.compile's traffic is
# counted apart, from what inductor fuses (core.training.speed.COMPILE_*), and runs at the
# pointwise rate (92 % of the bandwidth, as above): fixed, not fitted (FIXED below).
_ELEMENTWISE: Final = {"eager": 1 / 0.92, "compile": 1 / 0.92, "megatron": 0.4}


def _priors() -> dict[str, float]:
    # tp_overlap: the share of overlapped tensor-parallel traffic a step still waits for; half
    # is a neutral start (the first chunk of each collective matmul, and SM contention).
    priors: dict[str, float] = {"gemm_bytes": 1.0, "optimizer": 1 / 0.92, "tp_overlap": 0.5}
    # dp_contention: the share of overlapped data-parallel traffic (FSDP's gathers and
    # reduce-scatters, DDP's and the distributed optimizer's buckets) the step still loses to
    # it, NCCL's kernels holding SMs beside the compute (core.parallel.comm._contended): a
    # 24-block ncclAllGather on a 132-SM H100 holds 24 / 132 = 0.18 of the SMs while it runs
    # (NVIDIA developer forum, "Compute-Communication Overlap Causes Severe GEMM Performance
    # Degradation because of Tail Effect", 2025), the start.
    priors["dp_contention"] = 24 / 132
    # Ring attention's merges and copies (PyTorch's float32 ones, Transformer Engine's 16-bit ones under
    # Megatron) are plain pointwise kernels: 92 % of the bandwidth, as the roofline model above has them.
    priors["ring_merge"] = 1 / 0.92
    # Transformer Engine's float8 casts, counted from the bytes its source measures (below).
    priors["te_casts"] = 1 / 0.92
    # A mixture of experts' token permutes (core.training.speed.MOE_*): plain copy kernels, counted
    # from Transformer Engine's and Megatron-Core's source.
    priors["moe_permute"] = 1 / 0.92
    # Gradient accumulation outside the weight-gradient matmul (core.training.speed.
    # grad_accum_bytes): a plain pointwise add, counted from the bytes AccumulateGrad moves.
    priors["grad_accum"] = 1 / 0.92
    priors.update(MEGATRON_HOPPER)
    for family, gemm in _GEMM_16BIT.items():
        priors[f"gemm:{family}/16-bit"] = gemm
        priors[f"gemm:{family}/fp32"] = gemm
        for kind, ratio in _FP8_OVER_16BIT.items():
            priors[f"gemm:{family}/{kind}"] = gemm * ratio
        priors[f"attention:{family}/flash"] = _ATTENTION[family]
        priors[f"attention:{family}/fused"] = _FUSED_ATTENTION[family]
        priors[f"attention:{family}/flash1"] = _ATTENTION[family] * FLASH1_OVER_FLASH
    for stack, share in _ELEMENTWISE.items():
        priors[f"elementwise:{stack}"] = share
    return priors


PRIORS: Final[Mapping[str, float]] = _priors()

# Coefficients the fit does not move (held at their priors): the ring merges' bytes are counted
# from the source, and the corpus's only context-parallel rows (torchtitan's) would otherwise
# set the figure for themselves; torch.compile's elementwise bytes are counted from what inductor
# fuses, so its rows do not set the stack's factor either.
FIXED: Final = frozenset(
    {"ring_merge", "te_casts", "moe_permute", "grad_accum", "elementwise:compile", *MEGATRON_HOPPER}
)

# ---- fitted on the corpus (benchmarks/realgpu/throughput.py --fit, all sources) -----------
# Written by that script's --fit (tests/core/test_throughput.py checks they are its output).
# fmt: off
FITTED: Final[Mapping[str, float]] = {
    "attention:ada/flash": 2.1706,
    "attention:ada/flash1": 4.3506,
    "attention:ada/fused": 2.2222,
    "attention:ampere/flash": 1.4855,
    "attention:ampere/flash1": 3.0181,
    "attention:ampere/fused": 2.0000,
    "attention:blackwell/flash": 3.0756,
    "attention:blackwell/flash1": 6.0000,
    "attention:blackwell/fused": 1.8088,
    "attention:hopper/flash": 3.1730,
    "attention:hopper/flash1": 6.0000,
    "attention:hopper/fused": 1.8080,
    "dp_contention": 0.2004,
    "elementwise:compile": 1.0870,
    "elementwise:eager": 1.0476,
    "elementwise:megatron": 0.5276,
    "gemm:ada/16-bit": 1.0874,
    "gemm:ada/fp32": 1.2500,
    "gemm:ada/fp8-rowwise": 1.4659,
    "gemm:ada/fp8-tensorwise": 1.1022,
    "gemm:ampere/16-bit": 1.3644,
    "gemm:ampere/fp32": 1.1765,
    "gemm:ampere/fp8-rowwise": 1.7919,
    "gemm:ampere/fp8-tensorwise": 1.3473,
    "gemm:blackwell/16-bit": 1.6114,
    "gemm:blackwell/fp32": 1.2821,
    "gemm:blackwell/fp8-rowwise": 2.1034,
    "gemm:blackwell/fp8-tensorwise": 1.5815,
    "gemm:hopper/16-bit": 1.7075,
    "gemm:hopper/fp32": 1.2821,
    "gemm:hopper/fp8-rowwise": 2.2305,
    "gemm:hopper/fp8-tensorwise": 1.6633,
    "gemm:hopper/megatron-16-bit": 1.2761,
    "gemm:hopper/megatron-fp8-te": 1.3123,
    "gemm_bytes": 1.1864,
    "grad_accum": 1.0870,
    "moe_permute": 1.0870,
    "optimizer": 1.0679,
    "ring_merge": 1.0870,
    "te_casts": 1.0870,
    "tp_overlap": 0.4897,
}
# fmt: on


# Ties the fit keeps between coefficients (name, other, ratio): float8 matmuls as a fixed
# multiple of the same card's 16-bit ones (the priors' ratios), Blackwell like Hopper; a
# recipe or card seen by one source only is then scored by what the others say of its kin.
TIES: Final = (
    *(
        (f"gemm:{family}/{kind}", f"gemm:{family}/16-bit", ratio)
        for family in _GEMM_16BIT
        for kind, ratio in _FP8_OVER_16BIT.items()
    ),
    *((f"attention:{family}/flash1", f"attention:{family}/flash", FLASH1_OVER_FLASH) for family in _ATTENTION),
    ("gemm:blackwell/16-bit", "gemm:hopper/16-bit", 1.0),
    ("attention:blackwell/fused", "attention:hopper/fused", 1.0),
    ("attention:blackwell/flash", "attention:hopper/flash", 1.0),
)


def derived(name: str) -> tuple[str, float] | None:
    """The coefficient ``name`` is a fixed multiple of (``DERIVED``), and the ratio; None if free. A PEFT method's
    float32 matmuls take the card's float32 matmul coefficient, its memory-bound passes the stack's elementwise one
    (core.training.speed.method_features): no coefficient of their own, none fitted on them."""
    if name.startswith("adapter_fp32:"):
        return f"gemm:{name.removeprefix('adapter_fp32:')}/fp32", 1.0
    if name.startswith("optimizer_gemm:"):  # Muon's Newton-Schulz matmuls (core.training.speed.muon_feature)
        return f"gemm:{name.removeprefix('optimizer_gemm:')}", 1.0
    if name.startswith("adapter_bytes:"):
        return f"elementwise:{name.removeprefix('adapter_bytes:')}", 1.0
    if name.startswith("attention:"):
        family, _, kernel = name.removeprefix("attention:").partition("/")
        if kernel in EAGER_ATTENTION:
            return f"gemm:{family}/{EAGER_ATTENTION[kernel]}", 1.0
        if kernel == FLASH_SM80:  # FlashAttention-2's mma.sync on a tcgen05 card: Hopper's rate per SM and clock
            return "attention:hopper/flash", TCGEN05_OVER_MMA_SYNC
        if kernel == SDPA_CUDNN:  # cuDNN's fused attention under SDPA: Transformer Engine's kernel, its coefficient
            return f"attention:{family}/fused", 1.0
        if kernel == "flash3":  # FlashAttention-3 (Hopper only): FlashAttention-2's time / FLASH3_OVER_FLASH
            return f"attention:{family}/flash", 1 / FLASH3_OVER_FLASH
    for suffix, (other, ratio) in DERIVED.items():
        if name.endswith(suffix):
            return name[: -len(suffix)] + other, ratio
    return None


def coefficient(name: str, table: Mapping[str, float] = FITTED) -> float:
    """The coefficient of feature ``name``; a card family the corpus has no run on (Volta,
    Turing, AMD, Apple, a custom card) takes the Ampere figures."""
    if table is FITTED:  # the shipped table never changes: each name is looked up once
        return _shipped(name)
    return _coefficient(name, table)


@functools.cache
def _shipped(name: str) -> float:
    return _coefficient(name, FITTED)


def _coefficient(name: str, table: Mapping[str, float]) -> float:
    tie = derived(name)
    if tie is not None:
        return tie[1] * coefficient(tie[0], table)
    if name in table:
        return table[name]
    fallback = name.replace(":other", ":ampere")
    if fallback in table:
        return table[fallback]
    return PRIORS.get(fallback, 1.0)

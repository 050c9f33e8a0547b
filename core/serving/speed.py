"""Serving speed: decode from the bytes each step reads, prefill from its FLOPs, and a queue.

The model, stated (the window shows it under "Assumptions"):

* **A decode step** with ``n`` requests running reads the rank's weights (for a mixture of
  experts, the experts some request routes to) and each request's KV cache (prompt + half the
  answer cached, on average), at the card's bandwidth × its memory class's efficiency
  (:class:`core.serving.fit.ServingFit`; on the data-centre GDDR parts whose ECC is in-band, the
  15/16 of the bandwidth that carries data, :data:`INBAND_ECC_DATA_SHARE`; a lone token's F16
  weights in a llama.cpp CUDA build before
  b3916 on an HBM card take :data:`SCALAR_F16_MATVEC_SLOWDOWN` times as long, their mat-vec's scalar
  loads); it needs 2 · active parameters FLOPs per request (the token embedding, a lookup, left out) at
  the dense peak × utilisation (and, for one token of a K-quant file on an Apple GPU, the
  mat-vecs' ALU cycles per weight, :data:`APPLE_MATVEC_CYCLES`); it takes the longer of
  the two, plus a fixed cost per kernel
  it runs (:func:`kernel_seconds`: none for the graphs vLLM and SGLang capture, but for the empty
  per-expert Marlin MoE kernels of SGLang 0.4.6's GPTQ MoE, :func:`marlin_moe_kernels_per_layer`; for
  llama.cpp's kernels a number of GPU cycles each, fitted, at the card's boost clock: a short kernel's
  ramp-up and drain are counted in the SM's clock), and the launch overhead of each kernel no CUDA
  graph replays (:func:`launch_seconds`; llama.cpp replays a lone sequence's step on one
  GPU, :func:`core.serving.llamacpp.cuda_graphs_replayed`; vLLM under ``--enforce-eager`` and SGLang
  under ``--disable-cuda-graph`` replay none, :func:`launched_eagerly`),
  plus with tensor parallelism two all-reduces per layer over the plan's link (ring: 2(t−1)
  hops of the link's latency and 2(t−1)/t of the hidden states over its bandwidth × NCCL's
  bus efficiency), and vLLM and SGLang all-reduce the embedding lookup, split by vocabulary
  (:func:`embedding_allreduce_seconds`), and gather the step's logits across the ranks
  (:func:`logits_gather_seconds`). Pipeline stages run one after another.
* **llama.cpp with partial offload** reads the layers left on the host at the host's memory
  bandwidth (the plan's ``inference.host_bandwidth_gb_s``, by default
  :data:`core.inputs.HOST_BANDWIDTH_GB_S`) and every GPU's layers at that GPU's, one after another.
* **Prefill** of a prompt runs 2 · the blocks' active parameters · tokens, the output head for its
  last token only, and causal attention FLOPs (the token embedding is a lookup:
  :data:`PROMPT_HEAD_ROWS`) at the dense peak × utilisation on the tensor-parallel GPUs, with its
  all-reduces. llama.cpp's layer split pipelines a prompt's micro-batches across its GPUs: after the
  first, each leaves the last GPU a share of one micro-batch's time after the one before
  (:meth:`StepModel.prompt_seconds`, :func:`core.serving.llamacpp.prompt_pipeline_interval`).
* **The queue** (``vllm bench serve --num-prompts N`` with no rate limit, or N users pressing
  enter together): all N arrive at once; up to S (what the pool holds, max_num_seqs) run
  together, the rest wait for a slot; prompts are prefilled first come first served in
  chunks of max_num_batched_tokens shared with the running requests' decode tokens (chunked
  prefill), so one request's first token comes after the prompts ahead of it, and each
  request's decode steps carry, on average, half the prefills of the requests admitted with
  it. Mean TTFT = wait for a slot + (S + 1) / 2 prompts' prefill (the step that completes a
  prompt samples its first token from the prompt's own logits); mean time per
  output token = step(S) + (S − 1) / 2 · prompt prefill ÷ answer length. Hugging Face
  ``generate`` prefills its whole static batch at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, NamedTuple

from core.catalogue import GpuSpec, LinkSpec, find_link
from core.dtypes import GGUF_FLOAT, GgmlType, LlamaCppBackend, WeightFormat, matmul_dtype
from core.format import TOTAL_RATE_BASIS, counted, duration, gb, latency, tokens_per_s
from core.params import ParamCounts
from core.plan import Engine, Plan, SglangVersion
from core.serving.engines import RankLayout, serving_link
from core.serving.fit import (
    DEFAULT_FIT,
    HF_HOST_LAYER,
    METAL_KERNELS,
    EngineFamily,
    MemoryClass,
    ServingFit,
    bandwidth_key,
    memory_class,
)
from core.serving.gptq import hf_linear_extra_ops
from core.serving.hf_generate import (
    DENSE_LAYER_OPS,
    FP8_TRITON_KERNELS,
    TRITON_LAUNCH_S,
    decode_kv_passes,
    experts_hit,
    fp8_linears_parts,
    fp8_synchronised,
    host_ratio_parts,
    repeats_kv,
)
from core.serving.llamacpp import (
    F16_VECTOR_LOADS_FROM_BUILD,
    MMQ_MAX_BATCH_SIZE,
    OP_OFFLOAD_MIN_BATCH,
    PIPELINE_OVERLAP_SHARE,
    SCHED_COPIES,
    cuda_graphs_replayed,
    f16_matvec_scalar_loads,
    matvec_weights_by_type,
    vulkan_quantise_dispatches,
)
from core.serving.llamacpp_hybrid import expert_share as llamacpp_expert_share
from core.serving.llamacpp_hybrid import state_bytes_per_sequence as llamacpp_state_bytes
from core.serving.vllm_hybrid import state_bytes_per_request
from core.serving.vllm_versions import era_of
from core.training.mixer_flops import mixer_flops

# The hidden state one all-reduce carries is in 16 bits.
ACTIVATION_BYTES: Final = 2
# llama.cpp's decode graph of one Llama layer (llm_build_llama; the ggml-cuda of the corpus's 2024
# builds) launches one kernel per node that computes: RMS_NORM, MUL (the norm's weight), MUL_MAT
# q, k, v, ROPE q, k, CPY of k and v into the cache, MUL_MAT kq, SOFT_MAX (scale and mask fused),
# MUL_MAT kqv, CONT (heads merged), MUL_MAT o, ADD; RMS_NORM, MUL, MUL_MAT gate, up, SILU, MUL,
# MUL_MAT down, ADD: 23 (views, permutes and reshapes launch none). HF generate's eager layer
# launches more; 23 is its floor.
KERNELS_PER_LAYER: Final = 23
# With quantised weights on CUDA each weight MUL_MAT first quantises its activations to q8_1 for
# the mmvq kernels (ggml/src/ggml-cuda/ggml-cuda.cu, ggml_cuda_op_mul_mat: convert_src1_to_q8_1 ->
# quantize_row_q8_1_cuda): 7 kernels more. Metal's mul_mv kernels read float activations.
WEIGHT_MATMULS_PER_LAYER: Final = 7
# Without flash attention the two attention products (KQ, KQV: an F16 cache view times float
# activations, one batch per head) go through ggml_cuda_mul_mat_batched_cublas on every card with
# fast FP16 (ggml-cuda.cu at ggerganov/llama.cpp 005de593, ggml_cuda_mul_mat: "KQ + KQV
# multi-batch"): to_fp16_cuda converts the float operand, cuBLAS multiplies in F16, and with the
# default precision to_fp32_cuda converts the F16 result back: 3 kernels where the graph has one
# node, 4 with grouped-query attention, whose head broadcast (r2 > 1) takes cublasGemmBatchedEx
# after a k_compute_batched_ptrs kernel instead of the strided call. Metal multiplies the F16 cache
# by float activations in one kernel (kernel_mul_mv_f16_f32).
ATTENTION_PRODUCT_KERNELS: Final = 3
# ggml-vulkan (ggml-org/ggml 400b9294, 2025-12-13, src/ggml-vulkan/ggml-vulkan.cpp,
# ggml_backend_vk_graph_compute) dispatches a Llama layer of the 2025 graph (llama.cpp's
# src/llama-graph.cpp at 434f71a5: the KV writes are SET_ROWS, ggml-org/ggml a1938493; the FFN's
# SiLU and product one GLU node, ggml_swiglu_split, ggml-org/ggml 2560b6c5): 22 nodes that compute,
# the 23 above with SILU and MUL as one. Its fusions take five away: RMS_NORM + MUL twice
# ("RMS_NORM_MUL"), the k ROPE with its cache write ("ROPE_VIEW_SET_ROWS"), and the o and down
# mat-vecs with the residual ADD that follows each ("MUL_MAT_ADD": a one-row product whose addend has
# its shape): 17. With flash attention kq, softmax, kqv and the heads' CONT are one flash-attention
# dispatch and, for a lone token's grouped-query heads, its split-k reduce (ggml_vk_flash_attn):
# 15. Beside them the q8_1 quantisations of core.serving.llamacpp.vulkan_quantise_dispatches.
VULKAN_KERNELS_PER_LAYER: Final = 17
VULKAN_FLASH_KERNELS_PER_LAYER: Final = 15
# A card whose catalogue entry prints no boost clock (laptop parts, custom cards) counts its
# kernels' cycles at this clock. An assumption, not a sourced figure: a laptop part's clock follows
# the power limit its maker set; 1.5 GHz sits among the 1.2-2.0 GHz such parts run at. Apple's
# entries carry their GPU clock (resources/gpus.json: philipturner/metal-benchmarks dc2adc6 for
# M1 and M2, 1.278-1.398 GHz; the hmc-tech clock of their FP32 figure for M3 and M4).
FALLBACK_CLOCK_GHZ: Final = 1.5
# The catalogue's segments of GeForce cards (their tensor rates listed at FP32 accumulate).
GEFORCE_SEGMENTS: Final = frozenset({"consumer", "laptop"})


class SpeedPoint(NamedTuple):  # a tuple: a curve of them is built on every estimate
    concurrent: int
    step_s: float  # one decode step (all running requests advance one token)
    per_request_tokens_per_s: float
    total_tokens_per_s: float  # all replicas
    memory_bound: bool
    ttft_s: float = 0.0  # mean time to first token with this many requests sent together
    token_latency_s: float = 0.0  # mean time per output token, prefill stalls included


@dataclass(frozen=True)
class ServingSpeed:
    ttft_s: float  # mean time to first token at the plan's concurrency (queue and chunked prefill)
    prefill_flops: float  # one request's prompt
    step_s: float  # one decode step at the requests running together
    per_request_tokens_per_s: float  # 1 / mean time per output token
    total_tokens_per_s: float
    running: int  # requests decoding together
    curve: tuple[SpeedPoint, ...]
    peak_tflops: float
    bandwidth_gb_s: float
    formula: str
    assumptions: str
    ttft_alone_s: float = 0.0  # one request's prompt on an idle server
    token_latency_s: float = 0.0  # mean time per output token at the plan's concurrency
    queue_wait_s: float = 0.0  # mean wait for a slot of the requests beyond the ones running
    allreduce_s: float = 0.0  # one decode step's tensor-parallel all-reduces and logits gather

    @property
    def rates_sentence(self) -> str:
        """The two rates in the words the CLI and the report share: what one request sees while it
        decodes, and the output over every request's whole life (its prompt's prefill included), which
        is why the total can read lower than one request's rate."""
        return f"{self.per_request_rate}, {self.total_rate} in total ({TOTAL_RATE_BASIS})"

    @property
    def per_request_rate(self) -> str:
        """What one request sees, with the words that say so: "55 tokens/s each while decoding" (every engine:
        the window's Per request row, the CLI's and the report's speed line)."""
        return f"{tokens_per_s(self.per_request_tokens_per_s)} each while decoding"

    @property
    def total_rate(self) -> str:
        """The output of every request together: "46 output tokens/s" (the In total row; TOTAL_RATE_BASIS says
        what it counts)."""
        return f"{self.total_tokens_per_s:,.0f} output tokens/s"


# Prefill and decode compute when no utilisation is typed: the lesson's 40 % (what serving has
# always used; the modelled utilisation of core.training.speed is fitted on training steps,
# and 0, the plan's default since then, means "modelled" there).
SERVING_UTILISATION: Final = 0.4


# Apple's GPUs (M1-M4) multiply matrices on their ALUs: simdgroup_matrix products (llama.cpp's
# Metal kernel_mul_mm, ggml-metal.metal at ggerganov/llama.cpp 1d900212: simdgroup_multiply_accumulate
# over 8x8 tiles; Apple's MPS) run at the ALU rate the catalogue lists (F16 and F32 alike on the
# Apple 7-9 families: philipturner/metal-benchmarks README, GFLOPS F16 = F32). A GEMM on the ALUs
# keeps them busier than serving's tensor-core lesson of 40 %: Apple's own MPS reaches 8,270 GFLOPS
# in F32 at 4096 x 4096 x 4096 on the 32-core Apple 7 GPU (M1 Max, 10,620 GFLOPS peak), 78 %
# (philipturner/metal-flash-attention 01e41e6 README, "GFLOPS during general matrix
# multiplication"; MFA's own kernel 9,247, 87 %). Used when no utilisation is typed.
APPLE_MATMUL_UTILISATION: Final = 0.78


# Apple GPU ALU cycles (one lane's instruction slot: 128 lanes a GPU core, the catalogue's FP32
# TFLOP/s = cores x 128 x 2 x clock) that llama.cpp's Metal mat-vec of a K-quant tensor spends per
# weight. kernel_mul_mv_q4_K_f32 (ggml-metal.metal at ggerganov/llama.cpp 1d900212, the QK_K == 256
# branch) unpacks each 256-weight super-block's 6-bit scales and mins (kmask shifts, byte
# extractions), masks every 4-bit weight out of a 16-bit word and converts it to float before its
# FMA; the q5_K and q6_K kernels add the high bits (byte loads, shifts, ORs, a select or an offset):
# integer and conversion work per weight that Q4_0's block_q_n_dot_y mostly avoids (one half
# scale per 32 weights, the activations' sum carrying the -8 offset). Where the GPU has few ALU
# lanes per byte of bandwidth the mat-vec is bound by them, not by its reads. The figures are the
# slopes of the kernels' author's published times on a 30-core M2 Max, by model size (LLaMA 7B /
# 13B / 33B / 65B: 32 / 40 / 60 / 80 layers, 6.61 / 12.86 / 32.32 / 65.03 billion weights through
# the mat-vecs, the 6.74-65.29 billion parameters less the 32,000-row token embedding, a lookup):
# - Q4_K: ggml-org/llama.cpp PR #2290 ("Faster Q4_K on Metal", ikawrakow, 2023-07-20), 19.5 /
#   31.9 / 73.6 / 141.0 ms a token; least squares of t = layers x a + weights x b: a = 0.188 ms a
#   layer (the 23 Metal dispatches the fit charges: 0.171 ms), b = 1.935 ps a weight, x 30 cores
#   x 128 lanes x 1.398 GHz (philipturner/metal-benchmarks dc2adc6, M2 family clock) = 10.4. The
#   PR names the type, not the file: taken as Q4_K_S (every block matrix in Q4_K; the author's
#   next PR names its files Q5_K_S and Q6_K).
# - Q5_K and Q6_K: PR #2294 ("Faster Q5_K and Q6_K on Metal", the same author and Mac, 2023-07-20):
#   Q5_K_S 22.8 / 39.3 / 97.0 / 181.1 ms, Q6_K 24.6 / 44.3 / 111.0 ms (no 65B: "does not run" in
#   64 GB); with the Q4_K fit's a = 0.188 ms a layer (three sizes do not separate it), b = 2.57
#   and 3.05 ps a weight: 13.8 and 16.4.
# No byte rate explains them: 1.935 ps a Q4_K weight (4.5 bits a super-block) is 294 GB/s, 73 % of 400,
# while XiongjieDai's M2 Ultra and M3 Max move their Q4_K_M files at 85 % and 83 % of their
# memory; per byte a second of bandwidth the 30-core M2 Max has 13.4 lanes a clock, like the
# 32-core M1 Max (13.3), where the M2 Ultra has 17.0 and the M3 Max 17.9. Read from sources that
# are not scored; other types (Q2_K, Q3_K, IQ, Q4_0, Q8_0) are not costed here.
APPLE_MATVEC_CYCLES: Final[Mapping[GgmlType, float]] = MappingProxyType(
    {GgmlType.Q4_K: 10.4, GgmlType.Q5_K: 13.8, GgmlType.Q6_K: 16.4}
)


# NVIDIA GPU lane cycles (one FP32 lane's issue slot: the catalogue's FP32 TFLOP/s / 2 a second) that
# llama.cpp's CUDA mat-vec of a 2- or 3-bit K-quant tensor spends per weight, in the builds of early
# 2024. Those builds send a lone token's quantised product to mul_mat_vec_q on every card of compute
# capability >= MIN_CC_DP4A (6.1) (ggml-org/ggml bcdb75e3, 2024-01-12, src/ggml-cuda.cu, as
# docs/SERVING.md reads it; the same kernels in stored copies of ggml-cuda.cu of those weeks):
# mul_mat_vec_q2_K_q8_1_cuda launches block_dims(WARP_SIZE, GGML_CUDA_MMV_Y = 1), one 32-thread warp
# per row, a thread taking one int of a super-block a step (VDR_Q2_K_Q8_1_MMVQ = VDR_Q3_K_Q8_1_MMVQ
# = 1, QI2_K = 16: two 256-weight super-blocks a warp step). vec_dot_q2_K_q8_1_impl_mmvq spends
# per 4 weights a scale-byte load, shift and mask of the codes, two __dp4a (the codes, and the
# minimum broadcast into four bytes by two shift-ORs), an integer multiply by the 4-bit scale, two
# int-to-float conversions and two FMAs; vec_dot_q3_K_q8_1_impl_mmvq rebuilds each 6-bit scale from
# two bytes (modulo, shifts, masks, an OR, -32) and the third bit of each code from hmask
# (__vsubss4) before its __dp4a: dependent integer work per weight that Q4_0's vec_dot (two nibble
# masks, one __dp4a per 4 weights, one scale a 32-weight block) and Q8_0's avoid. The cycles are
# not the count of those instructions (about 4 a Q2_K weight, about 1 ms of the 10.8 ms token): a
# warp per row with one warp a block leaves each SM 16 resident warps (sm_86's 16 resident blocks),
# too few to hide the chain's latency. They are set from a source that is not scored:
# ggml-org/llama.cpp PR #5351 ("CUDA: mul_mat_vec_q for batch sizes > 1", JohannesGaessler,
# 2024-02), its RTX 3090 table's master column at batch size 1 (a pp512 of 512 one-token steps
# through the same mul_mat_vec_q): llama 7B Q2_K_M 103.75, Q3_K_S 98.36, Q4_0 131.80 t/s. With
# the fitted bandwidth and kernel cycles of core.serving.fit, the Q3_K_S row's time sets Q3_K's
# cycles and the Q2_K_M row's, given those, Q2_K's (benchmarks/realgpu/serving.py
# kquant_cuda_cycles re-derives both: 17.23 and 14.85). PR #4766's RTX 3090 rows, a month earlier,
# are scored with them. Other types (Q4_K-Q6_K, Q4_0, Q8_0, the IQ types) are not costed.
CUDA_LOW_BIT_MATVEC_CYCLES: Final[Mapping[GgmlType, float]] = MappingProxyType(
    {GgmlType.Q2_K: 14.9, GgmlType.Q3_K: 17.2}
)
# The builds the cost applies to: those up to the kernel PR #5351 measured, before JohannesGaessler's
# PR #5434 ("CUDA: mul_mat_vec_q tiling, refactor mul mat logic", merged 2024-02-11) retuned
# mul_mat_vec_q's rows and warps per block. Its build number is not read: b1786 is 2024-01-07
# (slaren's PR #4812 log, 32d9f7d9) and b2824 the first with PR #6766's CUDA graphs (merged
# 2024-05-08; core.serving.llamacpp.CUDA_GRAPHS_FROM_BUILD), 8.5 builds a day between them, which
# puts 2024-02-11 near b2080 (PR #5351's master, early February, before it). A current build (0)
# and later numbered ones are not costed (no source read gives their kernels' cost).
CUDA_LOW_BIT_MATVEC_BEFORE_BUILD: Final = 2080


# How much longer llama.cpp's F16 mat-vec with scalar loads (core.serving.llamacpp
# f16_matvec_scalar_loads: builds before b3916) takes on an HBM card than the same product with
# the vector loads of later builds, whose reads the bandwidth efficiency of core.serving.fit
# describes. Measured by the change's author on the kernel alone: ggml-org/llama.cpp issue #9817
# (agray3, NVIDIA, 2024-10-10, "Optimization of matrix-vector kernel memory accesses for NVIDIA
# CUDA High Bandwidth GPUs"), Meta-Llama-3-8B-Instruct-F16 at batch 1 on an H100-SXM-80GB-HBM3:
# "MMV kernel speedup" 1.33X (the whole token 1.27X). "While the memory throughput of the matrix
# vector CUDA kernels is already a high percentage of peak on GDDR GPUs, there is large room for
# improvement on ... HBM GPUs"; PR #9816 measured 1.01X on GDDR cards, taken as none. Read on an
# H100 (HBM3); the A100s (HBM2e) take the same factor, an assumption: no A100 figure was found.
# Not from a scored source (XiongjieDai's rows are of the slow kernel and do not set it).
SCALAR_F16_MATVEC_SLOWDOWN: Final = 1.33


# The cards whose memory runs with in-band ECC: data-centre parts on GDDR6, ECC on as they ship.
# NVIDIA keeps their check bits in the DRAM beside the data, "inline ECC where a portion of main
# memory is carved out for ECC bits, as in the GDDR5 memory subsystem of the Tesla K40 GPU where
# 6.25% of the overall GDDR5 is reserved for ECC bits", where HBM2's "native or sideband ECC" runs
# "without a bandwidth or capacity penalty" (NVIDIA Tesla V100 GPU Architecture whitepaper,
# WP-08608-001, "ECC Memory Resiliency", read as reprinted at forums.anandtech.com thread 2541153).
# The catalogue's memory of each (resources/gpus.json, the
# nvidia-smi totals) is that carve-out, 15/16 of the DRAM: T4 15,360 of 16,384 MiB, L4 23,034 and
# A10 23,028 of 24,576, A40, L20 and L40S 46,068 of 49,152 (XiongjieDai aa72e0e, LLaMA 3/Professional
# GPUs/A40_v3.ipynb and L40S_v3.ipynb cell 0: 46068MiB with the "Volatile Uncorr. ECC" column at 0,
# ECC on; the RTX A6000 and RTX 6000 Ada, the same GA102 and AD102 chips with ECC off, 49140MiB, "Off").
# HBM parts (A30, V100: their full 24,576 and 16,384 MiB) and workstation and GeForce cards (ECC
# off or absent) are not in it.
INBAND_ECC_CARDS: Final = frozenset({"t4", "l4", "a10", "a40", "l20", "l40s"})
# The share of the bus's transfers that carry data when the check bits cross the same pins: reading
# 15 bytes of data reads the 1 byte of ECC that covers them (the carve-out above). A floor of the
# cost: an inline-ECC controller spends bus cycles on the check bits in that proportion ("every
# ninth cycle is occupied by ECC" for a 1/8 carve-out: AMD PG456, Integrated DDR5/LPDDR5/5X Memory
# Controller, "Performance and Capacity Summary"); read-modify-writes of partial ECC words, which a
# decode step's reads do not make, are not costed.
INBAND_ECC_DATA_SHARE: Final = 15 / 16


def ecc_data_share(gpu: GpuSpec) -> float:
    """The share of the card's datasheet bandwidth that moves data: :data:`INBAND_ECC_DATA_SHARE`
    on the cards of :data:`INBAND_ECC_CARDS` (in-band ECC), else 1."""
    return INBAND_ECC_DATA_SHARE if gpu.id in INBAND_ECC_CARDS else 1.0


def weight_read_factor(plan: Plan, gpu: GpuSpec) -> float:
    """How many times the datasheet-efficiency time a lone token's weight reads on the GPU take:
    :data:`SCALAR_F16_MATVEC_SLOWDOWN` for llama.cpp's scalar-load F16 mat-vec on an HBM card,
    else 1."""
    slow = f16_matvec_scalar_loads(plan, gpu) and memory_class(gpu) is MemoryClass.HBM
    return SCALAR_F16_MATVEC_SLOWDOWN if slow else 1.0


def cuda_low_bit_matvec(plan: Plan, gpu: GpuSpec) -> bool:
    """Whether a lone token's 2- and 3-bit K-quant mat-vecs run ggml-cuda's early mul_mat_vec_q
    (:data:`CUDA_LOW_BIT_MATVEC_CYCLES`): llama.cpp's own backend on an NVIDIA card, a build before
    :data:`CUDA_LOW_BIT_MATVEC_BEFORE_BUILD`."""
    inf = plan.inference
    return (
        inf.engine is Engine.LLAMACPP
        and gpu.vendor == "nvidia"
        and inf.llamacpp_backend is LlamaCppBackend.NATIVE
        and 0 < inf.llamacpp_build < CUDA_LOW_BIT_MATVEC_BEFORE_BUILD
    )


def kquant_matvec_seconds(
    plan: Plan,
    gpu: GpuSpec,
    device_share: float = 1.0,
    head: bool = True,
    cycles_of: Mapping[GgmlType, float] | None = None,
) -> float:
    """Seconds one token's mat-vecs keep the GPU's ALUs busy: the weights they read of each type
    (core.serving.llamacpp.matvec_weights_by_type; with ``head``, the output layer's too) x
    ``cycles_of`` (:data:`APPLE_MATVEC_CYCLES`) on an Apple GPU, or x
    :data:`CUDA_LOW_BIT_MATVEC_CYCLES` for ggml-cuda's early-2024 mul_mat_vec_q on an NVIDIA card
    (:func:`cuda_low_bit_matvec`), the share on the GPU; 0 for other engines, cards and builds and
    for files of no costed type."""
    inf = plan.inference
    if inf.engine is not Engine.LLAMACPP or inf.gguf_quant in GGUF_FLOAT:
        return 0.0
    if cuda_low_bit_matvec(plan, gpu):
        cycles_of = CUDA_LOW_BIT_MATVEC_CYCLES if cycles_of is None else cycles_of
    elif gpu.vendor != "apple":
        return 0.0
    cycles_of = APPLE_MATVEC_CYCLES if cycles_of is None else cycles_of
    lanes = gpu.peak_tflops("fp32") * 1e12 / 2  # lane-cycles a second: FP32 peak / 2 FLOPs a lane-cycle
    if lanes <= 0:
        return 0.0
    weights = matvec_weights_by_type(plan.model, inf.gguf_quant, head)
    cycles = sum(count * cycles_of.get(kind, 0.0) for kind, count in weights)
    return cycles * device_share / lanes


# llama.cpp's Metal mat-mat kernel dequantises every weight once per 32 columns (prompt tokens) of a
# micro-batch. Read at ggml-org/ggml e84c498b (2024-05-12, the sync of the llama.cpp builds
# XiongjieDai ran, b2795-b2837): src/ggml-metal.m (GGML_OP_MUL_MAT) sends a product of more than
# ne11_mm_min = 1 columns on an MTLGPUFamilyApple7+ GPU to kernel_mul_mm_<type>_f32, dispatched as
# ((ne11 + 31)/32, (ne01 + 63)/64) threadgroups of 128 threads; src/ggml-metal.metal
# kernel_mul_mm_impl computes one 64 x 32 tile of the output per threadgroup (BLOCK_SIZE_M 64,
# BLOCK_SIZE_N 32) and, for every 32-wide step along the rows, dequantises its 64 rows' weights
# (dequantize_q4_K / _q5_K / _q6_K: the 6-bit scale and min unpacked, each weight masked, scaled and
# offset) into threadgroup memory, then waits at a barrier and runs the simdgroup products on the same
# ALUs. "Each weight in src0 is loaded once, dequantized once, and reused 32 times" (the kernel's
# author, lshzh-ww, ggml-org/llama.cpp PR #2995, 2023-09-04). A K-quant weight's unpack is taken to
# cost a tile what it costs the mat-vec (APPLE_MATVEC_CYCLES, read on an M2 Max), an assumption
# checked on a source that is not scored: ggml-org/llama.cpp PR #3084 ("Metal: PP speedup",
# ggerganov's M2 Ultra table, 2023-09-09, the PR's column), LLaMA 7B pp512 F16 1265.30 t/s, Q4_K_M
# 1028.20, Q5_K_M 976.31, Q5_K_S 977.60, Q6_K 977.56: the K-quant files take 93.3 / 119.8 / 119.1 /
# 119.1 ms more than F16, where 16 tiles of their 6.61 billion weights (the head ran for every
# prompt token in that build) at these cycles and 76 cores x 128 lanes x 1.398 GHz give 88.8 /
# 110.7 / 107.7 / 127.5 ms. The same table sets Q4_0's and Q8_0's cost a weight a tile, which no
# mat-vec figure gives: their files take 35.2 and 43.4 ms more than F16's, 16 tiles of 6.48 billion
# Q4_0 weights (less the Q6_K head's share, at its 16.4) and of 6.61 billion Q8_0 weights: 4.3 and 5.6
# lane-cycles (dequantize_q4_0 masks two nibbles of a 16-bit word and scales them, dequantize_q8_0
# scales bytes). Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and the IQ types are not costed. The output head runs
# for the prompt's last token only (PROMPT_HEAD_ROWS), a mat-vec, left out.
METAL_MM_TILE_TOKENS: Final = 32
METAL_TILE_DEQUANT_CYCLES: Final[Mapping[GgmlType, float]] = MappingProxyType(
    {**APPLE_MATVEC_CYCLES, GgmlType.Q4_0: 4.3, GgmlType.Q8_0: 5.6}
)


def metal_tile_dequant_seconds(plan: Plan, gpu: GpuSpec, device_share: float = 1.0) -> float:
    """Seconds an Apple GPU's ALUs spend dequantising the blocks' quantised weights for one
    :data:`METAL_MM_TILE_TOKENS`-token tile of a prompt micro-batch (llama.cpp's Metal
    ``kernel_mul_mm``, :data:`METAL_TILE_DEQUANT_CYCLES`); 0 for other engines and cards and for
    float files."""
    if gpu.vendor != "apple":
        return 0.0
    return kquant_matvec_seconds(plan, gpu, device_share, head=False, cycles_of=METAL_TILE_DEQUANT_CYCLES)


def serving_utilisation(plan: Plan, gpu: GpuSpec | None = None) -> float:
    """The share of the matmul peak serving's prefill and decode compute reach: the typed
    utilisation, else :data:`APPLE_MATMUL_UTILISATION` on Apple GPUs, else
    :data:`SERVING_UTILISATION`."""
    if plan.hardware.utilisation:
        return plan.hardware.utilisation
    return APPLE_MATMUL_UTILISATION if gpu is not None and gpu.vendor == "apple" else SERVING_UTILISATION


# A prompt's forward multiplies every prompt token through the blocks, but the token embedding is
# a row lookup, not a product (llama.cpp's llm_build_inp_embd: ggml_get_rows of tok_embd; vLLM's and
# transformers' nn.Embedding), and the output head is computed only for the rows whose logits are
# sampled: the last token of each prompt. llama.cpp keeps the outputs wanted (inp_out_ids) before the
# last layer's FFN and the head, one row for a prompt decoded without logits_all
# (ggerganov/llama.cpp 0028010d llama.cpp: build_llama's "skip computing output for unused tokens",
# llama_decode_internal's n_outputs = 1; PR #6122); vLLM V0 takes the logits of
# sampling_metadata.selected_token_indices only (vllm-project/vllm 307e0861
# vllm/model_executor/layers/logits_processor.py, _prune_hidden_states), V1 of logits_indices, one
# row a request without speculative tokens (000fc94b vllm/v1/worker/gpu_model_runner.py,
# execute_model: compute_logits(hidden_states[logits_indices])); SGLang's extend without input
# logprobs passes the last position of each sequence to the head (sgl-project/sglang 009db01a
# python/sglang/srt/layers/logits_processor.py, LogitsProcessor._get_logits: "hidden_states only
# contain the last position"); transformers' generate passes num_logits_to_keep = 1 from 4.45
# (huggingface/transformers PR #31292; logits_to_keep since PR #35757), so both Qwen tables'
# transformers 4.46 and 4.51.3 compute one row. A decode step samples every row: its tokens each
# pass through the head.
PROMPT_HEAD_ROWS: Final = 1


def head_params(plan: Plan) -> float:
    """Weights of the output head's product (vocabulary × hidden, tied to the embedding or not)."""
    model = plan.model
    return model.vocab_size * model.hidden_size * model.shape_scale


def block_params(plan: Plan, counts: ParamCounts) -> float:
    """The active parameters every token is multiplied through: all of them less the token (and
    learned position) embedding, a row lookup, and an untied head, costed per sampled row
    (:data:`PROMPT_HEAD_ROWS`)."""
    model = plan.model
    lookups = (model.embedding_params() + model.head_params()) * model.shape_scale
    return max(0.0, counts.active - lookups)


def prompt_token_flops(plan: Plan, counts: ParamCounts) -> float:
    """FLOPs of one prompt token outside attention: the blocks' products, a hybrid's chunked scans
    (:func:`prompt_scan_flops`) and its share of the head, computed for :data:`PROMPT_HEAD_ROWS` of the
    prompt's rows."""
    prompt = max(1, plan.inference.prompt_tokens)
    blocks = 2.0 * block_params(plan, counts) + prompt_scan_flops(plan)
    return blocks + 2.0 * head_params(plan) * PROMPT_HEAD_ROWS / prompt


def prompt_scan_flops(plan: Plan) -> float:
    """A hybrid's recurrent layers' chunked scan per prompt token on vLLM, whose prefill runs mamba_ssm's SSD
    kernels (its copy, vllm/model_executor/layers/mamba/ops/ssd_combined.py) and fla's chunked gated delta rule
    (vllm/model_executor/layers/fla/ops/chunk.py): core.training.mixer_flops, kernel path. The projections and
    the depthwise convolution are weights like any other (2 FLOPs a parameter: :func:`block_params`). 0 for an
    attention-only model and on llama.cpp, whose ggml scan ops run the recurrence token by token (not counted)."""
    mixer = mixer_flops(plan.model, kernels=True)
    if mixer is None or plan.inference.engine is Engine.LLAMACPP:
        return 0.0
    return mixer.scan * plan.model.recurrent_layers


def decode_token_flops(plan: Plan, counts: ParamCounts) -> float:
    """FLOPs of one decoded token outside attention: the blocks and the head (its logits are sampled)."""
    return 2.0 * (block_params(plan, counts) + head_params(plan))


def prefill_flops(plan: Plan, counts: ParamCounts, prompt: int) -> float:
    """One prompt's FLOPs: the blocks for every token, the head for the sampled row, causal attention."""
    model = plan.model
    products = (2.0 * block_params(plan, counts) + prompt_scan_flops(plan)) * prompt
    products += 2.0 * head_params(plan) * PROMPT_HEAD_ROWS
    return products + 2.0 * model.kv_layers * prompt * prompt * model.q_width


# Links over which vLLM's and SGLang's all-reduce is NCCL's: without GPU peer-to-peer their custom
# all-reduce is off (vLLM logs "Custom allreduce is disabled because your platform lacks GPU P2P
# capability"), so NCCL runs it through host memory.
NCCL_CARRIED_LINKS: Final = frozenset({"pcie4-host"})
# NCCL's own cost model of a ring all-reduce on a PCI path (NVIDIA/nccl b6475625,
# src/graph/tuning.cc: ncclTopoTuneModel, ncclTopoGetAlgoTime): time = baseLat + nsteps x hwLat +
# bytes / (bus bandwidth x nRanks / nsteps), for each protocol, and NCCL runs the one its model
# makes fastest. (base latency s, latency a step s, share of the bus bandwidth): LL 6.6 us, 1.0 us,
# a quarter ("busBw * 1.0/4.0" for an all-reduce: 8-byte stores carrying 4 bytes and a flag); Simple
# 8.4 us, 5.7 us, all of it. LL128 is enabled over NVLink only ("typeIntra <= PATH_NVB"). A lone
# token's hidden state (7 KiB for a 3,584-wide model) goes by LL, ten tokens' by Simple.
NCCL_PCI_PROTOCOLS: Final = ((6.6e-6, 1.0e-6, 0.25), (8.4e-6, 5.7e-6, 1.0))


def one_allreduce_seconds(plan: Plan, link: LinkSpec, tokens: int) -> float:
    """One ring all-reduce of ``tokens`` hidden states over ``link``: per hop the link's latency
    and the volume at its bus bandwidth, or over a link NCCL carries (:data:`NCCL_CARRIED_LINKS`)
    NCCL's own model of its fastest protocol."""
    tp = plan.inference.tensor_parallel
    if tp <= 1:
        return 0.0
    hops = 2 * (tp - 1)
    volume = hops / tp * tokens * plan.model.hidden_size * ACTIVATION_BYTES
    if link.id in NCCL_CARRIED_LINKS:
        bus = link.bus_bytes_per_second
        return min(base + hops * step + volume / (bus * share) for base, step, share in NCCL_PCI_PROTOCOLS)
    return hops * link.latency_us * 1e-6 + volume / link.bus_bytes_per_second


def allreduce_seconds(plan: Plan, link: LinkSpec, tokens: int) -> float:
    """Two all-reduces per layer of ``tokens`` hidden states over ``link`` (ring), a pipeline
    stage's layers: :func:`one_allreduce_seconds` each."""
    layers = math.ceil(plan.model.num_layers / plan.inference.pipeline_parallel)
    return 2 * layers * one_allreduce_seconds(plan, link, tokens)


# vLLM and SGLang split the token embedding by vocabulary across the tensor-parallel ranks, like
# the LM head: each rank looks up the tokens its rows hold, zeroes the others and the ranks
# all-reduce the step's hidden states before the first layer (VocabParallelEmbedding.forward:
# "Reduce across all the model parallel GPUs", tensor_model_parallel_all_reduce(output_parallel);
# vllm-project/vllm 00db0119 vllm/model_executor/layers/vocab_parallel_embedding.py,
# sgl-project/sglang 04d5e392 python/sglang/srt/layers/vocab_parallel_embedding.py). One more
# all-reduce a step (or prompt chunk) on the first pipeline stage, of the rows the layers carry.
EMBEDDING_ALLREDUCE_ENGINES: Final = frozenset({Engine.VLLM, Engine.SGLANG})


def embedding_allreduce_seconds(plan: Plan, link: LinkSpec, tokens: int) -> float:
    """The all-reduce after a vocabulary-parallel embedding lookup of ``tokens`` rows
    (:data:`EMBEDDING_ALLREDUCE_ENGINES`); 0 on one GPU or another engine."""
    if plan.inference.engine not in EMBEDDING_ALLREDUCE_ENGINES:
        return 0.0
    return one_allreduce_seconds(plan, link, tokens)


# vLLM's V0 engine (the 0.6-0.7 release lines) does a decode step's host work while the device
# waits: LLMEngine.step (vllm 0.6.3.post1, 93ec62b8, vllm/engine/llm_engine.py) runs the scheduler
# (Scheduler.schedule), then model_executor.execute_model, whose model runner builds the step's
# inputs on the host (prepare_model_input), replays the CUDA graph, and runs the sampler eagerly,
# outside the graph, ending in a copy of the sampled tokens to the host (the sampler's
# SamplingTensors are built from Python lists every step, and with presence / frequency penalties
# the prompt's and the output's token ids too: model_executor/sampling_metadata.py
# SamplingTensors.from_sampling_metadata); only the detokenisation and the output objects overlap
# the next step (async output processing, 0.6.0: V0_OUTPUT_PROCESSING_S below). So a V0 step is
# the device's time plus the host's, not the longer of the two. The host's share: "about 4ms of
# GPU bubble" on every decode step, vLLM's own profile of V0 (vllm-project/vllm issue #6854,
# "[RFC]: Multi-Step Scheduling", 2024-07-26: "For baseline, this overhead is incurred on every
# decode"; the work it names: the sampled tokens' copy to the host, their Pythonisation, the next
# step's input metadata, the scheduler; its screenshots are of vLLM serving, the model and card
# not stated in the text, PR #7000 that implemented it benchmarks Meta-Llama-3-8B on one
# GPU), profiled before async output processing took the Pythonisation off the step and under a
# served load, not at batch 1 on the Qwen team's A100 host: a figure from another source, not
# fitted on a scored one. V1 (0.8 on) is not charged a host time of its own, though through 0.13
# it also waits for the host between steps (vllm 0.10.1.1 EngineCore.step: schedule, execute_model
# ending in .tolist(), update_from_output; async scheduling on by default from 0.14.0): its gap is
# inside the HBM efficiency fitted on V1 rows (docs/SERVING.md, "vLLM V1's host work and the
# fitted HBM efficiency": separating it was tried and not adopted).
V0_STEP_HOST_S: Final = 4e-3

# From 0.6.0 V0 processes the previous step's outputs while the device runs the next step's forward
# (async output processing, vllm-project/vllm PR #7049): vllm-project/vllm@002a0ba9 (a 0.6-era V0
# tree, MultiModalInputs; not checked at the v0.6.3 tag) vllm/worker/model_runner.py
# ModelRunner.execute_model replays the graph, launches compute_logits, then calls
# model_input.async_callback (LLMEngine._process_model_outputs for the step before: the sequences'
# new tokens, stop checks, detokenisation, the request outputs) before the sampler waits for the
# device. V0's config turns it off under enforce_eager ("Since, enforce-eager is enabled, async
# output processor cannot be used"; other cases not read): a plan with inference.cuda_graphs off
# then adds that work after the step (StepModel.output_serial). So that work is hidden while it is
# shorter than the forward and bounds the step when longer.
# Its time, vLLM's own profile of V0 (vllm-project/vllm issue #6913, "[RFC]: Asynchronous Output
# Processor", 2024-07-29; Llama 3 70B FP8 on four H100s, 128-token prompts): _process_model_outputs
# took 0.2 ms a step at batch 1 and 3.4 ms at batch 32. It walks the running sequences in Python
# (LLMEngine._process_model_outputs loops over the scheduled sequence groups), so a fixed part and a
# part per sequence, the line through those two points: 0.097 ms + 0.103 ms a sequence. Cross-check:
# vllm-project/vllm issue #6801 (mpjlu, 2024-08-08, before 0.6.0): sampling, input preparation,
# output processing and scheduling together "can be 20ms" at batch 200; this line alone gives
# 20.7 ms there. Not set on a scored source: no scored V0 row runs more than one sequence.
V0_OUTPUT_PROCESSING_S: Final = ((1, 0.2e-3), (32, 3.4e-3))  # issue #6913: (batch, seconds a step)
V0_OUTPUT_PER_SEQUENCE_S: Final = (V0_OUTPUT_PROCESSING_S[1][1] - V0_OUTPUT_PROCESSING_S[0][1]) / (
    V0_OUTPUT_PROCESSING_S[1][0] - V0_OUTPUT_PROCESSING_S[0][0]
)
V0_OUTPUT_FIXED_S: Final = V0_OUTPUT_PROCESSING_S[0][1] - V0_OUTPUT_PROCESSING_S[0][0] * V0_OUTPUT_PER_SEQUENCE_S


# SGLang 0.4.6 runs a GPTQ int4 mixture-of-experts layer on vLLM's Marlin MoE kernel, launched once
# per expert whether a token routes to it or not. sglang 0.4.6.post1 (the PyPI wheel)
# sglang/srt/layers/quantization/gptq.py GPTQMarlinConfig.get_quant_method returns vLLM's
# GPTQMarlinMoEMethod for every FusedMoE layer (the branch that sends MoEs of more than 32 experts
# to the moe_wna16 kernel is commented out: "TODO: re-enable after SGLang syncs with vllm >= 0.7.3").
# vLLM 0.7.2 (the release the Qwen3 speed page installs beside SGLang 0.4.6.post1; its sdist)
# GPTQMarlinMoEMethod.apply calls fused_marlin_moe (model_executor/layers/fused_moe/
# fused_marlin_moe.py), two torch.ops._moe_C.marlin_gemm_moe products a layer (gate-up, down), and
# csrc/moe/marlin_moe_ops.cu marlin_mm_moe launches, for expert_idx = 0 .. num_experts - 1, one
# MarlinMoE kernel of one block per SM each; an expert no token routes to returns at once
# (marlin_kernels/marlin_moe_kernel.h: tot_its == 0). Each such kernel costs the fixed cycles of a
# short kernel (core.serving.fit's "eager" kernel_cycles: ramp-up and drain, fitted on llama.cpp's
# kernels, whether launched or replayed from a CUDA graph; SGLang replays these from its graph too),
# not covered by the bandwidth efficiency its full-size kernels set. Qwen3-30B-A3B: 48 layers x 2 x 128
# = 12,288 kernels a decode step. The releases read: 0.4.6 (0.4.6.post1's wheel); others not read.
MARLIN_MOE_GEMMS_PER_LAYER: Final = 2
MARLIN_MOE_PER_EXPERT_SGLANG: Final = frozenset({SglangVersion.V0_4_6})


def marlin_moe_kernels_per_layer(plan: Plan) -> int:
    """Marlin MoE kernels an MoE layer launches per decode step, one per expert and product, on SGLang
    releases whose GPTQ int4 MoE runs vLLM 0.7.2's loop over the experts
    (:data:`MARLIN_MOE_PER_EXPERT_SGLANG`); 0 otherwise."""
    inf, model = plan.inference, plan.model
    if inf.engine is not Engine.SGLANG or inf.weight_dtype is not WeightFormat.GPTQ_INT4 or model.num_experts <= 1:
        return 0
    if inf.sglang_version not in MARLIN_MOE_PER_EXPERT_SGLANG:
        return 0
    return MARLIN_MOE_GEMMS_PER_LAYER * model.num_experts


# vLLM replays a decode step of n requests as the CUDA graph captured for the next of its batch
# sizes, 1, 2, 4 and the multiples of 8: V0's _BATCH_SIZES_TO_CAPTURE ("[1, 2, 4] +
# [_BATCH_SIZE_ALIGNMENT * i ...]", vllm-project/vllm 002a0ba9 vllm/worker/model_runner.py), V1's
# cudagraph_capture_sizes ([1, 2, 4] + range(8, cuda_graph_sizes[0] + 1, 8), padded to by
# VllmConfig.pad_for_cudagraph; dennislee22's 0.10.1.1 start-up log prints them, 512 down to 1).
# Above the largest size the step runs eagerly, unpadded.
VLLM_GRAPH_SIZES_UP_TO: Final = 512

# vLLM under --enforce-eager and SGLang under --disable-cuda-graph launch each kernel of a decode step on its
# own (no CUDA graph replays the step; V1 also compiles nothing: core.serving.vllm_versions.graphs_captured).
# The kernels of one decoder layer, counted in vLLM 0.19.0's (2a69949bd) vllm/model_executor/models/qwen2.py
# Qwen2DecoderLayer.forward with its custom ops' CUDA kernels: the input RMSNorm (fused_add_rms_norm), the qkv
# projection, rotary_emb, the attention's cache write (reshape_and_cache_flash) and its kernel, the o
# projection, the post-attention RMSNorm, gate_up, SiluAndMul and down: 10; under tensor parallelism the o and
# down projections' RowParallelLinear each all-reduce, 2 more. SGLang's Llama / Qwen2 layers run the same
# operations (taken as the same count, not counted apart). Each pays core.serving.fit's "eager"
# launch_seconds (set on llama.cpp's graph on / off pairs, another source); the kernels' own cycles stay
# in the graph family's bandwidth efficiency, as when a graph replays them.
EAGER_ENGINE_KERNELS_PER_LAYER: Final = 10
EAGER_ENGINE_TP_KERNELS_PER_LAYER: Final = 2


def launched_eagerly(plan: Plan) -> bool:
    """Whether the plan's vLLM or SGLang launches each decode kernel on its own (``inference.cuda_graphs``
    off: vLLM's --enforce-eager, SGLang's --disable-cuda-graph)."""
    inf = plan.inference
    return inf.engine in (Engine.VLLM, Engine.SGLANG) and not inf.cuda_graphs


def eager_engine_kernels_per_layer(plan: Plan) -> int:
    """Kernels one decoder layer of an eagerly launched vLLM / SGLang step launches
    (:data:`EAGER_ENGINE_KERNELS_PER_LAYER`, and the all-reduces under tensor parallelism)."""
    tp = EAGER_ENGINE_TP_KERNELS_PER_LAYER if plan.inference.tensor_parallel > 1 else 0
    return EAGER_ENGINE_KERNELS_PER_LAYER + tp


def graph_batch(plan: Plan, n: int) -> int:
    """The rows a vLLM decode step of ``n`` requests runs through its layers: ``n`` padded to the
    captured CUDA-graph size (:data:`VLLM_GRAPH_SIZES_UP_TO`). The padded rows' all-reduces carry
    their hidden states; their matmuls are not charged (a decode step is bound by its reads), nor
    any attention or logits (V1 splits attention out of its piecewise graphs and takes logits at
    the real rows). Other engines, and vLLM under --enforce-eager: ``n``."""
    if plan.inference.engine is not Engine.VLLM or n <= 2 or n > VLLM_GRAPH_SIZES_UP_TO or launched_eagerly(plan):
        return n
    return 4 if n <= 4 else 8 * math.ceil(n / 8)


# NCCL's model of a ring all-gather on a PCI path (NVIDIA/nccl b6475625, src/graph/tuning.cc,
# ncclTopoTuneModel): the all-reduce's latencies (:data:`NCCL_PCI_PROTOCOLS`), with LL at a third of
# the bus bandwidth ("coll == ncclFuncAllReduce || coll == ncclFuncReduce ? 1.0/4.0 : 1.0/3.0").
NCCL_PCI_ALLGATHER_PROTOCOLS: Final = ((6.6e-6, 1.0e-6, 1.0 / 3.0), (8.4e-6, 5.7e-6, 1.0))


def logits_gather_seconds(plan: Plan, link: LinkSpec, tokens: int) -> float:
    """A decode step's logits gathered across the tensor-parallel ranks (vLLM and SGLang).

    The LM head is split by vocabulary: each rank computes its share of the ``tokens`` rows of
    logits, in the model's 16-bit type, and the step gathers them before sampling. vLLM V1
    all-gathers, every rank sampling (vllm-project/vllm PR #9856: "All processes run the sampler.
    This means that all workers need the logits so the logits_processor has an AllGather instead
    of a Gather operation"; ``Platform.use_all_gather`` in vllm/platforms/interface.py at 005e8184,
    ``LogitsProcessor._gather_logits``), V0 gathers to the driver rank; SGLang all-gathers
    (sgl-project/sglang 009db01a python/sglang/srt/layers/logits_processor.py,
    ``LogitsProcessor._get_logits``: ``tensor_model_parallel_all_gather(logits)``). Ring: t − 1
    steps, (t − 1)/t of the rows through each rank's link (the vocabulary's padding to 64 rows
    left out). A prompt chunk gathers only its completed prompts' last rows: not charged."""
    inf = plan.inference
    tp = inf.tensor_parallel
    if tp <= 1 or inf.engine not in (Engine.VLLM, Engine.SGLANG):
        return 0.0
    hops = tp - 1
    volume = hops / tp * tokens * plan.model.vocab_size * ACTIVATION_BYTES
    if link.id in NCCL_CARRIED_LINKS:
        bus = link.bus_bytes_per_second
        return min(base + hops * step + volume / (bus * share) for base, step, share in NCCL_PCI_ALLGATHER_PROTOCOLS)
    return hops * link.latency_us * 1e-6 + volume / link.bus_bytes_per_second


@dataclass(frozen=True)
class StepModel:
    """What one decode step of ``n`` requests costs on this plan (see the module docstring)."""

    plan: Plan
    counts: ParamCounts
    layout: RankLayout
    link: LinkSpec
    achieved_flops: float  # per rank, FLOP/s
    bandwidth: float  # bytes/s the decode reads reach
    layer_overhead_s: float  # kernels per layer x kernel_seconds
    kv_per_request: float
    expert_share: float
    host_bytes: float  # llama.cpp: weights read from host memory each token
    device_bytes: float  # llama.cpp: weights read from the GPUs each token (all of them)
    # llama.cpp --n-cpu-moe: the routed experts kept in host RAM (core.serving.llamacpp.GgufLayout.host_expert_bytes):
    # a decode step's CPU reads the experts its tokens route to from host memory; a prompt micro-batch of
    # OP_OFFLOAD_MIN_BATCH tokens or more copies the ones it routes to over the card's host link
    # (``host_link_bytes_per_s``) and multiplies them on the GPU
    host_expert_bytes: float = 0.0
    host_link_bytes_per_s: float = 0.0
    # llama.cpp before b3216 on CUDA: bytes each prompt micro-batch of more than 32 tokens moves to
    # turn the quantised matrices into F16 for cuBLAS (core.serving.llamacpp.prompt_dequant_bytes)
    prompt_dequant_bytes: float = 0.0
    # kernels per layer x the launch overhead (launch_seconds), paid unless a CUDA graph replays them
    layer_launch_s: float = 0.0
    graphs_alone: bool = False  # llama.cpp replays a lone sequence's decode step as a CUDA graph
    # llama.cpp on an Apple GPU: one token's K-quant mat-vecs on the ALUs (kquant_matvec_seconds)
    matvec_alu_s: float = 0.0
    # and a prompt micro-batch's dequantisation of the blocks' quantised weights, per 32-token tile
    # of its mat-mat products (metal_tile_dequant_seconds)
    tile_dequant_alu_s: float = 0.0
    # a lone token's GPU weight reads take this many times their time at the bandwidth (weight_read_factor)
    matvec_read_factor: float = 1.0
    # llama.cpp's layer split with pipeline parallelism: a prompt micro-batch leaves the last GPU this share
    # of one micro-batch's time after the one before (core.serving.llamacpp.prompt_pipeline_interval); 1: none
    prompt_interval: float = 1.0
    # Hugging Face generate: the host's Python time per layer per step (core.serving.fit.HF_HOST_LAYER
    # x core.serving.hf_generate.host_layer_ratio, plus the FP8 linears' Triton launches), overlapped by
    # the GPU's work: a step takes the longer of the two, or their sum when ``host_serial``
    host_layer_s: float = 0.0
    # and per expert the step's tokens route to, where the release's MoE loop runs the experts hit only
    # (core.serving.transformers_versions): host_layer_seconds(n) adds it times experts_hit(n)
    host_expert_s: float = 0.0
    # transformers' fine-grained FP8 linears synchronise the device after each product
    # (core.serving.hf_generate.fp8_synchronised): host and device no longer overlap
    host_serial: bool = False
    # vLLM's V0 engine: host seconds each step spends between the device's steps (V0_STEP_HOST_S)
    step_host_s: float = 0.0
    # and its output processing, fixed and per running sequence, which overlaps the device's step
    # (V0_OUTPUT_FIXED_S, V0_OUTPUT_PER_SEQUENCE_S): output_seconds(n)
    output_host_s: float = 0.0
    output_host_sequence_s: float = 0.0
    # V0 under --enforce-eager: no async output processing, so that work follows the device's step
    output_serial: bool = False
    # SGLang 0.4.6's GPTQ MoE: the per-expert Marlin MoE kernels' fixed cost per layer
    # (marlin_moe_kernels_per_layer x the eager family's kernel_seconds)
    moe_kernels_layer_s: float = 0.0
    # Hugging Face generate: passes a decode step makes over each layer's cached K and V (the cache's
    # torch.cat, repeat_kv's copies; core.serving.hf_generate.decode_kv_passes); 1 elsewhere
    kv_decode_passes: float = 1.0

    def output_seconds(self, n: int) -> float:
        """vLLM V0's host seconds processing a step's outputs for ``n`` running sequences while the
        device runs the next step (0 for other engines)."""
        return self.output_host_s + self.output_host_sequence_s * n if self.output_host_s else 0.0

    def host_layer_seconds(self, n: int) -> float:
        """Hugging Face generate's host seconds per layer of a step of ``n`` tokens."""
        if not self.host_expert_s:
            return self.host_layer_s
        return self.host_layer_s + self.host_expert_s * experts_hit(self.plan.model, n)

    def layer_seconds(self, n: int) -> float:
        """One layer's fixed time at ``n`` tokens a step: its kernels' cycles, and their launch
        overhead unless the step is one CUDA graph (a lone token, :attr:`graphs_alone`)."""
        return self.layer_overhead_s + (0.0 if self.graphs_alone and n == 1 else self.layer_launch_s)

    def _read_share(self, n: int) -> float:
        """The share of the weights a step of ``n`` tokens reads: every dense weight, and the experts
        its tokens route to."""
        model = self.plan.model
        touched = 1.0 - (1.0 - model.experts_per_token / model.num_experts) ** n if model.num_experts > 1 else 1.0
        return (1.0 - self.expert_share) + self.expert_share * touched

    def _expert_touched(self, n: int) -> float:
        """The share of a layer's routed experts a step of ``n`` tokens routes to."""
        model = self.plan.model
        return 1.0 - (1.0 - model.experts_per_token / model.num_experts) ** n if model.num_experts > 1 else 1.0

    def host_read_seconds(self, n: int) -> float:
        """llama.cpp: seconds a step of ``n`` tokens reads the layers left on the CPU, and the experts
        --n-cpu-moe keeps there (those its tokens route to), from host memory (the plan's
        inference.host_bandwidth_gb_s); 0 with every weight on the GPU."""
        read = self.host_bytes * self._read_share(n) if self.host_bytes else 0.0
        read += self.host_expert_bytes * self._expert_touched(n)
        return read / (self.plan.inference.host_bandwidth_gb_s * 1e9) if read else 0.0

    def expert_upload_seconds(self, chunk: int) -> float:
        """llama.cpp --n-cpu-moe: seconds a prompt micro-batch of ``chunk`` tokens copies the RAM-kept experts
        it routes to into the GPU (op offload, from core.serving.llamacpp.OP_OFFLOAD_MIN_BATCH tokens); 0
        below it (the CPU multiplies them: :meth:`host_read_seconds`) or without such experts."""
        if not self.host_expert_bytes or chunk < OP_OFFLOAD_MIN_BATCH or self.host_link_bytes_per_s <= 0:
            return 0.0
        return self.host_expert_bytes * self._expert_touched(chunk) / self.host_link_bytes_per_s

    def memory_seconds(self, n: int, matvec: bool = True) -> float:
        """Seconds a step of ``n`` tokens reads its weights and caches; ``matvec``: the step is a decode
        step, whose lone token multiplies each weight matrix by one vector (:attr:`matvec_read_factor`),
        not a prompt chunk read once for matrix-matrix products."""
        share = self._read_share(n)
        if self.bandwidth <= 0:  # a custom card given no bandwidth: no decode speed to speak of
            return math.inf
        if self.plan.inference.engine is Engine.LLAMACPP:
            # The read share is the whole model's (dense weights and experts together): taken over the GPUs'
            # bytes with the RAM-kept experts put back, less those experts' own reads (host_read_seconds).
            experts = self.host_expert_bytes
            read = (self.device_bytes + experts) * share - experts * self._expert_touched(n)
            weights = read * (self.matvec_read_factor if matvec and n == 1 else 1.0)
            device = (weights + n * self.kv_per_request) / self.bandwidth
            return device + self.host_read_seconds(n)
        kv = n * self.kv_per_request * (self.kv_decode_passes if matvec else 1.0)
        # A vision tower is not read by a text token's step (core.serving.engines.tower_bytes).
        return ((self.layout.weights_bytes - self.layout.tower_bytes) * share + kv) / self.bandwidth

    def compute_seconds(self, n: int) -> float:
        model, inf = self.plan.model, self.plan.inference
        cached = inf.prompt_tokens + inf.new_tokens / 2
        per_token = decode_token_flops(self.plan, self.counts) + 4.0 * model.kv_layers * cached * model.q_width
        flops = n * per_token / inf.tensor_parallel
        matmuls = flops / self.achieved_flops if self.achieved_flops > 0 else math.inf
        # Metal runs the mat-vec for one token a step only: above ne11_mm_min = 1 rows of activations
        # ggml_metal_graph_compute takes the mat-mat kernel (ggml-metal.m, GGML_OP_MUL_MAT, spring 2024),
        # which dequantises a weight tile once for all of them (not costed by this rule).
        return max(matmuls, self.matvec_alu_s if n == 1 else 0.0)

    @property
    def stages(self) -> int:
        """Pipeline stages run one after another (llama.cpp's layer split: its bytes already summed)."""
        inf = self.plan.inference
        return 1 if inf.engine is Engine.LLAMACPP else inf.pipeline_parallel

    def collectives(self, n: int) -> tuple[float, float, float]:
        """A step of ``n`` tokens' collectives: a stage's two all-reduces per layer, the embedding's
        all-reduce and the logits' gather (seconds each; 0 on one GPU)."""
        rows = graph_batch(self.plan, n)
        return (
            allreduce_seconds(self.plan, self.link, rows),
            embedding_allreduce_seconds(self.plan, self.link, rows),
            logits_gather_seconds(self.plan, self.link, n),
        )

    def step(self, n: int) -> float:
        inf = self.plan.inference
        stages = self.stages
        layers = self.plan.model.num_layers if inf.engine is Engine.LLAMACPP else self.layout.layers
        body = max(self.memory_seconds(n), self.compute_seconds(n)) + layers * (
            self.layer_seconds(n) + self.moe_kernels_layer_s
        )
        host = layers * self.host_layer_seconds(n)
        body = body + host if self.host_serial else max(body, host)
        reduced, embedded, gathered = self.collectives(n)
        device = stages * (body + reduced) + embedded + gathered
        if self.output_serial:
            return device + self.output_seconds(n) + self.step_host_s
        return max(device, self.output_seconds(n)) + self.step_host_s

    def prefill_per_token(self, chunk: int) -> float:
        """Seconds per prompt token when prompts are prefilled ``chunk`` tokens at a time."""
        inf = self.plan.inference
        model = self.plan.model
        flops = prompt_token_flops(self.plan, self.counts) + 2.0 * model.kv_layers * inf.prompt_tokens * model.q_width
        compute = chunk * flops / inf.tensor_parallel / self.achieved_flops if self.achieved_flops > 0 else math.inf
        stages = self.stages
        memory = self.memory_seconds(1, matvec=False)
        upload = self.expert_upload_seconds(chunk)
        if upload:  # op offload: the GPU multiplies the RAM-kept experts after copying them, the CPU reads none
            memory -= self.host_expert_bytes * self._expert_touched(1) / (inf.host_bandwidth_gb_s * 1e9)
        one = max(compute, memory) + upload + self.layout.layers * self.layer_seconds(chunk)
        if chunk > MMQ_MAX_BATCH_SIZE and self.bandwidth > 0:
            one += self.prompt_dequant_bytes / self.bandwidth
        if chunk > 1:  # Metal's mat-mat kernel, not its mat-vec (METAL_MM_TILE_TOKENS)
            one += math.ceil(chunk / METAL_MM_TILE_TOKENS) * self.tile_dequant_alu_s
        embedded = embedding_allreduce_seconds(self.plan, self.link, chunk)
        return (stages * (one + allreduce_seconds(self.plan, self.link, chunk)) + embedded) / chunk

    def prompt_seconds(self, tokens: float, chunk: int, per_token: float) -> float:
        """Seconds ``tokens`` prompt tokens take, prefilled ``chunk`` at a time at ``per_token`` seconds a
        token (:meth:`prefill_per_token`): one after another, or with llama.cpp's pipeline parallelism
        the first micro-batch through every GPU and each later one :attr:`prompt_interval` of that
        time after it (the last, partial micro-batch counted by its tokens)."""
        if self.prompt_interval >= 1.0 or tokens <= chunk:
            return tokens * per_token
        return (chunk + (tokens - chunk) * self.prompt_interval) * per_token


def _state_per_request(plan: Plan) -> float:
    """One request's recurrent state (0 without one): llama.cpp keeps it in float32
    (core.serving.llamacpp_hybrid), vLLM in the dtypes of core.serving.vllm_hybrid."""
    if plan.model.hybrid is not None and plan.inference.engine is Engine.LLAMACPP:
        return llamacpp_state_bytes(plan.model)
    return state_bytes_per_request(plan)


def _expert_share(plan: Plan, counts: ParamCounts) -> float:
    """Fraction of the stored parameters that sit in experts (0 for dense models; a hybrid's on llama.cpp
    from its GGUF tensors, core.serving.llamacpp_hybrid.expert_share)."""
    model = plan.model
    if model.hybrid is not None and plan.inference.engine is Engine.LLAMACPP:
        return llamacpp_expert_share(model)
    if model.num_experts <= 1 or counts.total <= 0:
        return 0.0
    experts = model.num_layers * model.num_experts * model.expert_mlp_params() * model.params_scale
    return min(1.0, experts / counts.total)


def engine_family(plan: Plan) -> EngineFamily:
    eager = plan.inference.engine in (Engine.LLAMACPP, Engine.HF)
    return EngineFamily.EAGER if eager else EngineFamily.GRAPHS


def vulkan(plan: Plan) -> bool:
    """Whether llama.cpp runs the plan's GPU layers on ggml-vulkan."""
    inf = plan.inference
    return inf.engine is Engine.LLAMACPP and inf.llamacpp_backend is LlamaCppBackend.VULKAN


def kernels_per_layer(plan: Plan, gpu: GpuSpec) -> float:
    """Kernels one decode step launches per layer (:data:`KERNELS_PER_LAYER`; on Vulkan
    :data:`VULKAN_KERNELS_PER_LAYER` and its q8_1 quantisations, a mean over the layers)."""
    if vulkan(plan):
        base = VULKAN_FLASH_KERNELS_PER_LAYER if plan.inference.flash_attention else VULKAN_KERNELS_PER_LAYER
        return base + vulkan_quantise_dispatches(plan, gpu.vendor)
    quant = plan.inference.gguf_quant
    quantised = plan.inference.engine is Engine.LLAMACPP and quant not in GGUF_FLOAT
    cuda = gpu.vendor != "apple"
    return (
        KERNELS_PER_LAYER
        + (WEIGHT_MATMULS_PER_LAYER if quantised and cuda else 0)
        + (batched_attention_kernels(plan) if cuda else 0)
    )


def batched_attention_kernels(plan: Plan) -> int:
    """Kernels beyond one each that llama.cpp's CUDA backend launches for a layer's two attention
    products without flash attention (:data:`ATTENTION_PRODUCT_KERNELS`); 0 for other engines
    and with flash attention (its kernel count is not read here)."""
    inf, model = plan.inference, plan.model
    if inf.engine is not Engine.LLAMACPP or inf.flash_attention:
        return 0
    broadcast = 1 if model.num_heads > model.num_kv_heads else 0
    return 2 * (ATTENTION_PRODUCT_KERNELS - 1 + broadcast)


def cycles_key(gpu: GpuSpec, family: EngineFamily) -> str:
    """The key of core.serving.fit's ``kernel_cycles`` a kernel of this family pays on this card:
    ``metal`` for an eager engine's dispatch on an Apple GPU (:data:`core.serving.fit.METAL_KERNELS`),
    else the family's."""
    return METAL_KERNELS if gpu.vendor == "apple" and family is EngineFamily.EAGER else family.value


def kernel_seconds(gpu: GpuSpec, fit: ServingFit, family: EngineFamily) -> float:
    """One kernel's fixed cost: the family's cycles (core.serving.fit; a Metal dispatch's on an
    Apple GPU) at the card's boost clock."""
    return fit.kernel_cycles[cycles_key(gpu, family)] / ((gpu.boost_clock_ghz or FALLBACK_CLOCK_GHZ) * 1e9)


def launch_seconds(plan: Plan, gpu: GpuSpec, fit: ServingFit, family: EngineFamily) -> float:
    """The launch overhead of one kernel that no CUDA graph replays (core.serving.fit's
    ``launch_seconds``); none on Apple GPUs, whose Metal dispatches are costed whole in their own
    cycles (:func:`kernel_seconds`, core.serving.fit's ``metal``), and
    none on Vulkan, which records a step's dispatches into command buffers and submits them in
    batches, every 100 nodes or about 100 MB of weights, "to overlap CPU cmdbuffer generation with
    GPU execution" (ggml_backend_vk_graph_compute at ggml-org/ggml 400b9294)."""
    return 0.0 if gpu.vendor == "apple" or vulkan(plan) else fit.launch_seconds[family]


def matmul_peak(plan: Plan, gpu: GpuSpec) -> float:
    """Dense TFLOP/s the engine's matmuls run at. llama.cpp multiplies through cuBLAS with
    ``CUBLAS_COMPUTE_16F`` (ggml/src/ggml-cuda/ggml-cuda.cu, ``ggml_cuda_op_mul_mat_cublas``):
    half-precision accumulation, which GeForce cards run at twice the FP32-accumulate rate the
    catalogue lists for them (its notes)."""
    override = plan.hardware.peak_tflops_override
    if override > 0:
        return override
    if plan.inference.engine is Engine.LLAMACPP:
        geforce = gpu.vendor == "nvidia" and gpu.segment in GEFORCE_SEGMENTS
        return gpu.peak_tflops("fp16") * (2 if geforce and gpu.tflops_dense.get("fp16") else 1)
    return gpu.peak_tflops(matmul_dtype(plan.inference.weight_dtype))


def step_model(
    plan: Plan,
    counts: ParamCounts,
    gpu: GpuSpec,
    layout: RankLayout,
    fit: ServingFit,
    offload: tuple[float, float],
    prompt_dequant: float = 0.0,
    prompt_interval: float = 1.0,
    host_experts: float = 0.0,
) -> StepModel:
    inf = plan.inference
    family = engine_family(plan)
    mean_cached = inf.prompt_tokens + inf.new_tokens / 2
    host_fixed_s, host_expert_s = hf_host_layer_seconds(plan, fit)
    efficiency = fit.bandwidth_efficiency[bandwidth_key(family, gpu)]
    return StepModel(
        plan=plan,
        counts=counts,
        layout=layout,
        link=serving_link(inf, gpu),
        achieved_flops=matmul_peak(plan, gpu) * 1e12 * serving_utilisation(plan, gpu),
        bandwidth=gpu.memory_bandwidth_gb_s * 1e9 * ecc_data_share(gpu) * efficiency,
        layer_overhead_s=kernels_per_layer(plan, gpu) * kernel_seconds(gpu, fit, family),
        layer_launch_s=(
            eager_engine_kernels_per_layer(plan) * launch_seconds(plan, gpu, fit, EngineFamily.EAGER)
            if launched_eagerly(plan)
            else kernels_per_layer(plan, gpu) * launch_seconds(plan, gpu, fit, family)
        ),
        graphs_alone=cuda_graphs_replayed(plan, gpu, 1),
        # a hybrid's recurrent state is read and written back whole each step (vLLM's selective_state_update
        # / fused recurrent kernels update it in place): core.serving.vllm_hybrid.state_bytes_per_request
        kv_per_request=layout.kv_token_layer_bytes * layout.kv_layers * mean_cached + 2 * _state_per_request(plan),
        expert_share=_expert_share(plan, counts),
        host_bytes=offload[0],
        device_bytes=offload[1],
        host_expert_bytes=host_experts,
        host_link_bytes_per_s=host_link_rate(gpu) if host_experts else 0.0,
        prompt_dequant_bytes=prompt_dequant,
        matvec_alu_s=kquant_matvec_seconds(plan, gpu, _device_share(offload)),
        tile_dequant_alu_s=metal_tile_dequant_seconds(plan, gpu, _device_share(offload)),
        matvec_read_factor=weight_read_factor(plan, gpu),
        prompt_interval=prompt_interval,
        host_layer_s=host_fixed_s,
        host_expert_s=host_expert_s,
        host_serial=fp8_synchronised(plan),
        step_host_s=V0_STEP_HOST_S if v0_engine(plan) else 0.0,
        output_host_s=V0_OUTPUT_FIXED_S if v0_engine(plan) else 0.0,
        output_host_sequence_s=V0_OUTPUT_PER_SEQUENCE_S if v0_engine(plan) else 0.0,
        output_serial=v0_engine(plan) and launched_eagerly(plan),
        moe_kernels_layer_s=marlin_moe_kernels_per_layer(plan) * kernel_seconds(gpu, fit, EngineFamily.EAGER),
        kv_decode_passes=decode_kv_passes(plan),
    )


def host_link_rate(gpu: GpuSpec) -> float:
    """Bytes per second the card's host link carries one way: the PCIe link of its catalogue link
    (``LinkSpec.host_link``: an NVLink card's own PCIe), the same link the training offload's copies take
    (core.parallel.comm); PCIe 4.0 x16 for a card the catalogue gives none."""
    link = find_link(gpu.intra_link or "pcie4-x16")
    return find_link(link.host_link or link.id).bandwidth_gb_s * 1e9


def v0_engine(plan: Plan) -> bool:
    """Whether the plan's vLLM runs the V0 engine (the 0.6-0.7 release lines), whose host work
    between two decode steps the device waits for (:data:`V0_STEP_HOST_S`)."""
    inf = plan.inference
    return inf.engine is Engine.VLLM and not era_of(inf.vllm_version).v1


def hf_host_layer_seconds(plan: Plan, fit: ServingFit) -> tuple[float, float]:
    """Host seconds per layer of a Hugging Face generate decode step, (outside the loop over the
    experts hit, per expert hit): the dense layer's (core.serving.fit.HF_HOST_LAYER) times the layer's
    host work in dense layers (an MoE block's loop over its experts by the plan's transformers release,
    core.serving.hf_generate.host_ratio_parts; an 8-bit GPTQ linear's own torch calls,
    core.serving.gptq.hf_linear_extra_ops), plus the fine-grained FP8 linears' Triton launches
    where they synchronise; (0, 0) for other engines."""
    inf = plan.inference
    if inf.engine is not Engine.HF:
        return 0.0, 0.0
    model, version = plan.model, inf.transformers_version
    dense = fit.launch_seconds.get(HF_HOST_LAYER, 0.0)
    fixed, per_expert = host_ratio_parts(model, version)
    # 8-bit GPTQ: the quantised linears' own torch calls, in dense layers (core.serving.gptq)
    fixed += hf_linear_extra_ops(plan) / DENSE_LAYER_OPS
    fixed_s, per_expert_s = dense * fixed, dense * per_expert
    if fp8_synchronised(plan):
        linears, expert_linears = fp8_linears_parts(model, version)
        fixed_s += linears * FP8_TRITON_KERNELS * TRITON_LAUNCH_S
        per_expert_s += expert_linears * FP8_TRITON_KERNELS * TRITON_LAUNCH_S
    return fixed_s, per_expert_s


def _device_share(offload: tuple[float, float]) -> float:
    """The share of llama.cpp's weight bytes on the GPUs (``offload`` = host bytes, GPU bytes); all
    of them when none are given."""
    host, device = offload
    return device / (host + device) if host > 0 else 1.0


@dataclass(frozen=True)
class Queue:
    """The queueing model's figures at N requests sent together (see the module docstring)."""

    ttft_s: float
    token_latency_s: float
    wait_s: float
    total_tokens_per_s: float


def queue(model: StepModel, requests: int, slots: int, chunk: int) -> Queue:
    inf = model.plan.inference
    running = max(1, min(requests, slots))
    step = model.step(running)
    prompt, answer = inf.prompt_tokens, max(1, inf.new_tokens)
    tokens = max(1, min(chunk, prompt * running))
    per_token = model.prefill_per_token(tokens)
    if inf.engine is Engine.HF:  # one static batch, prefilled at once
        ttft = running * prompt * per_token
        latency = step
    else:
        # The first token is sampled from the logits the prompt's own forward gives its last
        # position (the step that completes the prompt samples it): no decode step before it. With
        # llama.cpp's pipelined micro-batches the prompts ahead of a request's own stream through
        # the GPUs with it (the mean over the running requests of a time linear in the tokens
        # ahead, past the first micro-batch).
        ttft = model.prompt_seconds((running + 1) / 2 * prompt, tokens, per_token)
        latency = step + (running - 1) / 2 * prompt * per_token / answer
    lifetime = model.prompt_seconds(running * prompt, tokens, per_token) + answer * latency  # one wave
    waves = math.ceil(requests / running)
    wait = (waves - 1) / 2 * lifetime  # mean over the waves of the ones before them
    total = requests * answer / (waves * lifetime) * inf.replicas if lifetime > 0 else 0.0
    return Queue(ttft_s=wait + ttft, token_latency_s=latency, wait_s=wait, total_tokens_per_s=total)


def serving_speed(
    plan: Plan,
    counts: ParamCounts,
    gpu: GpuSpec,
    layout: RankLayout,
    fits_at_once: int,
    fit: ServingFit = DEFAULT_FIT,
    offload: tuple[float, float] = (0.0, 0.0),
    chunk: int = 0,
    prompt_dequant: float = 0.0,
    prompt_interval: float = 1.0,
    host_experts: float = 0.0,
) -> ServingSpeed:
    """Speed at the plan's concurrency and along a curve of concurrencies. ``offload``: for
    llama.cpp, the weight bytes read from host memory and from the GPUs each token; ``chunk``:
    the tokens one step prefills (vLLM's max_num_batched_tokens, llama.cpp's n_ubatch);
    ``prompt_dequant``: llama.cpp's bytes per prompt micro-batch to dequantise its weights (old builds);
    ``prompt_interval``: llama.cpp's pipelined prompt micro-batches (core.serving.llamacpp.prompt_pipeline_interval);
    ``host_experts``: llama.cpp's routed experts kept in host RAM (--n-cpu-moe)."""
    inf = plan.inference
    model = step_model(plan, counts, gpu, layout, fit, offload, prompt_dequant, prompt_interval, host_experts)
    chunk = chunk or inf.prompt_tokens
    slots = max(1, fits_at_once)
    running = max(1, min(inf.concurrent, slots))

    def point(n: int) -> SpeedPoint:
        q = queue(model, n, slots, chunk)
        step = model.step(min(n, slots))
        per = 1.0 / q.token_latency_s if q.token_latency_s > 0 else 0.0
        bound = model.memory_seconds(min(n, slots)) >= model.compute_seconds(min(n, slots))
        return SpeedPoint(n, step, per, q.total_tokens_per_s, bound, q.ttft_s, q.token_latency_s)

    sizes = sorted({1, running, *(1 << k for k in range(slots.bit_length()))})
    curve = tuple(point(n) for n in sizes)
    here = queue(model, inf.concurrent, slots, chunk)
    step = model.step(running)
    alone = queue(model, 1, 1, chunk).ttft_s
    flops = prefill_flops(plan, counts, inf.prompt_tokens)
    reduced, embedded, gathered = model.collectives(running)
    allreduce = reduced * model.stages + embedded + gathered
    return ServingSpeed(
        ttft_s=here.ttft_s,
        prefill_flops=flops,
        step_s=step,
        per_request_tokens_per_s=1.0 / here.token_latency_s if here.token_latency_s > 0 else 0.0,
        total_tokens_per_s=here.total_tokens_per_s,
        running=running,
        curve=curve,
        peak_tflops=matmul_peak(plan, gpu),
        bandwidth_gb_s=gpu.memory_bandwidth_gb_s,
        formula=_formula(plan, gpu, model, here, step, alone, allreduce, running, fit),
        assumptions=_assumptions(plan, gpu, model, fit, running, chunk),
        ttft_alone_s=alone,
        token_latency_s=here.token_latency_s,
        queue_wait_s=here.wait_s,
        allreduce_s=allreduce,
    )


def _assumptions(plan: Plan, gpu: GpuSpec, model: StepModel, fit: ServingFit, running: int, chunk: int) -> str:
    """What the serving speed assumes, in words: the queue, the prompt's FLOPs, the reads and
    every engine-specific cost the step model charges."""
    inf = plan.inference
    return (
        f"{counted(inf.concurrent, 'request')} sent together, {running:,} running at once"
        + (", the rest waiting for a slot; " if inf.concurrent > running else "; ")
        + f"prompts prefilled in turn in chunks of {chunk:,} tokens at {serving_utilisation(plan, gpu):.0%} of the "
        f"dense peak (the output head for each prompt's last token only, the embedding a lookup), sharing steps "
        f"with the decodes; each step reads the weights and every running request's "
        f"cache at {fit.bandwidth_efficiency[bandwidth_key(engine_family(plan), gpu)]:.0%} of the bandwidth"
        + (" that carries data (15/16 of it: in-band ECC)" if ecc_data_share(gpu) < 1.0 else "")
        + (f", host layers at {inf.host_bandwidth_gb_s:g} GB/s" if model.host_bytes else "")
        + _kv_passes_text(plan, model)
        + (
            f"; each prompt micro-batch of more than {MMQ_MAX_BATCH_SIZE} tokens first turns the quantised "
            f"weights into F16 for cuBLAS ({gb(model.prompt_dequant_bytes)} GB moved: llama.cpp before b3216)"
            if model.prompt_dequant_bytes
            else ""
        )
        + (
            f"; a lone token's F16 mat-vec reads its weights with scalar loads, {model.matvec_read_factor:g}× "
            f"the time (llama.cpp before b{F16_VECTOR_LOADS_FROM_BUILD} on an HBM card)"
            if model.matvec_read_factor != 1.0
            else ""
        )
        + _launch_text(plan, gpu, model, running)
        + ("; two all-reduces per layer over " + model.link.name if inf.tensor_parallel > 1 else "")
        + (
            "; one after the embedding lookup, split by vocabulary"
            if embedding_allreduce_seconds(plan, model.link, 1)
            else ""
        )
        + ("; the step's logits gathered across the ranks" if logits_gather_seconds(plan, model.link, 1) else "")
        + (
            f"; vLLM V0 schedules, prepares the inputs and samples on the host while the GPU waits, "
            f"{duration(model.step_host_s)} a step, and processes the step before's outputs while the "
            f"device runs ({duration(model.output_seconds(running))} at {counted(running, 'sequence')})"
            if model.step_host_s
            else ""
        )
        + (
            f"; the GPTQ MoE layers launch vLLM 0.7.2's Marlin MoE kernel once per expert, "
            f"{marlin_moe_kernels_per_layer(plan):,} a layer ({duration(model.moe_kernels_layer_s)})"
            if model.moe_kernels_layer_s
            else ""
        )
        + "; requests half-way through their answer; "
        + (
            f"a prompt's micro-batches of {chunk:,} tokens overlap across the GPUs (llama.cpp's pipeline "
            f"parallelism: each {model.prompt_interval:.0%} of one's time after the one before, "
            f"{PIPELINE_OVERLAP_SHARE:.0%} of the saving the busiest GPU's share of the layers, or "
            f"{SCHED_COPIES + 1} micro-batches in flight at most, would give), a decode step's do not"
            if model.prompt_interval < 1.0
            else "pipeline stages do not overlap"
        )
    )


def _kv_passes_text(plan: Plan, model: StepModel) -> str:
    """How often a Hugging Face generate decode step moves each layer's cache
    (core.serving.hf_generate.decode_kv_passes)."""
    if plan.inference.engine is not Engine.HF:
        return ""
    repeat = ", repeat_kv copies it to every query head and attention reads the copies" if repeats_kv(plan) else ""
    return (
        f"; transformers' DynamicCache copies each layer's cache with torch.cat every step{repeat}: "
        f"{model.kv_decode_passes:g} passes over the cache a step"
    )


def _launch_text(plan: Plan, gpu: GpuSpec, model: StepModel, running: int) -> str:
    """How llama.cpp's GPU backend issues a decode step's kernels (:func:`cuda_graphs_replayed`), or an
    eagerly launched vLLM / SGLang step's (:func:`launched_eagerly`)."""
    if launched_eagerly(plan):
        flag = "--enforce-eager" if plan.inference.engine is Engine.VLLM else "--disable-cuda-graph"
        return (
            f"; {flag}: {eager_engine_kernels_per_layer(plan)} kernels a layer each launched on its own "
            f"({model.layer_launch_s * 1e6:.0f} µs a layer: no CUDA graph)"
            + ("; the step's output processing is not overlapped" if model.output_serial else "")
        )
    if plan.inference.engine is not Engine.LLAMACPP:
        return ""
    if gpu.vendor == "apple":
        dispatches, per_layer = kernels_per_layer(plan, gpu), model.layer_overhead_s * 1e6
        alu = (
            f"; the K-quant mat-vecs keep the ALUs {duration(model.matvec_alu_s)} a token "
            f"(Q4_K / Q5_K / Q6_K: {' / '.join(f'{c:g}' for c in APPLE_MATVEC_CYCLES.values())} cycles a weight)"
            if model.matvec_alu_s
            else ""
        )
        tiles = (
            f"; a prompt's products dequantise the quantised weights once per {METAL_MM_TILE_TOKENS} tokens "
            f"({duration(model.tile_dequant_alu_s)} of the ALUs each time)"
            if model.tile_dequant_alu_s
            else ""
        )
        encoded = f"encoded again each token ({per_layer:.0f} µs)"
        return f"; Metal: {dispatches:.0f} dispatches a layer, {encoded}{alu}{tiles}"
    if vulkan(plan):
        return f"; Vulkan: {kernels_per_layer(plan, gpu):.1f} dispatches a layer recorded into command buffers"
    if model.graphs_alone and running == 1:
        return "; the decode step is replayed as one CUDA graph"
    return f"; each kernel launched on its own ({model.layer_launch_s * 1e6:.0f} µs a layer: no CUDA graph)"


def _formula(
    plan: Plan,
    gpu: GpuSpec,
    model: StepModel,
    here: Queue,
    step: float,
    alone: float,
    allreduce: float,
    running: int,
    fit: ServingFit,
) -> str:
    inf = plan.inference
    efficiency = fit.bandwidth_efficiency[bandwidth_key(engine_family(plan), gpu)]
    gathers = " and logits gather" if logits_gather_seconds(plan, model.link, running) else ""
    tp = f" + all-reduces{gathers} {duration(allreduce)}" if allreduce else ""
    v0 = f" + V0's host work between steps {duration(model.step_host_s)}" if model.step_host_s else ""
    ecc = " × 15/16 (in-band ECC)" if ecc_data_share(gpu) < 1.0 else ""
    bandwidth = f"{gpu.memory_bandwidth_gb_s:g} GB/s{ecc} × {efficiency:.0%}"
    sent = counted(inf.concurrent, "request")
    per_layer = model.layer_seconds(running)
    # A fixed per-layer time only where the engine has one: vLLM replays its decode as CUDA graphs
    # and its fit carries no per-layer term, which read "+ layers × 0 µs" before.
    layers = f" + layers × {per_layer * 1e6:.0f} µs" if per_layer * 1e6 >= 0.5 else ""
    # llama.cpp's layers left on the CPU: their weights come from host memory each step, said with their time
    # (h55ux: the formula read as if every byte came at the card's bandwidth).
    host_read = model.host_read_seconds(running)
    what = (
        "the CPU layers' weights"
        if not model.host_expert_bytes
        else (
            "the RAM-kept experts routed to" if not model.host_bytes else "the CPU layers' weights and RAM-kept experts"
        )
    )
    cpu = (
        f" + {what} ÷ {plan.inference.host_bandwidth_gb_s:g} GB/s of host memory ({duration(host_read)})"
        if host_read
        else ""
    )
    device = f"max({'GPU ' if cpu else ''}bytes read ÷ ({bandwidth}){cpu}, FLOPs ÷ compute){layers}"
    host_s = model.host_layer_seconds(running)
    # Hugging Face generate: the host's rules are the plan's transformers release's
    release = f"transformers {inf.transformers_version.value}"
    if host_s > 0 and model.host_serial:  # fine-grained FP8: the host waits for each product
        device = f"{device} + layers × {duration(host_s)} of {release} host time (synchronised)"
    elif host_s > 0:  # the host's Python loop, overlapped by the GPU
        device = f"max({device}, layers × {duration(host_s)} of {release} host time)"
    output = model.output_seconds(running)
    body = f"{device}{tp}"
    if output > 0 and output >= step - model.step_host_s:  # V0's output processing outlasts the device's step
        body = f"V0's output processing of the step before {duration(output)} (longer than the device's {body})"
    return (
        f"step at {counted(running, 'request')} = {body}"
        f"{v0} = {duration(step)}; TTFT alone {latency(alone)}, "
        f"with {sent} sent together {latency(here.ttft_s)} (waiting for a slot {latency(here.wait_s)}); "
        f"time per output token {duration(here.token_latency_s)}"
    )

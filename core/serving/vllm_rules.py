"""vLLM's start-up arithmetic, as the V1 engine of the 0.19.0 release does it.

Source followed: the vllm-0.19.0 release (commit 2a69949bd, as its ``vllm/_version.py``
records): ``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``,
``vllm/v1/worker/gpu_model_runner.py`` ``profile_run`` / ``_dummy_sampler_run``,
``vllm/v1/core/kv_cache_utils.py``): the KV pool takes what is left of
``total × gpu_memory_utilization`` after the weights, the torch peak of a profiling
forward of ``max_num_batched_tokens`` tokens followed by a sampler run over
``max_num_seqs`` rows, and the memory allocated outside torch during that profile (the
CUDA context and NCCL's start-up buffers are in the baseline snapshot, so they are not
taken). The CUDA-graph pool is estimated and logged but, by default in 0.19.0, not taken
from the pool (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is 0 in ``vllm/envs.py``): the
graphs are captured after the pool is sized and live in the card's 1 − utilisation
margin. The pool is cut into blocks of 16 tokens per layer; sliding-window models share
it between padded groups of layers, and ``GPU KV cache size`` and ``Maximum
concurrency`` are derived as ``_report_kv_cache_config`` does.

Versions: these are the 0.19 rules; :mod:`core.serving.vllm_versions` says how the other
release lines differ (the plan's ``inference.vllm_version``), and :mod:`core.serving.fit`
holds the constants set from start-up logs (non-torch memory by era and link, what the
driver keeps by card class).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.catalogue import GpuSpec, LinkSpec, tcgen05
from core.dtypes import WeightFormat
from core.model import ModelSpec
from core.plan import Inference, Platform, VllmSampler, VllmVersion
from core.platform_rules import driver_total_bytes
from core.serving.fit import DEFAULT_FIT, GRAPH_PER_LAYER, ServingFit, link_class, memory_class
from core.serving.kv import window_split
from core.serving.vllm_versions import HUGE_CARD_DEFAULTS_FROM, Accounting, at_least, era_of, profile_tokens
from core.units import GiB

# --- vLLM constants (source: vllm 0.19.0, the files named above) ------------------------
VLLM_BLOCK_SIZE: Final = 16  # CacheConfig.block_size default on CUDA (64 from 0.34: VllmEra.block_size)
# EngineArgs.get_batch_defaults, usage context OPENAI_API_SERVER (`vllm serve`): cards of
# 70 GiB or more that are not A100s get 8192 batched tokens and 1024 sequences, others
# 2048 and 256 (unchanged from 0.11 to 0.19.0).
VLLM_LARGE_CARD_BYTES: Final = 70 * GiB
VLLM_DEFAULTS_LARGE: Final = (8192, 1024)
VLLM_DEFAULTS_SMALL: Final = (2048, 256)
# From 0.28.0 (2cf0a6915, same function): cards of 160 GiB or more (B200, B300) get 16,384
# batched tokens and 1,024 sequences (core.serving.vllm_versions.HUGE_CARD_DEFAULTS_FROM).
VLLM_HUGE_CARD_BYTES: Final = 160 * GiB
VLLM_DEFAULTS_HUGE: Final = (16384, 1024)
# Torch peak of the profiling forward, per token: the gated MLP's gate|up output (2·I) and
# activation output (I) live with four hidden-size tensors. Four, not the three of the
# 0.6 line's eager forward: the 0.19.0 logs whose peak the forward decides (small
# vocabularies) need it: CodeLlama-7B logged 0.77 GiB at 8192 tokens against
# (3 · 11008 + 4 · 4096) · 2 B · 8192 = 0.75 GiB (llm-d-planner v0.19.0 logs, tuning set).
VLLM_HIDDEN_COPIES: Final = 4
# _dummy_sampler_run (gpu_model_runner.py): compute_logits gives max_num_seqs rows of the
# model dtype and keeps them while the Sampler (vllm/v1/sample/sampler.py) makes a float32
# copy; top-k/top-p run in place (ops/topk_topp_triton.py); the softmax probabilities and
# random_sample's exponential draw ``q`` are two more float32 rows. 4 + 4 + 4 bytes per
# logit beside the model-dtype logits.
SAMPLER_FLOAT32_COPIES: Final = 3
# apply_top_k_top_p_triton keeps one float32 row of the vocabulary per Triton program,
# min(rows, SM count) of them: 132 SMs on an H100 SXM (NVIDIA H100 whitepaper). Used for
# every card: the buffer is under 1 % of the sampler's memory.
VLLM_TRITON_SAMPLER_ROWS: Final = 132
# Which top-k/top-p sampler the dummy sampler run takes (read in the released wheels; the
# dummy run sets top_k = vocabulary - 1 and top_p = 0.9 on every row, gpu_model_runner.py
# _dummy_sampler_run, so a sorting sampler sorts the whole vocabulary):
# - vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__: 0.9.2-0.11.0 (0.10.2,
#   26b999c71; 0.11.0, f71952c1c) run FlashInfer's sampler when flashinfer is importable, else
#   forward_native; 0.12.0-0.19.0 (0.12.0, 4fd9d6a85; 0.13.0, 72506c983) only when
#   VLLM_USE_FLASHINFER_SAMPLER=1 ("Users must opt in explicitly"), else forward_native; 0.8.5
#   not with FlashInfer 0.2.3 or later.
# - forward_native -> apply_top_k_top_p: up to 0.16.0 (89a77b108) always logits.sort; from 0.17.0
#   (b31e9326a) apply_top_k_top_p_triton when ``HAS_TRITON and logits.shape[0] >= 8``, the sort
#   below 8 rows.
# - The wheels' METADATA: 0.9.2-0.11.0 list flashinfer-python only under "Provides-Extra:
#   flashinfer"; from 0.12.0 it is a requirement, but the sampler is opt-in. So a plain
#   ``pip install vllm==X`` never runs FlashInfer's sampler (VllmSampler.AUTO is NATIVE); the
#   0.9-0.11 Docker images ship FlashInfer and run it (dennislee22's 0.10.1.1 logs print "Using
#   FlashInfer for top-p & top-k sampling", kolyangg's 0.10.2 log "FlashInfer is not available").
TRITON_SAMPLER_FROM: Final = VllmVersion.V0_17
# The first release whose fused-MoE scratch outlives the forward (core.serving.engines.vllm_profile_peak).
MOE_WORKSPACE_KEPT_FROM: Final = VllmVersion.V0_13
TRITON_SAMPLER_MIN_ROWS: Final = 8
# Model Runner V2's profile (vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run, read in the
# 0.30.0 wheel, ced6857af) samples rows of a dummy InputBatch (InputBatch.make_dummy) whose
# requests were never added to the sampler: Sampler.apply_sampling_params
# (vllm/v1/worker/gpu/sample/sampler.py) returns the model-dtype logits untouched when no row
# needs logits processing (no float32 copy), SamplingStates.get_top_k_top_p (sample/states.py)
# gives no top-k / top-p at their defaults (top_k = vocabulary, top_p = 1.0), and gumbel_sample
# (sample/gumbel.py) keeps one int64 and one float32 per 1,024-wide block of a row. So the
# profile's sampler holds the logits alone. The early return is in the 0.28.0 (2cf0a6915) to
# 0.32.0 (5df63a720) wheels; 0.22.0-0.27.0 copy to float32 on every call, and 0.33.0
# (4ba787ec9) adds a second pass with SamplingParams.for_sampler_warmup ("the profiled peak must
# pay for the fp32 logits pipeline").
V2_DUMMY_SAMPLER_FROM: Final = VllmVersion.V0_28
V2_DUMMY_SAMPLER_LAST: Final = VllmVersion.V0_32
# The sort path at its peak, apply_top_k_top_p's ``logits.sort(dim=-1)`` on the float32 logits
# (0.10.2, 26b999c71, ops/topk_topp_sampler.py): the sorted float32 values and their int64
# indices (12 B a logit) and PyTorch's scratch for the stable sort
# (pytorch/pytorch aten/src/ATen/native/cuda/SortStable.cu, do_launch_stable_sort_kernel, the
# vocabulary being over 4,096 wide): one row or 128 rows and more take segmented_sort_pairs,
# an int64 index per element plus cub DeviceSegmentedRadixSort::SortPairs' temporary storage,
# which in its non-DoubleBuffer form (aten/src/ATen/cuda/cub.cuh segmented_sort_pairs) holds
# alternate key and value buffers: 8 + 4 + 8 = 20 B; 2-127 rows take
# segmented_sort_pairs_by_full_sort: two 8-byte (index, segment) buffers, radix_sort_pairs'
# own key output (4) and cub's alternate keys and values (12): 32 B. Later steps (masks,
# softmax, the scatter back: 28 B with the inputs) stay below the sort's peak.
SORT_OUTPUT_BYTES: Final = 4 + 8
SORT_SCRATCH_BYTES: Final = 20
SORT_SCRATCH_FULL_SORT_BYTES: Final = 32
SORT_FULL_SORT_ROWS: Final = range(2, 128)


class SamplerPath(StrEnum):
    """The top-k/top-p implementation the profile's sampler run takes."""

    SORT = "sort"  # forward_native's apply_top_k_top_p: torch.sort of the float32 logits
    TRITON = "triton"  # apply_top_k_top_p_triton (0.17 on, 8 rows or more)
    FLASHINFER = "flashinfer"  # flashinfer.sampling.top_k_top_p_sampling_from_logits
    LOGITS_ONLY = "logits-only"  # Model Runner V2's dummy sampler run (0.28-0.32): the logits alone


def sampler_path(inf: Inference, rows: int, v2_runner: bool = False) -> SamplerPath:
    """The sampler the plan's install runs (the constants above say where each case was read);
    ``v2_runner``: the model runs on Model Runner V2 (core.serving.vllm_versions.v2_runner)."""
    window = at_least(inf.vllm_version, V2_DUMMY_SAMPLER_FROM) and at_least(V2_DUMMY_SAMPLER_LAST, inf.vllm_version)
    if v2_runner and window:
        return SamplerPath.LOGITS_ONLY
    if inf.vllm_sampler is VllmSampler.FLASHINFER:
        return SamplerPath.FLASHINFER
    if at_least(inf.vllm_version, TRITON_SAMPLER_FROM) and rows >= TRITON_SAMPLER_MIN_ROWS:
        return SamplerPath.TRITON
    return SamplerPath.SORT


# The first matmul of the profile run allocates cuBLAS's workspace from torch's caching
# allocator (core.runtime.CUBLAS_WORKSPACE_BYTES), so it is part of the torch peak.
# Memory allocated outside torch during the profile run, as vLLM 0.19.0 logs it
# ("non-torch forward increase memory") on H100: 0.24-0.26 GiB on one GPU, 2.07-2.21 GiB with
# tensor parallelism, 0.07 GiB with pipeline parallelism only (benchmarks/serving/vllm_logs.json).
# The one-GPU and tensor-parallel parts are fitted per era and link (core.serving.fit); the
# pipeline-only figure is the H100 logs' own.
VLLM_NON_TORCH_PP_BYTES: Final = 0.07 * GiB
# vLLM sizes everything from torch.cuda.mem_get_info()'s total, which is below what
# nvidia-smi reports (the catalogue's memory_bytes) by what the driver keeps: fitted per card
# class (core.serving.fit.ServingFit.driver_reserved_bytes) from the logs that print the total
# (vLLM 0.19.0: total_memory=79.19GiB on H100 80GB against 79.65 GiB in nvidia-smi; PR #10511:
# 79.22 GiB; issue #10517: 23.58 GiB on an RTX 3090).
# CUDA graphs: 0.19.0 captures them after the pool is sized, outside the requested memory
# (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0), so they add to the process footprint, not
# to the pool's deductions. vLLM's own estimate ("Estimated CUDA graph memory") in the
# tuning logs runs 0.49-1.92 GiB; 0.84 GiB is its median there (Llama-3.1-8B logs it).
VLLM_CUDA_GRAPH_BYTES: Final = 0.84 * GiB
# From 0.20 the estimate is set aside before the KV cache, and it is a measurement, not a formula:
# Worker.determine_available_memory subtracts GPUModelRunner.profile_cudagraph_memory, which captures
# into a throwaway pool and reads what mem_get_info lost. V1 runner (gpu_model_runner.py, the same
# code in 0.21.0 ad7125a43, 0.22.1 0decac0d9, 0.27.1 6e448d0ea and 0.30.0 ced6857af): for each mode of
# CudagraphDispatcher.get_capture_descs (PIECEWISE, then FULL) it captures the largest two sizes and
# takes first + (n - 1) x max(second, 1 MiB). Model Runner V2 (0.29 on; gpu/cudagraph_utils.py
# profile_cudagraph_memory, 0.30.0) captures every PIECEWISE graph and the two largest FULL ones,
# extrapolated the same way (_extrapolate_full_graph_memory). A piecewise graph per size has one
# piece per decoder layer, a FULL one every layer's kernels, so what the driver keeps per graph grows
# with the layers: the estimate is modelled as bytes per layer per captured graph (fitted on the
# printed estimates of 0.20+ logs, core.serving.fit.ServingFit.vllm_graph_bytes) times the rank's
# layers times the graphs the release captures (vllm_graph_count).
VLLM_GRAPH_SIZES_SMALL: Final = (1, 2, 4)  # _set_cudagraph_sizes: [1, 2, 4] + range(8, 256, 8) + range(256, max, 16)
VLLM_GRAPH_STEP: Final = 8  # below 256
VLLM_GRAPH_STEP_LARGE: Final = 16  # from 256
VLLM_GRAPH_STEP_FROM: Final = 256
# max_cudagraph_capture_size = min(max_num_seqs x 2, 512) (0.21.0 - 0.27.1: vllm/config/vllm.py; from
# 0.28.0 2cf0a6915, read again in 0.29.0 and 0.30.0, 1024 on device capability family 100, datacenter
# Blackwell), then at most max_num_batched_tokens.
# The releases whose pool takes vllm_graph_estimate in place of VLLM_CUDA_GRAPH_BYTES: those that apply the estimate
# by default. The logs say "CUDA graph memory profiling is enabled (default since v0.21.0)" (eslam-ahmed43/llm-lab
# @0f01b47 logs/vllm_server.log, 0.30.0), but the 0.20.2 wheel (bc150f502) already prints that line, defaults
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS to "1" (vllm/envs.py) and applies the estimate in gpu_worker.py
# determine_available_memory, with _set_cudagraph_sizes, profile_cudagraph_memory and initialize_cudagraph_keys
# identical to 0.21.0's (ad7125a43): the 0.20 line, as VllmEra.graphs_before_kv has it. docs/SERVING.md h94cold
# for the leave-one-source-out check (no 0.20 log is in the corpus).
GRAPH_ESTIMATE_IN_POOL_FROM: Final = VllmVersion.V0_20
VLLM_GRAPH_CEILING: Final = 512
VLLM_GRAPH_CEILING_SM100: Final = 1024
VLLM_GRAPH_CEILING_SM100_FROM: Final = VllmVersion.V0_28
# 0.34.0's extensible KV cache (62d4bc3c7, vllm/v1/worker/extensible_kv_cache.py): after
# warm-up and capture it keeps free a margin of max(1 GiB, 0.75 x the reserve) on top of the
# reserve itself (the profiled activation peak plus the CUDA-graph estimate) on CUDA.
VLLM_KV_MARGIN_FLOOR_BYTES: Final = 1 * GiB  # KV_CACHE_MARGIN_FLOOR_BYTES (3 GiB on ROCm)
VLLM_KV_MARGIN_FRACTION: Final = 0.75  # KV_CACHE_MARGIN_FRACTION


def vllm_defaults(gpu: GpuSpec, version: VllmVersion = VllmVersion.V0_19) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` (V1) of this release picks for
    this card."""
    if gpu.memory_bytes >= VLLM_HUGE_CARD_BYTES and at_least(version, HUGE_CARD_DEFAULTS_FROM):
        return VLLM_DEFAULTS_HUGE
    large = gpu.memory_bytes >= VLLM_LARGE_CARD_BYTES and "a100" not in gpu.id.lower()
    return VLLM_DEFAULTS_LARGE if large else VLLM_DEFAULTS_SMALL


def vllm_capture_sizes(seqs: int, batched: int, gpu_id: str, version: VllmVersion) -> tuple[int, ...]:
    """The batch sizes vLLM 0.20+ captures CUDA graphs of by default (VllmConfig._set_cudagraph_sizes, no
    speculative decoding, the default performance mode)."""
    ceiling = VLLM_GRAPH_CEILING
    if tcgen05(gpu_id) and at_least(version, VLLM_GRAPH_CEILING_SM100_FROM):
        ceiling = VLLM_GRAPH_CEILING_SM100
    top = min(seqs * 2, ceiling, batched)
    sizes = [s for s in VLLM_GRAPH_SIZES_SMALL if s <= top]
    sizes += range(VLLM_GRAPH_STEP, min(top + 1, VLLM_GRAPH_STEP_FROM), VLLM_GRAPH_STEP)
    sizes += range(VLLM_GRAPH_STEP_FROM, top + 1, VLLM_GRAPH_STEP_LARGE)
    if batched <= top and batched not in sizes:  # "ensure max_num_tokens is captured"
        sizes.append(batched)
    return tuple(sorted(sizes))


def vllm_graph_count(seqs: int, batched: int, gpu_id: str, version: VllmVersion) -> int:
    """Graphs the default FULL_AND_PIECEWISE mode captures: a PIECEWISE graph of every capture size and a FULL
    one of every size up to max_num_seqs (CudagraphDispatcher.initialize_cudagraph_keys: uniform decode
    batches, one token a request)."""
    sizes = vllm_capture_sizes(seqs, batched, gpu_id, version)
    return len(sizes) + sum(1 for s in sizes if s <= seqs)


def vllm_graph_estimate(
    layers: int, seqs: int, batched: int, gpu_id: str, version: VllmVersion, fit: ServingFit = DEFAULT_FIT
) -> float:
    """The CUDA-graph estimate vLLM 0.20+ sets aside before the KV cache (profile_cudagraph_memory): the
    fitted bytes per layer per graph times the rank's layers and the graphs captured."""
    return fit.vllm_graph_bytes[GRAPH_PER_LAYER] * layers * vllm_graph_count(seqs, batched, gpu_id, version)


def vllm_graph_reserve(
    layers: int, seqs: int, batched: int, gpu_id: str, version: VllmVersion, fit: ServingFit = DEFAULT_FIT
) -> float:
    """What the pool sets aside for CUDA graphs where the release does so before the KV cache: the rule
    (vllm_graph_estimate) from GRAPH_ESTIMATE_IN_POOL_FROM; before it the fixed VLLM_CUDA_GRAPH_BYTES. The rule
    takes the fixed figure's place only beside the cold-compile term (a cold plan's own, core.serving.fit
    COLD_COMPILE_PEAK), which the fixed 0.84 GiB had also stood in for (docs/SERVING.md, h93graph and h94cold)."""
    if at_least(version, GRAPH_ESTIMATE_IN_POOL_FROM):
        return vllm_graph_estimate(layers, seqs, batched, gpu_id, version, fit)
    return VLLM_CUDA_GRAPH_BYTES


def vllm_total_memory(gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT, platform: Platform = Platform.LINUX) -> float:
    """The total vLLM (and SGLang) reads from the driver: on native Linux the card less what the driver
    keeps (fitted per card where a log shows it, else per memory class: core.serving.fit); under WSL2 and
    native Windows the whole card (core.platform_rules.driver_total_bytes)."""
    reserved = fit.driver_reserved_bytes
    return driver_total_bytes(gpu.memory_bytes, reserved.get(gpu.id, reserved[memory_class(gpu)]), platform)


def vllm_scheduler(inf: Inference, gpu: GpuSpec) -> tuple[int, int]:
    """The scheduler's limits: V1's defaults for the card, V0's 2,048 tokens (at least one
    max_model_len without chunked prefill) and 256 sequences."""
    if era_of(inf.vllm_version).v1:
        batched, seqs = vllm_defaults(gpu, inf.vllm_version)
    else:
        batched, seqs = profile_tokens(inf, VLLM_DEFAULTS_SMALL[0]), VLLM_DEFAULTS_SMALL[1]
    return inf.max_num_batched_tokens or batched, inf.max_num_seqs or seqs


def activation_element_bytes(inf: Inference) -> float:
    """Bytes of one activation element: the model dtype (quantised weights compute in 16 bits)."""
    return 4.0 if inf.weight_dtype is WeightFormat.FP32 else 2.0


def vllm_sampler_bytes(
    model: ModelSpec,
    batched_tokens: int,
    seqs: int,
    element_bytes: float,
    v1: bool = True,
    path: SamplerPath = SamplerPath.TRITON,
) -> float:
    """Torch memory live during profile_run's sampler step (_dummy_sampler_run): the
    forward's hidden states of every batched token, the random hidden states of the sampled
    rows, their logits in the model dtype and the sampler's float32 rows. V0's profile (the
    0.6-0.7 line) kept one float32 copy of the sampled rows' logits and no Triton top-k rows:
    vLLM 0.7 logged 0.19 GiB for DeepSeek-R1-Distill-Qwen-14B on two RTX 4090s (issue #13061),
    256 rows × 152,064 × 6 bytes = 0.22 GiB with the forward's 0.15 GiB not on top. In V1 the
    ``path`` (sampler_path) decides: Triton's and FlashInfer's three float32 rows (FlashInfer's
    top_k_mask_logits output and softmax beside the float32 logits, flashinfer 0.2.11
    sampling.py top_k_top_p_sampling_from_logits; no per-program rows), or the sort's."""
    rows = min(seqs, batched_tokens)
    hidden = (batched_tokens + rows) * model.hidden_size * element_bytes
    # Float32 logits need no copy: Tensor.to returns the same tensor.
    float32_copy = 4.0 if element_bytes < 4 else 0.0
    if v1 and path is SamplerPath.SORT:
        scratch = SORT_SCRATCH_FULL_SORT_BYTES if rows in SORT_FULL_SORT_ROWS else SORT_SCRATCH_BYTES
        return rows * model.vocab_size * (element_bytes + float32_copy + SORT_OUTPUT_BYTES + scratch) + hidden
    if path is SamplerPath.LOGITS_ONLY:
        return rows * model.vocab_size * element_bytes + hidden
    copies = SAMPLER_FLOAT32_COPIES if v1 else 1
    logit_bytes = element_bytes + float32_copy + (copies - 1) * 4.0
    triton_rows = min(rows, VLLM_TRITON_SAMPLER_ROWS) if v1 and path is SamplerPath.TRITON else 0
    return rows * model.vocab_size * logit_bytes + triton_rows * model.vocab_size * 4.0 + hidden


def moe_workspace_bytes(model: ModelSpec, inf: Inference, tokens: int, element_bytes: float) -> float:
    """TritonExperts.workspace_shapes (vllm/model_executor/layers/fused_moe/fused_moe.py):
    (M, topk, max(I, K)) shared with the output and (M, topk, max(2I, K)) for M tokens, the
    expert width I on this rank and the hidden size K, in the activation dtype."""
    width = math.ceil(model.intermediate_size / inf.tensor_parallel)
    k, d = model.experts_per_token, model.hidden_size
    return tokens * k * (max(width, d) + max(2 * width, d)) * element_bytes


def vllm_non_torch_bytes(inf: Inference, link: LinkSpec, fit: ServingFit = DEFAULT_FIT) -> float:
    """Memory the profile run counts outside torch: kernel libraries (and, in the 0.8-0.9
    accounting, the CUDA context), fitted per accounting era; with tensor parallelism the
    communication memory the profile's forward adds, fitted per link class (2.1 GiB in the 0.19.0
    H100 logs at TP 2, where NCCL 2.27.5 sets up no NVLS; its NVLS buffers, 128 MiB at TP 4, are
    the step to TP 4's 2.2 GiB). Pipeline parallelism alone sends point to
    point and adds nothing measurable beyond the H100 logs' 0.07 GiB."""
    era = era_of(inf.vllm_version)
    base = non_torch_base(inf, fit)
    if inf.tensor_parallel > 1:
        return base + fit.tp_comm_bytes[link_class(link)]
    if inf.pipeline_parallel > 1 and era.accounting is Accounting.INCREASE:
        return VLLM_NON_TORCH_PP_BYTES
    return base


# The release lines whose profile counts outside torch what the 0.10 line's does, so they read
# its value (set by its own logs) and not the era's (set mostly by 0.19.0's). Read in the released
# wheels: ``memory_profiling`` (vllm/utils/__init__.py in 0.10, vllm/utils/mem_utils.py after),
# ``MemorySnapshot.measure`` and gpu_worker.py ``determine_available_memory`` are the same code,
# formatting aside, from 0.10.2 (26b999c71) through 0.11.2 (275de3417), 0.13.0 (72506c983), 0.15.1
# (1892993bc), 0.16.0 (89a77b108) to 0.17.1 (95c0f928c). 0.18.1 (a26e8dc7f) first calls
# ``profile_cudagraph_memory`` inside the ``memory_profiling`` block: a minimal KV cache and a
# capture of each CUDA-graph mode's two first sizes into a temporary pool, cleared before the
# after-profile snapshot, so whatever that leaves outside torch is in the non-torch increase the
# 0.19.0 logs print (0.24-0.27 GiB at TP 1 on H100, against the 0.10 logs' -0.04 to 0.08).
# From 0.11 the baseline is taken after init_worker_distributed_environment ("Now take memory
# snapshot after NCCL is initialized"), which takes NCCL's start-up buffers out of the increase at
# tensor parallel only (the 0.10 logs at TP 2 over PCIe, dennislee22's, hold them: tens of MiB).
NON_TORCH_LIKE_0_10: Final = (VllmVersion.V0_10, VllmVersion.V0_17)


def non_torch_line_key(inf: Inference) -> str:
    """The key of ServingFit.vllm_non_torch_bytes for the plan's release line ("v1@0.19"): the line
    whose profile the release's measures as (0.11-0.17 measure as 0.10: NON_TORCH_LIKE_0_10)."""
    version = inf.vllm_version
    first, last = NON_TORCH_LIKE_0_10
    if at_least(version, first) and at_least(last, version):
        version = first
    return f"{era_of(version).accounting.value}@{version.value}"


def non_torch_base(inf: Inference, fit: ServingFit = DEFAULT_FIT) -> float:
    """One GPU's non-torch memory: the release line's own where start-up logs of that line set
    it (core.serving.fit), else its accounting era's."""
    values = fit.vllm_non_torch_bytes
    return values.get(non_torch_line_key(inf), values[era_of(inf.vllm_version).accounting])


def mxfp4_padding(model: ModelSpec, tensor_parallel: int) -> float:
    """How much vLLM's MXFP4 experts grow in memory: Mxfp4MoEMethod.create_weights
    (vllm/model_executor/layers/quantization/mxfp4.py, the 0.10 line) rounds each rank's
    expert width up to a multiple of 128 and the hidden size up to 256 (gpt-oss: 2,880 becomes
    2,944 and 3,072). The 0.10.1.1 log of gpt-oss-120b on four A100s, 17.22 GiB per GPU, is that."""
    width = math.ceil(model.intermediate_size / tensor_parallel)
    padded = math.ceil(width / 128) * 128 * math.ceil(model.hidden_size / 256) * 256
    return padded / (width * model.hidden_size)


@dataclass(frozen=True)
class KvGroups:
    """vLLM's KV cache groups (kv_cache_utils._get_kv_cache_groups_uniform_page_size): each
    attention type's layers split into groups of ``size`` layers, the last padded; every
    group shares one block table and the pool is cut into blocks of ``size`` layers."""

    size: int  # layers per group
    full: int  # groups of full-attention layers
    windowed: int  # groups of sliding-window (or chunked-local) layers
    window: int  # the window, or the chunk of chunked-local layers
    chunked: bool = False  # the windowed groups are ChunkedLocalAttentionSpec's (Llama 4)
    # groups of a hybrid's recurrent layers (core.serving.vllm_hybrid), and the blocks a request holds in each:
    # one state page without prefix caching, more in vLLM's "align" mode (core.serving.vllm_hybrid.state_blocks)
    recurrent: int = 0
    recurrent_blocks: int = 1

    @property
    def count(self) -> int:
        return self.full + self.windowed + self.recurrent


def vllm_kv_groups(model: ModelSpec, layers: int, hybrid: bool = True) -> KvGroups:
    """The rank's KV groups; before the hybrid allocator (``hybrid`` False: the 0.8-0.9 line, and for
    chunked-local layers the releases before core.serving.vllm_versions.CHUNKED_GROUPS_FROM) every layer kept a
    full-length cache in one group. Chunked-local layers (Llama 4) group as sliding-window layers do: one spec
    type beside FullAttentionSpec (kv_cache_utils._get_kv_cache_groups_uniform_page_size)."""
    full, windowed, window = window_split(model)
    if model.chunked_attention:
        full, windowed, window = model.num_layers - model.chunked_layers, model.chunked_layers, model.attention_chunk
    if not hybrid:
        full, windowed, window = model.num_layers, 0, 0
    # The rank's share of each type (a pipeline stage holds a slice of the layers).
    full = min(layers, round(full * layers / model.num_layers))
    windowed = layers - full
    if not windowed:
        return KvGroups(size=layers, full=1, windowed=0, window=0)
    chunked = model.chunked_attention
    if not full:  # every layer windowed (Mistral 7B v0.1): one group
        return KvGroups(size=layers, full=0, windowed=1, window=window, chunked=chunked)
    size = min(full, windowed)
    if max(full, windowed) < size * 1.5:  # few padding layers: one group per type
        size = max(full, windowed)
    count = math.ceil(windowed / size)
    return KvGroups(size=size, full=math.ceil(full / size), windowed=count, window=window, chunked=chunked)


def vllm_blocks_per_request(
    groups: KvGroups, context: int, batched_tokens: int, block_size: int = VLLM_BLOCK_SIZE
) -> int:
    """Blocks one request of ``context`` tokens takes (get_max_concurrency_for_kv_cache_config):
    cdiv(context, block size) in each full-attention group; in each sliding-window group the
    window less one plus one step's tokens, capped at the context, plus one block
    (SlidingWindowSpec.max_memory_usage_bytes); in each chunked-local group the chunk plus one step's tokens, capped
    at the context, and no extra block (vllm 0.19.0 v1/kv_cache_interface.py
    ChunkedLocalAttentionSpec.max_memory_usage_bytes: ``cdiv(min(attention_chunk_size + max_num_batched_tokens,
    max_model_len), block_size)``; the same in 0.10.0 and 0.24.0, whose max_admission_blocks_per_request holds it;
    0.34.0 adds its in-flight tokens, not modelled, as for the sliding window). Blocks are 16 tokens up to 0.33, 64
    in 0.34 (core.serving.vllm_versions)."""
    full_blocks = math.ceil(context / block_size)
    if groups.chunked:
        chunk_blocks = math.ceil(min(context, groups.window + batched_tokens) / block_size)
        return groups.full * full_blocks + groups.windowed * chunk_blocks + groups.recurrent * groups.recurrent_blocks
    win_tokens = min(context, groups.window - 1 + batched_tokens)
    win_blocks = math.ceil(win_tokens / block_size) + 1 if groups.windowed else 0
    # a recurrent group: the same blocks a request whatever its context (MambaSpec.max_memory_usage_bytes, one page
    # without prefix caching: vllm-project/vllm 0.11.0 wheel vllm/v1/kv_cache_interface.py; two or three in "align"
    # mode, 0.28.0 on: core.serving.vllm_hybrid.state_blocks)
    return groups.full * full_blocks + groups.windowed * win_blocks + groups.recurrent * groups.recurrent_blocks

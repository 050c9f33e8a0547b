"""vLLM by release: which start-up rules each release line follows.

vLLM changed how it sizes the KV cache several times. The planner groups the releases into
eras of identical rules; each era says where its rules were read (a commit of vLLM's source,
or, where the source could not be read, the start-up lines that show the rule):

* **V0 (0.6 – 0.7)**: the V0 engine. Without chunked prefill (the default up to a
  ``max_model_len`` of 32,768 tokens) its profile forward runs ``max(max_model_len,
  max_num_batched_tokens)`` tokens at once; eager PyTorch keeps three hidden-size tensors
  beside the MLP's. Read from the 0.6.4 / 0.6.5 start-up lines of vLLM issue #10517 and
  PR #10511 (``worker.py`` ``determine_num_available_blocks``), which print the profile
  tokens' peak and the 256-sequence V0 default.
* **V1, early (0.8 – 0.9)**: the V1 worker counts every byte allocated outside torch after
  the profile run as non-torch memory, the CUDA context included (vllm-project/vllm commit
  0012cf691b7e69423244d2b1405f4b6832156e19, ``vllm/v1/worker/gpu_worker.py``
  ``determine_available_memory``: ``non_torch_allocations = (total - free) -
  torch_allocated``). Sliding-window layers hold a full-length cache (one KV group).
* **V1 (0.10 – 0.19)**: a baseline snapshot after start-up, so only what the profile run
  adds outside torch is taken; sliding-window and full layers in padded KV groups (the
  hybrid allocator). The 0.19.0 release (commit 2a69949bd, as the wheel's
  ``vllm/_version.py`` records) is where :mod:`core.serving.vllm_rules` was read;
  ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is 0 there, so the CUDA-graph pool is captured
  after the KV cache, outside it.
* **V1 with CUDA-graph profiling (0.20 – 0.33)**: vLLM estimates the CUDA-graph pool
  (``gpu_model_runner.py`` ``profile_cudagraph_memory``: per capture mode the first graph's
  bytes plus the second's times the remaining sizes) and sets it aside before the KV cache,
  and ``gpu_memory_utilization`` defaults to 0.92. Read in the released wheels: 0.20.0
  (b8160878f: ``vllm/envs.py`` ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "1",
  ``vllm/config/cache.py`` ``gpu_memory_utilization`` ``default=0.92``; its start-up message
  says "default since v0.21.0", but the 0.20.0 release already ships both), 0.21.0
  (ad7125a43), 0.28.0 (2cf0a6915) and 0.33.0 (4ba787ec9): ``gpu_worker.py``
  ``determine_available_memory`` takes ``requested_memory - non_kv_cache_memory -
  cudagraph_memory_estimate``. From 0.27.0 (4bdc8a788, ``vllm/utils/mem_utils.py``
  ``memory_profiling``) the non-KV memory is what ``mem_get_info`` lost since the baseline plus
  the torch peak's transient headroom, which also counts the model runner's persistent
  buffers (not modelled: tens of MiB). From 0.28.0 (2cf0a6915, ``vllm/engine/arg_utils.py``
  ``get_batch_defaults``) cards of 160 GiB or more get 16,384 batched tokens under ``vllm
  serve``.
* **V1 with the extensible KV cache (0.34)**: 0.34.0 (62d4bc3c7) reserves the KV cache's
  address range and sizes it after warm-up and CUDA-graph capture from the memory then free
  (``vllm/v1/worker/extensible_kv_cache.py`` ``measure_kv_cache_bytes``): the budget is
  ``min(requested - what the engine holds, free - margin) - reserve``, where the reserve is
  the profiled activation peak plus the CUDA-graph estimate (``gpu_worker.py``
  ``initialize_from_config``: ``reserved_headroom_bytes = peak_activation_memory``) and the
  margin ``max(1 GiB, 0.75 x reserve)`` (``KV_CACHE_MARGIN_FLOOR_BYTES``,
  ``KV_CACHE_MARGIN_FRACTION``). ``gpu_memory_utilization`` unset resolves to 1.0 with it
  (``vllm/config/cache.py`` ``resolved_gpu_memory_utilization``), so the free memory bounds
  the pool: the CUDA context and NCCL's buffers are taken as well. Blocks are 64 tokens
  (``CacheConfig.DEFAULT_BLOCK_SIZE``, kept by FlashAttention, which takes any multiple of 16).
  From 0.21.0 (ad7125a43) the logged *GPU KV cache size* is the maximum concurrency times
  ``max_model_len`` (``kv_cache_utils._report_kv_cache_config``, ``get_kv_cache_capacity`` from
  0.24.0), not blocks per group times the block size: the same for full attention at a multiple
  of the block size, larger for sliding-window and hybrid recurrent models, whose requests take
  fewer blocks.
  Not checked against a start-up log: none of 0.34 is in the corpus.
* **Model Runner V2 (0.22 on)**: the models these releases run on Model Runner V2 by
  default (:func:`v2_runner`; every model from 0.29.0) get no CUDA-graph estimate before the
  KV cache up to 0.28 (its ``profile_cudagraph_memory`` returned 0 until 0.29.0, 98dff2a81):
  :func:`v2_runner_without_graph_estimate`; and from 0.28.0 to 0.32.0 its profile's sampler
  holds the logits alone (:data:`core.serving.vllm_rules.V2_DUMMY_SAMPLER_FROM`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.catalogue import amd_target
from core.dtypes import WeightFormat
from core.inputs import VLLM_V1_FROM
from core.model import ModelSpec
from core.plan import CompileCache, Engine, Inference, VllmVersion
from core.serving import releases


class Accounting(StrEnum):
    """What vLLM's profile counts outside torch (the key of ServingFit.vllm_non_torch_bytes)."""

    V0 = "v0"  # V0 worker's memory_profiling
    CONTEXT = "v1-early"  # every non-torch byte after the profile, CUDA context included
    INCREASE = "v1"  # the increase over a baseline snapshot taken after start-up


@dataclass(frozen=True)
class VllmEra:
    name: str
    first: VllmVersion
    last: VllmVersion
    accounting: Accounting
    hidden_copies: int  # hidden-size tensors live beside the MLP's in the profile forward
    kv_groups: bool  # sliding-window layers in their own padded groups (hybrid allocator)
    graphs_before_kv: bool  # the CUDA-graph estimate is set aside before the KV cache
    default_utilization: float
    block_size: int = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
    measured: bool = False  # the extensible KV cache: sized after warm-up from the free memory

    @property
    def v1(self) -> bool:
        """The V1 engine, from core.inputs.VLLM_V1_FROM (the one place the line is set)."""
        return releases.at_least(self.first, VLLM_V1_FROM)


# V1 (torch.compile) keeps four hidden-size tensors (core.serving.vllm_rules.VLLM_HIDDEN_COPIES);
# V0's eager forward three (the 0.6.x entries of benchmarks/serving/vllm_logs.json).
V0_HIDDEN_COPIES: Final = 3
ERAS: Final = (
    VllmEra("V0 (0.6-0.7)", VllmVersion.V0_6, VllmVersion.V0_7, Accounting.V0, V0_HIDDEN_COPIES, False, False, 0.9),
    VllmEra("V1 (0.8-0.9)", VllmVersion.V0_8, VllmVersion.V0_9, Accounting.CONTEXT, 4, False, False, 0.9),
    VllmEra("V1 (0.10-0.19)", VllmVersion.V0_10, VllmVersion.V0_19, Accounting.INCREASE, 4, True, False, 0.9),
    VllmEra(
        "V1 with CUDA-graph profiling (0.20-0.33)",
        VllmVersion.V0_20,
        VllmVersion.V0_33,
        Accounting.INCREASE,
        4,
        True,
        True,
        0.92,
    ),
    # 0.34.0 (62d4bc3c7): CacheConfig.DEFAULT_BLOCK_SIZE 64; resolved_gpu_memory_utilization 1.0
    # with the extensible KV cache, which is on by default on CUDA.
    VllmEra(
        "V1 with the extensible KV cache (0.34)",
        VllmVersion.V0_34,
        VllmVersion.V0_34,
        Accounting.INCREASE,
        4,
        True,
        True,
        1.0,
        block_size=64,
        measured=True,
    ),
)
# get_batch_defaults (vllm/engine/arg_utils.py) gives cards of 160 GiB or more 16,384 batched
# tokens under `vllm serve` from the 0.28.0 release (2cf0a6915; 0.27.0, 4bdc8a788, has no such tier).
HUGE_CARD_DEFAULTS_FROM: Final = VllmVersion.V0_28
# "GPU KV cache size" is max_concurrency x max_model_len from the 0.21.0 release (ad7125a43,
# vllm/v1/core/kv_cache_utils.py _report_kv_cache_config: "num_tokens = int(max_concurrency *
# max_model_len)", "Sourcing this from the concurrency calculation handles hybrid layouts correctly";
# the same in 0.22.0 and 0.23.0 (0fc695fc6), and through get_kv_cache_capacity from 0.24.0 (ee0da84ab));
# 0.20.0 (b8160878f) printed num_blocks // len(groups) x the smallest block size.
CAPACITY_TOKENS_FROM: Final = VllmVersion.V0_21
# V0 without chunked prefill: chunked prefill is on by default only past this max_model_len.
V0_CHUNKED_PREFILL_FROM: Final = 32_768


# Llama 4 (chunked local attention, core.model.ModelSpec.attention_chunk) by release, read in the released wheels:
# * 0.8.3 is the first whose registry has Llama4ForCausalLM / Llama4ForConditionalGeneration
#   (vllm/model_executor/models/registry.py); 0.6 - 0.7 cannot load it. 0.8.3 and 0.9.2 have no
#   ChunkedLocalAttentionSpec (vllm/v1/kv_cache_interface.py): every layer keeps a full-length cache.
#   core.inputs.LLAMA4_VLLM_FROM holds the line (core.plan.serving_refusal refuses the earlier ones).
# * 0.10.0 adds ChunkedLocalAttentionSpec and the hybrid allocator keeps the chunked layers in their own groups;
#   0.10.1.1, 0.11.0 (f71952c1c), 0.12.0 (4fd9d6a85) and 0.13.0 (72506c983) turn that off unless
#   VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (vllm/envs.py default "0"; vllm/config VllmConfig sets
#   disable_hybrid_kv_cache_manager, "There is a latency regression when using chunked local attention with the
#   hybrid KV cache manager"), and kv_cache_utils.unify_hybrid_kv_cache_specs then makes every chunked layer a
#   FullAttentionSpec: one group, full-length caches. 0.14.0 (b17039bcc), 0.15.0 (f17644344), 0.19.0
#   (2a69949bd), 0.24.0 (ee0da84ab) and 0.34.0 (62d4bc3c7) default it to "1": chunked groups. The 0.10 line is
#   modelled as its later patch releases (as START_CHECK_FROM), so 0.10 - 0.13 keep one group.
CHUNKED_GROUPS_FROM: Final = VllmVersion.V0_14


def chunked_groups(version: VllmVersion) -> bool:
    """Whether this release keeps chunked-local layers in KV groups of their own by default (above)."""
    return at_least(version, CHUNKED_GROUPS_FROM)


def era_of(version: VllmVersion) -> VllmEra:
    return releases.era_of(version, ERAS)


# vLLM 0.34.0 on ROCm (vllm/platforms/interface.py update_block_size_for_backend: without --block-size the block is
# the attention backend's get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE = 64)). vllm/platforms/rocm.py
# _get_backend_priorities lists ROCM_ATTN first for a non-MLA model (VLLM_ROCM_USE_AITER is off by default,
# vllm/envs.py), and vllm/v1/attention/backends/rocm_attn.py RocmAttentionBackend.get_preferred_block_size returns
# 16 ("Only 16 (and 32 ...) runs on the native C++ paged-attention kernel"); it refuses attention sinks
# (supports_sink False) and head sizes outside get_supported_head_sizes, and get_valid_backends puts TRITON_ATTN
# first on gfx1100 and gfx1201 (RDNA 3 / 4). Triton (MultipleOf(16)), AITER's unified attention ("return 64") and
# TRITON_MLA all take the 64. Up to 0.33 the default is 16 whatever the backend, so only 0.34 differs.
ROCM_NATIVE_BLOCK: Final = 16
ROCM_NATIVE_HEAD_SIZES: Final = frozenset((32, 64, 80, 96, 128, 160, 192, 224, 256))
ROCM_TRITON_FIRST_TARGETS: Final = frozenset(("gfx1100", "gfx1201"))


def default_block_size(model: ModelSpec, gpu_id: str, version: VllmVersion, triton_only: bool = False) -> int:
    """The KV block vLLM takes without --block-size on this card: the release's default, or on an AMD card at 0.34
    the native ROCm kernel's 16 when ROCM_ATTN serves the model (see ROCM_NATIVE_BLOCK). ``triton_only``: a cache
    only TRITON_ATTN keeps (vLLM's int8 / int4_per_token_head: ROCM_ATTN's supported_kv_cache_dtypes has neither in
    0.34.0, so the platform's list falls to Triton, core.plan._kv_format_refusal)."""
    block = era_of(version).block_size
    target = amd_target(gpu_id)
    if target is None or block == ROCM_NATIVE_BLOCK:
        return block
    triton = triton_only or model.latent_attention or model.attention_sinks or target in ROCM_TRITON_FIRST_TARGETS
    return block if triton or model.head_dim not in ROCM_NATIVE_HEAD_SIZES else ROCM_NATIVE_BLOCK


def at_least(version: VllmVersion, first: VllmVersion) -> bool:
    """Whether ``version`` is ``first`` or a later release line."""
    return releases.at_least(version, first)


# Model Runner V2 (vllm/v1/worker/gpu/model_runner.py) became the default runner for some
# models from 0.22.0 on, and up to 0.28.0 its profile_cudagraph_memory returned 0 ("It is TBD
# whether we keep this API or not"), so for those models no CUDA-graph estimate is set aside
# before the KV cache; from 0.29.0 (98dff2a81) it estimates the graphs like the V1 runner.
# Which models default to it (vllm/config/vllm.py VllmConfig._is_default_v2_model_runner_model,
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES), by the Hugging Face model_type of the architecture:
# 0.22.0 (0b3ba88f1): Qwen3ForCausalLM, neither MoE nor quantised; 0.23.0 (0fc695fc6): also
# Llama and Mistral; 0.24.0 (ee0da84ab): those three and DeepseekV2 / Qwen2Moe / GraniteMoe,
# quantised or not; 0.25.0 (dd10e03f9) to 0.28.0 (2cf0a6915): those three MoE architectures and
# every model that is not MoE nor hybrid ("if getattr(model_config, "is_hybrid", False): return False";
# 0.27.0 and 0.28.0 unless the architecture is in the list, which names no hybrid). The lists of 0.22.0 -
# 0.24.0 name no hybrid architecture either (granitemoe is GraniteMoeForCausalLM, not Granite 4.0-H's
# GraniteMoeHybridForCausalLM), so a hybrid (core.hybrid) runs the V1 runner up to 0.28.
V2_RUNNER_DENSE_0_22: Final = frozenset({"qwen3"})
V2_RUNNER_DENSE_0_23: Final = frozenset({"llama", "mistral", "qwen3"})
V2_RUNNER_MOE: Final = frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})
_UNQUANTISED: Final = frozenset({WeightFormat.BF16, WeightFormat.FP16, WeightFormat.FP32})


# From 0.29.0 (98dff2a81, vllm/config/vllm.py VllmConfig.use_v2_model_runner) Model Runner V2
# is the default for every model, unless a feature it lacks is asked for
# (_get_v2_model_runner_unsupported_features: speculative methods, sequence parallelism, ...; no
# plan input). Read in the 0.29.0, 0.30.0 (ced6857af), 0.31.0 (db9527a46) and 0.32.0 (5df63a720)
# wheels; vLLM 0.30.0 logs "Using V2 Model Runner" for Qwen2.5-1.5B (engine_logs.json, eslam).
V2_RUNNER_EVERY_MODEL_FROM: Final = VllmVersion.V0_29


def v2_runner(inf: Inference, model: ModelSpec) -> bool:
    """Whether this release runs the model on Model Runner V2 by default (vLLM 0.22 on)."""
    version = inf.vllm_version
    if not at_least(version, VllmVersion.V0_22):
        return False
    if at_least(version, V2_RUNNER_EVERY_MODEL_FROM):
        return True
    if model.hybrid is not None:
        return False
    moe, family = model.num_experts > 1, model.family
    plain = inf.weight_dtype in _UNQUANTISED
    if version is VllmVersion.V0_22:
        return family in V2_RUNNER_DENSE_0_22 and not moe and plain
    if version is VllmVersion.V0_23:
        return family in V2_RUNNER_DENSE_0_23 and not moe and plain
    if version is VllmVersion.V0_24:
        return family in V2_RUNNER_DENSE_0_23 | V2_RUNNER_MOE
    return not moe or family in V2_RUNNER_MOE


def v2_runner_without_graph_estimate(inf: Inference, model: ModelSpec) -> bool:
    """Whether this release runs the model on Model Runner V2 before it estimated CUDA graphs
    (0.22-0.28, the architectures above): no estimate is set aside before the KV cache."""
    return v2_runner(inf, model) and not at_least(inf.vllm_version, VllmVersion.V0_29)


# --enforce-eager (plan: inference.cuda_graphs False) captures no CUDA graph and, on V1, compiles nothing:
# * V1: 0.8.3 (vllm/config.py VllmConfig.__post_init__) and 0.10.0 set CompilationLevel.PIECEWISE and use_cudagraph
#   only "not self.model_config.enforce_eager"; 0.11.0 (f71952c1c, vllm/config/__init__.py) leaves level
#   NO_COMPILATION and sets cudagraph_mode NONE ("Cudagraph is disabled under eager mode"); 0.13.0 (72506c983,
#   vllm/config/vllm.py) drops the optimisation level to -O0 and cudagraph_mode to NONE with no capture sizes;
#   0.19.0 (2a69949bd), 0.24.0 (ee0da84ab) and 0.34.0 (62d4bc3c7) set compilation_config.mode NONE and
#   cudagraph_mode NONE ("Enforce eager set, disabling torch.compile and CUDAGraphs"). With cudagraph_mode NONE
#   the runner captures nothing, so nothing is captured after the pool (up to 0.19) and the CUDA-graph estimate
#   set aside before it (0.20 on) is none; with no compile, no cold compile runs inside the profile.
# * V0 (0.6 - 0.7): Worker._warm_up_model (vllm/worker/worker.py) captures the graphs after the KV cache only
#   "if not self.model_config.enforce_eager" (not read again in a wheel on this branch), and V0 compiles nothing.


def graphs_captured(inf: Inference) -> bool:
    """Whether vLLM captures CUDA graphs for the plan: not under --enforce-eager (above)."""
    return inf.cuda_graphs


def graphs_before_kv(inf: Inference, model: ModelSpec) -> bool:
    """Whether the CUDA-graph estimate is set aside before the KV cache for this model."""
    if not graphs_captured(inf):
        return False
    return era_of(inf.vllm_version).graphs_before_kv and not v2_runner_without_graph_estimate(inf, model)


def utilization(inf: Inference) -> float:
    """gpu_memory_utilization as given, or the version's default."""
    return inf.gpu_memory_utilization or era_of(inf.vllm_version).default_utilization


def profile_tokens(inf: Inference, batched: int) -> int:
    """Tokens of the profile forward: V0 without chunked prefill runs a whole max_model_len."""
    era = era_of(inf.vllm_version)
    if not era.v1 and inf.context <= V0_CHUNKED_PREFILL_FROM and not inf.max_num_batched_tokens:
        return max(inf.context, batched)
    return batched


# torch.compile runs inside the memory profile that sizes the KV cache, in every V1 release line
# (0.8 - 0.34). V1 compiles the model unless --enforce-eager (0.8.5, vllm/config.py
# VllmConfig.__post_init__: CompilationLevel.PIECEWISE under VLLM_USE_V1; V0's CompilationConfig.level
# defaults to 0, so 0.6 - 0.7 compile nothing by default). Dynamo and Inductor compile on the model's
# first forward (vllm/compilation/decorators.py, the decorated class's __call__; from the AOT path on,
# aot_compile under monitor_torch_compile and then the forward under monitor_profiling_run), and the
# first forward is Worker.profile_run: EngineCore._initialize_kv_caches (vllm/v1/engine/core.py) calls
# determine_available_memory before compile_or_warm_up_model, and gpu_worker.py
# determine_available_memory runs profile_run between reset_peak_memory_stats and its after-profile
# reading (0.8.5) or inside memory_profiling (vllm/utils, later vllm/utils/mem_utils.py). Read in the
# wheels of 0.8.5, 0.9.2, 0.10.0, 0.11.0, 0.11.2 (275de3417), 0.12.0 (4fd9d6a85), 0.13.0 (72506c983),
# 0.14.0 (b17039bcc), 0.15.0 (f17644344), 0.19.0 (2a69949bd), 0.20.0 (b8160878f), 0.21.0 (ad7125a43),
# 0.22.0 (0b3ba88f1), 0.23.0 (0fc695fc6), 0.24.0 (ee0da84ab), 0.25.0 (dd10e03f9), 0.26.0 (ffd46bfab),
# 0.27.0 (4bdc8a788), 0.28.0 (2cf0a6915), 0.29.0 (98dff2a81), 0.30.0 (ced6857af), 0.31.0 (db9527a46),
# 0.32.0 (5df63a720), 0.33.0 (4ba787ec9) and 0.34.0 (62d4bc3c7): no release compiles or warms the
# model before that window (the only earlier profile_run is the kv_cache_memory_bytes branch, which
# skips the profile). So a cold compile's transient peak (Inductor's compile-time benchmarking: vLLM
# sets combo_kernels and benchmark_combo_kernel from 0.11.2 with torch 2.9, vllm/config/compilation.py)
# is charged as activation and the kernels it leaves loaded as consumed memory; a warm start loads the
# cached artefact instead. 0.34's extensible KV cache keeps the same profiled peak as its reserve.
COLD_COMPILE_IN_PROFILE_FROM: Final = VLLM_V1_FROM
# What a cold compile cost on the one published pair of starts that differ only in the compile cache
# and print vLLM's own split (Tegdam/pickr_ai tests/bench/runner/test_enginelog.py @641ea05, vLLM
# 0.29.0 on the V1 runner, Qwen2.5-3B-Instruct-AWQ, RTX 4050 Laptop 6 GB): consumed memory 2.63 GiB
# cold against 2.10 warm, peak activation 0.67 against 0.22, so 0.53 + 0.45 = 0.98 GiB, and 43,664 KV
# tokens against 70,240 (-38 %). A figure read off the logs, not fitted; larger models lose more
# (vLLM issue #54122: "tens of GiB per GPU" on a nightly; 1CatAI/1Cat-vLLM PR #518: 2.49 GiB).
COLD_COMPILE_SEEN_GIB: Final = 0.98


# Memory other processes hold on the card (hardware.held_by_others), by release line:
# * V1 refuses to start when the free memory its worker reads at init is below
#   gpu_memory_utilization × total: vllm/v1/worker/gpu_worker.py ``init_device`` (``init_snapshot =
#   MemorySnapshot()``; ``if init_snapshot.free_memory < requested_memory: raise ValueError("Free memory on
#   device (free/total GiB) on startup is less than desired GPU memory utilization (u, U GiB). Decrease GPU
#   memory utilization or reduce GPU memory used by other processes.")``; from vllm-project/vllm@35d5cda1 the
#   check sits in ``vllm/v1/worker/utils.py`` ``request_memory``). It first shipped in 0.9.1: vLLM's own
#   issue #20305 ("vLLM v0.9.1 Free Memory on device on startup is less than desired") and
#   vllm-project/llm-compressor PR #1560 ("We started seeing the following failure ... starting from version
#   0.9.1"); ovg-project/kvcached issue #29 shows it at gpu_worker.py:145 ``init_device`` of 0.9.2. The 0.9
#   line is modelled with it (0.9.0, its first release, had none). 0.34's extensible KV cache resolves an
#   unset utilisation to 1.0 and sizes the pool from the free memory, so its check is not modelled there.
START_CHECK_FROM: Final = VllmVersion.V0_9
# * V1 0.8 - 0.9 (Accounting.CONTEXT): ``determine_available_memory`` takes non-torch memory as
#   (total - free) - torch allocated after the profile (0012cf691), so memory other processes hold is
#   counted as this engine's non-torch memory and the KV pool shrinks by it (vllm-project/vllm PR #19312:
#   "V1's memory profiling incorrectly counts memory used by other processes as non_torch_allocations").
#   From 0.10 (Accounting.INCREASE) non-torch memory is the increase over the baseline snapshot taken at
#   init, which already lacks what others hold: the pool does not shrink.
# * V0 (0.6 - 0.7): ``memory_profiling`` measures from a baseline taken at init (vllm/worker/worker.py
#   ``determine_num_available_blocks``, PR #10511 / #12126: baseline = total - free at init_device), so what
#   others hold is not counted either, and V0 has no start-up check: the pool does not shrink.


def start_check(version: VllmVersion) -> bool:
    """Whether this release line refuses to start on too little free memory (0.9 - 0.33)."""
    return at_least(version, START_CHECK_FROM) and not era_of(version).measured


def counts_others_as_non_torch(version: VllmVersion) -> bool:
    """Whether this release line counts memory other processes hold as its own non-torch memory."""
    return era_of(version).accounting is Accounting.CONTEXT


def compiles_in_profile(version: VllmVersion) -> bool:
    """Whether this release line compiles the model inside the memory profile (every V1 line)."""
    return at_least(version, COLD_COMPILE_IN_PROFILE_FROM)


def cold_compile_planned(inf: Inference) -> bool:
    """Whether the plan's start compiles cold inside the memory profile: vLLM V1 with torch.compile on (no
    --enforce-eager: graphs_captured) and the plan's compile cache cold (core.inputs.CompileCache)."""
    return (
        inf.engine is Engine.VLLM
        and compiles_in_profile(inf.vllm_version)
        and graphs_captured(inf)
        and inf.compile_cache is CompileCache.COLD
    )


# The modalities each family's tower serves (0.19.0's ``_mark_tower_model(vllm_config, ...)`` calls): the
# tower is skipped only when every one of them is 0; the release lines that skip it: core.inputs.TEXT_ONLY_FROM.
TOWER_MODALITIES: Final = {
    "gemma3": ("image",),
    "llama4": ("image",),
    "mistral3": ("image",),
    "llava": ("image",),
    "llava_next": ("image",),
    "llava_onevision": ("image", "video"),
    "qwen2_5_vl": ("image", "video"),
    "qwen3_vl": ("image", "video"),
    # Qwen3.5 / Qwen3.6 (qwen3_5.py, 0.17.0 - 0.19.0 wheels: ``_mark_tower_model(vllm_config, {"image",
    # "video"})`` in both classes); every line that loads them (core.plan.HYBRID_VLLM_FROM) is past 0.15.
    "qwen3_5": ("image", "video"),
    "qwen3_5_moe": ("image", "video"),
}


def limit_mm_json(family: str) -> str:
    """``--limit-mm-per-prompt``'s value that turns every modality of ``family``'s tower off (JSON, the form
    the 0.10 - 0.19 releases parse)."""
    modalities = TOWER_MODALITIES.get(family, ("image",))
    return "{" + ",".join(f'"{m}":0' for m in modalities) + "}"

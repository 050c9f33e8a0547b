"""The serving constants set from published measurements, and the classes they are set per.

Everything else in :mod:`core.serving` is read from an engine's source or a datasheet. These
few numbers are not written down anywhere; they are what start-up logs and speed tables show,
and each is *fitted*: benchmarks/realgpu/serving.py sets them from the corpora in
benchmarks/realgpu (and benchmarks/serving/vllm_logs.json) with one rule per constant (the
median of what each record implies), and scores every source with the constants set
without it (leave one source out). The values below are that rule applied to every source;
the benchmark checks they still are (``--check``), so a new record that moves one moves it
here in the same change.

Classes, so a constant set on one card or link carries to the others of its kind:

* a link's class (:func:`link_class`): NVLink through NVSwitch (Hopper and Blackwell SXM, where
  NCCL also sets up NVLS buffers on more than two GPUs), NVLink or Infinity Fabric without it,
  PCIe, and a network between nodes;
* a card's memory class (:func:`memory_class`): HBM (data-centre parts), GDDR (GeForce,
  RTX workstation and laptop parts), and Apple's unified memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from core.catalogue import GpuSpec, LinkSpec
from core.runtime import HF_HOST_LAYER_S
from core.units import GiB, MiB


class LinkClass(StrEnum):
    NVLS = "nvlink-nvswitch"  # NVLink 4/5 through NVSwitch (NCCL's NVLS multicast beyond 2 GPUs)
    NVLINK = "nvlink"  # NVLink 2/3, Infinity Fabric: peer-to-peer, no multicast buffers
    PCIE = "pcie"
    NETWORK = "network"  # ranks on different nodes


class MemoryClass(StrEnum):
    HBM = "hbm"
    GDDR = "gddr"
    UNIFIED = "unified"  # Apple silicon


class EngineFamily(StrEnum):
    GRAPHS = "cuda-graphs"  # vLLM, SGLang: a decode step replays one captured graph
    EAGER = "eager"  # llama.cpp (the builds in the corpus) and HF generate: one launch per kernel


NVLS_LINKS: Final = frozenset({"nvlink4", "nvlink5"})


def link_class(link: LinkSpec) -> LinkClass:
    if link.kind == "inter":
        return LinkClass.NETWORK
    if link.id in NVLS_LINKS:
        return LinkClass.NVLS
    if link.id.startswith(("nvlink", "xgmi")):
        return LinkClass.NVLINK
    return LinkClass.PCIE


def bandwidth_key(family: EngineFamily, gpu: GpuSpec) -> str:
    """The key of ServingFit.bandwidth_efficiency for an engine family on a card."""
    return f"{family.value}/{memory_class(gpu).value}"


def memory_class(gpu: GpuSpec) -> MemoryClass:
    if gpu.vendor == "apple":
        return MemoryClass.UNIFIED
    return MemoryClass.HBM if gpu.segment == "datacenter" and gpu.memory_bandwidth_gb_s >= 1000 else MemoryClass.GDDR


def _frozen(values: dict[str, float]) -> Mapping[str, float]:
    return MappingProxyType(values)


# The rule of benchmarks/realgpu/serving.py on every source (its "fitted on every source"
# table); a class no record shows holds its fallback (the CUDA context for the 0.8-0.9 era).
# "era@line": a release line whose own start-up logs set it (the median of what they imply),
# before its era's value: the 0.10.1.1 and 0.10.2 logs (dennislee22, vLLM PR #24577) show
# -0.04 to 0.08 GiB outside torch, the 0.19.0 ones (llm-d-planner on H100, myoceane on A100)
# 0.24-0.67 GiB, so one V1 constant missed the 0.10 line by a quarter of a GiB. The 0.6-0.10
# values rose by 0.02 GiB when the profile peak took the cuBLAS workspace at each card's size
# (8.125 MiB off sm90, core.runtime.cublas_workspace): their logs are from A100s and RTX cards.
# 0.02 -> 0.10 GiB when the 0.10 logs' sampler became FlashInfer's, which they print (no Triton
# per-program rows: 0.075 GiB at 256 rows of Qwen2's vocabulary, until then taken for the 0.10
# line's non-torch memory; core.serving.vllm_rules.sampler_path).
DEFAULT_NON_TORCH: Final = _frozen(
    {
        "v0": 0.38 * GiB,
        "v1-early": 0.5 * GiB,
        "v1": 0.29 * GiB,
        "v0@0.6": 0.38 * GiB,
        "v0@0.7": 0.40 * GiB,
        "v1@0.10": 0.10 * GiB,
        "v1@0.19": 0.29 * GiB,
    }
)
# NVSwitch H100s: 1.88 GiB, set by vLLM 0.19.0's logs and one SGLang log on four H100s. Not NVLS:
# NCCL 2.27.5 sets up no NVLS on two GPUs (ncclNvlsInit: gpuCount <= 2) and 128 MiB at TP 4, while
# the TP 2 logs already show 1.8 GiB; and the two engines measure different things (vLLM what its
# profile's forward adds after a baseline taken past the distributed start, SGLang what that start
# takes): docs/SERVING.md, "Is the gap NVLS? Read from source: no". The ring buffers over PCIe or
# plain NVLink are held at 0 (tens of MiB); across nodes, two dennislee22 logs through Ray: 0.10
# GiB (0.48 until the 40 GB run's remote worker, which prints "FlashInfer is not available", was
# given the sort its profile runs: 0.87 GiB of that run's pool had been read as communication;
# 0.05 until 0.10's fused-MoE scratch was freed before the sampler, as it is before 0.13).
DEFAULT_TP_COMM: Final = _frozen({"nvlink-nvswitch": 1.88 * GiB, "nvlink": 0.0, "pcie": 0.0, "network": 0.10 * GiB})
# Per card where a log prints torch's total (or two runs imply it), else the class's median.
# The RTX 5090's from four PyTorch OOM messages that agree (31.36-31.37 GiB of 32607 MiB:
# TrajectoryCrafter#20, Wan-Video/Wan2.1#465 and two write-ups; benchmarks/realgpu/torch_capacity.json),
# which print cudaMemGetInfo's total (pytorch/pytorch eb42ad6e, c10/cuda/CUDACachingAllocator.cpp,
# DeviceCachingAllocator::malloc); a card's messages never set its class's value. It was the GDDR
# class's 0.42 (the RTX 3090's), 0.06 GiB too little.
DEFAULT_DRIVER: Final = _frozen(
    {
        "h100-sxm": 0.46 * GiB,
        "a100-80gb-sxm": 0.72 * GiB,
        "b200": 0.70 * GiB,
        "rtx-3090": 0.42 * GiB,
        "rtx-5090": 0.48 * GiB,
        "hbm": 0.70 * GiB,
        "gddr": 0.42 * GiB,
        "unified": 0.0,
    }
)
# Unified memory: 0.89 since the M1 Max's K-quant decode rows, bound by its ALUs
# (core.serving.speed.APPLE_MATVEC_CYCLES), no longer set it (0.88 while they did); with
# Metal's dispatches costed apart ("metal" below) and llama.cpp discussion #4167's Apple table
# beside XiongjieDai's Macs; 0.72 when XiongjieDai's Macs alone set it with CUDA's kernel cycles.
# llama.cpp on HBM: 0.65 since its A100 F16 rows pay the scalar-load F16 mat-vec of builds before
# b3916 (core.serving.speed.SCALAR_F16_MATVEC_SLOWDOWN, read from another source); 0.54 while the
# slow kernel's time was taken as the memory's. GDDR: 0.90 since the A40 and L40S rows read at the
# 15/16 of the bandwidth their in-band ECC leaves to data (core.serving.speed.INBAND_ECC_DATA_SHARE);
# 0.88 (fitted 0.892) while their check bits were taken as data.
DEFAULT_BANDWIDTH: Final = _frozen(
    {
        "cuda-graphs/hbm": 0.59,
        "cuda-graphs/gddr": 0.90,
        "cuda-graphs/unified": 0.89,
        "eager/hbm": 0.65,
        "eager/gddr": 0.90,
        "eager/unified": 0.89,
    }
)
# GPU cycles a kernel of an eager engine's decode step costs beyond its reads (core.serving.speed's
# kernel_seconds: ramp-up and drain of a short kernel, counted in the SM's clock), whether launched
# one by one or replayed from llama.cpp's CUDA graph; vLLM's and SGLang's graph-captured steps
# are held at none. Fitted by benchmarks/realgpu/serving.py on every source (4,820 since the llama.cpp
# maintainers' CUDA tables joined, fitted 4,815: ggml-org/llama.cpp PR #4766 (RTX 3090 and RTX 4090,
# January 2024), #4812 (RTX 3090 Ti), #15035 (RTX 4090, Qwen2.5 3B at 0-32k context, 2025) and #19378
# (four RTX 4090s, 2026), benchmarks/realgpu/serving_speed.json;
# 4,540 (fitted 4,578) since the A100 F16 rows pay the scalar-load F16 mat-vec of their builds; 4,070 since the Apple
# rows set Metal's dispatches apart; 4,245 while they shared CUDA's; 3,187 when every kernel was
# taken as launched, launch included; 3,820 before the batched-cuBLAS kernels).
#
# "metal": llama.cpp's kernels on an Apple GPU, where each token's graph is dispatched by Metal and
# nothing is replayed: ggml_metal_graph_compute (ggml-metal.m, read at ggerganov/llama.cpp
# 006e74a4) encodes every node of the graph again each token, one dispatchThreadgroups per node
# into n_cb command buffers, a memoryBarrierWithScope between nodes that depend on each other,
# commits the buffers and waits for them. Its fixed cost per dispatch is fitted apart from CUDA's
# kernels, on the Apple decode rows alone, with the unified-memory efficiency (least squares: one
# chip's F16, Q8_0 and Q4_0 rows of one model, llama.cpp discussion #4167, or its 8B and 70B rows,
# XiongjieDai, tell a cost per token apart from a rate per byte); each Apple source is scored with
# the other's. In cycles at the GPU's clock: the time per token beyond the reads that #4167's rows
# imply is about the same number of cycles on every chip (M1 Max at 1.296 GHz 5.6 ms, M4 Max at
# 1.678 GHz 4.3 ms: 7.2 million cycles each for 32 layers' dispatches). 10,390 since the M1 Max's
# K-quant rows, bound by its ALUs, no longer set it (10,520 while they did).
METAL_KERNELS: Final = "metal"
DEFAULT_KERNEL_CYCLES: Final = _frozen({"cuda-graphs": 0.0, "eager": 4820.0, METAL_KERNELS: 10390.0})
# Seconds each kernel launched one by one into a stream adds over one replayed from a CUDA graph
# (core.serving.speed's launch_seconds: the launch overhead a graph removes, CPU submission and the
# GPU's gap between kernels). The median of what the published graph on / off pairs imply (benchmarks/realgpu/
# serving.py graph_pairs), Llama 2 7B, 1,088 kernels a token: ggml-org/llama.cpp issue #6763 (H100
# PCIe, 143.35 -> 163.83 tokens/s: 0.80 us), PR #6766 (RTX 3090 116.31 -> 128.27: 0.74 us; RTX 4090
# 138.31 -> 146.81: 0.39 us); vLLM's and SGLang's replayed steps are held at none.
# HF_HOST_LAYER: seconds of host (Python) time Hugging Face generate spends per decoder layer per
# decode step, which the GPU's work overlaps (launches are asynchronous): at batch 1 a step takes the
# longer of the two. The median of what the Qwen team's speed tables imply (dense BF16 models on one
# GPU at a 1-token prompt, time per new token / layers; benchmarks/realgpu/serving.py
# implied_host_layer): QwenLM/Qwen3@a912d239 speed_benchmark.rst, transformers 4.46 on an A100 host,
# 0.84-0.90 ms (Qwen2.5 0.5B-32B); QwenLM/Qwen3@7a2f61ff speed_benchmark.md, transformers 4.51.3 on
# an H20 host, 0.60-0.62 ms (Qwen3 0.6B-32B). Each table is scored with the other's; the figure
# depends on the host's CPU.
HF_HOST_LAYER: Final = "hf-host-layer"
DEFAULT_LAUNCH: Final = _frozen({"cuda-graphs": 0.0, "eager": 0.74e-6, HF_HOST_LAYER: HF_HOST_LAYER_S})


# vLLM 0.20+'s CUDA-graph estimate ("Estimated CUDA graph memory: X GiB total", or in 0.29+ "CUDA graph pool
# memory: ... (estimated)"), per decoder layer of the rank per graph captured: the sum of the printed
# estimates over the sum of layers x graphs (core.serving.vllm_rules.vllm_graph_count) of the 0.20+ logs that
# print one (benchmarks/realgpu/engine_logs.json: NnamdiOdozi 0.22.1 Qwen3-30B-A3B 0.14 GiB over 48 x 30,
# LukeJYK 0.26.1 Qwen3-Coder-30B-A3B 0.15 over 48 x 12, Freshair 0.29.0 Qwen3-4B 0.38 over 36 x 86, eslam
# 0.30.0 Qwen2.5-1.5B 0.34 over 28 x 86). The 0.19 logs' printed estimates (0.51 - 2.35 GiB) are not used:
# 0.19 does not apply them.
GRAPH_PER_LAYER: Final = "per-layer-graph"
DEFAULT_GRAPHS: Final = _frozen({GRAPH_PER_LAYER: 0.1375 * MiB})

# What a cold torch.compile adds to vLLM V1's profiled peak (Inductor's compile and autotuning inside the profiling
# forward: core.serving.vllm_versions.compiles_in_profile), on a plan whose compile cache is cold
# (core.inputs.CompileCache): the median of what each one-GPU cold start implies (benchmarks/realgpu/serving.py
# cold_observations; each log's compile state is its engine_logs.json record's "compile" field): the A100 notes'
# vLLM 0.31.0 Llama-3.1-8B, printed peak activation 1.44 GiB less the planner's warm peak and the graph rule, 0.84;
# Freshair's 0.29.0 Qwen3-4B, 1.09 less its warm peak and its printed 0.38 GiB estimate, 0.55; GIO443's 0.30.0
# Qwen2.5-1.5B, what --enforce-eager freed (1.08 GiB, its README) less the graph rule, 0.76; Tegdam's 0.29.0
# Qwen2.5-3B-AWQ pair, cold less warm peak activation (0.67 - 0.22), 0.45; NnamdiOdozi's 0.22.1 Qwen3-30B-A3B on an
# H100, which prints no split, the term its KV tokens imply, 0.08. Fitted, not bounded from Inductor's source
# (what its autotuning allocates depends on the kernels it benchmarks); larger models have lost more (vLLM issue
# #54122, 1CatAI/1Cat-vLLM PR #518).
COLD_COMPILE_PEAK: Final = "cold-compile-peak"
DEFAULT_COLD_COMPILE: Final = _frozen({COLD_COMPILE_PEAK: 0.55 * GiB})


@dataclass(frozen=True)
class ServingFit:
    """The fitted constants (bytes, seconds, fractions), by the class each is set per."""

    # What vLLM's profile counts outside torch on one GPU, by its accounting era
    # (core.serving.vllm_versions.Accounting), or "era@release line" where that line's logs set it.
    vllm_non_torch_bytes: Mapping[str, float] = field(default_factory=lambda: DEFAULT_NON_TORCH)
    # What tensor parallelism adds outside torch on each GPU (NCCL's and the custom all-reduce's
    # buffers), by link class.
    tp_comm_bytes: Mapping[str, float] = field(default_factory=lambda: DEFAULT_TP_COMM)
    # What the driver keeps of the card before torch.cuda.mem_get_info's total, by memory class.
    driver_reserved_bytes: Mapping[str, float] = field(default_factory=lambda: DEFAULT_DRIVER)
    # Share of the datasheet bandwidth a decode step's reads achieve, by engine family and memory
    # class ("eager/hbm": llama.cpp's kernels on an A100 reach two thirds of it, its old F16 mat-vec
    # less: core.serving.speed.weight_read_factor).
    bandwidth_efficiency: Mapping[str, float] = field(default_factory=lambda: DEFAULT_BANDWIDTH)
    # GPU cycles per kernel of a decode step outside the reads (launch, ramp-up and drain of a
    # short kernel), by engine family.
    kernel_cycles: Mapping[str, float] = field(default_factory=lambda: DEFAULT_KERNEL_CYCLES)
    # Launch overhead (s) per kernel launched one by one (not replayed from a CUDA graph), by engine family.
    launch_seconds: Mapping[str, float] = field(default_factory=lambda: DEFAULT_LAUNCH)
    # vLLM 0.20+'s CUDA-graph estimate per decoder layer per captured graph
    # (core.serving.vllm_rules.vllm_graph_estimate).
    vllm_graph_bytes: Mapping[str, float] = field(default_factory=lambda: DEFAULT_GRAPHS)
    # What a cold torch.compile adds to vLLM V1's profiled peak (core.serving.engines.vllm_pool, cold plans).
    vllm_cold_compile_bytes: Mapping[str, float] = field(default_factory=lambda: DEFAULT_COLD_COMPILE)


DEFAULT_FIT: Final = ServingFit()

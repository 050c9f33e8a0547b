"""The runtime's own memory: what the CUDA driver, NCCL and PyTorch's libraries hold beside
the tensors, and the constants of the caching allocator's reserve.

One home for the terms every process pays whatever it computes — the CUDA context, cuBLAS's
workspace, NCCL's buffers — read by the training figures (:mod:`core.training.device`) and by
every serving engine's rules, and for the one constant fitted on published real-GPU figures
(the fragmentation of the activations' segments).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, NamedTuple

from core.catalogue import Generation, GpuSpec, amd_target, generation, load_gpus
from core.units import GiB, MiB

# The CUDA context of a PyTorch process (driver, kernels of the loaded libraries) sits outside
# the caching allocator: nvidia-smi shows it, max_memory_reserved does not. 200-700 MiB across
# machines (pytorch/pytorch#28113: "from 200+mb to 700+mb"; #20532: 300-400 MB on a V100);
# 0.9-1.5 GiB on CUDA 11.0-11.1 builds that loaded every kernel (#49877: 1,644 MiB used on an
# RTX 3090 for a 156 MiB tensor; #60150: 1,105 MiB after empty_cache). PyTorch sets
# CUDA_MODULE_LOADING=LAZY when the user has not (torch/cuda/__init__.py, _lazy_init), which
# keeps it near the low end. 512 MiB is used for every card; the spread is part of the range.
CUDA_CONTEXT_BYTES: Final = 512 * MiB
CUDA_CONTEXT_SPREAD_BYTES: Final = (200 * MiB, 768 * MiB)
# cuBLAS workspace PyTorch keeps per (cuBLAS handle, stream) and takes from its caching allocator
# at the handle's first matmul on that stream (pytorch/pytorch 26a39059
# aten/src/ATen/cuda/CublasHandlePool.cpp: setWorkspaceForHandle -> getNewWorkspace ->
# CUDACachingAllocator::get()->allocate, kept in cublas_handle_stream_to_workspace until the
# process ends). Its size: CUBLAS_WORKSPACE_CONFIG ":SIZE_KiB:COUNT" summed, else
# (parseChosenWorkspaceSize, `properties->major == 9 && properties->minor == 0`: sm90 only, so
# Blackwell's sm100 / sm120 take the other size) 4096 KiB × 8 = 32 MiB on Hopper and
# 4096 KiB × 2 + 16 KiB × 8 = 8.125 MiB on every other card; Megatron-LM's CI sets ":4096:8" =
# 32 MiB (model_config.yaml at NVIDIA/Megatron-LM d98e8a64), which the default on Hopper equals.
# Which size a card gets: cublas_workspace below, by its architecture
# (core.catalogue.generation); a card whose architecture is not known is given the larger, an
# upper bound. cuBLASLt's workspace (1 MiB by default, CUBLASLT_WORKSPACE_SIZE, a map of its own
# unless TORCH_CUBLASLT_UNIFIED_WORKSPACE=1) is left out. Because max_memory_allocated counts it
# and the fake-tensor measurements do not, it is a term of the allocated peak which those suites
# take off.
CUBLAS_WORKSPACE_BYTES: Final = 32 * MiB  # sm90
CUBLAS_WORKSPACE_OTHER_BYTES: Final = 4096 * 1024 * 2 + 16 * 1024 * 8  # every card but sm90
# The handles a training step's matmuls run on: DeviceThreadHandlePool gives each host thread its
# own handle (aten/src/ATen/cuda/detail/DeviceThreadHandles.h, PoolWindow::reserve), and the
# backward runs on autograd's worker thread for the device, not the thread that called backward()
# (torch/csrc/autograd/engine.cpp, Note [Allocating GPUs to autograd threads]: "a thread per CUDA
# device"), so the forward's handle and the backward's are two keys of the workspace map: two
# workspaces on the default stream.
CUBLAS_TRAINING_HANDLES: Final = 2
# Transformer Engine's own cuBLAS workspace, a torch.empty (so from the caching allocator) cached
# for the process by functools.lru_cache: 32 MiB + 1,024 B on compute capability 9 and newer
# (`major >= 9`: Hopper and Blackwell), 4 MiB (4,194,304 B) before (NVIDIA/TransformerEngine
# 4329ff84, the commit Megatron-LM d98e8a64 pins in pyproject.toml,
# transformer_engine/pytorch/cpp_extensions/gemm.py get_cublas_workspace_size_bytes /
# get_cublas_workspace). A card whose architecture is not known is given the larger. Its grouped
# GEMM (Megatron's --moe-grouped-gemm: TEGroupedMLP, TE's GroupedLinear, general_grouped_gemm, whose
# get_cublas_workspace(device, False, True) is a second lru_cache entry) takes one more such
# workspace per compute stream: tex.get_num_cublas_streams(), common/util/multi_stream.cpp
# ``num_compute_streams = 4`` (plan setting moe_grouped_gemm).
TE_CUBLAS_WORKSPACE_BYTES: Final = 32 * MiB + 1024  # compute capability >= 9
TE_CUBLAS_WORKSPACE_PRE_HOPPER_BYTES: Final = 4_194_304  # compute capability < 9
TE_GROUPED_GEMM_STREAMS: Final = 4


WORKSPACE_ASSUMED_NOTE: Final = (
    " — the card's architecture is not known: the larger size assumed, an upper bound on NVIDIA cards"
)


class Workspace(NamedTuple):
    """One library workspace at the size its default gives a card, and how that size reads."""

    bytes: int
    label: str
    known: bool  # False: the card's architecture is not told apart, so the larger size is assumed
    library: str = "cuBLAS"  # whose workspace a matmul takes: cuBLAS, or hipBLASLt on an Instinct card

    @property
    def note(self) -> str:
        """What a term's label adds when the size was assumed ("" when the card's rule is known)."""
        return "" if self.known else WORKSPACE_ASSUMED_NOTE


# ROCm builds of PyTorch (the same CublasHandlePool.cpp, USE_ROCM): hipBLAS's per-(handle, stream)
# workspace is 32 MiB, 128 MiB on gfx94x / gfx95x (parseChosenWorkspaceSize), and hipBLASLt has a
# pool of its own, a handle per host thread (getCurrentCUDABlasLtHandle's DeviceThreadHandlePool)
# whose workspace per (handle, stream) is 76 MiB (parseCUDABlasLtWorkspaceSize, "Use 76 MB for
# hipBLASLt"; HIPBLASLT_WORKSPACE_SIZE in KiB moves it). Which of the two a matmul takes:
# at::globalContext().blasPreferredBackend() (aten/src/ATen/Context.cpp: "AMD Instinct targets
# prefer hipblaslt": gfx90a and gfx942, gfx950 from ROCm 6.5) is hipBLASLt on every Instinct card
# unless TORCH_BLAS_PREFER_HIPBLASLT=0, and CUDABlas.cpp's gemm / bgemm then call the Lt path
# (gemm_internal_cublaslt, bgemm_internal_cublaslt), which never takes the hipBLAS handle: so an
# Instinct card's matmuls hold the 76 MiB workspace per handle where NVIDIA cards hold cuBLAS's.
HIPBLASLT_WORKSPACE_BYTES: Final = 76 * MiB
_INSTINCT_LT_TARGETS: Final = frozenset({"gfx90a", "gfx942", "gfx950"})

# The size each library's default gives a card of each architecture (the sources above): PyTorch's
# cuBLAS workspace is 32 MiB on sm90 alone, Transformer Engine's 32 MiB + 1 KiB from compute
# capability 9 on; an AMD Instinct card's matmul workspace is hipBLASLt's 76 MiB (ROCm's
# Transformer Engine port is not read here: the larger NVIDIA size stands in for it, said so).
_CUBLAS_SM90: Final = (CUBLAS_WORKSPACE_BYTES, "32 MiB (sm90's default)")
_CUBLAS_OTHER: Final = (CUBLAS_WORKSPACE_OTHER_BYTES, "8.125 MiB (4096 KiB × 2 + 16 KiB × 8: not sm90)")
_TE_CC9: Final = (TE_CUBLAS_WORKSPACE_BYTES, "32 MiB + 1 KiB (compute capability ≥ 9)")
_TE_BEFORE: Final = (TE_CUBLAS_WORKSPACE_PRE_HOPPER_BYTES, "4 MiB (compute capability < 9)")
_WORKSPACES_BY_GENERATION: Final = {
    Generation.HOPPER: (_CUBLAS_SM90, _TE_CC9),
    Generation.BLACKWELL: (_CUBLAS_OTHER, _TE_CC9),  # sm100 / sm120: not sm90
    Generation.ADA: (_CUBLAS_OTHER, _TE_BEFORE),
    Generation.AMPERE: (_CUBLAS_OTHER, _TE_BEFORE),
}
# An NVIDIA card of the catalogue whose family the speed tables do not tell apart (Volta's V100,
# Turing's T4 and RTX 20 series) is still not sm90 and below compute capability 9, so both rules
# give it the smaller sizes: every Hopper card of the catalogue is named by core.catalogue's
# prefixes. A card whose architecture is not known (a custom card, an AMD one) is given the larger
# size of each: an upper bound on NVIDIA cards (an AMD Instinct card is told apart above). An Apple
# GPU's PyTorch holds no cuBLAS workspace at all (core.training.device.allocator_workspaces, runs_mps).
_ASSUMED_SIZES: Final = (_CUBLAS_SM90, _TE_CC9)
_BEFORE_HOPPER_SIZES: Final = (_CUBLAS_OTHER, _TE_BEFORE)


@lru_cache(maxsize=1)
def _catalogue_nvidia_ids() -> frozenset[str]:
    return frozenset(gpu.id for gpu in load_gpus() if gpu.vendor == "nvidia")


_HIPBLASLT: Final = (HIPBLASLT_WORKSPACE_BYTES, "76 MiB (hipBLASLt's default: an Instinct card's matmuls run on it)")


@lru_cache(maxsize=64)
def _workspaces(gpu_id: str) -> tuple[Workspace, Workspace]:
    if amd_target(gpu_id) in _INSTINCT_LT_TARGETS:
        (lt, lt_label), (te, te_label) = _HIPBLASLT, _TE_CC9
        return Workspace(lt, lt_label, True, "hipBLASLt"), Workspace(te, te_label, False)
    sizes = _WORKSPACES_BY_GENERATION.get(generation(gpu_id))
    if sizes is None and gpu_id in _catalogue_nvidia_ids():
        sizes = _BEFORE_HOPPER_SIZES
    known = sizes is not None
    (cublas, cublas_label), (te, te_label) = sizes if sizes is not None else _ASSUMED_SIZES
    return Workspace(cublas, cublas_label, known), Workspace(te, te_label, known)


def cublas_workspace(gpu_id: str) -> Workspace:
    """PyTorch's cuBLAS workspace per (handle, stream) on the catalogue card ``gpu_id``: the one
    home of the size every engine and the training step read."""
    return _workspaces(gpu_id)[0]


def te_workspace(gpu_id: str) -> Workspace:
    """Transformer Engine's cuBLAS workspace (one per process) on the catalogue card ``gpu_id``."""
    return _workspaces(gpu_id)[1]


# NCCL's buffers, allocated by NCCL itself (not through PyTorch's allocator) when a
# communicator connects: per connection (a peer on a channel), one buffer per protocol
# (NVIDIA/nccl src/init.cc): Simple DEFAULT_BUFFSIZE 4 MiB (NCCL_BUFFSIZE), LL 8 lines × 512
# threads × 8 steps × 16 B = 512 KiB, LL128 120 × 640 × 8 steps × 8 B = 4,915,200 B.
NCCL_CONNECTION_BYTES: Final = 4 * MiB + 512 * 1024 + 4_915_200
# Connections per channel: a ring's receive from its previous rank and a tree's from its
# parent. Channels: NCCL opens more where the link is fast; 16 over NVLink / NVSwitch /
# Infinity Fabric and 2 over PCIe are assumed (NCCL's MAXCHANNELS is 32; NCCL_MIN_NCHANNELS /
# NCCL_MAX_NCHANNELS move it). Check: vLLM 0.19.0 logs 2.07-2.21 GiB of non-torch memory with
# tensor parallelism on H100 (core.serving.vllm_rules), NCCL and the custom all-reduce's
# registered buffers together.
NCCL_CONNECTIONS_PER_CHANNEL: Final = 2
# From NCCL 2.22 a communicator connects an algorithm's channels at the first collective that picks it, not at
# init (NCCL_RUNTIME_CONNECT, 1 by default, taken where cuMem is: NVIDIA/nccl v2.22.3-1 178b6b75 and v2.27.5-1
# 3ea7eedf src/init.cc ``comm->runtimeConn``, src/enqueue.cc ``ncclPrepareTasks`` ``initAlgoChannels``,
# src/group.cc ``ncclCollPreconnectFunc``; v2.21.5-1 ab2b89c4 src/init.cc connects rings and trees at init). A
# group carrying only scalars (a seed's broadcast, a barrier, a loss, a gradient norm) runs rings alone: a
# broadcast or an all-gather has no tree (src/graph/tuning.cc ``ncclTopoTuneModel``), and a one-element
# all-reduce on one node picks the ring's LL, 6.6 + 2(n-1) × 0.6 us against the tree's 6.8 + 2(n-1) × 0.6 us
# (``baseLat``, ``hwLat`` NVLink, the same gap over PCIe); across nodes the tree wins it (2 nodes × 8: ring LL
# 6.6 + 28 × 1.0 + 2 × 2.7 = 40.0 us, the net overhead 1.0 raising the intra-node steps, against tree LL
# 6.8 + 2 × (7 × 0.6 + 5.0) = 25.2 us), so a group of scalars there connects trees and rings: full. The ring
# connects one receive per channel, on every channel (src/transport/generic.cc ``ncclTransportRingConnect``:
# ``c < comm->nChannels``), and each connection still takes every protocol's buffer, the LL one a scalar uses
# and Simple's and LL128's beside it (src/transport/p2p.cc ``p2pRecvSetup``: ``recvSize +=
# comm->buffSizes[p]`` over NCCL_NUM_PROTOCOLS): half a communicator, not an LL-sized one. The same tables and
# lines in v2.27.3-1 (PyTorch 2.8's) and v2.28.9-1.
NCCL_RING_CONNECTIONS_PER_CHANNEL: Final = 1
NCCL_CHANNELS_FAST_LINK: Final = 16
NCCL_CHANNELS_PCIE: Final = 2
# Each NCCL communicator connects its own channels and buffers, and PyTorch makes one per process
# group, on the first collective the group runs on the device (ProcessGroupNCCL's lazy init, where
# init_process_group is given no device_id: torchtitan d66b72a6 torchtitan/distributed/utils.py
# init_distributed). How many groups a rank runs collectives on, per layout and framework, with the
# sources: core.training.device.nccl_groups.

# The caching allocator's reserve (reserved minus allocated at the peak), as a closed form:
# c10/cuda/CUDACachingAllocator.cpp rounds every segment of 10 MiB or more up to 2 MiB and
# splits off a remainder over 1 MiB, so a weight tensor loaded into a fresh segment leaves
# about 1 MiB of it unused on average.
SEGMENT_ROUNDING_PER_TENSOR_BYTES: Final = 1 * MiB
# The activations of a step are allocated in many sizes, freed, and allocated again beside
# tensors of other lifetimes (gradients, the optimizer's first-step state): the free blocks
# left inside partly used segments at the peak. A fraction of the step's largest set of
# activations, fitted on the published reserved and nvidia-smi figures of
# benchmarks/realgpu/memory_figures.json (all sources; the benchmark scores each source with
# the value fitted without it: benchmarks/realgpu/memory.py, docs/REAL_GPU_MEMORY.md). Not fitted on
# figures whose allocated peak is known to miss a term (compile under per-op SAC): 0.185 -> 0.230.
# 0.230 -> 0.175 when FSDP2's sharded gradients became a reserved term of their own (cached for the
# reduce-scatter stream: core.training.detailed._gradients_cached); 0.175 -> 0.170 with torchtitan's
# Llama 3.1 405B pipeline rows (their FSDP2 units kept gathered, their gradients accumulated unsharded:
# core.parallel.state._pipeline_accumulated) and Answer.AI's Yi 34B rows in the corpus.
# 0.170 -> 0.115 when Answer.AI's loop kept its model output's float32 logits through the backward
# (plan setting loop_keeps_output, core.training.activations.loss_memory): the fraction no longer stands
# in for those bytes on that family's large-batch rows. 0.115 -> 0.120 when a predicted reading was capped
# at what the card can show (benchmarks/realgpu/memory.py card_limit: the allocator frees its cache and
# retries rather than pass the card). 0.120 -> 0.145 when readings within one of the step's largest
# allocations of that limit left the fit (memory.py capacity_bound: there the allocator may have freed
# its cache and retried, so they bound the reserve from below; they had pulled the fraction down).
# 0.145 -> 0.170 when PEFT's method comparison's LoRA figures, whose loop empties the cache before each
# peak step, were scored with no fragmentation and left the fit (memory.py carries_fragmentation).
# 0.170 -> 0.165 when a block compiled under per-op SAC no longer kept the saved outputs its backward
# never reads (core.training.activations.SAC_COMPILED_NOTE) and those figures (torchtitan's and Trainy's
# compiled 8B runs) entered the fit again. 0.165 -> 0.185 when FSDP2's reduce-scatter input left the
# reduce-scatter stream's cache (torch 2.5+ allocates it on the default stream, which reuses its block:
# core.parallel.state._reduce_stream_cache): the fraction no longer shares those bytes on torchtitan's rows.
# 0.185 -> 0.200 when an FSDP1-wrapped rank's weights were rounded once per unit shard rather than per parameter
# tensor (core.training.device.weight_segments): Answer.AI's rows lost 0.27 GB of reserve and ask for more of this.
ALLOCATOR_FRAGMENTATION: Final = 0.200
# With expandable_segments:True each stream's pool is one segment that grows by 20 MiB pages:
# the slivers of partly used segments do not form, and only a page per pool is left over
# (the note "Expandable Segments" in CUDACachingAllocator.cpp). Not measured in the corpus.
EXPANDABLE_FRAGMENTATION: Final = 0.0

# ---- PyTorch on an Apple GPU (the MPS backend) ------------------------------------------------
# Read from pytorch/pytorch, aten/src/ATen/mps/MPSAllocator.h at 01f98b3e (the newest stored
# version) and MPSAllocator.mm at 57ba4129; the rules below are the same in both, and in the
# OOM messages users pasted from torch 2.0 to 2.10 (docs/REAL_GPU_MEMORY.md, 2026-12-05).
# An Apple GPU's PyTorch process has no CUDA context, no cuBLAS handle pool (its matmuls run
# through MPS / MPSGraph) and no NCCL: none of those terms applies.
#
# The limit PyTorch enforces: MPSHeapAllocatorImpl::setHighWatermarkRatio sets
# m_max_total_allowed_size = ratio × max_device_size(), max_device_size() being Metal's
# [device recommendedMaxWorkingSetSize] (the catalogue's memory_bytes of an Apple card), ratio
# PYTORCH_MPS_HIGH_WATERMARK_RATIO or default_high_watermark_ratio = 1.7 (0 disables the limit;
# at most default_high_watermark_upper_bound = 2.0). alloc_buffer and get_free_buffer refuse an
# allocation when current_allocated_size() + its size passes it, current_allocated_size() being
# [device currentAllocatedSize]: every Metal allocation of the process, PyTorch's heaps and
# MPSGraph's own; alloc_buffer_block then raises "MPS backend out of memory (MPS allocated: heaps,
# other allocations: the rest, max allowed: the limit)". Metal's recommendedMaxWorkingSetSize is a
# soft bound ("without affecting runtime performance"): past it the GPU's memory is paged.
MPS_HIGH_WATERMARK_RATIO: Final = 1.7
# The low watermark (default_low_watermark_ratio(_unified) = 1.4 × the working set on unified
# memory): past it the allocator is "under memory pressure", collects cached buffers and gives
# large allocations heaps of their exact size rather than 1 GiB ones (createHeapBlock).
MPS_LOW_WATERMARK_RATIO: Final = 1.4
# The heaps (MPSAllocator.h, HeapBlock::createHeapBlock): a buffer of at most kMaxSmallAlloc =
# 1 MiB is placed in a kSmallHeap = 8 MiB heap, one under kMinLargeAlloc = 10 MiB in a kLargeHeap
# = 32 MiB heap, one under kXLargeHeap / 2 = 512 MiB (no memory pressure) in a kXLargeHeap =
# 1 GiB heap, split among buffers; a larger one in a heap of its own rounded up to kRoundLarge =
# 2 MiB. A buffer is sized by Metal's heapBufferSizeAndAlignWithLength (get_allocation_size): a
# page at most beyond the tensor. "MPS allocated" (m_total_allocated_memory, what
# torch.mps.driver_allocated_memory() reports with MPSGraph's allocations) counts whole heaps.
MPS_SMALL_HEAP_BYTES: Final = 8 * MiB
MPS_LARGE_HEAP_BYTES: Final = 32 * MiB
MPS_XLARGE_HEAP_BYTES: Final = 1024 * MiB
# The weights fill 1 GiB heaps one after another (get_free_heap takes the heap with the least room
# that still holds the buffer): the last heap of each size is partly used, half on average.
MPS_OPEN_HEAPS_BYTES: Final = (MPS_XLARGE_HEAP_BYTES + MPS_LARGE_HEAP_BYTES + MPS_SMALL_HEAP_BYTES) // 2


@lru_cache(maxsize=1)
def _catalogue_apple_ids() -> frozenset[str]:
    return frozenset(gpu.id for gpu in load_gpus() if gpu.vendor == "apple")


def runs_mps(gpu_id: str) -> bool:
    """PyTorch on the catalogue card ``gpu_id`` runs its MPS backend (an Apple GPU), not CUDA."""
    return gpu_id in _catalogue_apple_ids()


class RuntimeNames(NamedTuple):
    """What the runtime's own pieces are called on a card: PyTorch's ROCm build runs the same caching
    allocator and reserve rules (HIPified from c10/cuda/CUDACachingAllocator.cpp), but the context is
    the HIP runtime's, the collectives are RCCL's (the NCCL API, ROCm/rccl) and the tool that shows
    the process's whole memory is amd-smi (rocm-smi on older ROCm): AMD's "AMD SMI" documentation,
    ``amd-smi monitor --vram`` / ``amd-smi process`` ("VRAM_MEM")."""

    context: str  # "CUDA context" / "HIP context"
    collectives: str  # "NCCL" / "RCCL"
    smi: str  # "nvidia-smi" / "amd-smi"


CUDA_RUNTIME_NAMES: Final = RuntimeNames("CUDA context", "NCCL", "nvidia-smi")
# The HIP context's size is not measured here: the CUDA figure (CUDA_CONTEXT_BYTES) stands for it and
# its label says so where it is shown.
ROCM_RUNTIME_NAMES: Final = RuntimeNames("HIP context", "RCCL", "amd-smi")


def runtime_names(gpu_id: str) -> RuntimeNames:
    """The names of the context, the collectives library and the whole-process figure on ``gpu_id``: an AMD
    card (core.catalogue.amd_target) runs ROCm's, every other card CUDA's (an Apple GPU has none of
    them: callers ask runs_mps first)."""
    return ROCM_RUNTIME_NAMES if amd_target(gpu_id) is not None else CUDA_RUNTIME_NAMES


def mps_high_watermark_bytes(working_set_bytes: float) -> float:
    """The MPS allocator's limit at the default ratio: int(1.7 × recommendedMaxWorkingSetSize), the
    "max allowed" of its out-of-memory message (setHighWatermarkRatio's static_cast<size_t>)."""
    return float(int(MPS_HIGH_WATERMARK_RATIO * working_set_bytes))


def card_left_bytes(capacity: float, held: float) -> float:
    """``capacity`` (a card's memory, or PyTorch's limit on it) less ``held``, the bytes other processes
    hold on it (``hardware.held_by_others``), never below 0: what a verdict judges a plan against."""
    return max(0.0, capacity - held)


def pytorch_limit_bytes(gpu: GpuSpec) -> float:
    """What a PyTorch process may hold on ``gpu`` and still run: the card's memory on a CUDA or ROCm
    card. On an Apple GPU the lower of the MPS allocator's limit (:func:`mps_high_watermark_bytes` of
    Metal's working set, the catalogue's memory_bytes) and the machine's RAM: at the default shares
    (2/3 and 3/4 of RAM) 1.7 × the working set is 1.13 × and 1.28 × the RAM, and past the RAM the
    allocator still hands out heaps while macOS swaps them (its message: "may cause system failure";
    benchmarks/realgpu/mps_oom_limits.json: 180.7 GiB held on a 128 GB Mac before it raised)."""
    if not runs_mps(gpu.id):
        return float(gpu.memory_bytes)
    limit = mps_high_watermark_bytes(gpu.memory_bytes)
    ram = gpu.unified_memory_gb * GiB if gpu.unified_memory_gb else limit
    return min(limit, float(ram))


# Seconds of host (Python) time Hugging Face generate spends per decoder layer per decode step: the serving
# fit's default (core.serving.fit DEFAULT_LAUNCH[HF_HOST_LAYER], where its sources are named: the Qwen team's
# speed tables, QwenLM/Qwen3@a912d239 speed_benchmark.rst and @7a2f61ff speed_benchmark.md), kept here so
# the training time model (core.training.speed's eager kernel time) reads the same figure.
HF_HOST_LAYER_S: Final = 0.7285e-3

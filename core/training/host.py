"""Host memory of one node: what the node's ranks keep in RAM, against ``parallel.host_ram_gb``,
and the time of the optimizer step an offloaded plan runs on the node's CPUs (:func:`host_step`).

Per node: every rank process's baseline, what offload moves off the GPUs (optimizer state,
with parameter offload also parameters and gradients), the data loader's batches, and the
load of the checkpoint, whichever of the load and the steady state is larger (the loaded
copy is freed once the model is on the GPUs, before offloaded state is built).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from core.breakdown import Term
from core.format import duration, gb, sci
from core.memo import fills_fields
from core.parallel.layout import Layout, layout
from core.params import ParamCounts
from core.plan import Accounting, Offload, Plan, Strategy
from core.roles import dtypes_for
from core.training import detailed
from core.training.speed import optimizer_step_bytes, rank_trainable
from core.training.storage import weight_terms
from core.units import GB
from core.verdict import Verdict, judge

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_DETAILED: Final = Accounting.DETAILED
_OFFLOAD_NONE: Final = Offload.NONE
_OFFLOAD_PARAMS: Final = Offload.PARAMS
_STRATEGY_FSDP: Final = Strategy.FSDP
_STRATEGY_ZERO1: Final = Strategy.ZERO1
_STRATEGY_ZERO2: Final = Strategy.ZERO2
_STRATEGY_ZERO3: Final = Strategy.ZERO3

__all__ = ["HostMemory", "HostStep", "host_memory", "host_step", "host_threads_per_rank"]

# Host resident set of one process with PyTorch and a CUDA context, lazy module loading:
# 2,056,600 KiB measured with /usr/bin/time -v in pytorch/pytorch issue #113326
# (torch 2.2, CUDA 11.8, CUDA_MODULE_LOADING=LAZY). Python, transformers and the NCCL
# host buffers come on top of it; this is the floor.
PROCESS_BASELINE_BYTES: Final = 2_056_600 * 1024
# Token ids, labels and attention mask as int64, two batches ahead (DataLoader
# prefetch_factor 2 with workers; the HF Trainer's dataloader_num_workers defaults to 0).
DATALOADER_TENSORS: Final = 3
DATALOADER_BATCHES: Final = 2
HOST_HEADROOM: Final = 0.0  # the OS page cache shrinks under pressure: judged on the whole RAM
_BASELINE_GB: Final = f"{PROCESS_BASELINE_BYTES / GB:.2f}"  # in every host_memory's formula: formatted once


@fills_fields
@dataclass(frozen=True)
class HostMemory:
    bytes: float  # the node's peak host memory
    capacity_bytes: float  # parallel.host_ram_gb
    terms: tuple[Term, ...]
    verdict: Verdict | None  # None: the RAM was not given, so nothing is judged
    ranks_per_node: int


def _loading(plan: Plan, counts: ParamCounts, per_node: int) -> Term:
    """The checkpoint as ``from_pretrained`` materialises it on the host before the model
    moves to the GPUs. FSDP and ZeRO-3 are assumed to load once per node (accelerate's
    ``fsdp_cpu_ram_efficient_loading``: rank 0 loads, the others build on the meta device
    and receive a broadcast; DeepSpeed ``zero.Init``); DDP and ZeRO-1/2 load on every rank."""
    dt = dtypes_for(plan)
    sharded = plan.parallel.strategy in (_STRATEGY_FSDP, _STRATEGY_ZERO3)
    copies = 1 if sharded else per_node
    who = "once per node (rank-0 loading)" if sharded else f"on each of {per_node} ranks"
    if plan.quantised_base:
        # The base is quantised as it loads (transformers + bitsandbytes, shard by shard; with
        # FSDP, accelerate's cpu_ram_efficient_loading keeps rank 0's copy quantised): the host
        # holds its packed storage, not 16-bit weights.
        stored = sum(t.bytes for t in weight_terms(plan, counts, dt))
        return Term(f"checkpoint loaded {who}, quantised", f"{copies} × {gb(stored)} GB packed", copies * stored)
    b = dt.base if plan.adapter_based else dt.param
    size = counts.total * b
    return Term(
        f"checkpoint loaded {who}", f"{copies} × P × {b:g} B = {copies} × {sci(counts.total)} × {b:g} B", copies * size
    )


def host_memory(plan: Plan, counts: ParamCounts) -> HostMemory:
    per_node = plan.parallel.gpus_per_node
    capacity = plan.parallel.host_ram_gb * GB
    baseline = Term(
        "PyTorch + CUDA process baseline",
        f"{per_node} × {_BASELINE_GB} GB",
        per_node * PROCESS_BASELINE_BYTES,
    )
    w = plan.workload
    batch = per_node * DATALOADER_BATCHES * DATALOADER_TENSORS * w.micro_batch * w.seq_len * 8
    loader = Term("data loader batches (ids, labels, mask as int64, 2 ahead)", f"{per_node} × 2 × 3 × B·S × 8 B", batch)
    offloaded: list[Term] = []
    if plan.accounting is _ACCOUNTING_DETAILED:
        lay = layout(plan)
        offloaded = _offloaded(plan, counts, lay, per_node)
    load = _loading(plan, counts, per_node)
    steady = sum(t.bytes for t in offloaded)
    terms = [baseline, loader, *offloaded] if steady >= load.bytes else [baseline, loader, load]
    total = float(sum(t.bytes for t in terms))
    return HostMemory(
        bytes=total,
        capacity_bytes=capacity,
        terms=tuple(terms),
        verdict=judge(total, capacity, HOST_HEADROOM).verdict if capacity > 0 else None,
        ranks_per_node=per_node,
    )


def _offloaded(plan: Plan, counts: ParamCounts, lay: Layout, per_node: int) -> list[Term]:
    """The offloaded state of the node's ranks: the largest stage's, times the ranks per node."""
    stages = [detailed.host_terms(plan, counts, detailed.Rank(lay, s)) for s in lay.stages]
    worst = max(stages, key=lambda terms: sum(t.bytes for t in terms))
    return [
        Term(f"{t.label}, pinned, × {per_node} ranks", f"{per_node} × {gb(t.bytes)} GB", t.bytes * per_node)
        for t in worst
    ]


# --- the optimizer step on the host --------------------------------------------------------
# A CPU optimizer step streams each parameter, its gradient and its state through DRAM once
# (a memory-bound kernel: a handful of FLOPs per 14-28 bytes), so it is timed at the node's
# DRAM bandwidth (``parallel.host_memory_gbs``, its peak) × the share a streaming kernel reaches,
# or at what the ranks' threads stream, whichever is less (HOST_THREAD_STREAM_GBS below):
# AMD's own STREAM Triad binary, 250 GB/s on a two-socket EPYC 7601 whose 2 × 8 channels of
# DDR4-2400 peak at 307 GB/s (AnandTech, "Sizing Up Servers: Intel's Skylake-SP Xeon versus AMD's
# EPYC 7000", July 2017, "Memory Subsystem: Bandwidth"): 250 / 307.2.
HOST_STREAM_SHARE: Final = 250.0 / 307.2
# What one thread streams: a core's outstanding cache misses over the memory latency bound it far
# below the socket's DRAM (Little's law; John McCalpin, Intel Developer Zone forum "single core
# bandwidth: haswell vs. broadwell vs. skylake": single-thread STREAM Triad 19.9 GB/s on a
# two-socket Xeon E5-2690 v3). AnandTech's same 2017 article ("Memory Subsystem: Bandwidth"):
# 12 GB/s for one Skylake-SP thread on DDR4-2666, Broadwell-EP about 50 % more (~18 GB/s). The
# median of the three server figures, 18 GB/s, is used; the step takes the lesser of the node's
# DRAM and its ranks' threads (parallel.host_threads_per_rank).
HOST_THREAD_STREAM_GBS: Final = 18.0
# DeepSpeed ZeRO-Offload (stages 1-2), beside CPU Adam's own pass (deepspeedai/DeepSpeed@edaa7221
# deepspeed/runtime/zero/stage_1_and_2.py ``step``): the gradient norm reads the float32 host
# gradients (``complete_grad_norm_calculation_for_cpu_offload``), and the updated float32 master
# is copied into the pinned 16-bit staging buffer (``bit16_partition_buffer.data.copy_(
# fp32_partition.data)``) before it goes back to the GPU: 4 + (4 + 2) bytes a parameter.
ZERO_OFFLOAD_EXTRA_BYTES: Final = 4.0 + 4.0 + 2.0


def host_threads_per_rank(plan: Plan) -> int:
    """OMP_NUM_THREADS of each rank: the plan's, else the launcher's default — torchrun's 1 when a
    node runs several ranks (torch/distributed/run.py ``config_from_args``), else 0: OpenMP's own,
    every core, which the node's DRAM bounds before its threads do."""
    typed = plan.parallel.host_threads_per_rank
    if typed:
        return typed
    return 1 if min(plan.parallel.gpus_per_node, plan.world_size) > 1 else 0


@dataclass(frozen=True)
class HostStep:
    """The optimizer step of an offloaded plan, on the node's CPUs: the GPUs wait for it."""

    seconds: float
    bytes: float  # DRAM traffic of the node's ranks' steps
    label: str
    formula: str
    # Where the ranks' threads, not the node's DRAM, bound the step: how many threads a rank needs
    # for the DRAM to bound it, and the step's time then ("" when DRAM already bounds it).
    advice: str = ""


def host_step(plan: Plan, counts: ParamCounts) -> HostStep | None:
    """The host optimizer step of every rank of a node, run at once and sharing its DRAM.

    Where it runs and what waits for it, read from the frameworks:
    - FSDP2 ``CPUOffloadPolicy`` (pytorch/pytorch@010ae4a8 torch/distributed/fsdp/_fully_shard/
      _fsdp_collectives.py ``foreach_reduce``): the sharded gradient is copied to pinned host
      memory after its reduce-scatter and the optimizer (torch.optim on CPU tensors) steps there
      after the backward; with ``fused=True`` (torchtune's offload configs) it is ATen's CPU
      ``_fused_adamw_`` (aten/src/ATen/native/cpu/FusedAdamKernel.cpp: one vectorised pass,
      ``at::parallel_for`` over the tensor). With accumulation each later micro-batch's gradient
      is added to the host one on the CPU (``grad._local_tensor += new_sharded_grad``): read two,
      write one.
    - DeepSpeed ZeRO-Offload: ``DeepSpeedCPUAdam`` (csrc/adam/cpu_adam_impl.cpp: AVX512 / AVX2,
      ``#pragma omp parallel for``) runs inside ``step()`` before the 16-bit copy goes back and the
      parameters are all-gathered: nothing overlaps it (ZenFlow / Twin-Flow aside).
    No framework overlaps the step with the GPU's next forward, so its time adds to the step."""
    par = plan.parallel
    if par.offload is _OFFLOAD_NONE or counts.trainable <= 0:
        return None
    stages = layout(plan).stages
    stage = max(stages, key=lambda s: optimizer_step_bytes(plan, counts, s))
    per_rank = optimizer_step_bytes(plan, counts, stage)
    trainable = rank_trainable(plan, counts, stage)
    parts = [f"optimizer pass {_gb_text(per_rank)}"]
    if par.strategy in (_STRATEGY_ZERO1, _STRATEGY_ZERO2):
        per_rank += trainable * ZERO_OFFLOAD_EXTRA_BYTES
        parts.append(f"ZeRO-Offload's norm and 16-bit copy {ZERO_OFFLOAD_EXTRA_BYTES:g} B × {sci(trainable)}")
    micro = plan.workload.grad_accum
    if par.strategy is _STRATEGY_FSDP and par.offload is _OFFLOAD_PARAMS and micro > 1:
        g = dtypes_for(plan).grad
        per_rank += trainable * 3 * g * (micro - 1)
        parts.append(f"gradient accumulation on the host 3 × {g:g} B × {sci(trainable)} × {micro - 1}")
    ranks = min(par.gpus_per_node, plan.world_size)
    node = per_rank * ranks
    dram = par.host_memory_gbs * HOST_STREAM_SHARE
    per_rank_threads = host_threads_per_rank(plan)
    threads = ranks * per_rank_threads if per_rank_threads else 0
    rate_gbs = min(dram, threads * HOST_THREAD_STREAM_GBS) if threads else dram
    seconds = node / (rate_gbs * 1e9)
    advice = ""
    if rate_gbs < dram:
        limit = (
            f"{threads} threads ({ranks} ranks × {per_rank_threads}) × {HOST_THREAD_STREAM_GBS:g} GB/s "
            f"a thread, under the node's {dram:.0f} GB/s of DRAM"
        )
        needed = math.ceil(dram / (ranks * HOST_THREAD_STREAM_GBS))
        advice = (
            f"the ranks' threads bound it: {needed} threads a rank (Host threads per rank, "
            f"OMP_NUM_THREADS={needed}: {ranks * needed} cores on the node) would let the node's DRAM bound it, "
            f"{duration(node / (dram * 1e9))} instead of {duration(seconds)}"
        )
    else:
        limit = f"{par.host_memory_gbs:g} GB/s × {HOST_STREAM_SHARE:.3g} STREAM share"
    formula = f"{ranks} ranks × ({' + '.join(parts)}) = {_gb_text(node)} ÷ ({limit}) = {duration(seconds)}"
    return HostStep(seconds, node, "optimizer step on the host (CPU)", formula, advice)


def _gb_text(n_bytes: float) -> str:
    return f"{gb(n_bytes)} GB"

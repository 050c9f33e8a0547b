"""What the GPUs of a multi-GPU run exchange in one optimizer step, and how long it takes.

Each collective is timed as NCCL's ring does it (the NCCL documentation's "Performance"
notes and nccl-tests' PERFORMANCE.md; Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce
algorithms for clusters of workstations"): an all-reduce of S bytes over n ranks sends
2(n−1)/n × S from every rank, an all-gather or a reduce-scatter (n−1)/n × S, at the link's
bus bandwidth (its peak × what nccl-tests reach, resources/links.json). A group that spans
nodes runs at the slower of the NVLink ring and the NICs its GPUs have on each node (one
NIC per GPU on DGX systems, so ``local`` GPUs of the group per node bring ``local`` NICs),
which is the bandwidth NCCL's own model gives a multi-node ring. The latency of a
collective is NCCL's model for the ring with the Simple protocol (src/graph/tuning.cc,
NVIDIA/nccl v2.18.1-1, the release torch 2.1 ships, the same through v2.30.7-1): a base of
8.4 µs plus one hop latency per ring step, the network's (14 µs) for the steps between nodes.
An all-reduce across nodes is the one collective NCCL may run as a tree: it is timed as the
faster of the ring and the tree in NCCL's own model (``Links.all_reduce``), as NCCL's tuner picks.

Ranks are laid out as Megatron-LM orders them ("tp-cp-dp-pp": tensor parallel ranks are
neighbours, then context, data and pipeline), so a group's stride decides whether it stays
in a node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from core.catalogue import LinkSpec, find_link, intra_link_of
from core.dtypes import ELEMENT_BYTES, MP_BYTES, MpDtype
from core.format import duration, memory
from core.inputs import megatron_dispatcher, zero3_overlap_comm, zero_overlap_comm
from core.memo import fills_fields
from core.parallel.layout import (
    dispatched_copies,
    expert_load,
    expert_shares,
    fsdp_held_through_step,
    fsdp_no_sync,
    fsdp_reduce_bytes,
    layout,
    megatron_grad_bytes,
    received_tokens,
    train_share,
    weight_share,
)
from core.params import ParamCounts
from core.plan import (
    CheckpointPolicy,
    CpRotate,
    MoeDispatcher,
    Offload,
    PipelineSchedule,
    Plan,
    Stack,
    Strategy,
)
from core.roles import Dtypes, dtypes_for
from core.units import MiB

# NCCL's base latency of a ring collective with the Simple protocol, in seconds
# (src/graph/tuning.cc baseLat[Ring][Simple] = 8.4 µs, NVIDIA/nccl commit 01afd20 and every
# release since: v2.18.1-1 d97a32fa, v2.30.7-1). The per-hop figures are the links' own
# (resources/links.json latency_us: hwLat[NVLINK / PCI / NET][Ring][Simple] = 3.4 / 5.7 / 14.0 µs
# from v2.18.1-1, network 9.6 before it). On a ring that spans nodes NCCL also floors each
# intra-node step at 3 × its network post overhead (getNetOverhead: 1 µs, 2 µs on an AMD host),
# below every catalogue link's own hop on an Intel host, so it is not applied.
NCCL_BASE_LATENCY_S: Final = 8.4e-6

# NCCL's tree all-reduce with the Simple protocol, across nodes (src/graph/tuning.cc,
# NVIDIA/nccl@d97a32fa v2.18.1-1, unchanged through v2.21.5-1 ab2b89c4, the releases torch 2.1
# to 2.6 ship). ``ncclTopoTuneModel``: latency = baseLat[Tree][Simple] (0) + 2 × ((nRanks/nNodes − 1)
# × hwLat[NVLINK or PCI][Tree][Simple] + log2i(nNodes) × hwLat[NET][Tree][Simple]), both hops
# 28 µs ("the latency a 256kB chunk"; v2.23.4-1 68b54236 lowers them to 4.0 / 14, not adopted:
# the model follows the releases its evidence ran); bandwidth = the ring's bus bandwidth × 0.92
# (``busBw*.92``; the tree graph is searched with the ring's channels, src/init.cc treeGraph
# min/maxChannels = ringGraph.nChannels) × 0.5 (``ratio = .5``, bus to algorithm bandwidth).
# ``ncclTopoGetAlgoTime`` scales the tree's bandwidth by ``treeCorrectionFactor[Simple][log2i(nBytes
# >> 6)]`` below 256 MiB and a multi-node Simple ring all-reduce's latency by 1.4 on sm80 and newer
# ("Plateau effect of ring", when nBytes / (nChannels × nRanks) ≥ 64; 1.9 before sm80, V100, not
# modelled: the links do not carry the card's compute capability), then the tuner keeps the faster one.
NCCL_TREE_HOP_US: Final = 28.0
NCCL_TREE_BANDWIDTH_SHARE: Final = 0.92 * 0.5
NCCL_RING_PLATEAU: Final = 1.4
NCCL_MAX_CHANNELS: Final = 32  # src/include/devcomm.h MAXCHANNELS (v2.18.1-1): the plateau's test at its most channels
NCCL_TREE_CORRECTION_SIMPLE: Final = (
    0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9,
)  # fmt: skip


class Collective(StrEnum):
    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    SEND = "send"  # point to point


def ring_factor(kind: Collective, ranks: int) -> float:
    """Bytes each rank sends per byte of the collective's buffer (nccl-tests' busbw factor)."""
    if ranks <= 1:
        return 0.0
    if kind is Collective.ALL_REDUCE:
        return 2.0 * (ranks - 1) / ranks
    if kind is Collective.SEND:
        return 1.0
    return (ranks - 1) / ranks


def ring_steps(kind: Collective, ranks: int) -> int:
    """Ring steps of a collective (NCCL tuning.cc: 2(n−1) for all-reduce, n−1 for AG / RS)."""
    if ranks <= 1:
        return 0
    if kind is Collective.ALL_REDUCE:
        return 2 * (ranks - 1)
    return 1 if kind is Collective.SEND else ranks - 1


@dataclass(frozen=True)
class Span:
    """Where a group of ranks sits: ``local`` members on each of ``nodes`` nodes."""

    local: int
    nodes: int

    @property
    def ranks(self) -> int:
        return self.local * self.nodes


def group_span(size: int, stride: int, gpus_per_node: int, nodes: int = 1_000_000) -> Span:
    """The members of a group of ``size`` ranks ``stride`` apart, per node and nodes spanned
    (never more nodes than the run has: on one node every group is within it)."""
    if size <= 1:
        return Span(1, 1)
    local = max(1, min(size, gpus_per_node // stride)) if stride < gpus_per_node else 1
    spanned = math.ceil(size / local)
    if spanned > nodes:
        local, spanned = math.ceil(size / nodes), nodes
    return Span(local, spanned)


@dataclass(frozen=True)
class Links:
    intra: LinkSpec
    inter: LinkSpec

    def bus_bandwidth(self, span: Span) -> float:
        """Bytes per second a ring over ``span`` moves per rank: NVLink within a node; across
        nodes the slower of NVLink and the ``local`` NICs the group has on each node."""
        if span.nodes <= 1:
            return self.intra.bus_bytes_per_second
        nics = span.local * self.inter.bus_bytes_per_second
        return nics if span.local == 1 else min(self.intra.bus_bytes_per_second, nics)

    def latency(self, kind: Collective, span: Span) -> float:
        """NCCL's ring latency: base + intra-node steps × NVLink hop + inter-node steps × network hop."""
        steps = ring_steps(kind, span.ranks)
        inter_steps = ring_steps(kind, span.nodes) if span.nodes > 1 else 0
        hops = (steps - inter_steps) * self.intra.latency_us + inter_steps * self.inter.latency_us
        return NCCL_BASE_LATENCY_S + hops * 1e-6

    def all_reduce_times(self, call_bytes: float, span: Span) -> dict[str, float]:
        """One NCCL all-reduce call of ``call_bytes`` as each algorithm NCCL's tuner weighs it:
        the ring only within a node; across nodes the ring with its latency × 1.4 (the plateau)
        and the tree, each as ``ncclTopoGetAlgoTime`` models it (NCCL_TREE_HOP_US)."""
        bandwidth = self.bus_bandwidth(span)
        latency = self.latency(Collective.ALL_REDUCE, span)
        if span.nodes > 1 and call_bytes >= 64 * NCCL_MAX_CHANNELS * span.ranks:
            latency *= NCCL_RING_PLATEAU
        ring = ring_factor(Collective.ALL_REDUCE, span.ranks) * call_bytes / bandwidth + latency
        if span.nodes <= 1:
            return {"ring": ring}
        size = int(call_bytes) >> 6
        log_size = size.bit_length() - 1 if size else 0  # log2i(nBytes >> 6)
        correction = NCCL_TREE_CORRECTION_SIMPLE[log_size] if log_size < len(NCCL_TREE_CORRECTION_SIMPLE) else 1.0
        hops = (span.local - 1) + (span.nodes.bit_length() - 1)  # (nRanks/nNodes − 1) + log2i(nNodes)
        tree = 2 * hops * NCCL_TREE_HOP_US * 1e-6 + call_bytes / (bandwidth * NCCL_TREE_BANDWIDTH_SHARE * correction)
        return {"ring": ring, "tree": tree}

    def all_reduce(self, call_bytes: float, span: Span) -> tuple[float, str]:
        """One all-reduce call's seconds and the algorithm NCCL's tuner picks: the fastest."""
        times = self.all_reduce_times(call_bytes, span)
        algorithm = min(times, key=lambda name: times[name])
        return times[algorithm], algorithm

    def where(self, span: Span) -> str:
        if span.nodes <= 1:
            return f"{span.ranks} GPUs over {self.intra.id}"
        return f"{span.ranks} GPUs, {span.local} per node × {span.nodes} nodes over {self.inter.id}"


@dataclass(frozen=True)
class CommTerm:
    """One kind of traffic of the step: what it is, its arithmetic, bytes and time."""

    label: str
    formula: str
    bytes: float  # bytes one GPU sends for it per optimizer step
    seconds: float  # its time per optimizer step
    overlapped: bool = False  # runs beside the compute; only what the compute cannot hide is exposed
    window_seconds: float = 0.0  # the compute it can hide under (overlapped terms)
    unhidden_seconds: float = 0.0  # the part no schedule hides (first gather, last bucket)
    data_parallel: bool = False  # a data-parallel collective (gradients, sharded state)


@fills_fields
@dataclass(frozen=True)
class StepComm:
    terms: tuple[CommTerm, ...]
    comm_seconds: float  # every collective and transfer of one optimizer step
    exposed_seconds: float  # the part the step waits for
    bubble_fraction: float  # pipeline idle time over ideal compute time (Narayanan et al. 2021)
    assumptions: tuple[str, ...]


def _collective(
    label: str,
    kind: Collective,
    buffer_bytes: float,
    span: Span,
    links: Links,
    *,
    count: float = 1.0,
    launches: float = 1.0,
    overlapped: bool = False,
    window_seconds: float = 0.0,
    unhidden_share: float = 0.0,
    ring_only: bool = False,
) -> CommTerm:
    """``count`` collectives of ``buffer_bytes`` each, issued as ``launches`` NCCL calls per collective.
    An all-reduce across nodes runs as NCCL's tuner picks (``Links.all_reduce``) unless ``ring_only``
    (a pair of ring collectives timed as one all-reduce)."""
    factor = ring_factor(kind, span.ranks)
    bandwidth = links.bus_bandwidth(span)
    sent = factor * buffer_bytes * count
    latency = links.latency(kind, span) * launches * count
    seconds = sent / bandwidth + latency
    how = "2(n−1)/n" if kind is Collective.ALL_REDUCE else "(n−1)/n"
    formula = (
        f"{count:g} × {kind.value} of {memory(buffer_bytes)}: {how} = {factor:.3g} × {memory(buffer_bytes * count)} "
        f"÷ {bandwidth / 1e9:.4g} GB/s + {duration(latency)} latency ({links.where(span)})"
    )
    if kind is Collective.ALL_REDUCE and span.nodes > 1 and not ring_only:
        times = links.all_reduce_times(buffer_bytes / launches, span)
        one, algorithm = links.all_reduce(buffer_bytes / launches, span)
        seconds = one * launches * count
        weighed = ", ".join(f"{name} {duration(t)}" for name, t in times.items())
        formula = (
            f"{count * launches:g} × {kind.value} of {memory(buffer_bytes / launches)} as NCCL's {algorithm}, "
            f"the faster in its tuner's model (Simple protocol; {weighed} each; {links.where(span)})"
        )
    return CommTerm(
        label=label,
        formula=formula,
        bytes=sent,
        seconds=seconds,
        overlapped=overlapped,
        window_seconds=window_seconds,
        unhidden_seconds=seconds * unhidden_share,
    )


def _point_to_point(
    label: str, message_bytes: float, count: float, link: LinkSpec, *, overlapped: bool, window: float = 0.0
) -> CommTerm:
    bandwidth = link.bus_bytes_per_second
    latency = (NCCL_BASE_LATENCY_S + link.latency_us * 1e-6) * count
    seconds = message_bytes * count / bandwidth + latency
    formula = (
        f"{count:g} × send of {memory(message_bytes)} ÷ {bandwidth / 1e9:.4g} GB/s + "
        f"{duration(latency)} latency (over {link.id})"
    )
    return CommTerm(label, formula, message_bytes * count, seconds, overlapped, window)


def _host_transfer(label: str, n_bytes: float, link: LinkSpec) -> CommTerm:
    bandwidth = link.bus_bytes_per_second
    formula = f"{memory(n_bytes)} ÷ {bandwidth / 1e9:.4g} GB/s (over {link.id})"
    return CommTerm(label, formula, n_bytes, n_bytes / bandwidth)


def bubble_fraction(plan: Plan) -> float:
    """Pipeline bubble time over ideal compute time: (p−1)/m for GPipe and 1F1B, (p−1)/(v·m)
    for the interleaved schedule (Narayanan et al. 2021, "Efficient Large-Scale Language Model
    Training on GPU Clusters Using Megatron-LM", SC'21, sections 2.2.1 and 2.2.2), with m the
    micro-batches of a step (the gradient accumulation) and v the model chunks per stage."""
    par = plan.parallel
    stages = par.pipeline_parallel
    if stages <= 1:
        return 0.0
    chunks = par.virtual_stages if par.schedule is PipelineSchedule.INTERLEAVED else 1
    return (stages - 1) / (chunks * plan.workload.grad_accum)


def plan_links(plan: Plan) -> Links:
    """The plan's two links from the catalogue (a PlanError naming the field for an unknown id)."""
    par = plan.parallel
    intra = intra_link_of(par.intra_link, plan.hardware.gpu)
    return Links(intra, find_link(par.inter_link, "parallel.inter_link"))


# What every multi-GPU step assumes, whatever its parallelism.
_RING_ASSUMPTIONS: Final = (
    "Collectives run as NCCL rings at each link's nccl-tests bus bandwidth (resources/links.json), "
    "with NCCL's ring latency model; an all-reduce across nodes as ring or tree, whichever NCCL's tuner models "
    "faster (Simple protocol); no NVLink SHARP, SHARP or CollNet.",
    "Ranks are ordered tensor, context, data, pipeline (Megatron-LM's default), one NIC per GPU between nodes.",
    "The utilisation is the compute's own efficiency: exposed communication and the bubble come on top "
    "(a published MFU already includes them, so it understates the utilisation to enter here).",
)


@dataclass(frozen=True)
class _Traffic:
    """One parallelism's terms of the step and the assumption they rest on."""

    terms: tuple[CommTerm, ...]
    assumption: str


@dataclass(frozen=True)
class _Step:
    """What the traffic of one optimizer step is sized from, on the rank that sets its pace."""

    plan: Plan
    counts: ParamCounts
    links: Links
    dt: Dtypes
    compute_seconds: float  # ideal compute of the step on one GPU
    backward_micro: float  # one micro-batch's backward (DDP's all-reduce hides under the last)
    units: int  # FSDP2 units of the stage: each decoder block and the root
    w_share: float  # the stage's share of the stored parameters
    t_share: float  # and of the trainable ones
    base_bytes: float  # bytes per stored base parameter (a QLoRA base stays quantised)
    tokens_micro: float  # tokens of one micro-batch on one context-parallel rank
    layers: int  # blocks of the deepest stage, the one the others wait for
    tp_overlap_exposed: float = 0.5  # overlapped tensor-parallel traffic the step still waits for
    attention_seconds: float | None = None  # of the compute, attention's (None: not known)
    w_experts: float = 0.0  # of w_share, the rank's routed experts under expert parallel
    t_experts: float = 0.0  # of t_share, the trainable ones (layout.expert_shares)

    def dense(self) -> _Step:
        """The step's parameters without the rank's routed experts."""
        return replace(
            self, w_share=self.w_share - self.w_experts, t_share=self.t_share - self.t_experts, w_experts=0, t_experts=0
        )

    def experts(self) -> _Step:
        """The rank's routed experts alone: one FSDP unit per block, the root holds none."""
        return replace(self, w_share=self.w_experts, t_share=self.t_experts, units=self.units - 1)

    @property
    def micro(self) -> int:
        return self.plan.workload.grad_accum

    @property
    def trainable(self) -> float:
        return self.counts.trainable * self.t_share

    @property
    def grad_bytes(self) -> float:
        """The rank's gradients as DDP / ZeRO reduce them (Megatron's buffer in its dtype)."""
        return self.trainable * megatron_grad_bytes(self.plan, self.dt.grad, self.dt.compute)

    @property
    def stored_param_bytes(self) -> float:
        """The stage's parameters as stored: a quantised or frozen base, trainable ones in their dtype."""
        counts, dt = self.counts, self.dt
        if self.plan.adapter_based:
            return counts.total * self.base_bytes * self.w_share + counts.adapter * dt.adapter * self.t_share
        frozen = counts.total - counts.trainable
        return counts.trainable * dt.param * self.t_share + frozen * self.base_bytes * self.w_share


def _step_sizes(
    plan: Plan,
    counts: ParamCounts,
    compute_seconds: float,
    forward_share: float,
    tp_overlap_exposed: float,
    attention_share: float | None = None,
) -> _Step:
    links = plan_links(plan)
    dt = dtypes_for(plan)
    tp = plan.parallel.tensor_parallel
    # The pipeline stage with the most parameters (the embedding's or the head's) sets the
    # pace of the data-parallel collectives: its share of the model (core.parallel.layout).
    stages = layout(plan).stages
    stage = max(stages, key=lambda s: weight_share(plan, s, tp))
    per_micro = compute_seconds / plan.workload.grad_accum
    w_experts, t_experts = expert_shares(plan, stage, tp)
    return _Step(
        plan=plan,
        counts=counts,
        links=links,
        dt=dt,
        compute_seconds=compute_seconds,
        backward_micro=per_micro * (1.0 - forward_share),
        units=stage.layers + 1,
        w_share=weight_share(plan, stage, tp),
        t_share=train_share(plan, stage, tp),
        base_bytes=ELEMENT_BYTES[plan.quant.value] if plan.quantised_base else dt.base,
        tokens_micro=plan.workload.micro_batch * plan.workload.seq_len / plan.parallel.context_parallel,
        layers=max(s.layers for s in stages),
        tp_overlap_exposed=tp_overlap_exposed,
        attention_seconds=None if attention_share is None else compute_seconds * attention_share,
        w_experts=w_experts,
        t_experts=t_experts,
    )


def communicates(plan: Plan) -> bool:
    """Whether a step of ``plan`` moves anything between GPUs or to the host (several GPUs, or offload):
    :func:`step_communication` is empty otherwise, and what it would be given need not be worked out."""
    return plan.world_size > 1 or plan.parallel.offload is not Offload.NONE


def step_communication(
    plan: Plan,
    counts: ParamCounts,
    compute_seconds: float,
    forward_share: float,
    tp_overlap_exposed: float = 0.5,
    dp_contention: float = 0.0,
    attention_share: float | None = None,
) -> StepComm:
    """The traffic of one optimizer step of ``plan`` and how much of it the step waits for.

    ``compute_seconds`` is the compute of the step on the rank that sets its pace and
    ``forward_share`` the forward's part of it; ``tp_overlap_exposed`` the share of overlapped
    tensor-parallel traffic the step still waits for, ``dp_contention`` the share of overlapped
    data-parallel traffic (core.training.efficiency: both fitted); ``attention_share`` attention's
    part of the compute (what PyTorch's ring attention hides its K/V all-gather under; None: the
    whole compute).
    """
    if not communicates(plan):
        return StepComm((), 0.0, 0.0, 0.0, ())
    step = _step_sizes(plan, counts, compute_seconds, forward_share, tp_overlap_exposed, attention_share)
    found = [
        traffic
        for traffic in (
            _contended(_data_parallel_traffic(step), dp_contention),
            _tensor_parallel_traffic(step),
            _pipeline_traffic(step),
            _context_parallel_traffic(step),
            _expert_parallel_traffic(step),
            _offload_traffic(step),
        )
        if traffic is not None
    ]
    terms = [term for traffic in found for term in traffic.terms]
    assumptions = [*_RING_ASSUMPTIONS, *(traffic.assumption for traffic in found)]
    if counts.active < counts.total and plan.parallel.expert_parallel == 1:
        assumptions.append("Mixture of experts: every rank holds every expert (no expert parallel, no all-to-all).")
    comm = sum(term.seconds for term in terms)
    return StepComm(tuple(terms), comm, _exposed(terms), bubble_fraction(plan), tuple(assumptions))


def _contended(traffic: _Traffic | None, share: float) -> _Traffic | None:
    """Data-parallel collectives, of whose overlapped time ``share`` still delays the step.

    A collective that runs beside the compute is not free: NCCL's kernels take SMs (a
    24-block ncclAllGather on a 132-SM H100 pushes a one-wave GEMM into a second wave and
    nearly doubles it: NVIDIA developer forum, "Compute-Communication Overlap Causes Severe
    GEMM Performance Degradation because of Tail Effect", 2025) and memory bandwidth from the
    kernels they overlap; contention is one of the two main slowdowns of overlapped schedules
    (Design Space Exploration of DMA based Finer-Grain Compute Communication Overlap,
    arXiv:2512.10236). The longer the collectives run — more ranks, more latency per ring,
    slower links — the more of the compute they slow: what a weak-scaling run loses per GPU
    as it doubles its GPUs with the same per-GPU work (MosaicML's 128 → 512-GPU tables)."""
    if traffic is None:
        return None
    terms = tuple(
        replace(
            term,
            data_parallel=True,
            unhidden_seconds=term.unhidden_seconds + share * (term.seconds - term.unhidden_seconds)
            if term.overlapped
            else term.unhidden_seconds,
        )
        for term in traffic.terms
    )
    assumption = traffic.assumption
    if share > 0 and any(term.overlapped for term in traffic.terms):
        assumption += (
            f" While they run beside the compute, {share:.0%} of their time still slows it "
            "(NCCL's kernels hold SMs; fitted on published runs)."
        )
    return replace(traffic, terms=terms, assumption=assumption)


def _data_parallel_traffic(step: _Step) -> _Traffic | None:
    """Gradients reduced, and sharded state gathered, over the ranks that hold the same
    parameters. Context-parallel ranks hold the same parameters and see other tokens of the
    same sequences: gradients are reduced, and state sharded, over data × context parallel
    ranks (torchtitan parallel_dims.py: the "fsdp" mesh is dp_shard × cp; core.parallel.layout
    Layout.state_shards). In "tp-cp-dp-pp" order that group has stride tp. Under HSDP the
    shard group is DP · CP ÷ R of them, the R replicas beyond it (torchtitan's mesh order
    "pp", "dp_replicate", "fsdp", "tp": pytorch/torchtitan b5bcd76 parallel_dims.py)."""
    par = step.plan.parallel
    shards = par.fsdp_shards
    if shards <= 1:
        return None
    span = group_span(shards, par.tensor_parallel, par.gpus_per_node, par.nodes)
    if step.w_experts or step.t_experts:
        return _expert_data_parallel_traffic(step, span)
    return _group_traffic(step, span)


def _group_traffic(step: _Step, span: Span, label: str = "") -> _Traffic:
    """The strategy's data-parallel collectives of ``step``'s parameters over ``span``
    (``label`` added to each term's: whose parameters they move)."""
    par = step.plan.parallel
    if par.strategy is Strategy.DDP:
        traffic = _ddp_traffic(step, span)
    elif par.strategy in (Strategy.FSDP, Strategy.ZERO3):
        traffic = _sharded_parameter_traffic(step, span)
        if par.dp_replicate > 1:
            traffic = _hsdp_traffic(step, traffic, par.fsdp_shards)
    else:
        traffic = _zero12_traffic(step, span)
    if not label:
        return traffic
    return replace(traffic, terms=tuple(replace(t, label=f"{t.label} ({label})") for t in traffic.terms))


def _expert_data_parallel_traffic(step: _Step, span: Span) -> _Traffic:
    """Expert parallel: the dense parameters' collectives over the DP · CP ranks, the rank's
    routed experts' over the expert-data-parallel group of DP · CP ÷ EP ranks, TP · EP apart.

    Megatron-Core (NVIDIA/Megatron-LM d98e8a64): an expert's weights carry ``allreduce = False``
    (megatron/core/extensions/transformer_engine.py _set_expert_parameter_attributes: "selects
    the expert topology, including EDP for gradient reduction"); DistributedDataParallel puts
    them in their own buffers whose collective group is the expert-data-parallel one
    (megatron/core/distributed/distributed_data_parallel.py: ``intra_expt_dp_group`` for
    ``buffer_key.is_expert_parallel``, ``intra_dp_cp_group`` otherwise), and the buffer's
    bucket groups reduce-scatter the gradients (all-reduce without the distributed optimizer)
    and all-gather the updated parameters over it (param_and_grad_buffer.py start_grad_sync,
    start_param_sync), overlapped as the dense buckets are. The group: megatron/core/
    parallel_state.py initialize_model_parallel, expert_data_parallel_size = world ÷ (expert TP
    × EP × PP) = DP · CP ÷ EP with expert TP = TP, ranks in "tp-ep-dp-pp" order, so TP · EP
    apart. torchtitan (pytorch/torchtitan b5bcd76) does the same under FSDP2: the routed experts
    are fully_shard-ed on the "efsdp" mesh of dp_shard · cp · tp ÷ ep ranks
    (torchtitan/distributed/parallel_dims.py build_mesh, sparse mesh ("pp", "dp_replicate",
    "efsdp", "ep"); torchtitan/distributed/fsdp.py: "routed experts use edp_mesh, other params
    use dp_mesh"), its efsdp EP apart, TP · EP at TP 1 — the only TP the export carries.
    A group of one rank (EP = DP · CP) moves nothing: each expert's weights live on one rank."""
    par = step.plan.parallel
    ep = par.expert_parallel
    edp = par.fsdp_shards // ep
    dense = _group_traffic(step.dense(), span, f"dense, over DP × CP = {par.fsdp_shards}")
    why = (
        f" Expert parallel {ep}: the routed experts' gradients are reduced, and their state sharded, over "
        f"the expert-data-parallel group of DP × CP ÷ EP = {edp} GPU{'s' if edp > 1 else ''} "
        "(Megatron-Core's expert buffers, torchtitan's efsdp mesh), the dense parameters' over DP × CP"
    )
    if edp <= 1:
        return _Traffic(dense.terms, dense.assumption + why + ": one GPU holds each expert, nothing to reduce.")
    expert_span = group_span(edp, par.tensor_parallel * ep, par.gpus_per_node, par.nodes)
    experts = _group_traffic(step.experts(), expert_span, f"experts, over DP × CP ÷ EP = {edp}")
    moved = [t for t in experts.terms if t.bytes > 0]
    return _Traffic((*dense.terms, *moved), dense.assumption + why + ".")


def _hsdp_traffic(step: _Step, fsdp: _Traffic, shards: int) -> _Traffic:
    """HSDP: FSDP's gathers and reduce-scatters within the shard group (``fsdp``), plus an
    all-reduce of each unit's reduced gradient shard across the R replicas.

    PyTorch FSDP2 (pytorch/pytorch 8fc2039d, torch/distributed/fsdp/_fully_shard/
    _fsdp_collectives.py foreach_reduce): after a unit's reduce-scatter, ``all_reduce_stream``
    waits for it and runs ``dist.all_reduce(reduce_output, group=all_reduce_group)`` on the
    shard, beside the rest of the backward; it does so every backward unless
    ``set_requires_all_reduce(False)`` (``all_reduce_grads``), which torchtitan does not call
    (pytorch/torchtitan b5bcd76), so once per micro-batch as the reduce-scatter is, once per
    step under pipeline parallel or no_sync. FSDP1's HYBRID_SHARD also all-reduces each unit's shard over
    its inter-node group after its reduce-scatter. The replicate group's members are a whole
    shard group apart (stride TP · shards); the last unit's all-reduce cannot overlap."""
    par = step.plan.parallel
    buffer = step.trainable * fsdp_reduce_bytes(par, step.dt.grad) / shards  # the reduced shard
    r = par.dp_replicate
    span = group_span(r, par.tensor_parallel * shards, par.gpus_per_node, par.nodes)
    per_step = 1 if _reduces_once(step) else step.micro
    label = "HSDP gradient-shard all-reduce across replicas"
    all_reduce = _per_unit(step, label, Collective.ALL_REDUCE, buffer, span, per_step)
    why = (
        f" HSDP: sharded within groups of {shards} GPUs, replicated {r} times; each unit's reduced "
        f"gradient shard is all-reduced across the {r} replicas after its reduce-scatter, beside the "
        "backward (FSDP2's all-reduce stream)."
    )
    return _Traffic((*fsdp.terms, all_reduce), fsdp.assumption + why)


def _ddp_traffic(step: _Step, span: Span) -> _Traffic:
    grad_bytes = step.grad_bytes
    bucket = step.plan.parallel.ddp_bucket_mb * MiB
    buckets = max(1.0, math.ceil(grad_bytes / bucket))
    all_reduce = _collective(
        "DDP gradient all-reduce",
        Collective.ALL_REDUCE,
        grad_bytes,
        span,
        step.links,
        launches=buckets,
        overlapped=True,
        window_seconds=step.backward_micro,
        unhidden_share=min(1.0, bucket / grad_bytes) if grad_bytes else 0.0,
    )
    return _Traffic(
        (all_reduce,),
        "DDP all-reduces once per step (no_sync during accumulation), bucket by bucket during the last "
        "micro-batch's backward; the last bucket cannot overlap.",
    )


def _sharded_parameter_traffic(step: _Step, span: Span) -> _Traffic:
    """FSDP2 and ZeRO-3: parameters gathered per unit and gradients reduce-scattered, every micro-batch."""
    plan, counts, dt = step.plan, step.counts, step.dt
    par = plan.parallel
    fsdp = par.strategy is Strategy.FSDP
    gather_bytes = step.stored_param_bytes
    reduce_bytes = step.grad_bytes
    if fsdp and par.fsdp_param_dtype is not MpDtype.STORED:
        cast = MP_BYTES[par.fsdp_param_dtype]
        base = step.base_bytes if plan.quantised_base else cast  # a quantised base stays quantised
        gather_bytes = counts.total * base * step.w_share + counts.adapter * cast * step.t_share
    if fsdp:
        reduce_bytes = step.trainable * fsdp_reduce_bytes(par, dt.grad)
    name = "FSDP2" if fsdp else "ZeRO-3"
    # Under pipeline parallel FSDP gathers once per step and reduces once (layout.fsdp_held_through_step).
    piped = fsdp_held_through_step(par)
    regather = (par.reshard_after_forward or not fsdp) and not piped
    gathers = 2 if regather else 1
    per_step = 1 if piped else step.micro
    when = "once per step" if piped else "forward + backward" if regather else "forward"
    gather = _collective(
        f"{name} parameter all-gather ({when})",
        Collective.ALL_GATHER,
        gather_bytes,
        span,
        step.links,
        count=gathers * per_step,
        launches=step.units,
        overlapped=True,
        window_seconds=step.compute_seconds,
        unhidden_share=1.0 / (step.units * gathers),
    )
    # Under no_sync (accelerate's FSDP1 default) only the last micro-batch's backward reduces:
    # FSDP1's _post_backward_hook returns before the reduce-scatter while ``_sync_gradients`` is off.
    reduces = 1 if _reduces_once(step) else step.micro
    reduce = _per_unit(step, f"{name} gradient reduce-scatter", Collective.REDUCE_SCATTER, reduce_bytes, span, reduces)
    if not zero3_overlap_comm(plan):
        return _zero3_in_line(gather, reduce)
    if piped:
        why = (
            f"{name} under pipeline parallel gathers each block's parameters once per step and keeps them, and "
            "reduce-scatters the gradients after the last micro-batch (torchtitan's default with PP, "
            "torch.distributed.pipelining), prefetched beside the compute."
        )
        return _Traffic((gather, reduce), why)
    return _Traffic(
        (gather, reduce),
        f"{name} gathers each block's parameters before its forward"
        + (" and again before its backward" if regather else "")
        + (
            " and reduce-scatters its gradients in the last micro-batch only (no_sync)"
            if reduces == 1 < step.micro
            else " and reduce-scatters its gradients, every micro-batch"
        )
        + ", prefetched beside the compute; the first gather and the last reduce-scatter of each "
        "micro-batch cannot overlap.",
    )


def _zero3_in_line(gather: CommTerm, reduce: CommTerm) -> _Traffic:
    """ZeRO-3 with ``overlap_comm`` off (parallel.zero3_overlap_comm): the gathers and reduce-scatters
    run on the default stream, in line with the compute, and the step waits for all of them.
    deepspeedai/DeepSpeed edaa7221: stage3.py ``__init__``, ``reduce_and_partition_stream = ... Stream()
    if overlap_comm else get_accelerator().default_stream()``, used by ``__reduce_and_partition_ipg_grads``;
    parameter_offload.py ``__allgather_stream`` the same, used by partitioned_param_coordinator.py
    ``fetch_sub_module`` for the gathers and their prefetch."""
    terms = tuple(
        replace(t, label=f"{t.label} (overlap_comm off)", overlapped=False, window_seconds=0.0, unhidden_seconds=0.0)
        for t in (gather, reduce)
    )
    return _Traffic(
        terms,
        "DeepSpeed ZeRO-3 with overlap_comm off gathers and reduce-scatters on the default stream, in line "
        "with the compute: none of it hides (deepspeed/runtime/zero/stage3.py, parameter_offload.py, edaa7221).",
    )


def _reduces_once(step: _Step) -> bool:
    """Whether FSDP reduces the gradients once per step rather than once per micro-batch: under
    pipeline parallel (layout.fsdp_held_through_step) or no_sync (layout.fsdp_no_sync)."""
    par = step.plan.parallel
    return fsdp_held_through_step(par) or fsdp_no_sync(par, step.micro)


def _per_unit(step: _Step, label: str, kind: Collective, buffer: float, span: Span, count: float) -> CommTerm:
    """``count`` collectives of the gradients, each issued unit by unit after the unit's backward,
    beside the compute; the last unit's cannot overlap."""
    return _collective(
        label,
        kind,
        buffer,
        span,
        step.links,
        count=count,
        launches=step.units,
        overlapped=True,
        window_seconds=step.compute_seconds,
        unhidden_share=1.0 / step.units,
    )


def _zero12_traffic(step: _Step, span: Span) -> _Traffic:
    """ZeRO-1 / ZeRO-2: gradients reduce-scattered, updated parameters all-gathered after the step."""
    par = step.plan.parallel
    zero2 = par.strategy is Strategy.ZERO2
    launches = max(1.0, math.ceil(step.trainable / par.zero_bucket_elements))
    # Megatron's distributed optimizer (ZeRO-1) overlaps both with the compute in NeMo's
    # performance recipes (--overlap-grad-reduce, --overlap-param-gather): the reduction under
    # the last micro-batch's backward, the gather under the next step's first forward.
    megatron = step.plan.stack is Stack.MEGATRON
    per_micro = step.compute_seconds / step.micro
    reduces = step.micro if zero2 else 1
    hidden = megatron or zero_overlap_comm(step.plan)
    reduce = _collective(
        f"ZeRO-{2 if zero2 else 1} gradient reduce-scatter" + (" (overlap_comm)" if hidden and not megatron else ""),
        Collective.REDUCE_SCATTER,
        step.grad_bytes,
        span,
        step.links,
        count=reduces,
        launches=launches,
        overlapped=hidden,
        # Each reduction hides under the backward it follows: ZeRO-2's under every micro-batch's,
        # ZeRO-1's under the last one's; the last bucket of each waits (stage_1_and_2.py
        # independent_gradient_partition_epilogue reduces it after the backward and synchronizes).
        window_seconds=step.backward_micro * (1 if megatron else reduces) if hidden else 0.0,
        unhidden_share=1.0 / launches if hidden else 0.0,
    )
    # Megatron's distributed optimizer all-gathers the model's own parameters, in their dtype (bf16
    # under --bf16: the fp32 copies are the optimizer's), "NOT grad dtype" (NVIDIA/Megatron-LM
    # d98e8a64, megatron/core/distributed/param_and_grad_buffer.py start_param_sync; the buffer's
    # param_data is allocated in param.dtype: _ParamAndGradBuffer, group_params_for_buffers).
    param_bytes = step.dt.compute if megatron else step.dt.param
    gather = _collective(
        "ZeRO updated-parameter all-gather",
        Collective.ALL_GATHER,
        step.trainable * param_bytes,
        span,
        step.links,
        launches=launches,
        overlapped=megatron,
        window_seconds=per_micro - step.backward_micro if megatron else 0.0,
        unhidden_share=1.0 / launches if megatron else 0.0,
    )
    return _Traffic((reduce, gather), _zero12_why(megatron, hidden))


def _zero12_why(megatron: bool, overlap: bool) -> str:
    if megatron:
        return (
            "Megatron's distributed optimizer reduce-scatters the gradients under the last micro-batch's "
            "backward and all-gathers the updated parameters under the next forward (--overlap-grad-reduce, "
            "--overlap-param-gather, on in NeMo's performance recipes)."
        )
    if overlap:
        # deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/stage_1_and_2.py: with overlap_comm
        # the gradient hooks (create_gradient_handling_hooks) fill ipg buckets of reduce_bucket_size
        # and reduce each full one on self.reduction_stream (reduce_ipg_grads, average_tensor);
        # stage 1 only in the boundary micro-batch (reduce_ready_partitions_and_remove_grads:
        # partition_gradients or is_gradient_accumulation_boundary()). The parameter all-gather
        # after the step (all_gather_dp_groups in step) runs on the compute stream.
        return (
            "DeepSpeed ZeRO-1/2 with overlap_comm reduce the gradients bucket by bucket on a side stream "
            "during the backward (ZeRO-2 every micro-batch, ZeRO-1 in the last micro-batch), the last bucket "
            "after it; the updated parameters are all-gathered after the optimizer step, not overlapped "
            "(deepspeed/runtime/zero/stage_1_and_2.py, edaa7221)."
        )
    return (
        "DeepSpeed ZeRO-1/2 do not overlap the gradient reduction with the backward by default "
        "(overlap_comm defaults to True only for stage 3: deepspeed/runtime/zero/config.py, v0.19.8); "
        "ZeRO-2 reduces every micro-batch, ZeRO-1 at the accumulation boundary; the updated "
        "parameters are all-gathered after the optimizer step."
    )


def _tensor_parallel_traffic(step: _Step) -> _Traffic | None:
    plan = step.plan
    par = plan.parallel
    if par.tensor_parallel <= 1:
        return None
    activation = step.tokens_micro * plan.model.hidden_size * step.dt.compute
    # 4 per layer, 2 more for each block the backward recomputes (under layer SAC only
    # every Nth; per-op SAC re-runs the forward's all-reduces, which it does not save).
    recomputed = plan.checkpointed_blocks(step.layers)
    kind = "all-gather + reduce-scatter" if par.sequence_parallel else "all-reduce"
    overlap = par.tp_overlap
    all_reduce = _collective(
        f"tensor-parallel activation {kind}" + (" (overlapped)" if overlap else ""),
        Collective.ALL_REDUCE,
        activation,
        group_span(par.tensor_parallel, 1, par.gpus_per_node, par.nodes),
        step.links,
        count=(4 * step.layers + 2 * recomputed) * step.micro,
        launches=2 if par.sequence_parallel else 1,
        ring_only=par.sequence_parallel,  # an all-gather and a reduce-scatter: NCCL runs them as rings
        overlapped=overlap,
        window_seconds=step.compute_seconds if overlap else 0.0,
        # The share the step still waits for: the first of the TP chunks a collective matmul
        # splits each transfer into, and the matmuls slowed by the SMs the transfers take
        # (Wang et al. 2023, "Overlap communication with dependent computation", ASPLOS).
        unhidden_share=step.tp_overlap_exposed if overlap else 0.0,
    )
    if overlap:
        return _Traffic(
            (all_reduce,),
            "Tensor parallel with overlap (torchtitan async TP, Megatron --tp-comm-overlap): each layer's "
            f"all-gathers and reduce-scatters run in chunks beside the matmuls that use them; "
            f"{step.tp_overlap_exposed:.0%} of the traffic still delays the step (fitted on published runs).",
        )
    return _Traffic(
        (all_reduce,),
        "Tensor parallel: 2 all-reduces in each layer's forward and 2 in its backward per micro-batch "
        "(Megatron; with sequence parallel an all-gather + reduce-scatter each, the same bytes: "
        "Korthikanti et al. 2022), 2 more with recomputation; on the critical path, not overlapped.",
    )


def _pipeline_traffic(step: _Step) -> _Traffic | None:
    plan = step.plan
    par = plan.parallel
    if par.pipeline_parallel <= 1:
        return None
    tp = par.tensor_parallel
    chunks = par.virtual_stages if par.schedule is PipelineSchedule.INTERLEAVED else 1
    message = step.tokens_micro * plan.model.hidden_size * step.dt.compute / (tp if par.sequence_parallel else 1)
    stride = tp * par.context_parallel * par.data_parallel
    link = step.links.inter if par.nodes > 1 and stride >= par.gpus_per_node else step.links.intra
    sends = _point_to_point(
        "pipeline activations and gradients between stages",
        message,
        2 * chunks * step.micro,
        link,
        overlapped=False,
    )
    return _Traffic(
        (sends,),
        "Pipeline: each stage sends its activations forward and receives their gradients back once per "
        "micro-batch and model chunk, blocking; the bubble is (p−1)/m, or (p−1)/(v·m) interleaved "
        "(Narayanan et al. 2021).",
    )


def _context_parallel_traffic(step: _Step) -> _Traffic | None:
    plan = step.plan
    par = plan.parallel
    if par.context_parallel <= 1:
        return None
    if plan.stack is not Stack.MEGATRON:
        return _torch_ring_traffic(step)
    return _megatron_ring_traffic(step)


def _torch_ring_traffic(step: _Step) -> _Traffic:
    """PyTorch's ring attention as torchtitan drives it (torch.distributed.tensor.experimental.
    _attention, pytorch/pytorch@0123248a484ffe531edb5098b986c1bac08cd296; torchtitan 9dec370
    sets the "allgather" rotation, its default): the K/V as the rotate method moves them
    (:func:`_ring_kv_term`); the backward passes dK/dV on, in float32, after every step, and waits
    for the last one after its loop (its dkv_rotater is the all-to-all one whatever the method).
    torchtitan repeats the grouped K/V heads before SDPA (torchtitan/models/llama/model.py,
    repeat_kv), so K/V travel at the query heads' width. Under the compile stack the ring is traced
    into the compiled block and each collective is waited for where it is issued: both terms
    exposed whole (``_RING_TRACED``)."""
    plan = step.plan
    par, model = plan.parallel, plan.model
    cp = par.context_parallel
    width = step.tokens_micro * model.q_width / par.tensor_parallel
    span = group_span(cp, par.tensor_parallel, par.gpus_per_node, par.nodes)
    link = step.links.intra if span.nodes <= 1 else step.links.inter
    kv, how = _ring_kv_term(step, width, span, link)
    grads = _point_to_point(
        "context-parallel dK/dV ring (float32)",
        2 * width * 4.0,
        cp * step.layers * step.micro,
        link,
        overlapped=True,
        window=step.compute_seconds,
    )
    grads = replace(grads, unhidden_seconds=grads.seconds / cp)  # the last send of each ring waits
    if plan.stack is Stack.COMPILE:  # traced into the compiled block: every collective waited for at once
        kv, grads = (replace(term, overlapped=False, window_seconds=0.0, unhidden_seconds=0.0) for term in (kv, grads))
        return _Traffic((kv, grads), _RING_TRACED)
    return _Traffic(
        (kv, grads),
        f"Context parallel (PyTorch ring attention): {how}; dK/dV passed on in float32 after every backward "
        "step, the last of each layer waited for.",
    )


# PyTorch's ring attention under torch.compile waits for each of its collectives where it issues it. torchtitan
# compiles every TransformerBlock whole (pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py
# L303 ``torch.compile(transformer_block, fullgraph=True)``), so dynamo traces the patched SDPA and AOTAutograd the
# DTensor dispatch into the ring (_templated_ring_attention and its backward, the rotaters' ft_c.all_gather_tensor
# and ft_c.permute_tensor); the Dec-2024 test compiles that ring with fullgraph=True (pytorch/pytorch@01df946
# test/distributed/tensor/test_attention.py ``compiled``). A functional collective returns
# ``wait_tensor(self)`` at once when ``_are_we_tracing()`` and an AsyncCollectiveTensor, waited at first use, only
# in eager (torch/distributed/_functional_collectives.py ``_maybe_wrap_tensor``, every release read: pytorch/pytorch
# @fff02e67 and earlier). Inductor moves a wait only under ``reorder_for_compute_comm_overlap``, False by default
# (torch/_inductor/config.py, pytorch/pytorch@000091cf; the "sink_waits" / "raise_comms" passes run only with it),
# and torchtitan 9dec370 sets no inductor option but ``_micro_pipeline_tp`` (parallelize_llama.py L204). So the
# K/V all-gather (or each all-to-all send) and every float32 dK/dV send run alone, the compute stream waiting.
# The blocks stay compiled from step to step although train.py slices ``world_mesh["cp"]`` afresh every step
# (L270-271) and the patched SDPA closes over that mesh: dynamo guards a DeviceMesh with EQUALS_MATCH and
# DeviceMesh.__eq__ compares ranks, shape, device type and dim names, not identity (torch/_dynamo/variables/
# builder.py and torch/distributed/device_mesh.py in the 2.5.1 and 2.6.0 wheels, which bracket the runs' nightly
# 1963fc8 of 2024-12-23), so the closure's guard passes on every step's new slice: no per-step recompile.
_RING_TRACED: Final = (
    "Context parallel (PyTorch ring attention) under torch.compile: the ring is traced into the compiled block, "
    "where each collective is waited for where it is issued (functional collectives' wait_tensor while tracing; "
    "Inductor's reorder_for_compute_comm_overlap off by default), so the K/V exchange and every float32 dK/dV "
    "send are exposed whole."
)


def _ring_kv_term(step: _Step, width: float, span: Span, link: LinkSpec) -> tuple[CommTerm, str]:
    """The K/V of each ring call (forward, its recompute, backward), by ``parallel.cp_rotate_method``.

    allgather (_AllGatherRotater): every rank's K and V gathered at once, issued before the first
    step's attention and waited for at the second (``next_buffer`` at i = 1), so it hides only under
    the first step's kernel: 1/CP of each call's balanced attention (the causal 2c × 2c block
    against CP − 1 blocks of 2c²) — the layer's K/V do not exist before its projections.
    alltoall (_AllToAllRotater, pytorch/pytorch f2127dbdb01fc9319ce42b92d60344d19cbd0137 same
    file): at each of the first CP − 1 steps ``exchange_buffers`` sends the K/V chunk in hand to
    rank + 1 through ``ft_c.permute_tensor`` (an all_to_all_single with one non-empty split each
    way, which NCCL runs as one send and one receive) and ``next_buffer`` waits for it at the next
    step: each send hides under its own step's attention, (CP − 1)/CP of the call's."""
    plan = step.plan
    cp = plan.parallel.context_parallel
    recompute = plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.OP
    calls = (3 if recompute else 2) * step.layers * step.micro
    attention = step.compute_seconds if step.attention_seconds is None else step.attention_seconds
    if plan.parallel.cp_rotate_method is CpRotate.ALLTOALL:
        sends = _point_to_point(
            "context-parallel K/V ring (alltoall)",
            2 * width * step.dt.compute,
            (cp - 1) * calls,
            link,
            overlapped=True,
            window=attention if step.attention_seconds is None else attention * (cp - 1) / cp,
        )
        return sends, "each step's K/V chunk sent on to the next rank (alltoall), hidden under that step's attention"
    gather = _collective(
        "context-parallel K/V all-gather",
        Collective.ALL_GATHER,
        2 * width * step.dt.compute * cp,
        span,
        step.links,
        count=calls,
        overlapped=True,
        window_seconds=attention if step.attention_seconds is None else attention / cp,
    )
    return gather, "K/V all-gathered once per ring call, hidden only under the first step's attention (1/CP of it)"


def _megatron_ring_traffic(step: _Step) -> _Traffic:
    plan = step.plan
    par, model = plan.parallel, plan.model
    cp = par.context_parallel
    kv_chunk = 2 * step.tokens_micro * model.num_kv_heads / par.tensor_parallel * model.head_dim * step.dt.compute
    cp_span = group_span(cp, par.tensor_parallel, par.gpus_per_node, par.nodes)
    link = step.links.intra if cp_span.nodes <= 1 else step.links.inter
    ring = _point_to_point(
        "context-parallel K/V ring",
        kv_chunk,
        3 * (cp - 1) * step.layers * step.micro,
        link,
        overlapped=True,
        window=step.compute_seconds,
    )
    return _Traffic(
        (ring,),
        "Context parallel: each layer passes its K/V chunk around the ring (CP−1 sends forward, K/V and "
        "their gradients backward), overlapped with the attention of the chunk in hand.",
    )


def all_to_all_seconds(buffer_bytes: float, span: Span, links: Links) -> float:
    """One all-to-all of ``buffer_bytes`` per rank over ``span``: each rank keeps 1/n of its
    buffer and sends the rest, (n−1)/n (nccl-tests' alltoall bus-bandwidth factor,
    NVIDIA/nccl-tests doc/PERFORMANCE.md); the part bound for other nodes leaves through the
    GPU's own NIC while the rest crosses NVLink at the same time, so the slower of the two sets
    the time, plus one launch's latency: NCCL runs an all-to-all as grouped sends and receives
    (NVIDIA/nccl-tests src/alltoall.cu: ncclGroupStart, ncclSend / ncclRecv per peer), one
    step of a point-to-point transfer (:meth:`Links.latency` of a send over ``span``)."""
    n = span.ranks
    if n <= 1:
        return 0.0
    latency = links.latency(Collective.SEND, span)
    if span.nodes <= 1:
        return buffer_bytes * (n - 1) / n / links.intra.bus_bytes_per_second + latency
    off_node = buffer_bytes * (n - span.local) / n / links.inter.bus_bytes_per_second
    on_node = buffer_bytes * (span.local - 1) / n / links.intra.bus_bytes_per_second
    return max(off_node, on_node) + latency


# HybridEP (the hybrid-ep branch of deepseek-ai/DeepEP, NVIDIA's; Megatron-Core's flex dispatcher
# with moe_flex_dispatcher_backend "hybridep" calls its dispatch_with_permute / combine_with_unpermute,
# NVIDIA/Megatron-LM 55ac7082 megatron/core/transformer/moe/fused_a2a.py, in BF16: "HybridEP
# dispatcher does not support fp8 dispatch now") sends each token once to every rank that holds one
# of its experts, not once per routed copy as NCCL's all-to-all does, and moves it with its own
# TMA kernels on a few SMs, not NCCL. Its measured algorithm bandwidth inside one NVLink domain,
# per rank, the received tokens' bytes (each distinct token once, the rank's own included:
# tests/test_hybrid_ep.py ``dispatch_bf16_nvl_recv_bytes = dispatched_hidden.numel() * 2``) ÷ the
# time through its torch API: B200, 8 ranks, 4,096 tokens of hidden 7,168, top-8, random uniform
# routing, 8 local experts, 16 SMs — dispatch (BF16) 535.94 GB/s, combine 530.86 GB/s
# (shifangx/DeepEP@1dddd194 Hybrid-EP_Implementation.md, "B200 Platform"; the same document's GB200
# 8-rank rows, 16 SMs: 550.10 / 538.44, 32 SMs: 545.71 / 568.94). Keyed by the NVLink generation
# the document measures (B200 and GB200 are NVLink 5); elsewhere, and across nodes, the all-to-all
# model below (NCCL's bytes and bus bandwidth) stays.
HYBRIDEP_ALGBW_GB_S: Final = {"nvlink5": (535.94, 530.86)}  # (dispatch BF16, combine)


def hybridep_seconds(step: _Step, span: Span) -> tuple[float, float, float] | None:
    """One HybridEP dispatch and one combine of a rank's micro-batch: (the bytes it receives, the
    dispatch's seconds, the combine's), at the measured algorithm bandwidth of
    ``HYBRIDEP_ALGBW_GB_S``: the distinct tokens the rank receives (``received_tokens``: once per
    destination rank, balanced routing) × d × the compute bytes. None where no measurement applies
    (another link, more than one node, another dispatcher)."""
    plan = step.plan
    if megatron_dispatcher(plan) is not MoeDispatcher.HYBRIDEP or span.nodes > 1:
        return None
    rates = HYBRIDEP_ALGBW_GB_S.get(step.links.intra.id)
    if rates is None:
        return None
    model, ep = plan.model, plan.parallel.expert_parallel
    tokens = dispatched_copies(plan) / model.experts_per_token
    received = received_tokens(tokens, model.num_experts, model.experts_per_token, ep) * expert_load(plan)
    buffer = received * model.hidden_size * step.dt.compute
    return buffer, buffer / (rates[0] * 1e9), buffer / (rates[1] * 1e9)


def _expert_parallel_traffic(step: _Step) -> _Traffic | None:
    """Megatron-Core's alltoall token dispatcher (NVIDIA/Megatron-LM d98e8a64, megatron/core/
    transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher): each MoE layer permutes its
    tokens' top-k copies by expert and all-to-alls them to the experts' ranks (token_dispatch),
    and all-to-alls the experts' outputs back (token_combine): two in the forward, their two
    gradients in the backward, two more for a recomputed block, per micro-batch. A rank's buffer
    is its N·k routed copies × d in the compute dtype (N its tokens: ÷ CP, ÷ TP with sequence
    parallel, as the dispatcher receives them); balanced routing (dropless; Megatron-Bridge's
    benchmark recipes set moe_router_force_load_balancing). The EP group is EP ranks TP apart
    (Megatron's expert order "tp-ep-dp-pp", expert TP = TP). Blocking: Megatron overlaps the
    all-to-all only with overlap_moe_expert_parallel_comm, off by default
    (megatron/core/model_parallel_config.py at d98e8a64), as in the Qwen3-30B-A3B benchmark
    recipe (NVIDIA-NeMo/Megatron-Bridge 067f987d, perf_recipes/qwen/b200/qwen3_moe.py:
    moe_token_dispatcher_type "alltoall", moe_a2a_overlap False)."""
    plan = step.plan
    par, model = plan.parallel, plan.model
    ep, copies = par.expert_parallel, dispatched_copies(plan)
    if not copies:
        return None
    gather = megatron_dispatcher(plan) is MoeDispatcher.ALLGATHER
    # The allgather dispatcher all-gathers the EP group's N·d tokens (N·EP·d gathered) and
    # reduce-scatters the outputs back (MoEAllGatherTokenDispatcher, over the TP × EP group): per
    # collective each rank sends (EP−1)·N·d, the bytes of an all-to-all of N·EP·d.
    what, shape = ("all-gather and reduce-scatter", "N·EP·d") if gather else ("all-to-all", "N·k·d")
    rows = copies / model.experts_per_token * ep if gather else copies
    # The all-to-all ends when the busiest rank has received its copies: expert_load × N·k (the plan's routing
    # imbalance, capped or padded by a capacity factor). The allgather dispatcher gathers every token anyway.
    load = 1.0 if gather else expert_load(plan)
    if load != 1.0:
        rows *= load
        shape = f"{load:.3g} × N·k·d, the busiest rank's"
    routing = "balanced routing" if load == 1.0 else f"the busiest rank receiving {load:.3g} × the mean"
    buffer = rows * model.hidden_size * step.dt.compute
    span = group_span(ep, par.tensor_parallel, par.gpus_per_node, par.nodes)
    recomputed = plan.checkpointed_blocks(step.layers)
    count = (4 * step.layers + 2 * recomputed) * step.micro
    one = all_to_all_seconds(buffer, span, step.links)
    sent = buffer * (ep - 1) / ep * count
    where = step.links.where(span)
    term = CommTerm(
        f"expert-parallel {what} (dispatch and combine)",
        f"{count:g} × {what} of {memory(buffer)} ({shape}): (n−1)/n = {(ep - 1) / ep:.3g} × "
        f"{memory(buffer * count)}, {duration(one)} each ({where})",
        sent,
        one * count,
    )
    hybrid = hybridep_seconds(step, span)
    if hybrid is not None:
        # A dispatch's backward is a combine and a combine's a dispatch: half of each kind.
        received, dispatch, combine = hybrid
        rates = HYBRIDEP_ALGBW_GB_S[step.links.intra.id]
        term = CommTerm(
            "expert-parallel HybridEP dispatch and combine",
            f"{count / 2:g} dispatches and {count / 2:g} combines of {memory(received)} (the distinct tokens "
            f"the rank receives × d), {duration(dispatch)} / {duration(combine)} each at HybridEP's measured "
            f"{rates[0]:g} / {rates[1]:g} "
            f"GB/s ({where})",
            received * (ep - 1) / ep * count,
            (dispatch + combine) * count / 2,
        )
    return _Traffic(
        (term,),
        (
            f"Expert parallel {ep}: each MoE layer all-gathers the group's tokens and reduce-scatters the "
            "experts' outputs, twice in the forward and twice in the backward per micro-batch (Megatron-Core's "
            "allgather dispatcher), balanced routing, not overlapped (Megatron's default)."
        )
        if gather
        else (
            f"Expert parallel {ep}: each MoE layer all-to-alls its tokens' top-{model.experts_per_token} copies "
            "to the experts' ranks and back, twice in the forward and twice in the backward per micro-batch "
            f"(Megatron-Core's alltoall dispatcher), {routing}, not overlapped (Megatron's default)."
        ),
    )


def _offload_traffic(step: _Step) -> _Traffic | None:
    plan = step.plan
    par = plan.parallel
    if par.offload is Offload.NONE:
        return None
    if par.strategy is Strategy.FSDP and par.offload is Offload.PARAMS:
        return _Traffic(
            tuple(_fsdp_offload_terms(step)),
            "FSDP2 CPUOffloadPolicy: each unit's shard is copied to the GPU before its all-gather, on the "
            "all-gather's copy-in stream (prefetched beside the compute), and each reduced gradient is copied "
            "to pinned host memory on the reduce-scatter stream without blocking, but for an accumulated "
            "micro-batch (the CPU adds it to the host gradient, so the copy blocks); the optimizer steps on "
            "the CPU after the backward (the host step, timed apart).",
        )
    terms = _offload_terms(step)
    zero12 = par.strategy in (Strategy.ZERO1, Strategy.ZERO2)
    return _Traffic(
        tuple(terms),
        "ZeRO-Offload: each reduced gradient is cast to float32 and copied to the host without blocking during "
        "the backward; after the CPU step the 16-bit partition is copied back before the parameters' all-gather "
        "(nothing overlaps it)."
        if zero12
        else "Offload: the host↔GPU copies of the offloaded state run over the GPU's PCIe link and are counted "
        "as exposed; the CPU optimizer step is timed apart (the host step).",
    )


def _offload_rank(step: _Step) -> tuple[LinkSpec, float, float]:
    """The GPU's host link, and the rank's trainable and stored parameters (its shard when sharded)."""
    plan, counts = step.plan, step.counts
    par = plan.parallel
    host = find_link(step.links.intra.host_link or "pcie5-x16", "parallel.intra_link")
    sharded = par.strategy is not Strategy.DDP
    stage = max(layout(plan).stages, key=lambda s: weight_share(plan, s, par.tensor_parallel))
    shards = par.fsdp_shards if sharded else 1  # Layout.state_shards
    # Sharded, a rank's part is its share without the EP split ÷ DP × CP (Layout.state_shards_of).
    trainable = counts.trainable * train_share(plan, stage, par.tensor_parallel, experts_split=not sharded) / shards
    params = counts.total * weight_share(plan, stage, par.tensor_parallel, experts_split=not sharded) / shards
    return host, trainable, params


def _fsdp_offload_terms(step: _Step) -> list[CommTerm]:
    """FSDP2 ``CPUOffloadPolicy`` (pytorch/pytorch@010ae4a8 torch/distributed/fsdp/_fully_shard/):
    ``FSDPParam.all_gather_inputs`` copies the host shard ``.to(self.device, non_blocking=True)``
    inside ``foreach_all_gather``'s copy-in, before every all-gather (forward, and again before the
    backward when resharded), so it is prefetched with the gather; ``foreach_reduce`` copies each
    reduced gradient ``.to(torch.device("cpu"), non_blocking=...)``, non-blocking only when the host
    memory is pinned (``CPUOffloadPolicy.pin_memory``, default True), no gradient is accumulated and no
    post-accumulate-grad hook reads it. The parameters live on the host: nothing else comes back."""
    plan, dt, micro = step.plan, step.dt, step.micro
    par = plan.parallel
    host, trainable, params = _offload_rank(step)
    fetches = (2 if par.reshard_after_forward else 1) * micro
    units = max(1, step.units)
    fetch = _host_transfer("shards copied to the GPU before each all-gather", params * dt.param * fetches, host)
    first = _host_transfer("gradients copied to the host after each reduce-scatter", trainable * dt.grad, host)
    terms = [
        replace(
            fetch,
            overlapped=True,
            window_seconds=step.compute_seconds,
            unhidden_seconds=fetch.seconds / (units * fetches),
        ),
        replace(first, overlapped=True, window_seconds=step.compute_seconds, unhidden_seconds=first.seconds / units),
    ]
    if micro > 1:
        terms.append(
            _host_transfer(
                f"accumulated gradients copied to the host, blocking ({micro - 1} later micro-batches)",
                trainable * dt.grad * (micro - 1),
                host,
            )
        )
    return terms


def _offload_terms(step: _Step) -> list[CommTerm]:
    """ZeRO-Offload, a CPU optimizer beside DDP, ZeRO-3 offload: gradients down, parameters back.

    ZeRO-1/2 (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/stage_1_and_2.py):
    ``async_inplace_copy_grad_to_fp32_buffer_from_gpu`` casts each reduced gradient to float32
    (``master_weights_and_grads_dtype``) and copies it ``non_blocking=True`` during the backward;
    ``step`` runs the CPU optimizer, fills the 16-bit staging buffer and copies it to the GPU
    partition before ``all_gather_dp_groups``: that copy waits for the step and the gather waits
    for it. Other strategies keep both copies whole (not read)."""
    plan, dt, micro = step.plan, step.dt, step.micro
    par = plan.parallel
    host, trainable, params = _offload_rank(step)
    per_micro = par.strategy in (Strategy.ZERO2, Strategy.ZERO3, Strategy.FSDP)
    zero12 = par.strategy in (Strategy.ZERO1, Strategy.ZERO2)
    down_bytes = 4.0 if zero12 else dt.grad  # ZeRO-Offload copies float32 gradients
    down = _host_transfer(
        "gradients to the host" + (" (every micro-batch)" if per_micro and micro > 1 else ""),
        trainable * down_bytes * (micro if per_micro else 1),
        host,
    )
    if zero12:
        down = replace(down, overlapped=True, window_seconds=step.compute_seconds, unhidden_seconds=0.0)
    up_bytes = 2.0 if zero12 else dt.param  # the 16-bit partition (param_buffer_of_bit16_for_cpu_offload_groups)
    terms = [down, _host_transfer("updated parameters back to the GPU", trainable * up_bytes, host)]
    if par.offload is Offload.PARAMS:
        fetches = (2 if par.reshard_after_forward or par.strategy is Strategy.ZERO3 else 1) * micro
        terms.append(_host_transfer("parameters fetched from the host", params * dt.param * fetches, host))
    return terms


def _exposed(terms: list[CommTerm]) -> float:
    """Seconds the step waits for: blocking terms whole; overlapped ones past the compute they
    run beside (their windows may be the same compute, so they are also checked together),
    plus the pieces no schedule hides."""
    blocking = sum(t.seconds for t in terms if not t.overlapped)
    hidden = [t for t in terms if t.overlapped]
    if not hidden:
        return blocking
    floors = sum(t.unhidden_seconds for t in hidden)
    rest = [(t.seconds - t.unhidden_seconds, t.window_seconds) for t in hidden]
    alone = sum(max(0.0, seconds - window) for seconds, window in rest)
    together = sum(seconds for seconds, _ in rest) - max(window for _, window in rest)
    return blocking + floors + max(alone, together, 0.0)

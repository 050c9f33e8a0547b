"""The memory of every kind of rank of a plan, the worst one deciding the verdict.

A single-GPU plan has one rank, the GPU. A multi-GPU plan has one kind of rank per
pipeline stage that differs (first, the largest middle one, last; see
:mod:`core.parallel.layout`), each with its own phases: :func:`core.training.detailed.training_breakdown`
built for that rank. Lesson accounting is the lesson's single sum (it has no ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.breakdown import PHASE_BYTES, Breakdown, Bucket, Phase
from core.evidence import Confidence, confidence
from core.memo import Once, fills_fields
from core.parallel.layout import layout
from core.params import ParamCounts
from core.plan import Accounting, Plan, as_run
from core.training import detailed, lesson
from core.verdict import Verdict, judge

__all__ = ["RankMemory", "rank_memories"]


@fills_fields
@dataclass(frozen=True)
class RankMemory:
    """One kind of rank: its phases, the composition at its peak, its verdict."""

    label: str  # "every rank", "stage 1 of 4 (first)", ...
    phases: tuple[Phase, ...]
    buckets: tuple[Bucket, ...]  # the composition at the peak, overhead last
    peak_phase: str
    peak_bytes: float  # allocator peak (max_memory_allocated on that rank): the peak phase's tensors + workspaces
    total_bytes: float  # peak + overhead: what nvidia-smi shows (core.training.device)
    verdict: Verdict
    margin_bytes: float  # usable - total
    summary_formula: str
    notes: tuple[str, ...]
    count: int  # GPUs that are ranks of this kind
    reserved_bytes: float = 0.0  # peak + the caching allocator's reserve (max_memory_reserved)
    low_bytes: float = 0.0  # the bottom of total_bytes's range (cache given back, evidence's low end)
    high_bytes: float = 0.0  # its top (the evidence's high end)
    fragmentation_basis: float = 0.0  # the activations' high point the reserve's fitted term scales
    fragmentation: float = 0.0  # that term's fraction
    workspace_bytes: float = 0.0  # of peak_bytes: the libraries' workspaces (core.training.device.allocator_workspaces)
    # The rank's breakdown, whose evaluation forward is worked out when first read (:attr:`evaluation`).
    _breakdown: Breakdown | None = field(default=None, compare=False, repr=False)

    @Once
    def evaluation(self) -> Phase | None:
        """An evaluation forward between steps, on this rank (None: none modelled)."""
        return self._breakdown.evaluation if self._breakdown is not None else None

    @Once
    def evaluation_bytes(self) -> float:
        """The evaluation forward's allocated bytes + overhead (0 without one)."""
        return self._breakdown.evaluation_bytes if self._breakdown is not None else 0.0


def total_range(breakdown: Breakdown, peak: float, total: float, band: Confidence | None) -> tuple[float, float]:
    """The range of a rank's nvidia-smi figure: the published figures' band around it and, at
    the bottom, what the card holds once the caching allocator has given its cached blocks back
    (it does so before it fails: c10/cuda/CUDACachingAllocator.cpp ``malloc``). No band (lesson
    accounting): the total itself."""
    if band is None:
        return total, total
    runtime = breakdown.overhead.bytes - breakdown.reserve_bytes
    released = peak * (1 + band.low) + runtime
    return min(total * (1 + band.low), released), total * (1 + band.high)


def _rank(
    label: str, breakdown: Breakdown, count: int, capacity: float, headroom: float, band: Confidence | None = None
) -> RankMemory:
    peak = max(breakdown.phases, key=PHASE_BYTES)
    allocated = peak.allocated_bytes + breakdown.workspace_bytes
    total = peak.allocated_bytes + breakdown.overhead.bytes
    low, high = total_range(breakdown, peak.allocated_bytes, total, band)
    judged = judge(total, capacity, headroom, low_bytes=low, high_bytes=high)
    return RankMemory(
        label=label,
        phases=breakdown.phases,
        buckets=(*peak.buckets, breakdown.overhead),
        peak_phase=peak.name,
        peak_bytes=allocated,
        total_bytes=total,
        verdict=judged.verdict,
        margin_bytes=judged.margin_bytes,
        summary_formula=breakdown.summary_formula,
        notes=breakdown.notes,
        count=count,
        reserved_bytes=allocated + breakdown.reserve_bytes,
        low_bytes=low,
        high_bytes=high,
        fragmentation_basis=breakdown.fragmentation_basis,
        fragmentation=breakdown.fragmentation,
        workspace_bytes=breakdown.workspace_bytes,
        _breakdown=breakdown,
    )


def rank_memories(plan: Plan, counts: ParamCounts, capacity: float) -> tuple[tuple[RankMemory, ...], int]:
    """Every kind of rank of ``plan`` and the index of the worst (the largest total)."""
    headroom = plan.hardware.headroom
    plan = as_run(plan)  # prompt learning: the model runs on the sequence plus the virtual tokens
    if plan.accounting is Accounting.LESSON:
        one = _rank("every GPU", lesson.training_breakdown(plan, counts), plan.world_size, capacity, headroom)
        return (one,), 0
    band = confidence(plan)
    lay = layout(plan)
    if not lay.ranked:
        return (_rank("the GPU", detailed.training_breakdown(plan, counts), 1, capacity, headroom, band),), 0
    ranks = tuple(
        _rank(
            stage.label,
            detailed.training_breakdown(plan, counts, detailed.Rank(lay, stage)),
            stage.ranks,
            capacity,
            headroom,
            band,
        )
        for stage in lay.stages
    )
    worst = max(range(len(ranks)), key=lambda i: ranks[i].total_bytes)
    return ranks, worst

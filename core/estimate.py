"""``estimate(plan)``: the pure function every view, the command line and the tests use.

Same plan, same answer; no I/O (the GPU catalogue is passed in, or read once and cached);
fast enough to run on every keystroke.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core import detailed, lesson
from core.breakdown import Breakdown, Bucket, BucketKey, Phase
from core.catalogue import GpuSpec, custom_gpu, find_gpu
from core.checks import plan_warnings
from core.compute import Compute, compute_estimate
from core.inference import InferenceEstimate, inference_estimate
from core.params import ParamCounts, param_counts
from core.plan import Accounting, Plan

__all__ = ["Bucket", "BucketKey", "Estimate", "Phase", "Verdict", "estimate", "gpu_for"]


class Verdict(StrEnum):
    FITS = "fits"  # peak + overhead within the usable memory (capacity less headroom)
    TIGHT = "tight"  # inside the headroom band: may run, likely to fail on fragmentation
    OOM = "oom"  # more than the card holds


VERDICT_LABELS: Final = {Verdict.FITS: "Fits", Verdict.TIGHT: "Tight", Verdict.OOM: "Out of memory"}


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    gpu: GpuSpec
    params: ParamCounts
    buckets: tuple[Bucket, ...]  # the composition at the peak, in chart order
    phases: tuple[Phase, ...]
    peak_phase: str
    peak_bytes: float  # allocator-level peak (what max_memory_allocated reports)
    total_bytes: float  # peak + overhead (what nvidia-smi would show)
    capacity_bytes: float
    usable_bytes: float  # capacity less headroom
    verdict: Verdict
    margin_bytes: float  # usable - total; negative when it does not fit
    summary_formula: str
    compute: Compute
    inference: InferenceEstimate
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()  # core.checks.plan_warnings: valid, but doubtful

    def bucket(self, key: BucketKey) -> Bucket:
        for bucket in self.buckets:
            if bucket.key is key:
                return bucket
        raise KeyError(key)

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS


def gpu_for(plan: Plan) -> GpuSpec:
    if plan.hardware.gpu == "custom":
        return custom_gpu(plan.hardware.custom_memory_gb, plan.hardware.custom_tflops)
    return find_gpu(plan.hardware.gpu)


def verdict_for(total_bytes: float, capacity_bytes: float, headroom: float) -> tuple[Verdict, float, float]:
    usable = capacity_bytes * (1.0 - headroom)
    if total_bytes <= usable:
        verdict = Verdict.FITS
    elif total_bytes <= capacity_bytes:
        verdict = Verdict.TIGHT
    else:
        verdict = Verdict.OOM
    return verdict, usable, usable - total_bytes


def estimate(plan: Plan, gpu: GpuSpec | None = None) -> Estimate:
    """Estimate memory, time and serving needs for ``plan`` on ``gpu`` (or the plan's card)."""
    card = gpu if gpu is not None else gpu_for(plan)
    counts = param_counts(plan)
    breakdown: Breakdown
    if plan.accounting is Accounting.LESSON:
        breakdown = lesson.training_breakdown(plan, counts)
    else:
        breakdown = detailed.training_breakdown(plan, counts)
    peak = max(breakdown.phases, key=lambda p: p.allocated_bytes)
    overhead = breakdown.overhead
    buckets = (*peak.buckets, overhead)
    total = peak.allocated_bytes + overhead.bytes
    verdict, usable, margin = verdict_for(total, card.memory_bytes, plan.hardware.headroom)
    return Estimate(
        plan=plan,
        gpu=card,
        params=counts,
        buckets=buckets,
        phases=breakdown.phases,
        peak_phase=peak.name,
        peak_bytes=peak.allocated_bytes,
        total_bytes=total,
        capacity_bytes=float(card.memory_bytes),
        usable_bytes=usable,
        verdict=verdict,
        margin_bytes=margin,
        summary_formula=breakdown.summary_formula,
        compute=compute_estimate(plan, counts, card),
        inference=inference_estimate(plan, counts, card),
        notes=breakdown.notes,
        warnings=plan_warnings(plan),
    )

"""``estimate(plan)``: the pure function every view, the command line and the tests use.

Same plan, same answer; no I/O (the GPU catalogue is passed in, or read once and cached);
fast enough to run on every keystroke.
"""

from __future__ import annotations

from dataclasses import dataclass

from core import detailed, lesson
from core.breakdown import Breakdown, Bucket, BucketKey, Phase
from core.catalogue import GpuSpec, custom_gpu, find_gpu
from core.checks import plan_warnings
from core.compute import Compute, compute_estimate
from core.inference import InferenceEstimate, inference_estimate
from core.params import ParamCounts, param_counts
from core.plan import Accounting, Plan
from core.verdict import VERDICT_LABELS, Judgement, Mode, Verdict, judge

__all__ = [
    "VERDICT_LABELS",
    "Bucket",
    "BucketKey",
    "Estimate",
    "Judgement",
    "Mode",
    "Phase",
    "Verdict",
    "estimate",
    "gpu_for",
]


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

    def judgement(self, mode: Mode = Mode.TRAINING) -> Judgement:
        """The verdict with its figures, for the training step or for serving."""
        if mode is Mode.INFERENCE:
            inf = self.inference
            return Judgement(inf.verdict, inf.total_bytes, self.capacity_bytes, self.usable_bytes)
        return Judgement(self.verdict, self.total_bytes, self.capacity_bytes, self.usable_bytes)


def gpu_for(plan: Plan) -> GpuSpec:
    if plan.hardware.gpu == "custom":
        return custom_gpu(plan.hardware.custom_memory_gb, plan.hardware.custom_tflops)
    return find_gpu(plan.hardware.gpu)


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
    judged = judge(total, card.memory_bytes, plan.hardware.headroom)
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
        usable_bytes=judged.usable_bytes,
        verdict=judged.verdict,
        margin_bytes=judged.margin_bytes,
        summary_formula=breakdown.summary_formula,
        compute=compute_estimate(plan, counts, card),
        inference=inference_estimate(plan, counts, card),
        notes=breakdown.notes,
        warnings=plan_warnings(plan),
    )

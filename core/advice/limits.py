"""How far a plan goes: the largest micro-batch, sequence, concurrency and context that fit,
and memory against one workload dimension. Every answer comes from core.solve's one solver
over :func:`core.estimate.estimate` of modified plans."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.estimate import Estimate, estimate
from core.plan import Plan
from core.solve import largest_fitting

# Search ceilings. An answer equal to its ceiling means memory does not limit that dimension
# within any plan the planner accepts (lesson accounting types the activations, so they do
# not grow with the batch or the sequence).
MICRO_BATCH_CEILING: Final = 65_536
SEQUENCE_CEILING: Final = 1_048_576
AXES: Final = ("micro_batch", "seq_len")


def _fits(plan: Plan) -> bool:
    return estimate(plan).fits


def max_micro_batch(plan: Plan, high: int = MICRO_BATCH_CEILING) -> int:
    return largest_fitting(lambda b: _fits(plan.with_workload(micro_batch=b)), high)


def sequence_step(plan: Plan) -> int:
    """The lengths a plan can take come in steps of this: context parallel splits the sequence
    into 2 × CP load-balanced chunks (core.plan refuses any other length), else 1."""
    cp = plan.parallel.context_parallel
    return 2 * cp if cp > 1 else 1


def max_sequence(plan: Plan, high: int = SEQUENCE_CEILING) -> int:
    """The longest sequence up to ``high`` that fits, in the plan's :func:`sequence_step`
    (0: not even one step)."""
    step = sequence_step(plan)
    return step * largest_fitting(lambda k: _fits(plan.with_workload(seq_len=k * step)), high // step)


@dataclass(frozen=True)
class Limits:
    """The largest value of each dimension that fits (0: not even 1), the others held."""

    max_micro_batch: int
    max_sequence: int
    max_concurrent: int  # serving: requests of the plan's context
    max_context: int  # serving: tokens per request at the plan's concurrency

    @property
    def micro_batch_unbounded(self) -> bool:
        """Memory does not limit the micro-batch (up to the search ceiling)."""
        return self.max_micro_batch >= MICRO_BATCH_CEILING

    @property
    def sequence_unbounded(self) -> bool:
        return self.max_sequence >= SEQUENCE_CEILING

    def largest(self, axis: str) -> int:
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}")
        return self.max_micro_batch if axis == "micro_batch" else self.max_sequence


def limits(plan: Plan, est: Estimate | None = None) -> Limits:
    inf = (est or estimate(plan)).inference
    return Limits(max_micro_batch(plan), max_sequence(plan), inf.max_concurrent, inf.max_context)


@dataclass(frozen=True)
class Curve:
    """Memory against one workload dimension, with the card's limits."""

    axis: str  # "micro_batch" or "seq_len"
    values: tuple[int, ...]
    total_bytes: tuple[float, ...]
    usable_bytes: float
    capacity_bytes: float
    crossing: int  # the largest value that fits (0: none)


def memory_curve(plan: Plan, axis: str, points: int = 24, crossing: int | None = None) -> Curve:
    """``crossing`` may pass the limit already solved for ``axis`` (:class:`Limits`)."""
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}")
    current = getattr(plan.workload, axis)
    if crossing is None:
        crossing = max_micro_batch(plan) if axis == "micro_batch" else max_sequence(plan)
    step = sequence_step(plan) if axis == "seq_len" else 1
    top = max(current, crossing, 1) * 2
    extra = {current} if axis == "seq_len" else {current, 1}
    values = sorted({step * max(1, round(top * (i + 1) / points / step)) for i in range(points)} | extra)
    totals = tuple(estimate(plan.with_workload(**{axis: v})).total_bytes for v in values)
    est = estimate(plan)
    return Curve(axis, tuple(values), totals, est.usable_bytes, est.capacity_bytes, crossing)

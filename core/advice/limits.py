"""How far a plan goes: the largest micro-batch, sequence, concurrency and context that fit,
and memory against one workload dimension. Every answer comes from core.solve's one solver
over :func:`core.estimate.estimate` of modified plans.

One rule for "fits" (core.verdict, branch h60one): each training limit is found twice, the largest value
that fits with margin (Judgement.fits_with_margin, the answer a search gives) and the largest that fits at
all (the verdict FITS; larger ones are never offered). A value between them fits narrowly, and is said so
in core.verdict's words (:func:`core.verdict.limit_words`). The real-GPU boundary benchmark
(benchmarks/realgpu/memory.py) scores its own "fits at all" solver, not these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.context_limit import refused_context_words, starting_context
from core.estimate import Estimate, estimate
from core.format import counted
from core.plan import ENGINE_LABELS, Plan
from core.serving.inference import InferenceEstimate
from core.solve import largest_fitting
from core.verdict import limit_parts, limit_words

# Search ceilings. An answer equal to its ceiling means memory does not limit that dimension
# within any plan the planner accepts (lesson accounting types the activations, so they do
# not grow with the batch or the sequence).
MICRO_BATCH_CEILING: Final = 65_536
SEQUENCE_CEILING: Final = 1_048_576
AXES: Final = ("micro_batch", "seq_len")


def _fits(plan: Plan, margin: bool) -> bool:
    """The verdict fits (``margin``: and with margin, Judgement.fits_with_margin)."""
    judged = estimate(plan).judgement()
    return judged.fits_with_margin if margin else judged.fits


def max_micro_batch(plan: Plan, high: int = MICRO_BATCH_CEILING, margin: bool = False) -> int:
    """The largest micro-batch up to ``high`` that fits (``margin``: with margin); 0: not even 1."""
    # With margin the caller passes the limit at all as ``high``: the answer is at or just below it.
    guess = high if margin else None
    return largest_fitting(lambda b: _fits(plan.with_workload(micro_batch=b), margin), high, guess)


def sequence_step(plan: Plan) -> int:
    """The lengths a plan can take come in steps of this: context parallel splits the sequence
    into 2 × CP load-balanced chunks (core.plan refuses any other length), else 1."""
    cp = plan.parallel.context_parallel
    return 2 * cp if cp > 1 else 1


def max_sequence(plan: Plan, high: int = SEQUENCE_CEILING, margin: bool = False) -> int:
    """The longest sequence up to ``high`` that fits (``margin``: with margin), in the plan's
    :func:`sequence_step` (0: not even one step)."""
    step = sequence_step(plan)
    guess = high // step if margin else None
    return step * largest_fitting(lambda k: _fits(plan.with_workload(seq_len=k * step), margin), high // step, guess)


@dataclass(frozen=True)
class Limits:
    """The largest value of each dimension that fits at all (the verdict FITS; 0: not even 1), the
    others held; for training, too, the largest that fits with margin (Judgement.fits_with_margin, at
    most the former). Serving's verdict carries no range, so its limits fit with margin where they fit."""

    max_micro_batch: int
    max_sequence: int
    max_concurrent: int  # serving: requests of the plan's context
    max_context: int  # serving: tokens per request at the plan's concurrency
    margin_micro_batch: int
    margin_sequence: int

    @property
    def micro_batch_unbounded(self) -> bool:
        """Memory does not limit the micro-batch (up to the search ceiling)."""
        return self.max_micro_batch >= MICRO_BATCH_CEILING

    @property
    def sequence_unbounded(self) -> bool:
        return self.max_sequence >= SEQUENCE_CEILING

    def largest(self, axis: str) -> int:
        """The largest value of ``axis`` that fits at all."""
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}")
        return self.max_micro_batch if axis == "micro_batch" else self.max_sequence

    def with_margin(self, axis: str) -> int:
        """The largest value of ``axis`` that fits with margin (0: none)."""
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}")
        return self.margin_micro_batch if axis == "micro_batch" else self.margin_sequence

    def parts(self, axis: str) -> tuple[int, str]:
        """The value offered as the limit, the largest that fits with margin, else the largest that fits
        narrowly (core.verdict.fit_rank's order; 0 where nothing fits), and its note in core.verdict's
        words ("13 fits narrowly"; "" where the two limits are one): :func:`core.verdict.limit_parts`."""
        return limit_parts(self.with_margin(axis), self.largest(axis))

    def words(self, axis: str, unit: str = "") -> str:
        """The limit in core.verdict's words: "12", "12 (13 fits narrowly)", "2 (fits narrowly; none fits with
        margin)", "" where nothing fits."""
        return limit_words(self.with_margin(axis), self.largest(axis), unit)


def limits(plan: Plan, est: Estimate | None = None) -> Limits:
    inf = (est or estimate(plan)).inference
    micro, seq = max_micro_batch(plan), max_sequence(plan)
    margin_micro = max_micro_batch(plan, high=micro, margin=True)
    margin_seq = max_sequence(plan, high=seq, margin=True)
    return Limits(micro, seq, inf.max_concurrent, inf.max_context, margin_micro, margin_seq)


@dataclass(frozen=True)
class ServingLimit:
    """A serving limit as the Diagnosis's "How far it goes" says it: ``figure`` (the number the window sets in bold;
    "" where there is none) and the words after it."""

    figure: str
    words: str

    @property
    def text(self) -> str:
        return f"{self.figure} {self.words}" if self.figure else self.words


def serving_limits(plan: Plan, inf: InferenceEstimate, found: Limits) -> tuple[ServingLimit, ServingLimit]:
    """The most requests of the plan's context and the longest context at its concurrency, in words. Where the
    engine refuses the context at start-up (core.context_limit.would_not_start) no request of it runs,
    whatever the memory holds: the engine's refusal is said, and the longest context it starts with given instead
    (core.context_limit.starting_context; h92verd: "14 requests of 8,192 tokens" on Llama 2 7B, whose
    4,096-token limit vLLM enforces)."""
    serving = plan.inference
    requests = counted(serving.concurrent, "request")
    now = f"now {serving.context:,}"
    refused = refused_context_words(plan)
    if refused:
        most = ServingLimit("", f"none: {refused}")
        longest = starting_context(plan, found.max_context)
        at_limit = "the model's limit, " if longest == plan.model.max_position_embeddings else ""
        started = f"{at_limit}the longest {ENGINE_LABELS[serving.engine]} starts with; {now}"
        context = (
            ServingLimit(f"{longest:,}", f"tokens at {requests} ({started})")
            if longest
            else ServingLimit("", f"none at {requests}")
        )
        return most, context
    # "3 of 4,096 tokens" said neither what the 3 counts nor what the 4,096 is (docs/GUI.md, 2026-12-07): the
    # banner's words, "at most 3 requests of 4,096 tokens at once"
    count = found.max_concurrent
    noun = "request" if count == 1 else "requests"
    most = (
        ServingLimit(f"{count:,}", f"{noun} of {serving.context:,} tokens (now {serving.concurrent:,})")
        if count
        else ServingLimit("", f"none: {inf.none_served}")
    )
    # the model's own limit, not the memory, where the banner says so (InferenceEstimate.limits_sentence)
    cap = ", the model's limit" if inf.at_model_limit(plan) else ""
    context = (
        ServingLimit(f"{found.max_context:,}", f"tokens at {requests}{cap} ({now})")
        if found.max_context
        else ServingLimit("", f"none at {requests}")
    )
    return most, context


@dataclass(frozen=True)
class Curve:
    """Memory against one workload dimension, with the card's limits."""

    axis: str  # "micro_batch" or "seq_len"
    values: tuple[int, ...]
    total_bytes: tuple[float, ...]
    usable_bytes: float
    capacity_bytes: float
    crossing: int  # the largest value that fits at all (0: none)
    margin_crossing: int  # the largest value that fits with margin (0: none), at most ``crossing``

    @property
    def parts(self) -> tuple[int, str]:
        """The value marked as the limit and its note (:meth:`Limits.parts`)."""
        return limit_parts(self.margin_crossing, self.crossing)

    @property
    def fits_narrowly(self) -> bool:
        """The value marked fits only narrowly: some value fits, none with margin (drawn as a narrow fit, not
        a fit's green: core.verdict)."""
        return self.margin_crossing == 0 < self.crossing

    def words(self, unit: str = "") -> str:
        """The limit in core.verdict's words (:meth:`Limits.words`)."""
        return limit_words(self.margin_crossing, self.crossing, unit)


def _solved(plan: Plan, axis: str, margin: bool, high: int | None = None) -> int:
    if axis == "micro_batch":
        return max_micro_batch(plan, MICRO_BATCH_CEILING if high is None else high, margin)
    return max_sequence(plan, SEQUENCE_CEILING if high is None else high, margin)


def memory_curve(
    plan: Plan, axis: str, points: int = 24, crossing: int | None = None, margin_crossing: int | None = None
) -> Curve:
    """``crossing`` and ``margin_crossing`` may pass the limits already solved for ``axis`` (:class:`Limits`)."""
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}")
    current = getattr(plan.workload, axis)
    if crossing is None:
        crossing = _solved(plan, axis, margin=False)
    if margin_crossing is None:
        margin_crossing = _solved(plan, axis, margin=True, high=crossing)
    step = sequence_step(plan) if axis == "seq_len" else 1
    top = max(current, crossing, 1) * 2
    extra = {current} if axis == "seq_len" else {current, 1}
    values = sorted({step * max(1, round(top * (i + 1) / points / step)) for i in range(points)} | extra)
    totals = tuple(estimate(plan.with_workload(**{axis: v})).total_bytes for v in values)
    est = estimate(plan)
    return Curve(axis, tuple(values), totals, est.usable_bytes, est.capacity_bytes, crossing, margin_crossing)

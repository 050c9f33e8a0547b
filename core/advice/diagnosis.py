"""OOM diagnosis: why a plan will not fit, where it fails, what to change, how far it goes.

``diagnose(plan, mode, pins)`` gathers everything the Diagnosis tab shows: the verdict for the
mode (the training step, or serving), the failing phase and its symptom, the remedies with
their verdicts and costs (:mod:`core.advice.remedies`, :mod:`core.advice.serving_remedies`), the cheapest
fitting combination, and the limits (:mod:`core.advice.limits`). Everything is produced by
estimating modified plans with the same :func:`core.estimate.estimate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from core.advice.limits import (
    AXES,
    Curve,
    Limits,
    ServingLimit,
    limits,
    max_micro_batch,
    max_sequence,
    memory_curve,
    serving_limits,
)
from core.advice.remedies import (
    MAX_COMBINED,
    TRAINING_KINDS,
    Combination,
    Remedy,
    RemedyKind,
    cheapest_combination,
    remedies_for,
)
from core.advice.request import PIN_LABELS, AdviceKind, DiagnosisRequest, Pin
from core.advice.serving_remedies import SERVING_KINDS
from core.advice.symptoms import SEEN, SYMPTOM_BY_FAILURE, SYMPTOMS, Failure, Symptom, start_cause
from core.breakdown import BUCKET_LABELS, BucketKey
from core.estimate import Estimate, estimate
from core.format import memory
from core.plan import ENGINE_LABELS, Plan, training_refusal
from core.start_refusal import RefusalKind
from core.verdict import Judgement, Mode, Verdict

__all__ = [
    "PIN_LABELS",
    "SYMPTOMS",
    "Advice",
    "AdviceKind",
    "Combination",
    "Curve",
    "Diagnosis",
    "DiagnosisReport",
    "DiagnosisRequest",
    "Failure",
    "Limits",
    "Outcome",
    "Pin",
    "Remedy",
    "RemedyKind",
    "Symptom",
    "diagnose",
    "failing_phase",
    "max_micro_batch",
    "max_sequence",
    "memory_curve",
    "remedies_for_symptom",
    "report",
]


@dataclass(frozen=True)
class Advice:
    kind: AdviceKind
    fitting: int = 0  # remedies that fit on their own
    offered: int = 0  # remedies listed
    combined_at_most: int = MAX_COMBINED  # changes the combination search puts together
    queued: int = 0  # serving: the plan's requests that wait (FITS_QUEUED)
    at_once: int = 0  # serving: the requests that run together


# Failures of a plan whose training step fits: what else would fail.
_AFTER_THE_STEP: Final = (Failure.EVALUATION, Failure.SERVING, Failure.SERVING_WEIGHTS, Failure.SERVING_START)
# Where a training plan's diagnosis may find serving failing: the training step and the evaluation fit.
_STEP_AND_EVAL_FIT: Final = (Failure.NONE, Failure.SERVING, Failure.SERVING_WEIGHTS, Failure.SERVING_START)
# Serving's own failures: where a training plan whose step and evaluation fit fails.
_SERVING_FAILURES: Final = (Failure.SERVING, Failure.SERVING_WEIGHTS, Failure.SERVING_START)
# How sure a failure is, by the verdict of what fails (an over-headroom run may start and fail later, on
# fragmentation; a borderline one lies within the estimate's uncertainty).
_FAILS: Final = {Verdict.OVER_HEADROOM: "Likely to fail", Verdict.BORDERLINE: "May fail"}
SERVING_START: Final = SYMPTOM_BY_FAILURE[Failure.SERVING_START].when  # where a plan fails whose engine refuses it
# The buckets that exist before any activation: a first-step failure is theirs.
_STATE_BUCKETS = frozenset({BucketKey.WEIGHTS, BucketKey.GRADIENTS, BucketKey.OPTIMIZER})


@dataclass(frozen=True)
class Outcome:
    """What fails, in one sentence the Diagnosis tab, the report and the command line share (h91diag: the tab said
    "the training step, evaluation and serving all fit" beside a serving verdict of "Would not start"). ``lead``,
    then ``head`` (the words the window sets in bold), then ``rest`` make :attr:`sentence`; ``seen`` is the error the
    user would see ("" where there is none), which :attr:`text` adds."""

    lead: str
    head: str
    rest: str
    seen: str = ""

    @property
    def sentence(self) -> str:
        return f"{self.lead}{self.head}{self.rest}"

    @property
    def text(self) -> str:
        return f"{self.sentence} {SEEN} “{self.seen}”" if self.seen else self.sentence


@dataclass(frozen=True)
class Diagnosis:
    mode: Mode
    estimate: Estimate
    judgement: Judgement  # the verdict in this mode, with its figures
    dominant: BucketKey
    failure: Failure
    symptom: Symptom | None
    state_bytes: float  # weights + gradients + optimizer state + overhead (the first step's floor)
    eval_bytes: float  # peak of an evaluation forward with the plan's eval batch
    remedies: tuple[Remedy, ...]  # for this mode, those that fit first, cheapest first
    combination: Combination | None  # the cheapest fitting set of changes, when cheaper than any one
    limits: Limits
    pins: frozenset[Pin] = frozenset()

    @property
    def step_state_bytes(self) -> float:
        """Of state_bytes: the optimizer-step phase less its activations (the chart's optimizer-step
        bar); the rest is the overhead that needs no activation (:func:`_fixed_overhead`)."""
        return _step_state_bytes(self.estimate)

    @property
    def load_bytes(self) -> float:
        """The stored weights with the overhead that needs no activation: what a load puts on the card."""
        return _load_bytes(self.estimate)

    @property
    def phase(self) -> str:
        """The phase a training plan that does not fit fails in (:func:`failing_phase`); "" otherwise."""
        if self.mode is Mode.INFERENCE or self.failure not in (Failure.FIRST_STEP, Failure.LONG_BATCHES):
            return ""
        return failing_phase(self.estimate, self.load_bytes, self.usable_bytes)

    @property
    def when(self) -> str:
        """Where the plan fails, as "fails ___" ends: for the training step, the phase
        :func:`failing_phase` decides, which is the phase the verdict's banner names as the peak's
        unless the weights alone do not load; a serving engine that refuses the plan at start-up, the training step
        and evaluation fitting (:attr:`serving_refused`), fails when it starts; otherwise the symptom table's words."""
        if self.serving_refused:
            return SERVING_START
        if self.symptom is None:
            return ""
        phase = self.phase
        if phase == LOAD:
            return (
                f"at load: the stored weights with the CUDA context and workspaces ({memory(self.load_bytes)}) "
                f"exceed the {memory(self.usable_bytes)} usable before the first step"
            )
        if self.failure is Failure.FIRST_STEP:
            return f"at the {phase}, the peak (weights, gradients and optimizer state)"
        if self.failure is Failure.LONG_BATCHES:
            return f"at the {phase}, the peak (activations), of the first batch this long"
        return self.symptom.when

    def state_sentence(self, unit: str = "GB") -> str:
        """What "state before activations" sums: the chart's last bar (the optimizer step; in lesson
        accounting the one training-step bar) without its activations, and the overhead that needs no
        activation. The chart's bar is allocated memory only, so the two differ by that overhead."""
        fixed = self.state_bytes - self.step_state_bytes
        text = f"{memory(self.step_state_bytes, unit)} ({self.estimate.phases[-1].name} bar, no activations)"
        if fixed:
            text = f"{memory(self.state_bytes, unit)} = {text} + {memory(fixed, unit)} CUDA context and workspaces"
        return text

    @property
    def largest(self) -> tuple[str, float]:
        """The largest part of what is judged in this mode: a training bucket, or for serving
        the weights, KV cache, activations or overhead."""
        if self.mode is Mode.INFERENCE:
            largest = max(self.estimate.inference.buckets, key=lambda b: b.bytes)
            return largest.label, largest.bytes
        return BUCKET_LABELS[self.dominant], self.estimate.bucket(self.dominant).bytes

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    @property
    def advice(self) -> Advice:
        """Which of the diagnosis' messages applies, with the counts it states."""
        fitting = sum(1 for r in self.remedies if r.fits)
        offered = len(self.remedies)
        if self.judgement.fits:
            if (self.failure in _AFTER_THE_STEP and self.symptom is not None) or self.serving_refused:
                return Advice(AdviceKind.STEP_FITS_BUT)
            inf = self.estimate.inference
            if self.mode is Mode.INFERENCE and inf.queued:
                return Advice(AdviceKind.FITS_QUEUED, queued=inf.queued, at_once=inf.max_concurrent)
            return Advice(AdviceKind.FITS_NARROWLY if self.judgement.fits_narrowly else AdviceKind.FITS)
        if not offered:
            kind = AdviceKind.NO_CHANGE_KNOWN
        elif self.combination is not None:
            kind = AdviceKind.TOGETHER_CHEAPEST if fitting else AdviceKind.ONLY_TOGETHER
        else:
            kind = AdviceKind.SOME_FIT if fitting else AdviceKind.NONE_FITS
        return Advice(kind, fitting, offered)

    @property
    def serving_refused(self) -> str:
        """A training plan whose step and evaluation fit and whose serving engine would not start it: why, in the
        engine's words (InferenceEstimate.would_not_start: a context past the model's limit, verdict WONT_START, or the
        engine's own memory check, vLLM's KV pool short of one request among them, verdict OOM); "" otherwise."""
        if self.mode is Mode.INFERENCE or self.failure not in _STEP_AND_EVAL_FIT:
            return ""
        return self.estimate.inference.would_not_start

    @property
    def serving_after_step(self) -> bool:
        """A training plan whose step and evaluation fit and whose serving does not fit or start: what the
        diagnosis says of it (:attr:`outcome`) is serving's verdict, not the step's."""
        return bool(self.serving_refused) or (self.mode is Mode.TRAINING and self.failure in _SERVING_FAILURES)

    @property
    def offers_symptom(self) -> bool:
        """The diagnosed failure is a row of the symptom picker the window's "Show remedies for this symptom"
        selects: a training step that fits beside an evaluation or serving that does not."""
        return self.advice.kind is AdviceKind.STEP_FITS_BUT and self.symptom is not None

    @property
    def outcome(self) -> Outcome:
        """Where the plan fails, or that nothing does, in one sentence: serving's own verdict beside a training step
        and evaluation that fit (never "serving fits" where serving would not start or does not fit), the engine's
        start-up refusal where it refuses, else the symptom table's row with how sure it is."""
        if self.mode is Mode.INFERENCE:
            first = self.estimate.inference.start_refusal  # refused at start-up: nothing runs to fail later
            if first is not None:  # the first check the engine runs, classified where it refused (h94start)
                if first.kind is RefusalKind.CONTEXT:
                    return Outcome("", "Fails at start-up", ": the engine refuses this context, whatever the memory.")
                return Outcome("", "Fails at start-up", ": the engine's own check of its memory refuses this plan.")
            if self.symptom is None:
                return Outcome("", "Nothing fails", ": serving fits.")
            return Outcome(f"{_FAILS.get(self.verdict, 'Fails')} ", self.when, ".", self.symptom.symptom)
        if _untrained(self.estimate.plan, self.mode):  # no training figure to fail: the explanation says why
            return Outcome("", "Not estimated", ": where this training step would fail is not said.")
        refused = self.serving_refused
        if refused:
            return Outcome("Fails ", SERVING_START, f": the training step and evaluation fit; {_ended(refused)}")
        if self.symptom is None:
            return Outcome("", "Nothing fails", ": the training step, evaluation and serving all fit.")
        if self.serving_after_step:
            serving = self.estimate.judgement(Mode.INFERENCE)
            return Outcome(
                f"{_FAILS.get(serving.verdict, 'Fails')} ",
                self.when,
                f": the training step and evaluation fit; serving's verdict is {serving.label}.",
                self.symptom.symptom,
            )
        return Outcome(f"{_FAILS.get(self.verdict, 'Fails')} ", self.when, ".", self.symptom.symptom)

    @property
    def serving_limits(self) -> tuple[ServingLimit, ServingLimit]:
        """How far serving goes, in words: the most requests of the plan's context and the longest context at its
        concurrency, an engine's refusal of the context said (:func:`core.advice.limits.serving_limits`)."""
        return serving_limits(self.estimate.plan, self.estimate.inference, self.limits)

    @property
    def margin_bytes(self) -> float:
        return self.judgement.margin_bytes

    @property
    def usable_bytes(self) -> float:
        return self.judgement.usable_bytes

    @property
    def total_bytes(self) -> float:
        return self.judgement.total_bytes

    def _fit_in_words(self) -> str:
        """How a fit fits (branch h56mode: "room to spare" was said with 0.21 GB to spare). Room to
        spare only when the estimate's whole range lies within the usable memory and the margin is
        at least the headroom kept free (a headroom above 0); otherwise the margin is said, and where
        the range reaches past the usable memory, how far it goes."""
        judged = self.judgement
        margin = judged.margin_bytes
        headroom = judged.capacity_bytes - judged.usable_bytes
        if judged.fits_narrowly:  # core.verdict's words for a narrow fit, one home
            narrow = judged.narrow_words()
            return narrow[:1].upper() + narrow[1:]
        if margin < headroom or headroom <= 0:  # no headroom kept: any margin is all there is
            return f"Fits, with only {memory(margin)} to spare beyond the {memory(headroom)} of headroom"
        return "Fits with room to spare"

    @property
    def explanation(self) -> str:
        """The cause in words; it names the largest bucket only where that bucket is the cause."""
        dom = BUCKET_LABELS[self.dominant].lower()
        inf = self.estimate.inference
        if self.mode is Mode.INFERENCE and inf.would_not_start:
            # the engine does not start: its own first check decides, its words a sentence (h92verd: vLLM's ended
            # "NaN"); a later check that would refuse too is listed after it (h94start)
            then = f" Once that check passes: {_ended(inf.refused_next)}" if inf.refused_next else ""
            return _ended(inf.would_not_start) + then
        if _untrained(self.estimate.plan, self.mode):
            return f"Training is not estimated: {training_refusal(self.estimate.plan)}."
        if self.failure in (Failure.NONE, Failure.SERVING_START):  # the engine's refusal: the outcome's own words
            return f"{self._fit_in_words()}; the largest part is {self.largest[0].lower()}."
        cause = SYMPTOM_BY_FAILURE[self.failure].cause
        if self.failure is Failure.FIRST_STEP:
            tail = f" The largest of them is {dom}." if self.dominant in _STATE_BUCKETS else ""
            return f"{cause}.{tail}"
        if self.failure is Failure.LONG_BATCHES:
            if self.dominant is BucketKey.ACTIVATIONS:
                return f"{cause}. Activations are also the largest bucket."
            return (
                f"{cause}. Weights, gradients and optimizer state fit on their own; "
                f"the activations on top of them do not, although the largest bucket is {dom}."
            )
        return f"{cause}."


# ---- building blocks --------------------------------------------------------------
def _ended(words: str) -> str:
    """An engine's words as the end of a sentence: a full stop unless they end with one."""
    return words if words.endswith(".") else f"{words}."


def _step_state_bytes(est: Estimate) -> float:
    """The optimizer-step phase less its activations: the chart's optimizer-step bar."""
    return sum(b.bytes for b in est.phases[-1].buckets if b.key is not BucketKey.ACTIVATIONS)


def _fixed_overhead(est: Estimate) -> float:
    """The overhead less the free blocks the activations leave (core.training.device): the CUDA
    context, the libraries' workspaces and the weights' segment rounding."""
    worst = est.worst
    return est.bucket(BucketKey.OVERHEAD).bytes - worst.fragmentation * worst.fragmentation_basis


def _state_bytes(est: Estimate) -> float:
    """What exists before any activation: the optimizer-step phase less its activations, with
    the overhead that needs no activation."""
    worst = est.worst  # summed in this order since the figure was first golden (tests/golden.py)
    return (
        _step_state_bytes(est) + est.bucket(BucketKey.OVERHEAD).bytes - worst.fragmentation * worst.fragmentation_basis
    )


def _load_bytes(est: Estimate) -> float:
    """What loading the model puts on the card: the stored weights (the optimizer step's, without the
    forward's 16-bit copies) with the overhead that needs no activation."""
    return est.phases[-1].bucket(BucketKey.WEIGHTS).bytes + _fixed_overhead(est)


LOAD: Final = "load"


def failing_phase(est: Estimate, load_bytes: float, usable_bytes: float) -> str:
    """The one rule for the phase a training step that does not fit fails in: :data:`LOAD` when
    the stored weights with the CUDA context exceed the usable memory, else the phase of the peak,
    the one the verdict's banner names (``est.peak_phase``): the estimate judges its peak, so the
    peak's phase is where it says the card runs out."""
    return LOAD if load_bytes > usable_bytes else est.peak_phase


def _serving_failure(est: Estimate) -> Failure:
    """SERVING_START where the engine refuses the plan at start-up, whatever its memory verdict (its KV pool short
    of one request, its free-memory check, a context past the model's limit: InferenceEstimate.would_not_start; it
    exits before any request, so no symptom of a running server applies), else NONE, SERVING (the requests' KV
    cache) or SERVING_WEIGHTS (the weights alone do not fit one GPU of the serving split: no number of users is the
    cause)."""
    if est.inference.would_not_start:
        return Failure.SERVING_START
    judged = est.judgement(Mode.INFERENCE)
    if judged.fits or (judged.verdict is Verdict.WONT_START and judged.margin_bytes >= 0):
        return Failure.NONE
    inf = est.inference
    if inf.weights_bytes + inf.overhead_bytes > est.usable_bytes:
        return Failure.SERVING_WEIGHTS
    return Failure.SERVING


def _failure(est: Estimate, eval_bytes: float, mode: Mode) -> Failure:
    usable = est.usable_bytes
    if mode is Mode.INFERENCE:
        return _serving_failure(est)
    if est.total_bytes > usable or est.judgement().verdict is Verdict.BORDERLINE:
        return Failure.FIRST_STEP if _state_bytes(est) > usable else Failure.LONG_BATCHES
    if eval_bytes > usable:
        return Failure.EVALUATION
    return _serving_failure(est)


def symptom_of(est: Estimate, failure: Failure) -> Symptom | None:
    """The symptom table's row for ``failure``, its likely cause this plan's own where the row lists several: a plan
    its engine refuses at start-up names the checks that refuse it (InferenceEstimate.start_cause_words; h93diag2:
    "its KV cache pool ..., the free memory ..., or the context ..." for every plan). The row as it stands otherwise
    (a symptom picked for a plan the engine starts)."""
    symptom = SYMPTOM_BY_FAILURE.get(failure)
    causes = est.inference.start_cause_words if failure is Failure.SERVING_START else ""
    if symptom is None or not causes:
        return symptom
    return replace(symptom, cause=start_cause(ENGINE_LABELS[est.inference.engine], causes))


def _dominant(est: Estimate) -> BucketKey:
    return max(est.buckets, key=lambda b: b.bytes).key


def diagnose(plan: Plan, mode: Mode = Mode.TRAINING, pins: frozenset[Pin] = frozenset()) -> Diagnosis:
    """Diagnose ``plan`` for a training step or for serving; remedies never change what is pinned."""
    est = estimate(plan)
    judged = est.judgement(mode)
    eval_bytes = est.evaluation_bytes
    failure = _failure(est, eval_bytes, mode)
    specs = SERVING_KINDS if mode is Mode.INFERENCE else TRAINING_KINDS
    # A hybrid recurrent model's training step is not estimated (core.plan.hybrid_refusal): nothing to remedy.
    remedies = remedies_for(plan, specs, est, pins) if not judged.fits and not _untrained(plan, mode) else ()
    combination = None
    if remedies:
        # Shown whenever it is cheaper than every single change that fits (or none fits).
        fitting_ranks = [r.cost_rank for r in remedies if r.fits]
        below = min(fitting_ranks) if fitting_ranks else 1 << 30
        combination = cheapest_combination(plan, remedies, specs, mode=mode, below_rank=below)
    return Diagnosis(
        mode=mode,
        estimate=est,
        judgement=judged,
        dominant=_dominant(est),
        failure=failure,
        symptom=symptom_of(est, failure),
        state_bytes=_state_bytes(est),
        eval_bytes=eval_bytes,
        remedies=remedies,
        combination=combination,
        limits=limits(plan, est),
        pins=pins,
    )


def remedies_for_symptom(
    plan: Plan,
    failure: Failure,
    remedies: tuple[Remedy, ...] | None = None,
    pins: frozenset[Pin] = frozenset(),
) -> tuple[Symptom, tuple[Remedy, ...]]:
    """Start from what the user saw: the likely cause and the remedies for that failure.

    ``remedies`` may pass the training remedies a :func:`diagnose` of the same plan found.
    """
    symptom = (
        symptom_of(estimate(plan), failure) if failure is Failure.SERVING_START else SYMPTOM_BY_FAILURE.get(failure)
    )
    if symptom is None:
        raise ValueError(f"no symptom for {failure!r}")
    if failure is Failure.SERVING_START:  # the serving changes after which the engine starts
        found = remedies_for(plan, SERVING_KINDS, pins=pins)
        return symptom, tuple(r for r in found if not r.estimate.inference.would_not_start)
    if failure in (Failure.SERVING, Failure.SERVING_WEIGHTS):
        found = remedies_for(plan, SERVING_KINDS, pins=pins)
        return symptom, tuple(r for r in found if failure in r.addresses)
    if _untrained(plan, Mode.TRAINING):
        return symptom, ()
    found = remedies if remedies is not None else remedies_for(plan, TRAINING_KINDS, pins=pins)
    return symptom, tuple(r for r in found if failure in r.addresses)


def _untrained(plan: Plan, mode: Mode) -> bool:
    """A training question about a model whose training is not estimated (core.plan.training_refusal)."""
    return mode is Mode.TRAINING and training_refusal(plan) is not None


@dataclass(frozen=True)
class DiagnosisReport:
    request: DiagnosisRequest
    diagnosis: Diagnosis
    curves: Mapping[str, Curve]  # training: "micro_batch" and "seq_len", crossing at the limits; serving: none
    symptom: Symptom | None
    symptom_remedies: tuple[Remedy, ...]


def report(request: DiagnosisRequest) -> DiagnosisReport:
    """The diagnosis, both memory curves and the picked symptom's remedies for one request.

    Pure and picklable both ways, so the app runs it in a worker process.
    """
    plan = request.plan
    diagnosis = diagnose(plan, request.mode, request.pins)
    # The curves are the training step's memory against its micro-batch and sequence: none for serving.
    curves = (
        {
            axis: memory_curve(
                plan, axis, crossing=diagnosis.limits.largest(axis), margin_crossing=diagnosis.limits.with_margin(axis)
            )
            for axis in AXES
        }
        if request.mode is Mode.TRAINING and not _untrained(plan, request.mode)
        else {}
    )
    symptom: Symptom | None = None
    found: tuple[Remedy, ...] = ()
    if request.symptom is not None and request.symptom is not Failure.NONE:
        known = diagnosis.remedies if request.mode is Mode.TRAINING and diagnosis.remedies else None
        symptom, found = remedies_for_symptom(plan, request.symptom, known, request.pins)
    return DiagnosisReport(request, diagnosis, curves, symptom, found)

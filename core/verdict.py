"""The verdict rule, one definition for training and serving: does a total fit a card?

:func:`judge` is the one rule, and :meth:`core.estimate.Estimate.judgement` the one place a
plan's verdict is decided with it: the worst rank's GPU figures and, for training, each node's
RAM (a plan whose offloaded state the host cannot hold does not run, however well the GPUs fit).

Four states. Within the usable memory (the card less the headroom the user keeps free) it
fits. Over the usable memory but under the card's capacity it eats into the headroom the
user asked for: the run may start and then fail on fragmentation or a longer batch, so it is
named for that and never reads as "fits, barely". Over the capacity it is out of memory.
A total that carries a range (the band published real-GPU figures of plans of its kind lay
in, :mod:`core.evidence`, down to what the card holds once the allocator gives its cache
back) is borderline when the capacity lies inside that range: the estimate cannot say which
side of the card's limit the run will fall on. Serving has a fifth, :attr:`Verdict.WONT_START`: the engine refuses the
plan's context at start-up whatever the memory (core.context_limit; InferenceEstimate.would_not_start says why).

One rule for "does it fit", everywhere (branch h60one). "Fits" is the verdict state. A fit whose
range reaches past the usable memory, into the headroom, *fits narrowly* (:attr:`Judgement.fits_narrowly`,
labelled :data:`NARROW_LABEL`, said by :meth:`Judgement.narrow_words`); a fit whose whole range lies
within the usable memory fits *with margin* (:attr:`Judgement.fits_with_margin`). Every search that
answers "which" or "how many" fits (the card finder's cheapest, the fewest GPUs, the more-GPUs and
bigger-card changes, the comparison's cheapest) ranks by :func:`fit_rank`: a fit with margin before a
narrow fit before no fit, so a narrow fit is never the answer where a fit with margin exists, and is
shown as the fallback, labelled, where none does. A narrow fit is never shown as a plain, green "Fits".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.format import memory
from core.memo import fills_fields


class Verdict(StrEnum):
    FITS = "fits"  # total within the usable memory (capacity less headroom)
    OVER_HEADROOM = "over-headroom"  # over the headroom asked for, under the card's capacity
    BORDERLINE = "borderline"  # the card's capacity lies within the estimate's uncertainty
    OOM = "oom"  # more than the card holds
    # The serving engine refuses the plan at start-up for a reason that is not memory: a context past the model's
    # limit without vLLM's / SGLang's variable (core.context_limit, h90start). A memory refusal (vLLM's KV pool
    # smaller than one request, its start-up free-memory check) is OOM, its reason in InferenceEstimate.refusal.
    WONT_START = "would-not-start"


VERDICT_LABELS: Final = {
    Verdict.FITS: "Fits",
    Verdict.OVER_HEADROOM: "Over headroom",
    Verdict.BORDERLINE: "Borderline",
    Verdict.OOM: "Out of memory",
    Verdict.WONT_START: "Would not start",
}
VERDICT_MEANINGS: Final = {
    Verdict.FITS: "fits within the usable memory, the headroom kept free",
    Verdict.OVER_HEADROOM: (
        "needs part of the headroom you asked to keep free, though it is under the card's capacity: "
        "it may start, then fail on fragmentation or a longer batch"
    ),
    Verdict.BORDERLINE: (
        "borderline: the card's capacity lies within the estimate's uncertainty; it may run or fail "
        "with an out-of-memory error"
    ),
    Verdict.OOM: "needs more than the card holds",
    Verdict.WONT_START: "the engine refuses to start this plan, whatever the memory: its own check says why",
}

# A fit whose range reaches past the usable memory (Judgement.fits_narrowly): the one word for it, in
# every view, the command line and the report.
NARROW_LABEL: Final = "Fits narrowly"
NARROW_MEANING: Final = (
    "fits within the usable memory, but the estimate's range reaches past it, into the headroom: "
    "no margin for the estimate's uncertainty"
)
# Where a search finds only narrow fits: its answer is one of them, said so.
NO_MARGIN_FALLBACK: Final = "none fits with margin"


# A plan the serving engine would not start (Verdict.WONT_START), by the memory's own verdict (Judgement.gpu_verdict):
# true in both senses (h92verd: the command line said "margin -20.0 GB; the card holds the total, but the engine would
# not start" where the card did not hold it). Serving's total has no range, so its memory verdict is never BORDERLINE;
# a training total with one would read so.
START_WORDS: Final = {
    Verdict.FITS: "the card holds the total, but the engine would not start",
    Verdict.OVER_HEADROOM: "the engine would not start, and the total is over the usable memory too",
    Verdict.BORDERLINE: "the engine would not start, and the card's capacity lies within the estimate's range too",
    Verdict.OOM: "the engine would not start, and the card does not hold the total either",
}

# From best to worst: the verdict of several judged parts is the worst of theirs.
SEVERITY: Final = {
    Verdict.FITS: 0,
    Verdict.OVER_HEADROOM: 1,
    Verdict.BORDERLINE: 2,
    Verdict.OOM: 3,
    Verdict.WONT_START: 4,
}


def worst_verdict(*verdicts: Verdict) -> Verdict:
    return max(verdicts, key=SEVERITY.__getitem__)


class Mode(StrEnum):
    """What is judged: one training step, or serving (weights + KV cache)."""

    TRAINING = "training"
    INFERENCE = "inference"


@fills_fields
@dataclass(frozen=True)
class Judgement:
    """A total held against a card: the verdict with the figures it was decided on.

    ``verdict`` is the plan's: the GPU's, or the host's when that is worse (``host_verdict``,
    each node's RAM against what the plan keeps there; None where nothing is judged on the host).
    """

    verdict: Verdict
    total_bytes: float
    capacity_bytes: float
    usable_bytes: float  # capacity less headroom
    host_verdict: Verdict | None = None
    # The range the total may lie in (None: a total without one, as serving's).
    low_bytes: float | None = None
    high_bytes: float | None = None

    @property
    def gpu_verdict(self) -> Verdict:
        """The verdict of the GPU figures alone."""
        return _rule(self.total_bytes, self.capacity_bytes, self.usable_bytes, self.low_bytes, self.high_bytes)

    @property
    def range_bytes(self) -> tuple[float, float]:
        """The range of the total (the total itself at both ends when it has none)."""
        low = self.total_bytes if self.low_bytes is None else self.low_bytes
        high = self.total_bytes if self.high_bytes is None else self.high_bytes
        return low, high

    @property
    def host_limits(self) -> bool:
        """The host, not the GPU, decides the verdict: the GPUs hold the plan, the nodes' RAM does not."""
        return self.host_verdict is not None and SEVERITY[self.host_verdict] > SEVERITY[self.gpu_verdict]

    @property
    def short_of(self) -> str:
        """Why the plan is out of memory though its total lies within the usable memory: the host's RAM
        (``host_limits``), or a pooled engine that serves no request; "" where the total decides. An engine that would
        not start (WONT_START) is said in both senses by :attr:`start_words`."""
        if self.verdict is not Verdict.OOM or self.margin_bytes < 0:
            return ""
        return "the host's RAM is short" if self.host_limits else "no request fits"

    @property
    def start_words(self) -> str:
        """A plan the serving engine would not start (:attr:`Verdict.WONT_START`) said in both senses, the memory's
        (:attr:`gpu_verdict`: does the card hold its total?) and the engine's; "" for any other verdict
        (:data:`START_WORDS`)."""
        return START_WORDS[self.gpu_verdict] if self.verdict is Verdict.WONT_START else ""

    @property
    def after_margin(self) -> str:
        """What the verdict says after its margin where the figures alone do not tell it ("" where they do): the
        nodes' RAM deciding, a pooled engine that serves no request, an engine that would not start
        (:attr:`start_words`). One home for the command line's verdict line (and its --json), the report's and the
        window's banner."""
        if self.host_limits:
            return f"the GPUs hold it ({VERDICT_LABELS[self.gpu_verdict].lower()}), a node's RAM does not"
        if self.start_words:
            return self.start_words
        return f"the card holds the total, but {self.short_of}" if self.short_of else ""

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS

    @property
    def fits_with_margin(self) -> bool:
        """It fits, and so does the top of the estimate's range: the margin is at least the uncertainty above
        the total. The Diagnosis says a fit short of it "fits with X to spare, but the estimate's range reaches
        Y, past the usable, into the headroom" (core.advice.diagnosis); an answer to "how many GPUs" is one
        that fits with margin (branch h59qtp: 32 RTX 3060s fitted QLoRA on Llama 3.1 8B by 0.05 GB, its range
        1.1 GB above the total)."""
        return self.fits and self.range_bytes[1] <= self.usable_bytes

    @property
    def fits_narrowly(self) -> bool:
        """It fits, but the top of the estimate's range passes the usable memory (NARROW_LABEL)."""
        return self.fits and not self.fits_with_margin

    @property
    def label(self) -> str:
        """The verdict's label, "Fits narrowly" for a narrow fit: the one label every view shows."""
        return verdict_label(self.verdict, self.fits_narrowly)

    @property
    def fit_rank(self) -> int:
        """0 for a fit with margin, 1 for a narrow fit, 2 for no fit: how every search ranks its answers."""
        return fit_rank(self)

    def narrow_words(self, unit: str = "GB") -> str:
        """Why a fit is narrow, in words (the Diagnosis', the banner's, the searches'); "" for any other."""
        if not self.fits_narrowly:
            return ""
        return (
            f"fits with {memory(self.margin_bytes, unit)} to spare, but the estimate's range reaches "
            f"{memory(self.range_bytes[1], unit)}, past the {memory(self.usable_bytes, unit)} usable, into the headroom"
        )

    @property
    def margin_bytes(self) -> float:
        """Usable memory less the total; negative when it does not fit."""
        return self.usable_bytes - self.total_bytes

    @property
    def capacity_margin_bytes(self) -> float:
        """The card's capacity less the total; positive while under the capacity."""
        return self.capacity_bytes - self.total_bytes


def verdict_label(verdict: Verdict, narrow: bool = False) -> str:
    """A verdict's label, NARROW_LABEL for a narrow fit (a view that keeps the verdict and the narrow flag apart,
    a remedy row, labels it with this)."""
    return NARROW_LABEL if narrow and verdict is Verdict.FITS else VERDICT_LABELS[verdict]


def cheapest_fit_words(name: str, narrow: bool) -> str:
    """A search's answer in words: "cheapest that fits: NAME", or, where the answer is a narrow fit
    (``narrow``: Judgement.fits_narrowly; none fits with margin), "cheapest that fits narrowly (none fits
    with margin): NAME"."""
    if narrow:
        return f"cheapest that {NARROW_LABEL.lower()} ({NO_MARGIN_FALLBACK}): {name}"
    return f"cheapest that fits: {name}"


def limit_parts(with_margin: int, at_all: int) -> tuple[int, str]:
    """A limit (the largest value that fits, core.advice.limits) as its answer and a note in this module's
    words: the largest that fits with margin, noting a larger one that fits narrowly ("13 fits narrowly");
    where none fits with margin, the largest that fits narrowly, noted "fits narrowly; none fits with
    margin"; (0, "") where nothing fits, and no note where the two are one."""
    if with_margin < 0 or at_all < with_margin:
        raise ValueError(f"a limit with margin ({with_margin}) lies between 0 and the limit at all ({at_all})")
    narrow = NARROW_LABEL.lower()
    if with_margin == at_all:
        return at_all, ""
    if with_margin == 0:
        return at_all, f"{narrow}; {NO_MARGIN_FALLBACK}"
    return with_margin, f"{at_all:,} {narrow}"


def limit_words(with_margin: int, at_all: int, unit: str = "") -> str:
    """A limit in words (:func:`limit_parts`), ``unit`` after its answer: "12", "12 (13 fits narrowly)",
    "2 (fits narrowly; none fits with margin)"; "" where nothing fits (the caller says what does not)."""
    answer, note = limit_parts(with_margin, at_all)
    if not answer:
        return ""
    return f"{answer:,}{unit} ({note})" if note else f"{answer:,}{unit}"


def fit_rank(judged: Judgement) -> int:
    """The one order of fits for every search: with margin (0), narrowly (1), not at all (2)."""
    if judged.fits_with_margin:
        return 0
    return 1 if judged.fits else 2


def _rule(
    total_bytes: float,
    capacity_bytes: float,
    usable_bytes: float,
    low_bytes: float | None = None,
    high_bytes: float | None = None,
) -> Verdict:
    low = total_bytes if low_bytes is None else min(low_bytes, total_bytes)
    high = total_bytes if high_bytes is None else max(high_bytes, total_bytes)
    if low > capacity_bytes:
        return Verdict.OOM
    if high > capacity_bytes:
        return Verdict.BORDERLINE
    if total_bytes <= usable_bytes:
        return Verdict.FITS
    return Verdict.OVER_HEADROOM


def judge(
    total_bytes: float,
    capacity_bytes: float,
    headroom: float,
    host: Verdict | None = None,
    low_bytes: float | None = None,
    high_bytes: float | None = None,
) -> Judgement:
    """The one verdict rule: ``headroom`` is the fraction of the card kept free; ``host`` the
    verdict of the nodes' RAM, which makes the plan's verdict worse when it is; ``low_bytes``
    and ``high_bytes`` the total's range (the capacity inside it: borderline)."""
    usable = capacity_bytes * (1.0 - headroom)
    verdict = _rule(total_bytes, capacity_bytes, usable, low_bytes, high_bytes)
    if host is not None:
        verdict = worst_verdict(verdict, host)
    return Judgement(verdict, total_bytes, capacity_bytes, usable, host, low_bytes, high_bytes)

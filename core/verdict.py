"""The verdict rule, one definition for training and serving: does a total fit a card?

Three states. Within the usable memory (the card less the headroom the user keeps free) it
fits. Over the usable memory but under the card's capacity it eats into the headroom the
user asked for: the run may start and then fail on fragmentation or a longer batch, so it is
named for that and never reads as "fits, barely". Over the capacity it is out of memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Verdict(StrEnum):
    FITS = "fits"  # total within the usable memory (capacity less headroom)
    OVER_HEADROOM = "over-headroom"  # over the headroom asked for, under the card's capacity
    OOM = "oom"  # more than the card holds


VERDICT_LABELS: Final = {
    Verdict.FITS: "Fits",
    Verdict.OVER_HEADROOM: "Over headroom",
    Verdict.OOM: "Out of memory",
}
VERDICT_MEANINGS: Final = {
    Verdict.FITS: "fits within the usable memory, the headroom kept free",
    Verdict.OVER_HEADROOM: (
        "needs part of the headroom you asked to keep free, though it is under the card's capacity: "
        "it may start, then fail on fragmentation or a longer batch"
    ),
    Verdict.OOM: "needs more than the card holds",
}


class Mode(StrEnum):
    """What is judged: one training step, or serving (weights + KV cache)."""

    TRAINING = "training"
    INFERENCE = "inference"


@dataclass(frozen=True)
class Judgement:
    """A total held against a card: the verdict with the figures it was decided on."""

    verdict: Verdict
    total_bytes: float
    capacity_bytes: float
    usable_bytes: float  # capacity less headroom

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS

    @property
    def margin_bytes(self) -> float:
        """Usable memory less the total; negative when it does not fit."""
        return self.usable_bytes - self.total_bytes

    @property
    def capacity_margin_bytes(self) -> float:
        """The card's capacity less the total; positive while under the capacity."""
        return self.capacity_bytes - self.total_bytes


def judge(total_bytes: float, capacity_bytes: float, headroom: float) -> Judgement:
    """The one verdict rule: ``headroom`` is the fraction of the card kept free."""
    usable = capacity_bytes * (1.0 - headroom)
    if total_bytes <= usable:
        verdict = Verdict.FITS
    elif total_bytes <= capacity_bytes:
        verdict = Verdict.OVER_HEADROOM
    else:
        verdict = Verdict.OOM
    return Judgement(verdict, total_bytes, capacity_bytes, usable)

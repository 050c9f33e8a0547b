"""Where a run that does not fit fails first, and what the user would see: the lesson's
"reading an out-of-memory error" table, in our words."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Failure(StrEnum):
    """Where a run that does not fit fails first: the rows of the symptom table."""

    NONE = "none"
    FIRST_STEP = "first-step"  # weights + gradients + optimizer state
    LONG_BATCHES = "long-batches"  # activations
    EVALUATION = "evaluation"  # a large eval batch, logits of long sequences
    SERVING = "serving"  # KV cache


@dataclass(frozen=True)
class Symptom:
    failure: Failure
    symptom: str
    cause: str
    remedies: str


SYMPTOMS: Final = (
    Symptom(
        Failure.FIRST_STEP,
        "Out of memory at the first step, right after the model loads",
        "Weights, gradients and optimizer state together exceed the card",
        "LoRA, a smaller model, a quantised base, an 8-bit optimizer, sharding",
    ),
    Symptom(
        Failure.LONG_BATCHES,
        "Out of memory after some steps, or only on long batches",
        "Activations: the micro-batch or the sequence length is too large",
        "Smaller micro-batch with accumulation, checkpointing, shorter sequences, fused attention",
    ),
    Symptom(
        Failure.EVALUATION,
        "Out of memory only during evaluation",
        "A large evaluation batch, or the logits of long sequences",
        "A smaller evaluation batch; compute the loss in chunks",
    ),
    Symptom(
        Failure.SERVING,
        "Out of memory when serving many users",
        "The KV cache of many long concurrent requests",
        "Shorter contexts, fewer concurrent requests, a quantised KV cache",
    ),
)
SYMPTOM_BY_FAILURE: Final = {s.failure: s for s in SYMPTOMS}

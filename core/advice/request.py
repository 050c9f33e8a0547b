"""What the Diagnosis tab asks of a diagnosis and how its advice is worded: the window's
side of :mod:`core.advice.diagnosis`, light enough to load at start-up.

The diagnosis itself (its remedies, limits and curves, dozens of estimates) is loaded when
the first one is run — in the app, in its worker process (:func:`run_report`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from core.advice.symptoms import SYMPTOMS, Failure
from core.inputs import Engine
from core.plan import Plan
from core.verdict import Mode

if TYPE_CHECKING:
    from core.advice.diagnosis import DiagnosisReport

__all__ = ["PIN_LABELS", "AdviceKind", "DiagnosisRequest", "Pin", "pin_label", "pins_for", "run_report", "symptoms_for"]


class Pin(StrEnum):
    """What the user says must not change; remedies that change it are left out."""

    MODEL = "model"
    SEQUENCE = "sequence"  # training sequence length and serving context
    GPU = "gpu"  # the card
    GPU_COUNT = "gpu-count"
    LAYOUT = "layout"  # the data-parallel strategy and degree, the tensor / pipeline degrees
    NO_OFFLOAD = "no-offload"  # nothing moves to host memory


PIN_LABELS: Final = {
    Pin.MODEL: "Keep the model",
    Pin.SEQUENCE: "Keep the sequence length",
    Pin.GPU: "Keep the card",
    Pin.GPU_COUNT: "Keep the GPU count",
    Pin.LAYOUT: "Keep the parallel layout",
    Pin.NO_OFFLOAD: "No CPU offload",
}


# Serving's words for a pin where training's would mislead: the serving context, not a sequence.
SERVING_PIN_LABELS: Final = {Pin.SEQUENCE: "Keep the context length"}


def pins_for(mode: Mode, engine: Engine | str = Engine.HF) -> tuple[Pin, ...]:
    """The pins that mean something for ``mode`` (and, serving, the ``engine``): those some
    remedy of the mode would change (its RemedySpec.changes). A pin none of them changes
    constrains nothing there, and one shown anyway reads as a promise the advice does not keep.

    Training: every pin (core.advice.remedies.TRAINING_KINDS). Serving
    (core.advice.serving_remedies.SERVING_KINDS): the context (a shorter context) and the GPU
    count (tensor parallel over more GPUs; llama.cpp: the layers split over more GPUs); CPU
    offload only on llama.cpp, the one engine whose remedies put layers on the CPU. No serving
    remedy changes the model, the card or the data-parallel layout.
    tests/core/test_pins.py checks this against the remedies themselves."""
    if mode is Mode.TRAINING:
        return tuple(Pin)
    serving = [Pin.SEQUENCE, Pin.GPU_COUNT]
    if engine == Engine.LLAMACPP:
        serving.append(Pin.NO_OFFLOAD)
    return tuple(pin for pin in Pin if pin in serving)


def pin_label(pin: Pin, mode: Mode) -> str:
    """The pin's words in ``mode``: "Keep the context length" when serving."""
    if mode is Mode.INFERENCE:
        return SERVING_PIN_LABELS.get(pin, PIN_LABELS[pin])
    return PIN_LABELS[pin]


def symptoms_for(mode: Mode) -> tuple[Failure, ...]:
    """The symptoms the Diagnosis tab offers in ``mode``: serving fails loading the model, serving many users, or
    is refused at start-up (core.advice.diagnosis._serving_failure); a training plan can fail at any of them,
    serving last (the step fits, serving does not)."""
    if mode is Mode.INFERENCE:
        return (Failure.SERVING, Failure.SERVING_WEIGHTS, Failure.SERVING_START)
    return tuple(symptom.failure for symptom in SYMPTOMS)


class AdviceKind(StrEnum):
    """What the diagnosis advises, as the Diagnosis tab, reports and the command line word it."""

    FITS = "fits"  # nothing needs to change
    # It fits, the estimate's range reaching into the headroom (core.verdict's narrow fit): never worded as a plain fit.
    FITS_NARROWLY = "fits-narrowly"
    FITS_QUEUED = "fits-queued"  # serving fits, but some of the plan's requests wait in the queue
    STEP_FITS_BUT = "step-fits-but"  # the training step fits; the evaluation or serving does not
    NO_CHANGE_KNOWN = "no-change-known"  # no change the planner knows lowers the memory
    ONLY_TOGETHER = "only-together"  # no single change fits; the combination does
    TOGETHER_CHEAPEST = "together-cheapest"  # the combination fits for less than any single change
    SOME_FIT = "some-fit"  # some single changes fit
    NONE_FITS = "none-fits"  # nothing fits, alone or combined


@dataclass(frozen=True)
class DiagnosisRequest:
    """Everything a diagnosis for the Diagnosis tab depends on."""

    plan: Plan
    mode: Mode = Mode.TRAINING
    pins: frozenset[Pin] = frozenset()
    symptom: Failure | None = None  # a symptom the user picked: its remedies are found too


def run_report(request: DiagnosisRequest) -> DiagnosisReport:
    """:func:`core.advice.diagnosis.report`, its modules loaded at the first call (picklable by
    reference, so the worker process runs it)."""
    from core.advice.diagnosis import report

    return report(request)

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
    SERVING_WEIGHTS = "serving-weights"  # the served weights alone, on one GPU of the split
    # The serving engine refuses the plan at start-up, in its own words (InferenceEstimate.would_not_start): its KV
    # pool short of one request, its free-memory check, or a context past the model's limit (h92verd: said "Out of
    # memory when serving many users" where vLLM exits before serving any).
    SERVING_START = "serving-start"


@dataclass(frozen=True)
class Symptom:
    failure: Failure
    symptom: str
    cause: str
    remedies: str
    when: str  # where it fails, as "fails ___" ends: "at load / the first optimizer step"


SYMPTOMS: Final = (
    Symptom(
        Failure.FIRST_STEP,
        "Out of memory at the first step, right after the model loads",
        "Weights, gradients and optimizer state together exceed the card",
        "LoRA, a smaller model, a quantised base, an 8-bit optimizer, sharding",
        "at load / the first optimizer step",
    ),
    Symptom(
        Failure.LONG_BATCHES,
        "Out of memory in the forward or backward pass of the first batch this long "
        "(at once with packed or fixed-length data; only on the longest batches otherwise)",
        "Activations: the micro-batch or the sequence length is too large",
        "Smaller micro-batch with accumulation, checkpointing, shorter sequences, fused attention",
        "in the forward or backward pass (activations)",
    ),
    Symptom(
        Failure.EVALUATION,
        "Out of memory only during evaluation",
        "A large evaluation batch, or the logits of long sequences",
        "A smaller evaluation batch; compute the loss in chunks",
        "during evaluation",
    ),
    Symptom(
        Failure.SERVING,
        "Out of memory when serving many users",
        "The KV cache of many long concurrent requests",
        "Shorter contexts, fewer concurrent requests, a quantised KV cache",
        "when serving many users",
    ),
    Symptom(
        Failure.SERVING_WEIGHTS,
        "Out of memory while the serving engine loads the model",
        "The weights alone exceed one GPU at this split of the model over GPUs",
        "More GPUs (tensor parallel; llama.cpp: the layers split over them, or fewer layers on the GPU), "
        "a quantised format (AWQ, GPTQ, FP8; a smaller GGUF type), a smaller model",
        "when loading the model to serve it",
    ),
    Symptom(
        Failure.SERVING_START,
        "Refused at start-up: the serving engine exits with its own error before it serves a request",
        "The serving engine's own start-up check refuses the plan: its KV cache pool holds less than one request of "
        "the context, the free memory is less than it asks for, or the context passes the model's limit",
        "What starts it, as the engine's error names it: a shorter context (--max-model-len), a higher "
        "--gpu-memory-utilization (or a lower one where its free-memory check fails), an fp8 KV cache, tensor "
        "parallel over more GPUs; past the model's limit, VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 or "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
        "when the serving engine starts",
    ),
)
SYMPTOM_BY_FAILURE: Final = {s.failure: s for s in SYMPTOMS}


def start_cause(engine: str, causes: str) -> str:
    """The "Refused at start-up" row's likely cause for a plan its engine refuses: the checks that refuse it
    (InferenceEstimate.start_cause_words), not the row's three possible ones (h93diag2)."""
    return f"{engine}'s own start-up check refuses this plan: {causes}"


# Before a symptom's error where the diagnosis says what fails (core.advice.diagnosis.Outcome.text, the Diagnosis tab).
SEEN: Final = "What you would see:"

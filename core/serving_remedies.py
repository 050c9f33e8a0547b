"""Serving remedies: changes that bring weights + KV cache + working memory under the card.

One home for them, judged on the serving total (:func:`core.verdict.judge` through
``Estimate.judgement(Mode.INFERENCE)``); :func:`core.diagnosis.diagnose` lists them first in
inference mode and for the "serving many users" symptom. New serving changes (more
tensor-parallel GPUs, a smaller ``max_num_batched_tokens``...) are added to
:data:`SERVING_KINDS` with a :class:`core.remedies.RemedyKind`.
"""

from __future__ import annotations

from typing import Final

from core.estimate import estimate
from core.plan import Plan
from core.remedies import Pin, RemedyKind, RemedySpec
from core.symptoms import Failure
from core.verdict import Mode

SERVING: Final = frozenset({Failure.SERVING})
_WIDE_KV: Final = ("bf16", "fp16", "fp32")


def _kv_fp8(plan: Plan) -> tuple[Plan, str] | None:
    if plan.inference.kv_dtype not in _WIDE_KV:
        return None
    return plan.with_inference(kv_dtype="fp8"), "8-bit KV cache"


def _fewer_requests(plan: Plan) -> tuple[Plan, str] | None:
    most = estimate(plan).inference.max_concurrent
    if not 1 <= most < plan.inference.concurrent:
        return None
    return plan.with_inference(concurrent=most), f"{most:,} concurrent requests"


def _shorter_context(plan: Plan) -> tuple[Plan, str] | None:
    longest = estimate(plan).inference.max_context
    if not 1 <= longest < plan.inference.context:
        return None
    return plan.with_inference(context=longest), f"Context of {longest:,} tokens"


def _weights_nf4(plan: Plan) -> tuple[Plan, str] | None:
    if plan.inference.weight_dtype not in _WIDE_KV:
        return None
    return plan.with_inference(weight_dtype="nf4"), "4-bit weights"


K = RemedyKind
SERVED = Mode.INFERENCE
SERVING_KINDS: Final = (
    RemedySpec(K.KV_FP8, _kv_fp8, 1, SERVING, "small quality cost", judged_on=SERVED),
    RemedySpec(K.FEWER_REQUESTS, _fewer_requests, 2, SERVING, "lower throughput", combinable=False, judged_on=SERVED),
    RemedySpec(K.WEIGHTS_NF4, _weights_nf4, 2, SERVING, "some quality and speed cost", judged_on=SERVED),
    RemedySpec(
        K.SHORTER_CONTEXT,
        _shorter_context,
        3,
        SERVING,
        "shorter prompts and answers",
        combinable=False,
        changes=frozenset({Pin.SEQUENCE}),
        judged_on=SERVED,
    ),
)

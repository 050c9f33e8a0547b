"""Serving remedies: changes that bring weights + KV cache + working memory under the card.

One home for them, judged on the serving total (:func:`core.verdict.judge` through
``Estimate.judgement(Mode.INFERENCE)``); :func:`core.advice.diagnosis.diagnose` lists them first in
inference mode and for the "serving many users" symptom. New serving changes (more
tensor-parallel GPUs, a smaller ``max_num_batched_tokens``) are in :data:`SERVING_KINDS`
with a :class:`core.advice.remedies.RemedyKind` each.
"""

from __future__ import annotations

from typing import Final

from core.advice.remedies import RemedyKind, RemedySpec
from core.advice.request import Pin
from core.advice.symptoms import Failure
from core.estimate import estimate
from core.plan import Plan
from core.verdict import Mode

SERVING: Final = frozenset({Failure.SERVING})
# What also helps when the weights alone do not fit one GPU: smaller or more widely split weights.
WEIGHTS: Final = frozenset({Failure.SERVING, Failure.SERVING_WEIGHTS})
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


# Tensor parallel within one NVLink node: past 8 GPUs it crosses nodes.
MAX_TENSOR_PARALLEL: Final = 8
# vLLM's scheduler defaults for cards under 70 GiB (EngineArgs.get_batch_defaults): its
# profiling forward covers 2,048 tokens and its sampler run 256 rows instead of 8,192 and 1,024.
SMALL_BATCHED_TOKENS: Final = 2048
SMALL_NUM_SEQS: Final = 256


def _more_tensor_parallel(plan: Plan) -> tuple[Plan, str] | None:
    tp = plan.inference.tensor_parallel * 2
    if tp > MAX_TENSOR_PARALLEL:
        return None
    return plan.with_inference(tensor_parallel=tp), f"Tensor parallel over {tp} GPUs"


def _smaller_batched_tokens(plan: Plan) -> tuple[Plan, str] | None:
    """vLLM profiles a forward of max_num_batched_tokens and a sampler run of max_num_seqs
    rows: smaller limits leave more of the card to the pool."""
    inf = plan.inference
    served = estimate(plan).inference
    if inf.engine != "vllm" or (
        served.max_num_batched_tokens <= SMALL_BATCHED_TOKENS and served.max_num_seqs <= SMALL_NUM_SEQS
    ):
        return None
    tokens = min(served.max_num_batched_tokens, SMALL_BATCHED_TOKENS)
    seqs = min(served.max_num_seqs, SMALL_NUM_SEQS)
    new = plan.with_inference(max_num_batched_tokens=tokens, max_num_seqs=seqs)
    return new, f"max_num_batched_tokens {tokens:,}, max_num_seqs {seqs:,}"


K = RemedyKind
SERVED = Mode.INFERENCE
SERVING_KINDS: Final = (
    RemedySpec(K.KV_FP8, _kv_fp8, 1, SERVING, "small quality cost", judged_on=SERVED),
    RemedySpec(K.FEWER_REQUESTS, _fewer_requests, 2, SERVING, "lower throughput", combinable=False, judged_on=SERVED),
    RemedySpec(K.WEIGHTS_NF4, _weights_nf4, 2, WEIGHTS, "some quality and speed cost", judged_on=SERVED),
    RemedySpec(
        K.SMALLER_BATCHED_TOKENS,
        _smaller_batched_tokens,
        1,
        SERVING,
        "slower prefill of long prompts",
        judged_on=SERVED,
    ),
    RemedySpec(
        K.MORE_TENSOR_PARALLEL,
        _more_tensor_parallel,
        3,
        WEIGHTS,
        "twice the GPUs per copy",
        changes=frozenset({Pin.GPU_COUNT}),
        judged_on=SERVED,
    ),
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

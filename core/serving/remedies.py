"""Serving remedies: changed plans that make a serving plan fit, cheapest first.

Each remedy is an estimated modified plan; the diagnosis (``core.diagnosis``) lists them
for a serving plan. Kinds are an enum so views and tests never match display strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from core.estimate import Estimate, estimate
from core.plan import Plan
from core.serving.formats import Engine, KvDtype, WeightFormat

MAX_TENSOR_PARALLEL = 8  # GPUs in one NVLink node: past it tensor parallel crosses nodes


class ServingRemedyKind(StrEnum):
    KV_FP8 = "kv-fp8"
    FEWER_REQUESTS = "fewer-requests"
    SHORTER_CONTEXT = "shorter-context"
    MORE_TENSOR_PARALLEL = "more-tensor-parallel"
    QUANTISED_WEIGHTS = "quantised-weights"
    SMALLER_BATCHED_TOKENS = "smaller-batched-tokens"


# What each remedy costs, in words, and its rank (lower is cheaper to accept).
COSTS: dict[ServingRemedyKind, tuple[int, str]] = {
    ServingRemedyKind.KV_FP8: (1, "small quality cost"),
    ServingRemedyKind.SMALLER_BATCHED_TOKENS: (1, "slower prefill of long prompts"),
    ServingRemedyKind.FEWER_REQUESTS: (2, "lower throughput"),
    ServingRemedyKind.QUANTISED_WEIGHTS: (2, "some quality cost"),
    ServingRemedyKind.MORE_TENSOR_PARALLEL: (3, "more GPUs"),
    ServingRemedyKind.SHORTER_CONTEXT: (3, "shorter prompts and answers"),
}


@dataclass(frozen=True)
class ServingRemedy:
    kind: ServingRemedyKind
    title: str
    plan: Plan
    estimate: Estimate
    cost_rank: int
    cost: str

    @property
    def fits(self) -> bool:
        return self.estimate.inference.fits


def serving_remedies(plan: Plan) -> tuple[ServingRemedy, ...]:
    """Changed plans for serving, those that fit first, then the cheapest."""
    base = estimate(plan).inference
    inf = plan.inference
    options: list[tuple[ServingRemedyKind, str, Plan]] = []
    if inf.kv_dtype in (KvDtype.BF16, KvDtype.FP16, KvDtype.FP32):
        options.append((ServingRemedyKind.KV_FP8, "8-bit (fp8) KV cache", plan.with_inference(kv_dtype=KvDtype.FP8)))
    if 1 <= base.max_concurrent < inf.concurrent:
        n = base.max_concurrent
        options.append(
            (ServingRemedyKind.FEWER_REQUESTS, f"{n:,} concurrent requests", plan.with_inference(concurrent=n))
        )
    if 1 <= base.max_context < inf.context:
        n = base.max_context
        options.append((ServingRemedyKind.SHORTER_CONTEXT, f"Context of {n:,} tokens", plan.with_inference(context=n)))
    tp = inf.tensor_parallel * 2
    if tp <= MAX_TENSOR_PARALLEL:
        options.append(
            (
                ServingRemedyKind.MORE_TENSOR_PARALLEL,
                f"Tensor parallel over {tp} GPUs",
                plan.with_inference(tensor_parallel=tp),
            )
        )
    if inf.weight_dtype in (WeightFormat.BF16, WeightFormat.FP16, WeightFormat.FP32):
        fmt = WeightFormat.AWQ_INT4 if inf.engine is Engine.VLLM else WeightFormat.NF4
        options.append(
            (ServingRemedyKind.QUANTISED_WEIGHTS, f"{fmt.value} weights", plan.with_inference(weight_dtype=fmt))
        )
    if inf.engine is Engine.VLLM and base.max_num_batched_tokens > 2048:
        options.append(
            (
                ServingRemedyKind.SMALLER_BATCHED_TOKENS,
                "max_num_batched_tokens 2048",
                plan.with_inference(max_num_batched_tokens=2048),
            )
        )
    out = []
    for kind, title, new_plan in options:
        rank, cost = COSTS[kind]
        out.append(ServingRemedy(kind, title, new_plan, estimate(new_plan), rank, cost))
    return tuple(sorted(out, key=lambda r: (not r.fits, r.cost_rank)))

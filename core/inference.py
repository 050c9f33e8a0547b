"""Serving memory: weights + KV cache + working activations, and what fits a card."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.breakdown import gb, sci
from core.catalogue import GpuSpec
from core.model import ModelSpec
from core.params import ParamCounts
from core.plan import Plan
from core.solve import largest_fitting
from core.units import DTYPE_BYTES, MiB
from core.verdict import Verdict, judge

# Serving process outside the weights and the cache: CUDA context and runtime buffers,
# assumed like training's context (see core.detailed.CUDA_CONTEXT_BYTES).
SERVING_OVERHEAD_BYTES: Final = 512 * MiB
# Quantised weights keep embeddings, head and norms in 16 bits; block scales add a little.
WEIGHT_BYTES: Final = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "int8": 1.0 + 4 / 4096,
    "nf4": 0.5 + 1 / 64 + 4 / (64 * 256),
}


@dataclass(frozen=True)
class InferenceEstimate:
    weights_bytes: float
    kv_bytes_per_token: float  # across all layers, one sequence
    kv_cache_bytes: float
    activation_bytes: float
    overhead_bytes: float
    total_bytes: float
    fits: bool
    verdict: Verdict  # core.verdict.judge: the same rule as training
    margin_bytes: float  # usable memory less the total; negative when it does not fit
    max_concurrent: int  # most requests of the plan's context that fit (0: none)
    max_context: int  # longest context for the plan's concurrency that fits (0: none)
    formula: str


def kv_cache_bytes(model: ModelSpec, tokens: int, batch: int, bytes_per_element: float) -> float:
    """2 · layers · KV heads · head width · tokens · batch · bytes, windows respected.

    Layers that attend within a sliding window keep at most ``window`` positions.
    """
    per_layer_token = 2 * model.kv_width * bytes_per_element
    window_layers = model.sliding_window_layers if model.sliding_window else 0
    full_layers = model.num_layers - window_layers
    windowed = min(tokens, model.sliding_window) if model.sliding_window else tokens
    return per_layer_token * batch * (full_layers * tokens + window_layers * windowed)


def lesson_kv_cache_bytes(layers: int, width: int, tokens: int, batch: int = 1, bytes_per_element: float = 2) -> float:
    """The lesson's form, 2·L·d·n·B·b, for models where every head has its own KV."""
    return 2 * layers * width * tokens * batch * bytes_per_element


def serving_weights(plan: Plan, counts: ParamCounts) -> float:
    dtype = plan.inference.weight_dtype
    per = WEIGHT_BYTES[dtype]
    if dtype in ("int8", "nf4"):
        quantised = plan.model.stored_matmul_params()
        return quantised * per + (counts.total - quantised) * 2
    return counts.total * per


def working_activations(model: ModelSpec, batch: int, context: int) -> float:
    """Prefill of a whole prompt in 16 bits: a block's widest tensors, plus last-token logits."""
    block = batch * context * (2 * model.hidden_size + 2 * model.intermediate_size) * 2
    logits = batch * model.vocab_size * 4
    return block + logits


def _total(plan: Plan, weights: float, batch: int, context: int) -> float:
    kv_b = DTYPE_BYTES[plan.inference.kv_dtype]
    return (
        weights
        + kv_cache_bytes(plan.model, context, batch, kv_b)
        + working_activations(plan.model, batch, context)
        + SERVING_OVERHEAD_BYTES
    )


def _per_request(model: ModelSpec, context: int, kv_b: float) -> float:
    return kv_cache_bytes(model, context, 1, kv_b) + working_activations(model, 1, context)


def _max_context_guess(model: ModelSpec, batch: int, kv_b: float, budget: float) -> float:
    """Solve budget = B·(KV(n) + activations(n)) for n; KV is piecewise linear in n."""
    fixed = batch * model.vocab_size * 4
    per_token_act = batch * (2 * model.hidden_size + 2 * model.intermediate_size) * 2
    per_layer = 2 * model.kv_width * kv_b * batch
    window = model.sliding_window or 0
    windowed = model.sliding_window_layers if window else 0
    full = model.num_layers - windowed
    slope_below = per_layer * model.num_layers + per_token_act
    room = budget - fixed
    if room <= 0:
        return 0
    if not window or room <= slope_below * window:
        return room / slope_below
    slope_above = per_layer * full + per_token_act
    if slope_above <= 0:
        return float(MAX_CONTEXT)
    return window + (room - slope_below * window) / slope_above


MAX_CONCURRENT: Final = 10_000_000
MAX_CONTEXT: Final = 100_000_000


def inference_estimate(plan: Plan, counts: ParamCounts, gpu: GpuSpec) -> InferenceEstimate:
    inf = plan.inference
    model = plan.model
    kv_b = DTYPE_BYTES[inf.kv_dtype]
    weights = serving_weights(plan, counts)
    per_token = model.kv_bytes_per_token(kv_b)
    kv = kv_cache_bytes(model, inf.context, inf.concurrent, kv_b)
    acts = working_activations(model, inf.concurrent, inf.context)
    total = weights + kv + acts + SERVING_OVERHEAD_BYTES
    judged = judge(total, gpu.memory_bytes, plan.hardware.headroom)
    usable = judged.usable_bytes
    budget = usable - weights - SERVING_OVERHEAD_BYTES
    # The closed-form guesses are exact up to rounding: the solver confirms them in two tests.
    max_concurrent = largest_fitting(
        lambda b: _total(plan, weights, b, inf.context) <= usable,
        MAX_CONCURRENT,
        guess=budget / _per_request(model, inf.context, kv_b),
    )
    max_context = largest_fitting(
        lambda n: _total(plan, weights, inf.concurrent, n) <= usable,
        MAX_CONTEXT,
        guess=_max_context_guess(model, inf.concurrent, kv_b, budget),
    )
    formula = (
        f"KV cache = 2 · L · KV heads · head width · n · B · b = 2 × {model.num_layers} × {model.num_kv_heads} × "
        f"{model.head_dim} × {inf.context:,} × {inf.concurrent} × {kv_b:g} = {sci(kv)} B ({gb(kv)} GB); "
        f"{per_token:,.0f} bytes per token"
    )
    return InferenceEstimate(
        weights_bytes=weights,
        kv_bytes_per_token=per_token,
        kv_cache_bytes=kv,
        activation_bytes=acts,
        overhead_bytes=SERVING_OVERHEAD_BYTES,
        total_bytes=total,
        fits=judged.fits,
        verdict=judged.verdict,
        margin_bytes=judged.margin_bytes,
        max_concurrent=max_concurrent,
        max_context=max_context,
        formula=formula,
    )

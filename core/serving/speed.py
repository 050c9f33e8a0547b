"""Serving speed: time to first token and decode throughput from a roofline.

Assumptions (stated in the window and the README):
* Prefill is compute-bound: its FLOPs (2 · active parameters per token plus causal
  attention, 2 · L · S² · query width) run at the card's dense peak × the plan's
  utilisation, split across tensor-parallel ranks.
* A decode step reads every weight on the rank once plus each running request's KV cache,
  at the card's memory bandwidth × ``BANDWIDTH_EFFICIENCY``; it also needs
  2 · active parameters FLOPs per request. The step takes the longer of the two.
* Pipeline stages run one after another for one step (no micro-batch overlap);
  replicas multiply the total.
* Requests are at the middle of their answer on average: prompt + new tokens / 2 cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from core.catalogue import GpuSpec
from core.dtypes import matmul_dtype
from core.params import ParamCounts
from core.plan import Plan
from core.serving.engines import RankLayout

# Share of the datasheet memory bandwidth a decode step achieves. A vLLM sweep of
# Llama-3.1-8B on one A100 40GB measured 75 tokens/s at one request, "roughly 77 % of the
# GPU's memory-bandwidth ceiling" (John Musgrave, "vLLM throughput-latency sweep on
# NVIDIA A100", johnmusgrave.com/p/vllm-throughput-latency-sweep-on, vLLM 0.23.0).
BANDWIDTH_EFFICIENCY: Final = 0.77


class SpeedPoint(NamedTuple):  # a tuple: a curve of them is built on every estimate
    concurrent: int
    step_s: float  # time per output token
    per_request_tokens_per_s: float
    total_tokens_per_s: float  # all replicas
    memory_bound: bool


@dataclass(frozen=True)
class ServingSpeed:
    ttft_s: float  # first token of a request (hf: of the whole static batch)
    prefill_flops: float  # one request's prompt
    step_s: float  # at the plan's concurrency (capped at what fits)
    per_request_tokens_per_s: float
    total_tokens_per_s: float
    running: int  # requests decoding together
    curve: tuple[SpeedPoint, ...]
    peak_tflops: float
    bandwidth_gb_s: float
    formula: str
    assumptions: str


# Prefill and decode compute when no utilisation is typed: the lesson's 40 % (what serving has
# always used; the modelled utilisation of core.training.speed is fitted on training steps).
SERVING_UTILISATION: Final = 0.4


def prefill_flops(plan: Plan, counts: ParamCounts, prompt: int) -> float:
    model = plan.model
    return 2.0 * counts.active * prompt + 2.0 * model.num_layers * prompt * prompt * model.q_width


def serving_speed(plan: Plan, counts: ParamCounts, gpu: GpuSpec, layout: RankLayout, fits_at_once: int) -> ServingSpeed:
    inf, model = plan.inference, plan.model
    tp, pp = inf.tensor_parallel, inf.pipeline_parallel
    override = plan.hardware.peak_tflops_override
    peak = override if override > 0 else gpu.peak_tflops(matmul_dtype(inf.weight_dtype))
    utilisation = plan.hardware.utilisation or SERVING_UTILISATION
    achieved = peak * 1e12 * utilisation * tp
    bandwidth = gpu.memory_bandwidth_gb_s * 1e9 * BANDWIDTH_EFFICIENCY
    prompt = inf.prompt_tokens
    flops = prefill_flops(plan, counts, prompt)
    static_batch = inf.concurrent if inf.engine == "hf" else 1
    ttft = static_batch * flops / achieved if achieved > 0 else float("inf")
    mean_cached = prompt + inf.new_tokens / 2
    kv_per_request = layout.kv_token_layer_bytes * layout.layers * mean_cached
    expert_share = _expert_share(plan, counts)

    def point(n: int) -> SpeedPoint:
        touched = 1.0 - (1.0 - model.experts_per_token / model.num_experts) ** n if model.num_experts > 1 else 1.0
        weights_read = layout.weights_bytes * ((1.0 - expert_share) + expert_share * touched)
        memory_s = (weights_read + n * kv_per_request) / bandwidth if bandwidth > 0 else float("inf")
        step_flops = n * (2.0 * counts.active + 4.0 * model.num_layers * mean_cached * model.q_width) / tp
        compute_s = step_flops / (achieved / tp) if achieved > 0 else float("inf")
        step = pp * max(memory_s, compute_s)
        per = 1.0 / step if step > 0 else 0.0
        return SpeedPoint(n, step, per, per * n * inf.replicas, memory_s >= compute_s)

    running = max(1, min(inf.concurrent, fits_at_once)) if fits_at_once >= 1 else 1
    top = max(1, fits_at_once)
    sizes = sorted({1, running, *(1 << k for k in range(top.bit_length()))})
    curve = tuple(point(n) for n in sizes)
    here = point(running)
    formula = (
        f"TTFT = {static_batch} × {flops:.2e} FLOPs ÷ ({peak:g} TFLOP/s × {utilisation:.0%} × {tp}) "
        f"= {ttft * 1e3:,.0f} ms; step = max(bytes read ÷ {gpu.memory_bandwidth_gb_s:g} GB/s × "
        f"{BANDWIDTH_EFFICIENCY:.0%}, FLOPs ÷ compute) = {here.step_s * 1e3:.1f} ms at {running} requests"
    )
    return ServingSpeed(
        ttft_s=ttft,
        prefill_flops=flops,
        step_s=here.step_s,
        per_request_tokens_per_s=here.per_request_tokens_per_s,
        total_tokens_per_s=here.total_tokens_per_s,
        running=running,
        curve=curve,
        peak_tflops=peak,
        bandwidth_gb_s=gpu.memory_bandwidth_gb_s,
        formula=formula,
        assumptions=(
            f"prefill at {utilisation:.0%} of the dense peak; each decode step reads every weight "
            f"and each request's cache once, at {BANDWIDTH_EFFICIENCY:.0%} of the memory bandwidth; requests are "
            "half-way through their answer; pipeline stages do not overlap"
        ),
    )


def _expert_share(plan: Plan, counts: ParamCounts) -> float:
    """Fraction of the stored parameters that sit in experts (0 for dense models)."""
    model = plan.model
    if model.num_experts <= 1 or counts.total <= 0:
        return 0.0
    experts = model.num_layers * model.num_experts * model.expert_mlp_params() * model.params_scale
    return min(1.0, experts / counts.total)

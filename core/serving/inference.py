"""Serving estimate: memory as the chosen engine lays it out, and its speed.

The rules live in :mod:`core.serving` (formats, KV cache, engines, speed); this module
assembles them into the :class:`InferenceEstimate` every view, the command line and the
diagnosis read.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.breakdown import Bucket
from core.catalogue import GpuSpec
from core.format import gb
from core.params import ParamCounts
from core.plan import Engine, Plan
from core.serving.engines import SERVING_OVERHEAD_BYTES, hf_memory, rank_layout, sglang_memory, vllm_memory
from core.serving.kv import kv_cache_bytes, lesson_kv_cache_bytes
from core.serving.speed import ServingSpeed, SpeedPoint, serving_speed
from core.verdict import Verdict

__all__ = [
    "SERVING_OVERHEAD_BYTES",
    "InferenceEstimate",
    "SpeedPoint",
    "inference_estimate",
    "kv_cache_bytes",
    "lesson_kv_cache_bytes",
]


@dataclass(frozen=True)
class InferenceEstimate:
    engine: Engine
    weights_bytes: float  # on the rank that decides
    kv_bytes_per_token: float  # one sequence, across the rank's layers
    kv_cache_bytes: float  # hf: the batch's cache at its longest; vllm: the whole pool
    activation_bytes: float  # hf: prefill / decode working memory; vllm: profiled peak
    non_torch_bytes: float  # vllm: memory allocated outside torch during the profile run
    cuda_graph_bytes: float  # vllm: CUDA-graph pool, captured after the KV pool and outside it
    overhead_bytes: float  # CUDA context
    peak_bytes: float  # allocator level
    total_bytes: float  # what the plan needs at once on one card (judged by core.verdict)
    footprint_bytes: float  # what the process holds on the card (pooled engines take their budget)
    budget_bytes: float  # hf: capacity less headroom; vllm: the card (its utilisation is its headroom)
    fits: bool
    verdict: Verdict  # core.verdict.judge: the same rule as training (a pool holding no request: OOM)
    margin_bytes: float
    kv_cache_tokens: int  # vllm: "GPU KV cache size"; hf: concurrent × context
    max_concurrency: float  # vllm: "Maximum concurrency for <context> tokens per request"
    max_concurrent: int  # most requests of the plan's context served at once (0: none)
    queued: int  # vllm/sglang: the plan's requests beyond those served at once, waiting
    max_context: int  # longest context for each of the plan's requests at once, within the model's window
    max_num_seqs: int  # effective (vllm defaults resolved)
    max_num_batched_tokens: int
    gpus: int  # tensor × pipeline × replicas
    speed: ServingSpeed
    formula: str
    # What total_bytes (the figure judged) is made of, in SERVING_BUCKET_ORDER; a chart of
    # serving draws these, so its segments add up to the verdict's figure.
    buckets: tuple[Bucket, ...] = ()

    @property
    def summary_formula(self) -> str:
        """The judged figure as the sum of its parts, written as the lesson writes a sum."""
        return " + ".join(gb(b.bytes) for b in self.buckets) + f" = {gb(self.total_bytes)} GB needed at once"

    @property
    def ttft_s(self) -> float:
        return self.speed.ttft_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.speed.total_tokens_per_s


ENGINES = {Engine.HF: hf_memory, Engine.VLLM: vllm_memory, Engine.SGLANG: sglang_memory}


def inference_estimate(plan: Plan, counts: ParamCounts, gpu: GpuSpec) -> InferenceEstimate:
    inf = plan.inference
    layout = rank_layout(plan)
    memory = ENGINES[inf.engine](plan, gpu, layout)
    speed = serving_speed(plan, counts, gpu, layout, memory.max_concurrent)
    return InferenceEstimate(
        engine=inf.engine,
        weights_bytes=memory.weights_bytes,
        kv_bytes_per_token=layout.kv_token_layer_bytes * layout.layers,
        kv_cache_bytes=memory.kv_cache_bytes,
        activation_bytes=memory.activation_bytes,
        non_torch_bytes=memory.non_torch_bytes,
        cuda_graph_bytes=memory.cuda_graph_bytes,
        overhead_bytes=memory.overhead_bytes,
        peak_bytes=memory.peak_bytes,
        total_bytes=memory.total_bytes,
        footprint_bytes=memory.footprint_bytes,
        budget_bytes=memory.budget_bytes,
        fits=memory.verdict is Verdict.FITS,
        verdict=memory.verdict,
        margin_bytes=memory.margin_bytes,
        kv_cache_tokens=memory.kv_cache_tokens,
        max_concurrency=memory.max_concurrency,
        max_concurrent=memory.max_concurrent,
        queued=max(0, inf.concurrent - memory.max_concurrent) if inf.engine is not Engine.HF else 0,
        max_context=memory.max_context,
        max_num_seqs=memory.max_num_seqs,
        max_num_batched_tokens=memory.max_num_batched_tokens,
        gpus=inf.gpus,
        speed=speed,
        formula=memory.formula,
        buckets=memory.parts,
    )

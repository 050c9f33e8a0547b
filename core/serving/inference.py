"""Serving estimate: memory as the chosen engine lays it out, and its speed.

The rules live in :mod:`core.serving` (formats, KV cache, engines, speed); this module
assembles them into the :class:`InferenceEstimate` every view, the command line and the
diagnosis read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

from core.breakdown import Bucket
from core.catalogue import GpuSpec
from core.context_limit import context_start_refusal, past_limit_words
from core.format import amount, counted
from core.format import memory as format_memory
from core.params import ParamCounts
from core.plan import ENGINE_LABELS, Engine, Plan
from core.serving.engines import (
    SERVING_OVERHEAD_BYTES,
    EngineMemory,
    RankLayout,
    hf_memory,
    rank_layout,
    sglang_memory,
    vllm_memory,
)
from core.serving.fit import DEFAULT_FIT, ServingFit
from core.serving.kv import kv_cache_bytes, lesson_kv_cache_bytes
from core.serving.llamacpp import (
    cell_layer_bytes,
    llamacpp_buffers,
    llamacpp_memory,
    prompt_dequant_bytes,
    prompt_pipeline_interval,
)
from core.serving.llamacpp_fit import auto_gpu_layers
from core.serving.ollama import ollama_plan
from core.serving.speed import ServingSpeed, SpeedPoint, serving_speed
from core.start_refusal import RefusalKind, StartRefusal, in_engine_order
from core.units import GB
from core.verdict import Verdict

__all__ = [
    "SERVING_OVERHEAD_BYTES",
    "InferenceEstimate",
    "SpeedPoint",
    "inference_estimate",
    "kv_cache_bytes",
    "lesson_kv_cache_bytes",
]

# SGLang prefills in chunks of chunked_prefill_size tokens (8,192 on cards of 80 GB and more
# in its server_args defaults; the speed model uses it for every card).
SGLANG_CHUNK = 8192


@dataclass(frozen=True)
class InferenceEstimate:
    engine: Engine
    weights_bytes: float  # on the rank that decides
    kv_bytes_per_token: float  # one sequence, across the rank's layers
    kv_cache_bytes: float  # hf: the batch's cache at its longest; vllm: the whole pool; llama.cpp: its KV buffer
    activation_bytes: float  # hf: prefill / decode working memory; vllm: profiled peak; llama.cpp: compute buffer
    non_torch_bytes: float  # vllm: memory allocated outside torch during the profile run
    cuda_graph_bytes: float  # vllm: CUDA-graph pool, captured after the KV pool and outside it
    overhead_bytes: float  # CUDA context (generate: and its cuBLAS workspace)
    peak_bytes: float  # allocator level
    total_bytes: float  # what the plan needs at once on one card (judged by core.verdict)
    footprint_bytes: float  # what the process holds on the card (pooled engines take their budget)
    budget_bytes: float  # hf: capacity less headroom; vllm: the card (its utilisation is its headroom)
    fits: bool
    verdict: Verdict  # core.verdict.judge: the same rule as training (a pool holding no request: OOM)
    margin_bytes: float
    kv_cache_tokens: int  # vllm: "GPU KV cache size"; hf: concurrent × context; llama.cpp: n_ctx cells
    max_concurrency: float  # vllm: "Maximum concurrency for <context> tokens per request"
    max_concurrent: int  # most requests of the plan's context served at once (0: none)
    queued: int  # vllm/sglang: the plan's requests beyond those served at once, waiting
    max_context: int  # longest context for each of the plan's requests at once, within the model's window
    max_num_seqs: int  # effective (vllm defaults resolved)
    max_num_batched_tokens: int
    gpus: int  # tensor × pipeline × replicas
    formula: str
    # What total_bytes (the figure judged) is made of, in SERVING_BUCKET_ORDER; a chart of
    # serving draws these, so its segments add up to the verdict's figure.
    buckets: tuple[Bucket, ...] = ()
    host_bytes: float = 0.0  # llama.cpp: host memory (token embeddings, layers not offloaded, their KV)
    host_ram_bytes: float = 0.0  # the plan's host RAM (0: not given)
    # The engine's start-up checks that refuse the plan, classified where each is decided (core.start_refusal): a
    # context past the model's limit (core.context_limit.context_start_refusal, verdict WONT_START), then its memory
    # (core.serving.engines), in the order the engine runs them; () where it starts (h94start: one classification).
    refusals: tuple[StartRefusal, ...] = ()
    # The serving speed, worked out when first read (:attr:`speed`): its queue curve is a third
    # of an estimate's cost, and a training plan's views never read it. A partial of
    # serving_speed, so an estimate still pickles to the worker process.
    _speed_of: Callable[[], ServingSpeed] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def speed(self) -> ServingSpeed:
        """Time to first token, decode speed and the throughput curve (:mod:`core.serving.speed`)."""
        if self._speed_of is None:
            raise ValueError("this serving estimate was built without its speed")
        return self._speed_of()

    def __getstate__(self) -> dict[str, object]:
        """Pickled with its speed worked out: the fit behind it holds read-only mappings."""
        state = dict(self.__dict__)
        state["speed"] = self.speed
        state["_speed_of"] = None
        return state

    @property
    def summary_formula(self) -> str:
        """The judged figure as the sum of its parts, written as the lesson writes a sum."""
        return self.summary_in("GB")

    def summary_in(self, unit: str = "GB") -> str:
        """:attr:`summary_formula` in ``unit`` (GB or GiB)."""
        parts = " + ".join(amount(b.bytes, unit) for b in self.buckets)
        return f"{parts} = {amount(self.total_bytes, unit)} {'GiB' if unit == 'GiB' else 'GB'} needed at once"

    def _words_of(self, memory: bool) -> str:
        return next((r.words for r in self.refusals if r.memory is memory), "")

    @property
    def refusal(self) -> str:
        """The engine's refusal of its memory at start-up, in its words (verdict OOM); "" where none."""
        return self._words_of(memory=True)

    @property
    def context_refusal(self) -> str:
        """The engine's refusal of a context past the model's limit, in its words (verdict WONT_START); "" where it
        starts or warns (core.context_limit)."""
        return self._words_of(memory=False)

    @property
    def start_refusal(self) -> StartRefusal | None:
        """The refusal the engine prints: the first of its checks that refuses (:attr:`refusals`); None where it
        starts."""
        return self.refusals[0] if self.refusals else None

    @property
    def would_not_start(self) -> str:
        """Why the engine would not start the plan, in the words of the first check that refuses it: a context past
        the model's limit before its memory, as vLLM and SGLang run them (core.start_refusal); "" where it starts.
        The one home the command line's JSON and the Diagnosis read (h90start; h94start: the memory's was said
        first, though vLLM raises on the context at config time, before its KV pool is sized)."""
        return self.start_refusal.words if self.start_refusal else ""

    @property
    def refused_next(self) -> str:
        """What the engine would refuse once the first check passes (the context allowed, say), in its words; "" where
        one check or none refuses."""
        return " ".join(r.words for r in self.refusals[1:])

    @property
    def start_causes(self) -> tuple[str, ...]:
        """Which of the engine's start-up checks refuse the plan, each in a few words with the plan's figures, in the
        order the engine runs them, as each check classified itself (core.start_refusal); () where it starts.
        h93diag2: the Diagnosis's likely cause listed all three for every plan."""
        return tuple(r.cause for r in self.refusals)

    @property
    def start_cause_words(self) -> str:
        """:attr:`start_causes` as one clause, in the engine's order: the first check that refuses, then "once that
        check passes," the next (the Diagnosis's explanation says their words so). The Diagnosis's likely cause and the
        Serving tab's headline say it; h95ui: "X; and Y" read as two refusals at once, though the engine prints the
        second only once the first is allowed."""
        return "; once that check passes, ".join(self.start_causes)

    @property
    def pooled(self) -> bool:
        """The engine allocates its KV cache pool at start-up (vLLM, SGLang), whatever the requests use."""
        return self.engine in (Engine.VLLM, Engine.SGLANG)

    @property
    def kv_held(self) -> str:
        """What the judged KV cache bucket holds, in words, where it is not the engine's whole cache: a pooled
        engine's running requests' blocks (the pool is :meth:`apart`); "" otherwise."""
        return "the running requests' blocks" if self.pooled else ""

    def apart(self, unit: str = "GB") -> tuple[str, str]:
        """The figure shown beside "needed at once" that is not it, as (name, value in words): the pool a pooled
        engine allocates at start-up, llama.cpp's ggml buffers, or the allocator peak torch would report. One
        home for the command line's serving table and the window's Serving panel (commit 2753058: the window
        showed vLLM's "Peak (allocator)", weights + the whole pool + activations, beside "Needed at once")."""
        if self.pooled:
            return (
                f"KV cache pool {ENGINE_LABELS[self.engine]} allocates at start-up",
                f"{format_memory(self.kv_cache_bytes, unit)} ({self.kv_cache_tokens:,} tokens), however few "
                "requests run; not judged",
            )
        if self.engine is Engine.LLAMACPP:
            return "Buffers (ggml) it allocates at load", format_memory(self.peak_bytes, unit)
        return (
            "Allocator peak (torch.cuda.max_memory_allocated)",
            f"{format_memory(self.peak_bytes, unit)}, the figure needed at once less the CUDA context",
        )

    def held_note(self, unit: str = "GB") -> str:
        """Why "Held on the card" may exceed what the verdict judges (docs/GUI.md, 2026-12-04:
        24.2 GB held above a "fits" in 23.2 GB usable); "" where it does not. vLLM and SGLang take
        their pool at start-up, whatever the requests use: ``gpu_memory_utilization`` of the card
        (vllm/v1/worker/gpu_worker.py ``determine_available_memory``: requested_memory = total ×
        utilisation) and ``mem_fraction_static`` (sglang srt/model_executor/model_runner.py), so
        the verdict judges the memory the requests running together need."""
        if self.footprint_bytes <= self.total_bytes:
            return ""
        needed = f"the {format_memory(self.total_bytes, unit)} needed at once"
        knob = {Engine.VLLM: "gpu_memory_utilization", Engine.SGLANG: "mem_fraction_static"}.get(self.engine)
        if knob:
            name = "vLLM" if self.engine is Engine.VLLM else "SGLang"
            return (
                f"Not what the verdict judges ({needed}): {name} allocates its KV cache pool at "
                f"start-up, up to {knob} × the card, however few requests run; its CUDA context "
                "comes on top."
            )
        return f"Not what the verdict judges ({needed}): what the process holds at its peak."

    @property
    def none_served(self) -> str:
        """Why no request of the plan's context runs at once (``max_concurrent`` 0), in words: the
        weights and the runtime's context past the usable memory, or else the requests' KV cache
        and working memory beside them; or the engine's own refusal to start."""
        if self.refusal:
            return self.refusal
        if self.weights_bytes + self.overhead_bytes > self.budget_bytes:
            return "the weights alone do not fit"
        return "not at this context: its KV cache and working memory do not fit beside the weights"

    def at_model_limit(self, plan: Plan) -> bool:
        """The longest context (:attr:`max_context`) is the model's own limit, its ``max_position_embeddings``
        (every engine caps it there: core.serving.engines, core.serving.llamacpp), not what the memory allows."""
        return bool(self.max_context) and self.max_context == plan.model.max_position_embeddings

    def limits_sentence(self, plan: Plan) -> str:
        """What fits at once, in the words the banner, the CLI and the report share: the most
        requests of the plan's context, and the longest context at the plan's concurrency, said to be the
        model's own limit where that, not the memory, stops it (and left out where it is the plan's context).
        A context past the model's limit: the engine's own words first where it would not start, after
        where it warns (core.context_limit, h89ctx: "at most 1 request of 8,192 tokens" on Llama 2 7B,
        which vLLM refuses to start)."""
        fits = self._memory_sentence(plan)
        if self.context_refusal:  # set where the engine refuses the context (inference_estimate)
            return f"{self.context_refusal}; with it set, {fits}"
        past = past_limit_words(plan)  # an engine that starts and warns
        return f"{fits}. {past}" if past else fits

    def _memory_sentence(self, plan: Plan) -> str:
        concurrent, context = plan.inference.concurrent, plan.inference.context
        requests = counted(concurrent, "request")
        if self.max_concurrent and self.max_context:
            at_most = f"at most {counted(self.max_concurrent, 'request')} of {context:,} tokens"
            if not self.at_model_limit(plan):
                return f"{at_most} at once, or {self.max_context:,} tokens each at {requests}"
            if self.max_context < context:  # a context past the model's limit: the engine's words follow (h89ctx)
                return f"{at_most} at once"
            if self.max_context == context:  # "or 4,096 tokens each at 1 request" would say nothing
                return f"{at_most} (the model's limit) at once"
            return f"{at_most} at once, or {self.max_context:,} tokens each (the model's limit) at {requests}"
        if self.max_context:
            # A pooled engine whose pool holds less than one request does not start (vLLM's check, h88fix).
            refused = f". {self.refusal}" if self.refusal else ""
            return f"no request of {context:,} tokens fits; {self.max_context:,} tokens each at {requests}{refused}"
        if self.max_concurrent:
            return f"at most {counted(self.max_concurrent, 'request')} of {context:,} tokens at once"
        return f"no request fits: {self.none_served}"

    @property
    def speed_note(self) -> str:
        """Said beside the speed when no request of the plan runs (the engine refuses to start, or its pool
        holds none): the figures are then one request's as if it ran; "" otherwise."""
        if self.max_concurrent:
            return ""
        return "No request of this plan runs (see the verdict): the speed is one request's, as if it ran."

    @property
    def ttft_s(self) -> float:
        return self.speed.ttft_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.speed.total_tokens_per_s

    @property
    def host_ram_short(self) -> bool:
        """llama.cpp's host part exceeds the host RAM the plan gives."""
        return bool(self.host_ram_bytes) and self.host_bytes > self.host_ram_bytes


ENGINES = {Engine.HF: hf_memory, Engine.VLLM: vllm_memory, Engine.SGLANG: sglang_memory}


def _llamacpp_layout(
    plan: Plan, gpu: GpuSpec, memory: EngineMemory, split: tuple[int, ...] = ()
) -> tuple[RankLayout, tuple[float, float], float, float, float]:
    """The decode's view of llama.cpp's buffers: every layer's KV per token, the weights read
    from the host and from the GPUs each token (the token embeddings are a row lookup), the bytes a
    prompt micro-batch dequantises, the interval of its pipelined micro-batches and the routed experts
    --n-cpu-moe keeps in host RAM (apart from the host's whole layers: a step reads only those it routes to)."""
    model, inf = plan.model, plan.inference
    buffers = llamacpp_buffers(plan, split=split)
    per_layer = cell_layer_bytes(model, inf.cache_type)
    layout = RankLayout(
        weights_bytes=memory.weights_bytes,
        layers=model.num_layers,
        kv_token_layer_bytes=per_layer,
        kv_heads=model.num_kv_heads,
        intermediate=model.intermediate_size,
        q_heads=model.num_heads,
        kv_layers=model.kv_layers,  # a hybrid's attention layers only (core.serving.llamacpp_hybrid)
    )
    experts = buffers.layout.host_expert_bytes
    host = buffers.layout.host_weights - buffers.layout.embedding_bytes - experts
    return (
        layout,
        (host, sum(buffers.layout.device_weights)),
        prompt_dequant_bytes(plan, gpu, buffers.layout),
        prompt_pipeline_interval(plan, buffers.layout),
        experts,
    )


def _slots(plan: Plan, memory: EngineMemory) -> int:
    """Requests a pooled engine runs together: it hands out blocks as the tokens come, so on
    average a request holds its prompt and half its answer (vLLM's scheduler admits while blocks
    are free, up to max_num_seqs); a static batch or llama.cpp's slots hold the whole context."""
    inf = plan.inference
    if inf.engine not in (Engine.VLLM, Engine.SGLANG):
        return memory.max_concurrent
    held = inf.prompt_tokens + inf.new_tokens / 2
    return max(memory.max_concurrent, min(memory.max_num_seqs, int(memory.kv_cache_tokens / held)))


def _chunk(plan: Plan, memory: EngineMemory) -> int:
    inf = plan.inference
    if inf.engine is Engine.VLLM:
        return memory.max_num_batched_tokens
    if inf.engine is Engine.SGLANG:
        return inf.max_num_batched_tokens or SGLANG_CHUNK
    if inf.engine is Engine.LLAMACPP:
        return inf.ubatch
    return inf.concurrent * inf.prompt_tokens


def inference_estimate(
    plan: Plan, counts: ParamCounts, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT
) -> InferenceEstimate:
    inf = plan.inference
    offload, dequant, interval, experts = (0.0, 0.0), 0.0, 1.0, 0.0
    if inf.engine is Engine.LLAMACPP:
        # Through Ollama, llama.cpp runs with the layers Ollama's own estimate chose (core.serving.ollama).
        plan, ollama = ollama_plan(plan, gpu)
        split = ollama.tensor_split if ollama is not None else ()
        sentence = ollama.sentence if ollama is not None else ""
        if ollama is None and plan.inference.gpu_layers < 0:
            plan, split, sentence = auto_gpu_layers(plan, gpu)
        memory = llamacpp_memory(plan, gpu, split=split)
        if sentence:
            memory = replace(memory, formula=f"{sentence} {memory.formula}")
        layout, offload, dequant, interval, experts = _llamacpp_layout(plan, gpu, memory, split)
    else:
        layout = rank_layout(plan)
        memory = ENGINES[inf.engine](plan, gpu, layout, fit)
    speed = partial(
        serving_speed,
        plan,
        counts,
        gpu,
        layout,
        _slots(plan, memory),
        fit,
        offload,
        _chunk(plan, memory),
        dequant,
        interval,
        experts,
    )
    # One verdict (h90start): an engine that refuses the context does not start, whatever the memory; a memory
    # refusal is already OOM (core.serving.engines), the worse of the two is said. Each refusal classified once,
    # where it is decided, in the engine's order (h94start).
    refusals = in_engine_order((context_start_refusal(plan), memory.refusal))
    refused = any(r.kind is RefusalKind.CONTEXT for r in refusals)
    verdict = Verdict.WONT_START if refused else memory.verdict
    return InferenceEstimate(
        engine=inf.engine,
        weights_bytes=memory.weights_bytes,
        kv_bytes_per_token=layout.kv_token_layer_bytes * layout.kv_layers,
        kv_cache_bytes=memory.kv_cache_bytes,
        activation_bytes=memory.activation_bytes,
        non_torch_bytes=memory.non_torch_bytes,
        cuda_graph_bytes=memory.cuda_graph_bytes,
        overhead_bytes=memory.overhead_bytes,
        peak_bytes=memory.peak_bytes,
        total_bytes=memory.total_bytes,
        footprint_bytes=memory.footprint_bytes,
        budget_bytes=memory.budget_bytes,
        fits=verdict is Verdict.FITS,
        verdict=verdict,
        margin_bytes=memory.margin_bytes,
        kv_cache_tokens=memory.kv_cache_tokens,
        max_concurrency=memory.max_concurrency,
        max_concurrent=memory.max_concurrent,
        # Requests wait only for a pool that serves some: with none served (or the engine refusing to
        # start) nothing runs and nothing queues; the verdict says why.
        queued=max(0, inf.concurrent - memory.max_concurrent)
        if inf.engine in (Engine.VLLM, Engine.SGLANG) and memory.max_concurrent
        else 0,
        max_context=memory.max_context,
        max_num_seqs=memory.max_num_seqs,
        max_num_batched_tokens=memory.max_num_batched_tokens,
        gpus=inf.gpus,
        formula=memory.formula,
        buckets=memory.parts,
        host_bytes=memory.host_bytes,
        host_ram_bytes=plan.parallel.host_ram_gb * GB,
        refusals=refusals,
        _speed_of=speed,
    )

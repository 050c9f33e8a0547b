"""Serving remedies: changes that bring weights + KV cache + working memory under the card.

One home for them, judged on the serving total (:func:`core.verdict.judge` through
``Estimate.judgement(Mode.INFERENCE)``); :func:`core.advice.diagnosis.diagnose` lists them first in
inference mode and for the "serving many users" symptom. New serving changes (more
tensor-parallel GPUs, a smaller ``max_num_batched_tokens``) are in :data:`SERVING_KINDS`
with a :class:`core.advice.remedies.RemedyKind` each. llama.cpp and Ollama have their own
settings for the same changes (a quantised KV cache type, a smaller GGUF file, fewer layers on
the GPU, the layers split over more GPUs): the engine-neutral changes (``kv_dtype``,
``weight_dtype``, tensor parallel) do not apply to them.
"""

from __future__ import annotations

import math
from typing import Any, Final

from core.advice.remedies import RemedyKind, RemedySpec, Transform
from core.advice.request import Pin
from core.advice.symptoms import Failure
from core.context_limit import SGLANG_LONG_ENV, VLLM_LONG_ENV, would_not_start
from core.dtypes import KvDtype
from core.estimate import Estimate, estimate, gpu_for
from core.format import gb
from core.memo import last_answer
from core.plan import UNQUANTISED_CACHE, CacheType, Engine, GgufQuant, OllamaVersion, Plan
from core.serving.engines import (
    HIGHEST_SHARE,
    sglang_flag_fraction,
    vllm_highest_utilization,
    vllm_starting_utilization,
)
from core.serving.llamacpp import gguf_tensor_bytes
from core.serving.vllm_versions import utilization
from core.start_refusal import RefusalKind
from core.verdict import Mode

SERVING: Final = frozenset({Failure.SERVING})
# What also helps when the weights alone do not fit one GPU: smaller or more widely split weights.
WEIGHTS: Final = frozenset({Failure.SERVING, Failure.SERVING_WEIGHTS})
_WIDE_KV: Final = ("bf16", "fp16", "fp32")


def _llamacpp(plan: Plan) -> bool:
    return plan.inference.engine is Engine.LLAMACPP


def _kv_fp8(plan: Plan) -> tuple[Plan, str] | None:
    if _llamacpp(plan) or plan.inference.kv_dtype not in _WIDE_KV:
        return None
    return plan.with_inference(kv_dtype="fp8"), "8-bit KV cache"


def _kv_int4(plan: Plan) -> tuple[Plan, str] | None:
    """vLLM's int4_per_token_head cache (0.25 on: core.inputs.VLLM_KV_FROM), a quarter of a 16-bit cache's bytes and
    half of fp8's, plus a float32 scale per token and KV head; Plan validation refuses it where vLLM would (a release
    before 0.25, latent attention, a head not a power of 2: core.plan._kv_format_refusal), and RemedySpec.apply
    then offers nothing. Its int8 sibling is not offered: one byte an element and the same scales, never smaller
    than the fp8 cache :func:`_kv_fp8` offers on every release."""
    if plan.inference.engine is not Engine.VLLM or plan.inference.kv_dtype == KvDtype.INT4:
        return None
    return plan.with_inference(kv_dtype=KvDtype.INT4), "4-bit KV cache (vLLM's int4_per_token_head)"


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
    if _llamacpp(plan) or plan.inference.weight_dtype not in _WIDE_KV:
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
    if _llamacpp(plan) or tp > MAX_TENSOR_PARALLEL:
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


def _starting_utilization(plan: Plan) -> tuple[Plan, str] | None:
    """vLLM refusing to start on the memory other processes hold: the gpu_memory_utilization its own
    check passes (free ÷ total, core.serving.engines.vllm_starting_utilization), a smaller pool."""
    if plan.inference.engine is not Engine.VLLM:
        return None
    would = vllm_starting_utilization(plan, gpu_for(plan))
    if would is None or would <= 0:
        return None
    return plan.with_inference(gpu_memory_utilization=would), f"gpu_memory_utilization {would:.3f}"


# The refusals of a KV pool too small for one request, or empty, that a larger share of the card cures: vLLM's own
# words say "Try increasing `gpu_memory_utilization`", SGLang's "Please try to increase --mem-fraction-static"
# (core.serving.engines, each refusal's source).
SHARE_REFUSALS: Final = frozenset({RefusalKind.NO_CACHE_BLOCKS, RefusalKind.KV_POOL_SHORT, RefusalKind.EMPTY_POOL})


def _share_now_and_highest(plan: Plan) -> tuple[str, float, float] | None:
    """The engine's share field, its value now and the highest offered: vLLM's gpu_memory_utilization up to
    core.serving.engines.vllm_highest_utilization (0.95, and no more than the free memory at start-up ÷ the total);
    SGLang's mem_fraction_static up to HIGHEST_SHARE (a share of the memory SGLang finds free, other processes'
    already left out)."""
    inf = plan.inference
    if inf.engine is Engine.VLLM:
        return "gpu_memory_utilization", utilization(inf), vllm_highest_utilization(plan, gpu_for(plan))
    if inf.engine is Engine.SGLANG:
        return "mem_fraction_static", sglang_flag_fraction(plan, gpu_for(plan)), HIGHEST_SHARE
    return None


def _higher_share(plan: Plan) -> tuple[Plan, str] | None:
    """The smallest share, in steps of 0.01 above the plan's, with which the engine starts and the plan's requests
    fit, where its KV pool refuses the plan (:data:`SHARE_REFUSALS`); where none up to the highest fits, the smallest
    with which it starts (over the headroom, or a part of a combination). None where even the highest does not start,
    and for any other refusal or none."""
    first = estimate(plan).inference.start_refusal
    field = _share_now_and_highest(plan)
    if first is None or first.kind not in SHARE_REFUSALS or field is None:
        return None
    name, now, highest = field
    steps = [s / 100 for s in range(math.floor(now * 100 + 1e-6) + 1, round(highest * 100) + 1)]

    def outcome(share: float) -> tuple[bool, bool]:
        changed = estimate(plan.with_inference(**{name: share}))
        return not changed.inference.would_not_start, changed.judgement(Mode.INFERENCE).fits

    at_highest = outcome(steps[-1]) if steps else (False, False)
    if not at_highest[0]:
        return None
    wanted = 1 if at_highest[1] else 0  # starts and fits where the highest does, else starts
    low, high = 0, len(steps) - 1  # the highest passes; the smallest that does is in [low, high]
    while low < high:
        middle = (low + high) // 2
        if outcome(steps[middle])[wanted]:
            high = middle
        else:
            low = middle + 1
    share = steps[low]
    return plan.with_inference(**{name: share}), f"{name} {share:.2f}"


# What the long-context variable costs, in the engines' own words. vLLM: vllm-project/vllm@18ec6629
# vllm/config/model.py _get_and_verify_max_len, the warning logged with the variable set (raised without it); SGLang:
# the warning sglang 0.5.23's sglang/srt/configs/model_config.py ModelConfig._derive_context_length logs with its own
# (core.context_limit.past_limit_words quotes both in full).
VLLM_LONG_CAUTION: Final = (
    "If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan"
)
SGLANG_LONG_CAUTION: Final = "This may lead to incorrect model outputs or CUDA errors"


def _long_context(plan: Plan) -> tuple[Plan, str] | None:
    """vLLM's or SGLang's variable that starts a context past the model's limit (core.context_limit.would_not_start):
    the model then runs past the positions it was trained on. Listed after the changes that keep it within them
    (its rank, 5, past every other serving change's), never combined (h93diag2)."""
    if not would_not_start(plan):
        return None
    inf = plan.inference
    env = VLLM_LONG_ENV if inf.engine is Engine.VLLM else SGLANG_LONG_ENV
    title = f"{env}=1 ({inf.context:,} tokens, past the model's {plan.model.max_position_embeddings:,})"
    return plan.with_inference(long_context=True), title


def _long_context_note(plan: Plan) -> str:
    """The cost of :func:`_long_context`, with the engine's own caution quoted."""
    if plan.inference.engine is Engine.VLLM:
        harm, said = "NaN or degraded output", f'vLLM\'s caution: "{VLLM_LONG_CAUTION}"'
    else:
        harm, said = "incorrect output", f'SGLang\'s warning: "{SGLANG_LONG_CAUTION}"'
    return (
        f"positions past {plan.model.max_position_embeddings:,} are outside the model's trained range: {harm} ({said})"
    )


def _served_fits(plan: Plan) -> bool:
    return estimate(plan).judgement(Mode.INFERENCE).fits


def _kv_q8_0(plan: Plan) -> tuple[Plan, str] | None:
    """llama.cpp's K and V cache in q8_0 blocks (34 bytes per 32 values against 64 in f16); a
    quantised V cache needs flash attention (llama-context.cpp refuses it without), so it is
    turned on with it."""
    inf = plan.inference
    if not _llamacpp(plan) or inf.cache_type not in UNQUANTISED_CACHE:
        return None
    flash = "" if inf.flash_attention else ", with flash attention -fa on"
    title = f"q8_0 KV cache (-ctk q8_0 -ctv q8_0{flash})"
    return plan.with_inference(cache_type=CacheType.Q8_0, flash_attention=True), title


# Smaller GGUF files of the same model, largest first, with the perplexity each adds to Llama 3 8B
# against its F16 file, as llama-quantize lists its types (QUANT_OPTIONS, ggml-org/llama.cpp
# 03161a4e tools/quantize/quantize.cpp: "Q4_K_M : 4.58G, +0.1754 ppl @ Llama-3-8B"). The K-quant
# mixes of that list; the I-quants carry no perplexity there.
GGUF_LADDER: Final = (
    (GgufQuant.Q8_0, 0.0026),
    (GgufQuant.Q6_K, 0.0217),
    (GgufQuant.Q5_K_M, 0.0569),
    (GgufQuant.Q4_K_M, 0.1754),
    (GgufQuant.Q3_K_M, 0.6569),
    (GgufQuant.Q2_K, 3.5199),
)
GGUF_PERPLEXITY: Final = dict(GGUF_LADDER)


def gguf_file_bytes(plan: Plan, quant: GgufQuant) -> float:
    """The tensors of the model's ``quant`` file (what llama.cpp loads, wherever each layer runs)."""
    layers, embedding, output = gguf_tensor_bytes(plan.model, quant)
    return sum(layers) + embedding + (0.0 if plan.model.tie_embeddings else output)


def _smaller_gguf(plan: Plan) -> tuple[Plan, str] | None:
    """The largest file type of :data:`GGUF_LADDER` smaller than the plan's that fits; the
    smallest of them where none does. Judged by the file, not by the GPU's share of it: Ollama
    puts fewer layers of a larger file on the GPU."""
    if not _llamacpp(plan):
        return None
    now = gguf_file_bytes(plan, plan.inference.gguf_quant)
    smaller = None
    for quant, _ in GGUF_LADDER:
        changed = plan.with_inference(gguf_quant=quant)
        if gguf_file_bytes(plan, quant) >= now:
            continue
        smaller = changed
        if _served_fits(changed):
            break
    if smaller is None:
        return None
    return smaller, f"GGUF {smaller.inference.gguf_quant.value} (a smaller file of the same model)"


def _gguf_note(plan: Plan) -> str:
    ppl = GGUF_PERPLEXITY.get(plan.inference.gguf_quant)
    return f"+{ppl:g} perplexity on Llama 3 8B against F16 (llama-quantize's table)" if ppl is not None else ""


@last_answer  # asked twice of one plan: as its own remedy and by _cpu_moe_rank, each a search of estimates
def _gpu_layers(plan: Plan) -> tuple[Plan, str] | None:
    """The most layers on the GPU that fit (llama.cpp's -ngl N: the last N repeating layers,
    the output layer as one more); the rest run on the CPU from host RAM. Not under Ollama, which
    picks the layers itself, nor below no layer at all."""
    inf = plan.inference
    every = plan.model.num_layers + 1
    now = min(inf.gpu_layers, every)
    if not _llamacpp(plan) or inf.ollama_version is not OllamaVersion.NONE or now <= 0:
        return None
    if not _served_fits(plan.with_inference(gpu_layers=0)):
        return None
    low, high = 0, now - 1  # fits at low; the most that fits is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if _served_fits(plan.with_inference(gpu_layers=middle)):
            low = middle
        else:
            high = middle - 1
    return plan.with_inference(gpu_layers=low), f"{low} of {every} layers on the GPU (-ngl {low}), the rest on the CPU"


def _cpu_moe(plan: Plan) -> tuple[Plan, str] | None:
    """The fewest layers whose routed experts, kept in host RAM (llama.cpp's --n-cpu-moe N: the first N
    layers'), let the plan fit with every layer's attention still on the GPU; --cpu-moe when only all of
    them do. A mixture of experts under llama-server only (Ollama has no such option), from the plan's own
    count up; none where even every layer's experts in RAM do not fit."""
    inf, model = plan.inference, plan.model
    every = model.num_layers
    now = min(inf.cpu_moe_layers, every)
    if not _llamacpp(plan) or inf.ollama_version is not OllamaVersion.NONE or model.num_experts <= 1 or now >= every:
        return None
    if not _served_fits(plan.with_inference(cpu_moe_layers=every)):
        return None
    low, high = now + 1, every  # fits at high; the fewest that fits is in [low, high]
    while low < high:
        middle = (low + high) // 2
        if _served_fits(plan.with_inference(cpu_moe_layers=middle)):
            high = middle
        else:
            low = middle + 1
    if low >= every:
        return plan.with_inference(cpu_moe_layers=every), f"Every layer's experts in host RAM (--cpu-moe, {every})"
    title = f"The experts of the first {low} of {every} layers in host RAM (--n-cpu-moe {low})"
    return plan.with_inference(cpu_moe_layers=low), title


def _cpu_moe_rank(plan: Plan, changed: Estimate) -> int:
    """Before fewer GPU layers (rank 2 against their 3) when the app's own decode estimate of the experts in
    RAM is faster than that of the most GPU layers that fit, else after them (4)."""
    layers = _gpu_layers(plan)
    if layers is None:
        return 2
    mine = changed.inference.speed.per_request_tokens_per_s
    theirs = estimate(layers[0]).inference.speed.per_request_tokens_per_s
    return 2 if mine >= theirs else 4


def _offload_note(plan: Plan) -> str:
    served = estimate(plan).inference
    return (
        f"{gb(served.host_bytes)} GB in host RAM; decode at "
        f"{served.speed.per_request_tokens_per_s:,.1f} tokens/s per request"
    )


def _layer_split(plan: Plan) -> tuple[Plan, str] | None:
    """llama.cpp's default split: whole layers over the GPUs (-sm layer), twice as many."""
    gpus = plan.inference.pipeline_parallel * 2
    if not _llamacpp(plan) or gpus > MAX_TENSOR_PARALLEL:
        return None
    return plan.with_inference(pipeline_parallel=gpus), f"The layers split over {gpus} GPUs (-sm layer)"


K = RemedyKind
SERVED = Mode.INFERENCE
GPUS: Final = frozenset({Pin.GPU_COUNT})


def _served(
    kind: RemedyKind, transform: Transform, rank: int, fixes: frozenset[Failure], cost: str, **kw: Any
) -> RemedySpec:
    """A serving change, judged on the serving total."""
    return RemedySpec(kind, transform, rank, fixes, cost, judged_on=SERVED, **kw)


def _to_host(kind: RemedyKind, transform: Transform, cost: str, **kw: Any) -> RemedySpec:
    """A llama.cpp change that leaves weights in host RAM (fewer GPU layers, experts kept there): rank 3 unless
    ``rank_of`` says otherwise, alone, not with a pin against offload, its host RAM and decode speed noted."""
    return _served(
        kind,
        transform,
        3,
        WEIGHTS,
        cost,
        combinable=False,
        changes=frozenset({Pin.NO_OFFLOAD}),
        plan_note=_offload_note,
        **kw,
    )


# Both change the cache's format: never combined.
_KV_FORMATS: Final = frozenset({K.KV_FP8, K.KV_INT4})
SERVING_KINDS: Final = (
    _served(K.KV_FP8, _kv_fp8, 1, SERVING, "small quality cost", excludes=_KV_FORMATS),
    _served(
        K.KV_INT4,
        _kv_int4,
        2,
        SERVING,
        "a larger quality cost than fp8: 4-bit keys and values, Hadamard-rotated",
        excludes=_KV_FORMATS,
    ),
    _served(K.FEWER_REQUESTS, _fewer_requests, 2, SERVING, "lower throughput", combinable=False),
    _served(K.WEIGHTS_NF4, _weights_nf4, 2, WEIGHTS, "some quality and speed cost"),
    _served(K.SMALLER_BATCHED_TOKENS, _smaller_batched_tokens, 1, SERVING, "slower prefill of long prompts"),
    _served(K.STARTING_UTILIZATION, _starting_utilization, 1, WEIGHTS, "a smaller KV pool: fewer requests at once"),
    _served(
        K.HIGHER_SHARE,
        _higher_share,
        1,
        SERVING,
        "less of the card left to other processes and to memory the engine does not count",
    ),
    _served(K.MORE_TENSOR_PARALLEL, _more_tensor_parallel, 3, WEIGHTS, "twice the GPUs per copy", changes=GPUS),
    _served(K.KV_Q8_0, _kv_q8_0, 1, SERVING, "small quality cost"),
    _served(K.SMALLER_GGUF, _smaller_gguf, 2, WEIGHTS, "a new download; lower quality", plan_note=_gguf_note),
    _served(K.LAYER_SPLIT, _layer_split, 3, WEIGHTS, "twice the GPUs", changes=GPUS),
    _to_host(K.GPU_LAYERS, _gpu_layers, "much slower decode: the CPU's layers run at host memory speed"),
    _to_host(
        K.CPU_MOE,
        _cpu_moe,
        "slower decode: the CPU reads the routed experts from host memory; prompts copy them to the GPU",
        rank_of=_cpu_moe_rank,
    ),
    _served(K.LONG_CONTEXT, _long_context, 5, SERVING, "", combinable=False, plan_note=_long_context_note),
    _served(
        K.SHORTER_CONTEXT,
        _shorter_context,
        3,
        SERVING,
        "shorter prompts and answers",
        combinable=False,
        changes=frozenset({Pin.SEQUENCE}),
    ),
)

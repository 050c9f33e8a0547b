"""What the Diagnosis tab offers a llama.cpp / Ollama plan that does not fit: llama.cpp's own
settings (a q8_0 KV cache, a smaller GGUF file, fewer layers on the GPU, the layers over more
GPUs). Before these, such a plan got no remedy at all: the engine-neutral changes (an fp8 KV
cache, 4-bit weights, tensor parallel) leave a llama.cpp plan as it is."""

from __future__ import annotations

from dataclasses import replace

from core.advice.diagnosis import diagnose
from core.advice.remedies import RemedyKind
from core.advice.request import Pin
from core.advice.serving_remedies import GGUF_LADDER, gguf_file_bytes
from core.catalogue import find_gpu, find_model
from core.dtypes import CacheType, GgufQuant
from core.estimate import estimate
from core.plan import Engine, OllamaVersion, Plan
from core.presets import default_plan
from core.serving.llamacpp_fit import llamacpp_fit
from core.verdict import Mode

SERVED = Mode.INFERENCE


def _plan(model: str, gpu: str, **inference: object) -> Plan:
    base = default_plan()
    plan = replace(base, model=find_model(model).spec, model_id=model, hardware=replace(base.hardware, gpu=gpu))
    settings = {"engine": Engine.LLAMACPP, "gguf_quant": GgufQuant.Q4_K_M, "concurrent": 1, **inference}
    return replace(plan, inference=replace(plan.inference, **settings))


def _fits(plan: Plan) -> bool:
    return estimate(plan).judgement(SERVED).fits


def _by_kind(plan: Plan, pins: frozenset[Pin] = frozenset()) -> dict[RemedyKind, object]:
    return {r.kind: r for r in diagnose(plan, SERVED, pins).remedies}


def test_llama_70b_on_one_rtx_4090_is_offered_partial_offload_and_a_second_gpu() -> None:
    # Llama 3.1 70B Q4_K_M at 4,096 tokens needs about 44 GB on the GPU with every layer there (the
    # worked example of tests/core/test_llamacpp_fit.py); an RTX 4090 has 24,564 MiB.
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, flash_attention=True)
    assert not _fits(plan)
    found = _by_kind(plan)
    assert not {RemedyKind.KV_FP8, RemedyKind.WEIGHTS_NF4, RemedyKind.MORE_TENSOR_PARALLEL} & found.keys()
    layers = found[RemedyKind.GPU_LAYERS]
    n = layers.plan.inference.gpu_layers  # type: ignore[attr-defined]
    # The most layers that fit: one more does not.
    assert layers.fits and not _fits(plan.with_inference(gpu_layers=n + 1))  # type: ignore[attr-defined]
    # llama.cpp's own fit leaves 1 GiB free and places 45 (common/fit.cpp 08033df0); the planner keeps
    # its headroom (10 % of the card), so it places no more than that.
    assert 0 < n <= llamacpp_fit(plan, find_gpu("rtx-4090")).gpu_layers
    assert f"-ngl {n}" in layers.title and "host RAM" in layers.cost  # type: ignore[attr-defined]
    split = found[RemedyKind.LAYER_SPLIT]
    assert split.fits and split.plan.inference.pipeline_parallel == 2  # type: ignore[attr-defined]


def test_a_pin_against_offload_or_more_gpus_leaves_those_out() -> None:
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, flash_attention=True)
    pinned = _by_kind(plan, frozenset({Pin.NO_OFFLOAD, Pin.GPU_COUNT}))
    assert RemedyKind.GPU_LAYERS not in pinned and RemedyKind.LAYER_SPLIT not in pinned


def test_the_smaller_file_is_the_largest_of_llama_quantizes_ladder_that_fits() -> None:
    # Llama 3.1 8B Q8_0 (8.5 GB of tensors) at 8,192 tokens on an 8 GB RTX 4060.
    plan = _plan("llama-3.1-8b", "rtx-4060", context=8192, gguf_quant=GgufQuant.Q8_0, flash_attention=True)
    assert not _fits(plan)
    smaller = _by_kind(plan)[RemedyKind.SMALLER_GGUF]
    chosen = smaller.plan.inference.gguf_quant  # type: ignore[attr-defined]
    ladder = [q for q, _ in GGUF_LADDER]
    assert smaller.fits and ladder.index(chosen) > ladder.index(GgufQuant.Q8_0)
    # Every larger type of the ladder below Q8_0 does not fit.
    for quant in ladder[ladder.index(GgufQuant.Q8_0) + 1 : ladder.index(chosen)]:
        assert not _fits(plan.with_inference(gguf_quant=quant))
    # The ladder runs from the largest file to the smallest (llama-quantize's sizes for Llama 3 8B:
    # 7.96G, 6.14G, 5.33G, 4.58G, 3.74G, 2.96G).
    sizes = [gguf_file_bytes(plan, q) for q in ladder]
    assert sizes == sorted(sizes, reverse=True)
    assert "perplexity" in smaller.cost  # type: ignore[attr-defined]


def test_under_ollama_no_larger_file_and_no_gpu_layers_are_offered() -> None:
    # Ollama picks the layers itself: a larger file puts fewer of them on the GPU and would look
    # smaller there; the remedy compares files.
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, ollama_version=OllamaVersion.V0_15_5)
    found = _by_kind(plan)
    assert RemedyKind.GPU_LAYERS not in found
    if RemedyKind.SMALLER_GGUF in found:
        quant = found[RemedyKind.SMALLER_GGUF].plan.inference.gguf_quant  # type: ignore[attr-defined]
        assert gguf_file_bytes(plan, quant) < gguf_file_bytes(plan, GgufQuant.Q4_K_M)


def test_a_q8_0_cache_turns_flash_attention_on() -> None:
    # llama.cpp refuses a quantised V cache without flash attention (core.plan's check says so).
    plan = _plan("llama-3.1-8b", "rtx-4090", context=131072, concurrent=4, flash_attention=False)
    q8 = _by_kind(plan)[RemedyKind.KV_Q8_0]
    inf = q8.plan.inference  # type: ignore[attr-defined]
    assert inf.cache_type is CacheType.Q8_0 and inf.flash_attention
    assert "flash attention" in q8.title  # type: ignore[attr-defined]
    assert q8.total_bytes < estimate(plan).judgement(SERVED).total_bytes  # type: ignore[attr-defined]

"""Ollama in front of llama.cpp (core.serving.ollama): its defaults and its own GPU-layer placement.

Every rule is read from ollama/ollama at the tags core.serving.ollama.LINES names; the worked
examples are offload lines users posted (benchmarks/realgpu/ollama_logs.json), replayed with the
free memory, --ctx-size and --parallel their logs print.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.dtypes import CacheType, GgufQuant
from core.estimate import estimate
from core.files import planfile
from core.plan import Engine, OllamaVersion, Plan
from core.presets import default_plan
from core.serving.ollama import (
    LINES,
    Card,
    auto_parallel,
    estimate_gpu_layers,
    graph_size,
    ollama_defaults,
    ollama_model,
    ollama_plan,
)
from core.units import GiB, MiB


def _plan(model: str, gpu: str, version: OllamaVersion, **inference: object) -> Plan:
    base = default_plan()
    plan = replace(base, model=find_model(model).spec, hardware=replace(base.hardware, gpu=gpu))
    settings = {"engine": Engine.LLAMACPP, "ollama_version": version, "gguf_quant": GgufQuant.Q4_K_M, **inference}
    return replace(plan, inference=replace(plan.inference, **settings))


def test_each_line_has_its_releases_defaults() -> None:
    # num_ctx: api/types.go DefaultOptions NumCtx 2048 (v0.5.0), then envconfig OLLAMA_CONTEXT_LENGTH
    # 2048 (v0.5.13 .. v0.6.6) and 4096 (v0.6.7 on). server/sched.go defaultParallel 4 (to v0.6.6),
    # 2 (v0.6.7 .. v0.9.6), 1 with OLLAMA_NUM_PARALLEL defaulting to 1 (v0.10.0). llm/memory.go
    # EstimateGPULayers visits the last layer first from v0.7.0 ("i := BlockCount - 1; i >= 0").
    expected = {
        OllamaVersion.V0_5: (2048, (4, 1), False),
        OllamaVersion.V0_6_7: (4096, (2, 1), False),
        OllamaVersion.V0_7: (4096, (2, 1), True),
        OllamaVersion.V0_10: (4096, (1,), True),
    }
    assert {v: (line.num_ctx, line.parallel_tries, line.last_layer_first) for v, line in LINES.items()} == expected


def test_the_cli_takes_the_releases_num_ctx_and_parallel_unless_given() -> None:
    # Llama 3.1 8B Q4_K_M fits an RTX 4090 whole at 4 × 2048 cells, so 0.5's scheduler keeps
    # parallel 4 (pickBestFullFitByLibrary tries defaultParallel first); 0.10 runs one slot.
    gpu = find_gpu("rtx-4090")
    old = ollama_defaults(_plan("llama-3.1-8b", "rtx-4090", OllamaVersion.V0_5), gpu, frozenset())
    assert (old.inference.context, old.inference.concurrent, old.inference.flash_attention) == (2048, 4, False)
    new = ollama_defaults(_plan("llama-3.1-8b", "rtx-4090", OllamaVersion.V0_10), gpu, frozenset())
    assert (new.inference.context, new.inference.concurrent) == (4096, 1)
    given = ollama_defaults(
        _plan("llama-3.1-8b", "rtx-4090", OllamaVersion.V0_5, context=8192, concurrent=2),
        gpu,
        frozenset({"inference.context", "inference.concurrent"}),
    )
    assert (given.inference.context, given.inference.concurrent) == (8192, 2)


def test_parallel_falls_back_to_one_when_the_model_does_not_fit_whole() -> None:
    # sched.go: the tries are full fits only; a 70B model on a 24 GB card fits at no parallel,
    # so pickBestPartialFitByLibrary sets numParallel 1.
    plan = _plan("llama-3.1-70b", "rtx-4090", OllamaVersion.V0_7, context=4096)
    assert auto_parallel(plan, find_gpu("rtx-4090")) == 1


def test_the_llama_graph_is_ggml_graph_size() -> None:
    # fs/ggml/ggml.go GraphSize, case "llama", Llama 3.1 8B at 8,192 cells and batch 512:
    # full = 4·512·(1 + 4·4096 + 8192·33) = 560.0 MiB; the partial graph 677.5 MiB. Both as the
    # T4 and RTX 4090 logs of ollama/ollama issues print them (memory.graph.full="560.0 MiB").
    model = ollama_model(find_model("llama-3.1-8b").spec, GgufQuant.Q4_0)
    kv, partial, full = graph_size(model, 8192, 4, CacheType.F16, LINES[OllamaVersion.V0_7])
    assert full == 587_204_608 and round(partial / MiB, 1) == 677.5
    assert sum(kv) == 1024 * MiB  # 32 layers × 8,192 × (128 + 128) × 8 heads × 2 bytes


def test_placement_reproduces_a_logged_partial_offload() -> None:
    # jazzwang/snippet@676312c0 md/genai/llm/phi.md line 272 (Ollama 0.5.x, RTX 4060 Laptop):
    # Phi-4 at --ctx-size 2048 --parallel 1 with 6.9 GiB free: layers.offload=29 of 41,
    # memory.required.partial="6.8 GiB", memory.required.full="9.6 GiB", kv "400.0 MiB" and both
    # graphs "266.7 MiB" (phi3 has no GraphSize formula: GQA × KV / 6).
    model = ollama_model(find_model("phi-4").spec, GgufQuant.Q4_K_M)
    est = estimate_gpu_layers(model, [Card(int(6.9 * GiB))], LINES[OllamaVersion.V0_5], context=2048, parallel=1)
    assert (est.layers, est.layers_model) == (29, 41)
    assert f"{est.partial / GiB:.1f}" == "6.8" and f"{est.full / GiB:.1f}" == "9.6"
    assert f"{est.kv / MiB:.1f}" == "400.0" and f"{est.graph_partial / MiB:.1f}" == "266.7"
    assert est.processor == "29%/71% CPU/GPU"


def test_placement_splits_layers_over_several_gpus_in_turn() -> None:
    # ollama/ollama issue 9181: four GPUs with 22.0 GiB free, a Llama 70B in Q8_0 at 64,000 cells
    # with flash attention: layers.offload=44, layers.split=11,11,11,11, memory.required.full
    # "127.4 GiB" (EstimateGPULayers hands layers to gpusWithSpace[i % j] in turn).
    model = ollama_model(find_model("llama-3.3-70b-instruct").spec, GgufQuant.Q8_0)
    cards = [Card(int(22.0 * GiB))] * 4
    est = estimate_gpu_layers(model, cards, LINES[OllamaVersion.V0_5], context=64000, parallel=1)
    assert est.split == (11, 11, 11, 11) and est.layers == 44 and f"{est.full / GiB:.1f}" == "127.4"


def test_num_gpu_caps_the_layers() -> None:
    # memory.go: "if opts.NumGPU >= 0 && layerCount >= opts.NumGPU" stops placing; the rest overflow.
    model = ollama_model(find_model("llama-3.1-8b").spec, GgufQuant.Q4_K_M)
    est = estimate_gpu_layers(model, [Card(40 * GiB)], LINES[OllamaVersion.V0_7], context=4096, parallel=1, num_gpu=10)
    assert est.layers == 10 and est.processor.endswith("CPU/GPU")


def test_the_runner_gets_ollamas_layer_count_and_the_explanation_says_so() -> None:
    plan = _plan("llama-3.1-8b", "rtx-3060-12gb", OllamaVersion.V0_7, context=32768, concurrent=2)
    ran, decision = ollama_plan(plan, find_gpu("rtx-3060-12gb"))
    assert decision is not None and ran.inference.gpu_layers == decision.estimate.layers < 33
    serving = estimate(plan).inference
    assert f"would place {decision.estimate.layers} of 33 layers" in serving.formula
    assert "ollama ps: SIZE" in serving.formula and "CPU/GPU" in serving.formula


def test_without_ollama_the_plan_is_llama_server_as_typed() -> None:
    plan = _plan("llama-3.1-8b", "rtx-3060-12gb", OllamaVersion.NONE, gpu_layers=20)
    ran, decision = ollama_plan(plan, find_gpu("rtx-3060-12gb"))
    assert decision is None and ran is plan


def test_ollama_passes_only_the_cache_types_it_knows() -> None:
    # llm/server.go: --kv-cache-type with flash attention, and only a type GGML.SupportsKVCacheType
    # accepts (f16, q8_0, q4_0); q5_1 stays f16.
    plan = _plan("llama-3.1-8b", "rtx-4090", OllamaVersion.V0_7, cache_type=CacheType.Q5_1, flash_attention=True)
    ran, _ = ollama_plan(plan, find_gpu("rtx-4090"))
    assert ran.inference.cache_type is CacheType.F16


def test_plan_file_round_trip_and_old_files_read_as_llama_server() -> None:
    plan = _plan("llama-3.1-8b", "rtx-4090", OllamaVersion.V0_10)
    assert planfile.loads(planfile.dumps(plan)).inference.ollama_version is OllamaVersion.V0_10
    doc = json.loads(planfile.dumps(default_plan()))
    del doc["plan"]["inference"]["ollama_version"]
    assert planfile.plan_from_dict(doc) == default_plan()
    assert planfile.plan_from_dict(doc).inference.ollama_version is OllamaVersion.NONE


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_ollama_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("estimate", "--mode", "inference", "--engine", "llamacpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090")
    code, out, _ = _run(capsys, *args, "--ollama", "0.5")
    assert code == 0 and "Ollama 0.5 (v0.5.0 – v0.6.6) would place 33 of 33 layers" in out
    assert "100% GPU" in out and "4 requests of 2,048 tokens" in out
    code, _, err = _run(capsys, *args, "--ollama", "0.3")
    assert code != 0 and "0.10" in err and "0.5" in err and "Traceback" not in err

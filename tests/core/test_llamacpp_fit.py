"""llama.cpp's own fit of the GPU layers (``--fit``), as Ollama 0.30 on leaves it to llama-server.

Rules read at ggml-org/llama.cpp common/fit.cpp 08033df0 (common_params_fit_impl) and common/common.h
001d906a (fit_params_target 1024 MiB); Ollama's flags at ollama/ollama v0.30.0 (2c71d8d7)
llm/llama_server.go startLlamaServer.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.dtypes import GgufQuant
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.files.launch.llamacpp import export_llama_server, read_llama_server
from core.inputs import OLLAMA_LLAMA_FIT
from core.plan import Engine, OllamaVersion, Plan
from core.presets import default_plan
from core.serving.llamacpp import llamacpp_buffers
from core.serving.llamacpp_fit import FIT_TARGET, llamacpp_fit
from core.serving.ollama import LINES, ollama_estimate
from core.units import MiB


def _plan(model: str, gpu: str, **inference: object) -> Plan:
    base = default_plan()
    plan = replace(base, model=find_model(model).spec, hardware=replace(base.hardware, gpu=gpu))
    settings = {"engine": Engine.LLAMACPP, "gguf_quant": GgufQuant.Q4_K_M, "concurrent": 1, **inference}
    return replace(plan, inference=replace(plan.inference, **settings))


def test_the_margin_is_one_gib_per_device() -> None:
    # common/common.h: fit_params_target = std::vector<size_t>(llama_max_devices(), 1024 * 1024*1024).
    assert 1024 * MiB == FIT_TARGET


def test_a_model_that_fits_whole_keeps_every_layer() -> None:
    # Step 1: Llama 3.1 8B Q4_K_M at 4,096 tokens leaves an RTX 4090 far more than 1 GiB: "no changes needed".
    fit = llamacpp_fit(_plan("llama-3.1-8b", "rtx-4090", context=4096, flash_attention=True), find_gpu("rtx-4090"))
    assert (fit.gpu_layers, fit.split, fit.whole) == (33, (33,), True)


def test_worked_example_llama_70b_on_one_rtx_4090() -> None:
    # Step 3 by hand: an RTX 4090 reports 24,564 MiB (the catalogue), the target is 24,564 - 1,024 = 23,540 MiB
    # of use. With the last 45 of Llama 3.1 70B's 80 blocks (blk.35 - blk.79) on the GPU: Q4_K_M weights
    # 21,996.69 MiB (460.06 or 518.88 MiB a block: Q4_K_M keeps half the attn_v / ffn_down in Q6_K),
    # KV 45 × 16 MiB (4,096 cells × 2 × 1,024 × 2 B), compute 148 MiB, CUDA context 512 MiB: 23,376.69 MiB
    # <= 23,540. A 46th block adds at least 460.06 + 16 MiB: 23,852.75 > 23,540. The false-position search
    # between 0 and 81 stops at the largest count that fits: 45, and the output layer stays in host memory.
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, flash_attention=True)
    fit = llamacpp_fit(plan, find_gpu("rtx-4090"))
    assert (fit.gpu_layers, fit.split, fit.whole) == (45, (45,), False)
    at = llamacpp_buffers(replace(plan, inference=replace(plan.inference, gpu_layers=45)))
    assert round(at.device_totals[0] / MiB, 2) == 23376.69
    over = llamacpp_buffers(replace(plan, inference=replace(plan.inference, gpu_layers=46)))
    assert over.device_totals[0] > 24564 * MiB - FIT_TARGET
    # A smaller margin (-fitt 0) lets more layers on: the target is what decides.
    assert llamacpp_fit(plan, find_gpu("rtx-4090"), target=0).gpu_layers > 45


def test_several_gpus_are_filled_from_the_last() -> None:
    # Step 3 goes "back to front": the last GPU takes what fits of all 81 layers (the output layer among
    # them), then the one before it takes what fits of the rest; the counts become the tensor split.
    # Two RTX 3060 12 GB: the last holds the output layer (822 MiB) and the larger compute buffer, so it
    # takes 20 (19 blocks and the output), the first 21 blocks.
    plan = _plan("llama-3.1-70b", "rtx-3060-12gb", context=4096, flash_attention=True, pipeline_parallel=2)
    gpu = find_gpu("rtx-3060-12gb")
    fit = llamacpp_fit(plan, gpu)
    assert (fit.whole, fit.split, fit.gpu_layers) == (False, (21, 20), 41)
    ran = replace(plan, inference=replace(plan.inference, gpu_layers=fit.gpu_layers))
    totals = llamacpp_buffers(ran, split=fit.split).device_totals
    assert max(totals) <= gpu.memory_bytes - FIT_TARGET
    for g, more in ((1, (0, 21)), (0, (22, 20))):  # one more on either GPU passes its target
        grown = llamacpp_buffers(replace(plan, inference=replace(plan.inference, gpu_layers=sum(more))), split=more)
        assert grown.device_totals[g] > gpu.memory_bytes - FIT_TARGET


def test_ollama_030_leaves_the_layers_to_llama_cpp() -> None:
    # v0.30.0 llm/llama_server.go: "-c" num_ctx × parallel and no -ngl, so the fit above decides.
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, flash_attention=True, ollama_version=OllamaVersion.V0_30)
    estimate = ollama_estimate(plan, find_gpu("rtx-4090"))
    assert (estimate.layers, estimate.layers_model, estimate.split) == (45, 81, (45,))
    # num_gpu given: Ollama passes it as -ngl and llama.cpp's fit keeps it ("already set by user").
    given = replace(plan, inference=replace(plan.inference, gpu_layers=20))
    assert ollama_estimate(given, find_gpu("rtx-4090")).layers == 20


def test_a_mixture_of_experts_model_is_refused_with_the_plan() -> None:
    # common/fit.cpp step 4 (expert tensors to host memory first, layers in parts) is not modelled. The
    # plan was made and its estimate refused, so a launch export of it raised (the round-trip property
    # test drew it now and then): the plan itself is refused now, naming the lines that do not fit.
    with pytest.raises(PlanError, match="mixture-of-experts.*step 4") as refused:
        _plan("qwen3-30b-a3b", "rtx-4090", context=4096, ollama_version=OllamaVersion.V0_30)
    assert "a line before 0.30 (0.5, 0.6.7, 0.7, 0.10, 0.12.11, 0.13.4, 0.15.5)" in str(refused.value)
    # With num_gpu given (GPU layers up to the model's) Ollama passes -ngl and llama.cpp does not fit.
    given = _plan("qwen3-30b-a3b", "rtx-4090", context=4096, ollama_version=OllamaVersion.V0_30, gpu_layers=20)
    assert ollama_estimate(given, find_gpu("rtx-4090")).layers == 20
    # Ollama's earlier lines place an MoE model with their own estimate.
    _plan("qwen3-30b-a3b", "rtx-4090", context=4096, ollama_version=OllamaVersion.V0_15_5)


def test_the_lines_that_leave_the_layers_to_llama_cpp_are_one_list() -> None:
    assert {v for v, line in LINES.items() if line.llama_fit} == OLLAMA_LLAMA_FIT


def test_the_cli_names_the_fit(capsys: pytest.CaptureFixture[str]) -> None:
    args = "estimate --mode inference --engine llamacpp --model llama-3.1-70b --gpu rtx-4090 --ollama 0.30"
    code = main(args.split())
    out = capsys.readouterr().out
    assert code == 0
    assert "Ollama 0.30 (v0.30.0 – v0.32.15) starts llama-server without -ngl" in out
    assert "leaving at least 1,024 MiB free" in out


def test_gpu_layers_auto_is_llama_cpps_fit_for_plain_llama_server() -> None:
    # common/common.h: n_gpu_layers = -1 "is auto" and fit_params on, so a llama-server started without
    # -ngl fits as above; the plan's -1 asks for that (999, the default, stays "every layer").
    plan = _plan("llama-3.1-70b", "rtx-4090", context=4096, flash_attention=True, gpu_layers=-1)
    result = estimate(plan).inference
    assert result is not None
    assert result.formula.startswith("-ngl auto: llama.cpp's fit (common/fit.cpp) would place 45 of 81 layers")
    every = estimate(replace(plan, inference=replace(plan.inference, gpu_layers=45))).inference
    assert every is not None and result.total_bytes == every.total_bytes


def test_gpu_layers_auto_round_trips_and_bad_counts_are_refused() -> None:
    # llama-server --help: "-ngl N ... either an exact number, 'auto', or 'all' (default: auto)".
    plan = _plan("llama-3.1-8b", "rtx-4090", context=4096, gpu_layers=-1)
    assert planfile.loads(planfile.dumps(plan)).inference.gpu_layers == -1
    exported = export_llama_server(plan)
    assert " -ngl auto " in exported.text
    assert read_llama_server(exported.text)["inference.gpu_layers"] == -1
    with pytest.raises(PlanFileError, match="from -1 to"):
        planfile.loads(planfile.dumps(plan).replace('"gpu_layers": -1', '"gpu_layers": -2'))
    with pytest.raises(PlanError, match="mixture-of-experts"):
        _plan("qwen3-30b-a3b", "rtx-4090", context=4096, gpu_layers=-1)

"""vLLM --enforce-eager / SGLang --disable-cuda-graph (inference.cuda_graphs) and vLLM's prefix-caching switch
(inference.prefix_caching): memory, speed, plan files, the command line and the launch exports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch.sglang import export_sglang, read_sglang
from core.files.launch.vllm import export_vllm, read_vllm
from core.files.planfile import dumps, loads
from core.plan import Engine, Plan, PrefixCaching, SglangVersion, VllmVersion
from core.presets import default_plan
from core.serving.engines import cold_compile_warning
from core.serving.fit import DEFAULT_FIT, EngineFamily
from core.serving.sglang_versions import (
    RESERVE_PER_GRAPH_BATCH_MIB,
    RESERVE_PER_PREFILL_GRAPH_MIB,
    card_defaults,
    card_mib,
    default_fraction,
    prefill_graph_sizes,
)
from core.serving.speed import EAGER_ENGINE_KERNELS_PER_LAYER, EAGER_ENGINE_TP_KERNELS_PER_LAYER
from core.serving.vllm_rules import VLLM_CUDA_GRAPH_BYTES, vllm_graph_estimate

V = VllmVersion


def served(model_id: str = "qwen2.5-7b", gpu: str = "h100-sxm", **inference: Any) -> Plan:
    entry = find_model(model_id)
    plan = default_plan().with_hardware(gpu=gpu).on_model(entry.spec, entry.id)
    return plan.with_inference(**{"engine": Engine.VLLM, **inference})


# --- vLLM memory --------------------------------------------------------------------------------------------------
# vllm/config/vllm.py (0.19.0 2a69949bd, 0.24.0 ee0da84ab, 0.34.0 62d4bc3c7): enforce_eager sets
# compilation_config.mode NONE and cudagraph_mode NONE, so the runner captures nothing and its CUDA-graph estimate
# (0.20 on: set aside before the KV cache) is none (core.serving.vllm_versions.graphs_captured).


# 0.21 (V1 runner) and 0.33 (Model Runner V2, which estimates graphs from 0.29); 0.25 - 0.28 run Qwen2.5 on V2
# without an estimate (core.serving.vllm_versions.v2_runner_without_graph_estimate): nothing to take away there.
@pytest.mark.parametrize("version", [V.V0_21, V.V0_33])
def test_eager_takes_no_graph_estimate_before_the_pool(version: VllmVersion) -> None:
    graphs, eager = (estimate(served(vllm_version=version, cuda_graphs=on)).inference for on in (True, False))
    # The pool grows by the graph estimate vLLM no longer subtracts (gpu_worker.py determine_available_memory:
    # requested - non_kv - cudagraph_memory_estimate), to the block: from 0.21 the rule's (core.serving.vllm_rules
    # vllm_graph_reserve) for Qwen2.5-7B's 28 layers (its config.json) at an H100's 1,024 sequences and 8,192 tokens.
    estimated = vllm_graph_estimate(28, 1024, 8192, "h100-sxm", version)
    grown = (eager.kv_cache_bytes - graphs.kv_cache_bytes) / estimated
    assert grown == pytest.approx(1.0, abs=0.02)
    assert eager.cuda_graph_bytes == 0.0 and graphs.cuda_graph_bytes == pytest.approx(estimated)
    assert "CUDA graphs (estimated)" not in [t.label for b in eager.buckets for t in b.terms]
    assert "CUDA graphs (estimated)" in [t.label for b in graphs.buckets for t in b.terms]
    assert "--enforce-eager: no CUDA graphs captured or set aside, no torch.compile" in eager.formula


def test_eager_up_to_0_19_keeps_the_pool_and_drops_the_graphs_captured_after_it() -> None:
    # 0.19.0: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is 0, so the graphs are captured after the pool is sized.
    graphs, eager = (estimate(served(vllm_version=V.V0_19, cuda_graphs=on)).inference for on in (True, False))
    assert eager.kv_cache_bytes == graphs.kv_cache_bytes
    assert graphs.footprint_bytes - eager.footprint_bytes == pytest.approx(VLLM_CUDA_GRAPH_BYTES)
    assert "captured afterwards" in graphs.formula and "captured afterwards" not in eager.formula


def test_the_extensible_pool_of_0_34_grows_by_the_graphs_held_and_reserved() -> None:
    # measure_kv_cache_bytes (0.34.0): min(requested - held, free - margin) - reserve, with the graph estimate in
    # both held and reserve; eager takes it out of both (and so out of the margin's 0.75 x reserve as well).
    graphs, eager = (estimate(served(vllm_version=V.V0_34, cuda_graphs=on)).inference for on in (True, False))
    assert eager.kv_cache_bytes - graphs.kv_cache_bytes >= VLLM_CUDA_GRAPH_BYTES
    assert "CUDA graphs" not in eager.formula.split("=")[1]


def test_eager_compiles_nothing_so_no_cold_compile_warning() -> None:
    # A plan whose requests fill the warm pool: the cold-compile sentence is there with graphs, gone under eager
    # (vllm/config/vllm.py 0.19.0: "Enforce eager set, disabling torch.compile and CUDAGraphs").
    full = served(vllm_version=V.V0_19, context=32768)
    at_once = int(estimate(full).inference.max_concurrency)
    with_graphs = full.with_inference(concurrent=at_once)
    assert cold_compile_warning(with_graphs, estimate(with_graphs).inference)
    eager = with_graphs.with_inference(cuda_graphs=False)
    assert cold_compile_warning(eager, estimate(eager).inference) == ""


# --- SGLang's default fraction -------------------------------------------------------------------------------------
# sglang 0.5.23 arg_groups/cuda_graph_hook.py parse_cuda_graph_config: disable_cuda_graph sets the decode and prefill
# backends to Backend.DISABLED; memory_hook.reserve_for_graph_mb counts neither then. sglang 0.5.10 server_args.py
# adds cuda_graph_max_bs * 2 whatever the switch (0.5.11 - 0.5.19: tests/core/test_sglang_versions.py).


def test_sglang_0_5_23_reserves_nothing_for_graphs_it_does_not_capture() -> None:
    gpu = find_gpu("h100-sxm")
    plan = served(engine=Engine.SGLANG, sglang_version=SglangVersion.V0_5_23)
    gpu_mib = card_mib(gpu)
    chunk, max_bs = card_defaults(SglangVersion.V0_5_23, gpu_mib, 1)
    graphs_mib = RESERVE_PER_GRAPH_BATCH_MIB * max_bs + RESERVE_PER_PREFILL_GRAPH_MIB * len(prefill_graph_sizes(chunk))
    with_graphs = default_fraction(plan.inference, gpu)
    without = default_fraction(plan.with_inference(cuda_graphs=False).inference, gpu)
    assert without - with_graphs == pytest.approx(graphs_mib / gpu_mib, abs=0.001)  # both rounded to 0.001
    eager = estimate(plan.with_inference(cuda_graphs=False)).inference
    assert eager.kv_cache_tokens > estimate(plan).inference.kv_cache_tokens
    assert "--disable-cuda-graph: no reserve for graphs" in eager.formula


def test_sglang_0_5_10_keeps_its_reserve() -> None:
    gpu = find_gpu("h100-sxm")
    plan = served(engine=Engine.SGLANG, sglang_version=SglangVersion.V0_5_10)
    assert default_fraction(plan.with_inference(cuda_graphs=False).inference, gpu) == default_fraction(
        plan.inference, gpu
    )
    assert "its reserve for graphs kept" in estimate(plan.with_inference(cuda_graphs=False)).inference.formula


# --- speed ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tp", "kernels"), [(1, EAGER_ENGINE_KERNELS_PER_LAYER), (2, 12)])
def test_eager_decode_pays_each_kernels_launch(tp: int, kernels: int) -> None:
    # 12 under TP: the two RowParallelLinear all-reduces (vllm 0.19.0 qwen2.py) beside the 10 kernels of a layer.
    assert EAGER_ENGINE_KERNELS_PER_LAYER + EAGER_ENGINE_TP_KERNELS_PER_LAYER == 12
    plan = served(vllm_version=V.V0_19, tensor_parallel=tp)
    graphs, eager = (estimate(plan.with_inference(cuda_graphs=on)).inference.speed for on in (True, False))
    layers = plan.model.num_layers
    launch = DEFAULT_FIT.launch_seconds[EngineFamily.EAGER.value]
    step = 1 / eager.per_request_tokens_per_s - 1 / graphs.per_request_tokens_per_s
    assert step == pytest.approx(layers * kernels * launch, rel=1e-6)
    assert f"--enforce-eager: {kernels} kernels a layer each launched on its own" in eager.assumptions


def test_v0_eager_processes_outputs_after_the_step() -> None:
    # vLLM V0's config turns async output processing off under enforce_eager (core.serving.speed
    # V0_OUTPUT_PROCESSING_S): its 0.2 ms at batch 1 is no longer hidden behind the step.
    plan = served(vllm_version=V.V0_6)
    graphs, eager = (estimate(plan.with_inference(cuda_graphs=on)).inference.speed for on in (True, False))
    launches = plan.model.num_layers * EAGER_ENGINE_KERNELS_PER_LAYER * DEFAULT_FIT.launch_seconds["eager"]
    step = 1 / eager.per_request_tokens_per_s - 1 / graphs.per_request_tokens_per_s
    assert step == pytest.approx(launches + 0.2e-3, rel=1e-6)
    assert "output processing is not overlapped" in eager.assumptions


# --- prefix caching ------------------------------------------------------------------------------------------------
# Granite 4.0-H-Tiny: a request holds one state block per recurrent group without prefix caching, two in "align"
# mode (0.28.0 on by default, opt-in from 0.26.0), three from 0.32.0 (tests/core/test_hybrid_vllm_lines.py).


@pytest.mark.parametrize(
    ("version", "default", "on", "off"),
    [(V.V0_26, 1, 2, 1), (V.V0_28, 2, 2, 1), (V.V0_32, 3, 3, 1)],
)
def test_the_switch_picks_a_hybrids_state_blocks(version: VllmVersion, default: int, on: int, off: int) -> None:
    def held(caching: PrefixCaching) -> int:
        plan = served("granite-4.0-h-tiny", vllm_version=version, prefix_caching=caching)
        text = estimate(plan).inference.formula
        return 1 if "one state block a request" in text else int(text.split(" state blocks a request")[0][-1])

    assert (held(PrefixCaching.DEFAULT), held(PrefixCaching.ON), held(PrefixCaching.OFF)) == (default, on, off)


def test_prefix_caching_before_0_26_is_refused_for_a_hybrid_and_changes_nothing_for_a_dense_model() -> None:
    with pytest.raises(PlanError, match="inference.prefix_caching"):  # by Plan validation: no estimate runs
        served("granite-4.0-h-tiny", vllm_version=V.V0_20, prefix_caching=PrefixCaching.ON)
    # A dense model's pool is the same whatever the switch (vLLM sizes it before any prefix is cached).
    pools = {
        estimate(served(vllm_version=V.V0_28, prefix_caching=caching)).inference.kv_cache_tokens
        for caching in PrefixCaching
    }
    assert len(pools) == 1


# --- files, command line, exports ----------------------------------------------------------------------------------


def test_plan_files_keep_the_switches_and_old_files_take_the_engines_defaults() -> None:
    plan = served(cuda_graphs=False, prefix_caching=PrefixCaching.OFF)
    back = loads(dumps(plan)).inference
    assert (back.cuda_graphs, back.prefix_caching) == (False, PrefixCaching.OFF)
    document = json.loads(dumps(served()))
    del document["plan"]["inference"]["cuda_graphs"], document["plan"]["inference"]["prefix_caching"]
    old = loads(json.dumps(document)).inference
    assert (old.cuda_graphs, old.prefix_caching) == (True, PrefixCaching.DEFAULT)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["estimate", "--mode", "inference", "-m", "granite-4.0-h-tiny", "--engine", "vllm", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return dict(json.loads(out))


def test_the_command_line_sets_both_switches(capsys: pytest.CaptureFixture[str]) -> None:
    base = _cli(capsys, "--vllm-version", "0.28")
    eager = _cli(capsys, "--vllm-version", "0.28", "--no-cuda-graphs")
    off = _cli(capsys, "--vllm-version", "0.28", "--prefix-caching", "off")
    assert eager != base and off != base
    assert _cli(capsys, "--vllm-version", "0.28", "--cuda-graphs", "--prefix-caching", "default") == base


@pytest.mark.parametrize("caching", list(PrefixCaching))
@pytest.mark.parametrize("graphs", [True, False])
def test_vllm_serve_round_trips_the_switches(graphs: bool, caching: PrefixCaching) -> None:
    exported = export_vllm(served(cuda_graphs=graphs, prefix_caching=caching)).text
    assert ("--enforce-eager" in exported) is not graphs
    assert ("--no-enable-prefix-caching" in exported) is (caching is PrefixCaching.OFF)
    assert ("--enable-prefix-caching" in exported) is (caching is PrefixCaching.ON)
    _, fields = read_vllm(exported)
    assert (fields["inference.cuda_graphs"], fields["inference.prefix_caching"]) == (graphs, caching)
    assert fields["inference.context"] == served().inference.context  # the flags with values still pair up


def test_sglang_launch_round_trips_cuda_graphs() -> None:
    plan = served(engine=Engine.SGLANG, cuda_graphs=False)
    exported = export_sglang(plan).text
    assert exported.rstrip().endswith("--disable-cuda-graph")
    _, fields = read_sglang(exported)
    assert fields["inference.cuda_graphs"] is False
    assert fields["inference.mem_fraction_static"] == pytest.approx(
        default_fraction(plan.inference, find_gpu("h100-sxm"))
    )
    assert "--disable-cuda-graph" not in export_sglang(served(engine=Engine.SGLANG)).text

"""vLLM 0.20+'s CUDA-graph estimate: the sizes it captures and the estimate per layer and graph
(core.serving.vllm_rules.vllm_capture_sizes / vllm_graph_count / vllm_graph_estimate), against what
the start-up logs print; and the pool that takes it in place of the fixed 0.84 GiB from 0.21 (docs/SERVING.md,
h93graph and h94cold)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from core.plan import VllmVersion
from core.serving.fit import DEFAULT_FIT, GRAPH_PER_LAYER
from core.serving.vllm_rules import VLLM_CUDA_GRAPH_BYTES, vllm_capture_sizes, vllm_graph_count, vllm_graph_estimate
from core.units import GiB, MiB
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
V030 = VllmVersion("0.30")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "serving.py", "realgpu_serving_graphs_test")


def test_the_default_capture_sizes_are_the_releases_list() -> None:
    # vLLM 0.30.0 (ced6857af) vllm/config/vllm.py _set_cudagraph_sizes: [1, 2, 4] + range(8, 256, 8)
    # + range(256, max + 1, 16), max = min(max_num_seqs x 2, 512) and at most max_num_batched_tokens.
    sizes = vllm_capture_sizes(256, 2048, "a100-80gb-sxm", V030)
    assert sizes[:5] == (1, 2, 4, 8, 16) and sizes[-1] == 512 and len(sizes) == 3 + 31 + 17
    # 64 sequences (NnamdiOdozi's 0.22.1 log: --max-num-seqs 64) stop at 128; 16 (LukeJYK's) at 32.
    assert vllm_capture_sizes(64, 8192, "h100-sxm", VllmVersion("0.22"))[-1] == 128
    assert vllm_capture_sizes(16, 2048, "a100-80gb-sxm", VllmVersion("0.26")) == (1, 2, 4, 8, 16, 24, 32)
    # A batched-token limit under the ceiling caps the sizes and is captured itself ("ensure max_num_tokens
    # is captured if within max capture size").
    assert vllm_capture_sizes(256, 300, "a100-80gb-sxm", V030)[-2:] == (288, 300)


def test_datacenter_blackwell_captures_up_to_1024_from_0_28() -> None:
    # 0.28.0 (2cf0a6915) default_max_graph_size = 1024 if is_device_capability_family(100) else 512;
    # 0.27.1 (6e448d0ea) min(max_num_seqs * 2, 512) on every card.
    assert vllm_capture_sizes(1024, 16384, "b200", VllmVersion("0.28"))[-1] == 1024
    assert vllm_capture_sizes(1024, 16384, "b200", VllmVersion("0.27"))[-1] == 512
    assert vllm_capture_sizes(1024, 16384, "h100-sxm", VllmVersion("0.28"))[-1] == 512


def test_full_and_piecewise_capture_a_full_graph_per_size_up_to_max_num_seqs() -> None:
    # 0.30.0 vllm/v1/cudagraph_dispatcher.py initialize_cudagraph_keys: PIECEWISE for every capture size,
    # FULL for the uniform-decode sizes up to max_num_seqs: 51 + 35 at 256 sequences.
    assert vllm_graph_count(256, 2048, "t4", V030) == 51 + 35
    assert vllm_graph_count(64, 8192, "h100-sxm", VllmVersion("0.22")) == 19 + 11
    assert vllm_graph_count(16, 2048, "a100-80gb-sxm", VllmVersion("0.26")) == 7 + 5


def test_the_estimate_grows_with_layers_and_graphs() -> None:
    per = DEFAULT_FIT.vllm_graph_bytes[GRAPH_PER_LAYER]
    # Qwen2.5-1.5B's 28 layers at 256 sequences: 28 x 86 graphs.
    assert vllm_graph_estimate(28, 256, 2048, "t4", V030) == pytest.approx(per * 28 * 86)
    assert vllm_graph_estimate(56, 256, 2048, "t4", V030) == pytest.approx(
        2 * vllm_graph_estimate(28, 256, 2048, "t4", V030)
    )
    assert vllm_graph_estimate(28, 16, 2048, "t4", V030) < vllm_graph_estimate(28, 256, 2048, "t4", V030) / 5


def test_the_constant_is_the_printed_estimates_over_their_layers_and_graphs(bench: ModuleType) -> None:
    # The four 0.20+ logs that print their estimate (engine_logs.json): NnamdiOdozi/mlops-assignment@0d2e919
    # logs/vllm.log "Estimated CUDA graph memory: 0.14 GiB total"; LukeJYK/AutoScientists@e313354 vllm.log 0.15;
    # eslam-ahmed43/llm-lab's T4 log "0.34 GiB (estimated)"; Freshair129/Private-Runtime-Platform@f52b9b9
    # vllm-startup-success.log "0.38 GiB (estimated)".
    graphs = bench.graph_observations()
    assert sorted(round(g[2] / GiB, 2) for g in graphs) == [0.14, 0.15, 0.34, 0.38]
    assert sorted(g[1] for g in graphs) == [48 * 12, 48 * 30, 28 * 86, 36 * 86]
    fit, priors = bench.fit_graphs(DEFAULT_FIT, graphs)
    assert not priors
    # 1.01 GiB over 7,520 layer-graphs = 0.1375 MiB, as core.serving.fit holds it.
    assert fit.vllm_graph_bytes[GRAPH_PER_LAYER] / MiB == pytest.approx(0.1375, abs=0.0005)
    assert DEFAULT_FIT.vllm_graph_bytes[GRAPH_PER_LAYER] == pytest.approx(
        fit.vllm_graph_bytes[GRAPH_PER_LAYER], rel=0.01
    )


def test_held_out_the_rule_lands_within_a_tenth_of_a_gib_of_each_printed_estimate(bench: ModuleType) -> None:
    # Each log predicted with the constant set on the other three sources: 0.21 / 0.07 / 0.32 / 0.44 GiB against
    # 0.14 / 0.15 / 0.34 / 0.38 printed; the fixed 0.84 GiB misses each by 0.46 GiB or more.
    graphs = bench.graph_observations()
    for source, units, printed, log_id in graphs:
        fit, _ = bench.fit_graphs(DEFAULT_FIT, [g for g in graphs if g[0] != source])
        rule = units * fit.vllm_graph_bytes[GRAPH_PER_LAYER]
        assert abs(rule - printed) < 0.1 * GiB, log_id
        assert abs(VLLM_CUDA_GRAPH_BYTES - printed) > 0.45 * GiB, log_id


def test_in_the_pool_the_rule_and_the_cold_term_replace_the_fixed_estimate(bench: ModuleType) -> None:
    # Issue 23's test (docs/SERVING.md, h94cold), each log with the constants fitted without its source: the two warm
    # starts that print "Directly load AOT compilation" (LukeJYK/AutoScientists@e313354 vllm.log, 151,216 tokens;
    # eslam-ahmed43/llm-lab@0f01b47 logs/vllm_server.log, 324,704) go from -4.8 % each with the fixed 0.84 GiB to
    # within 2 %; the cold ones keep their band (NnamdiOdozi@0d2e919 logs/vllm.log, 464,656: -1.3 -> -1.4 %; the
    # A100 notes' 460,496: +0.7 % either way). GIO443/statecraft-serving@992a95b default/env.json (72,400 tokens)
    # stays the worst, +16.9 -> +17.7 %: its own 0.76 GiB is left out of its fold, which the others put at 0.50.
    rows = {case.id: (fixed, rule, case.logged) for case, fixed, rule in bench.graph_rule_rows(bench.all_cases())}
    for log_id in ("lukejyk-vllm0261dev-qwen3-coder-30b-a3b-a100", "eslam-vllm0300-qwen25-1.5b-t4"):
        fixed, rule, logged = rows[log_id]
        assert fixed / logged - 1 == pytest.approx(-0.048, abs=0.002), log_id
        assert abs(rule / logged - 1) < 0.02, log_id
    for log_id in ("nnamdiodozi-vllm0221-qwen3-30b-a3b-fp8-h100", "a100notes-vllm0310-llama31-8b-a100-80gb"):
        fixed, rule, logged = rows[log_id]
        assert abs(rule / logged - 1) < 0.02, log_id
    fixed, rule, logged = rows["gio443-vllm0300-qwen25-1.5b-4070laptop-wsl"]
    assert fixed / logged - 1 == pytest.approx(0.169, abs=0.002)
    assert rule / logged - 1 == pytest.approx(0.177, abs=0.002)
    # The eager twin sets nothing aside and compiles nothing either way.
    fixed, rule, _ = rows["gio443-vllm0300-qwen25-1.5b-4070laptop-wsl-eager"]
    assert fixed == rule
    # The mean |error| falls (4.4 -> 3.8 %), as many within 5 % (7 of 9), and no row leaves its band.
    line, keep = bench.graph_rule_summary(list(bench.graph_rule_rows(bench.all_cases())))
    assert keep and "within 5 % 7 -> 7" in line and "rows leaving the 5 % band: none" in line

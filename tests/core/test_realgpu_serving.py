"""Serving speed against published measurements (benchmarks/realgpu/serving.py), whole, and the
rules issue 23's fourth round added: an eager kernel's fixed cost in GPU cycles at the card's
boost clock, and tensor parallelism without GPU peer-to-peer through host memory.

The benchmark runs in about a second, so CI runs all of it. Issue 23's decode and TTFT targets
are not all met (docs/SERVING.md says which and why); what is held: the targets that are met stay
met, the decode median stays within its target, the rows past 35 % are only the listed ones (a
ratchet: shorten the list when the estimate improves), and core.serving.fit holds the benchmark's
own fit.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from core.catalogue import find_gpu, find_model
from core.estimate import estimate
from core.plan import Hardware, Plan
from core.serving.fit import DEFAULT_FIT, EngineFamily
from core.serving.speed import KERNELS_PER_LAYER, WEIGHT_MATMULS_PER_LAYER, kernel_seconds, kernels_per_layer
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]

# The decode rows past 35 % (leave one source out), measured with the estimate of this commit.
# XiongjieDai's table is the only source of llama.cpp on A100s and on Apple silicon; see
# docs/SERVING.md ("Still missed").
KNOWN_DECODE_MISSES = {
    "xd-a100-sxm-x4-8b-q4_kmedium-tg512",
    "xd-a100-sxm-x4-8b-f16-tg512",
    "xd-a100-pcie-x4-8b-q4_kmedium-tg512",
    "xd-a100-pcie-x4-8b-f16-tg512",
    "xd-a100-sxm-x1-8b-q4_kmedium-tg512",
    "xd-a100-sxm-x1-8b-f16-tg512",
    "xd-m1max-64gb-x1-8b-q4_kmedium-tg512",
    "xd-m1max-64gb-x1-70b-q4_kmedium-tg512",
    "xd-m2ultra-192gb-x1-8b-q4_kmedium-tg512",
}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "serving.py", "realgpu_serving_test")


@pytest.fixture(scope="module")
def scored(bench: ModuleType) -> tuple[list, object]:
    rows, _, everything = bench.score(bench.all_cases())
    return rows, everything


def _llamacpp(gpu: str, quant: str) -> Plan:
    model = find_model("llama-3.1-8b").spec
    return Plan(model=model, model_id="llama-3.1-8b", hardware=Hardware(gpu=gpu)).with_inference(
        engine="llamacpp", gguf_quant=quant, context=640, new_tokens=128, cache_type="f16", flash_attention=False
    )


def test_llamacpp_launches_a_q8_1_quantise_before_each_quantised_weight_matmul_on_cuda() -> None:
    # ggml-cuda's ggml_cuda_op_mul_mat quantises the activations to q8_1 for mmvq; F16 weights
    # and Metal's mul_mv kernels read float activations.
    assert kernels_per_layer(_llamacpp("rtx-4090", "Q4_K_M"), find_gpu("rtx-4090")) == 30
    assert kernels_per_layer(_llamacpp("rtx-4090", "F16"), find_gpu("rtx-4090")) == KERNELS_PER_LAYER == 23
    mac = find_gpu("apple-m1-max-64gb")
    assert kernels_per_layer(_llamacpp("apple-m1-max-64gb", "Q4_K_M"), mac) == 23
    assert WEIGHT_MATMULS_PER_LAYER == 7


def test_a_kernels_fixed_cost_is_counted_at_the_cards_clock() -> None:
    # A100 boost 1.41 GHz (NVIDIA A100 datasheet), RTX 4090 2.52 GHz (NVIDIA product page): the
    # same kernel costs the A100 2.52 / 1.41 times as long; CUDA graphs replay with none.
    a100, rtx = find_gpu("a100-80gb-sxm"), find_gpu("rtx-4090")
    assert a100.boost_clock_ghz == 1.41 and rtx.boost_clock_ghz == 2.52
    ratio = kernel_seconds(a100, DEFAULT_FIT, EngineFamily.EAGER) / kernel_seconds(rtx, DEFAULT_FIT, EngineFamily.EAGER)
    assert ratio == pytest.approx(2.52 / 1.41)
    assert kernel_seconds(a100, DEFAULT_FIT, EngineFamily.GRAPHS) == 0.0


def _record(bench: ModuleType, record_id: str) -> dict:
    return next(r for r in bench.speed_corpus()["measurements"] if r["id"] == record_id)


def test_tinyllama_on_a_4090_is_not_charged_a_slow_cards_launches(bench: ModuleType) -> None:
    # geerlingguy/ai-benchmarks#43 (geerling43-1b-tg128): TinyLlama Q4_K_M, 762 tokens/s on an
    # RTX 4090. 54 µs per layer on every card (the old rule, set on slower clocks) gave 387 (-49 %).
    record = _record(bench, "geerling43-1b-tg128")
    predicted = estimate(bench.bench_plan(record)).inference.speed.per_request_tokens_per_s
    assert abs(predicted / record["value"] - 1) < 0.35


def test_tensor_parallel_without_p2p_goes_through_host_memory(bench: ModuleType) -> None:
    # dennislee22/vLLM-benchmarking (b474d1e, README): Qwen2-7B at TP 2 on one node whose log
    # says it lacks GPU P2P, 100 requests at once, mean ITL 29.0 ms (34.5 tokens/s per user).
    # Over PCIe 4.0 at NCCL's P2P bus rate the all-reduces of the chunked prefills were cheap
    # and the estimate read 53.8 (+56 %).
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n100-1024-1024-itl_ms")
    assert case.plan is not None and case.plan.inference.link == "pcie4-host"
    assert abs(case.predict(DEFAULT_FIT) / case.logged - 1) < 0.35


def test_met_targets_stay_met_and_the_decode_misses_do_not_grow(bench: ModuleType, scored: tuple) -> None:
    rows, _ = scored
    summaries = {s.name: s for s in bench.summaries(rows)}
    assert summaries["kv"].met and summaries["buffers"].met
    decode = [r for r in rows if r.case.table == "decode"]
    errors = sorted(abs(r.error_pct) for r in decode)
    assert errors[len(errors) // 2] <= bench.DECODE_MEDIAN
    assert {r.case.id for r in decode if abs(r.error_pct) > bench.DECODE_WORST} <= KNOWN_DECODE_MISSES


def test_core_holds_the_benchmarks_fit(bench: ModuleType, scored: tuple) -> None:
    _, everything = scored
    assert bench.fit_agrees(everything)

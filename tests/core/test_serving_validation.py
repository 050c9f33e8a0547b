"""Serving estimates against committed observations (run in CI from committed data).

(a) Hugging Face generate peaks measured by tools/measure's serving mode
    (benchmarks/serving/measured): median |error| ≤ 2 %, worst ≤ 5 % (issue 12's targets).
(b) vLLM start-up logs (benchmarks/serving/vllm_logs.json, one URL per entry): the H100
    logs of vLLM 0.19.0 that llm-d-incubation/llm-d-planner publishes and four 0.6.x logs
    quoted in vLLM's threads. GPU KV cache size within 5 % for every log held to the target,
    the held-out logs (no constant was set from them) reported and checked on their own.
Nothing in the estimator is fitted per case.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
# Where the v0.19.0 start-up logs were read (llm-d-incubation/llm-d-planner, commit d3121e05).
LLM_D_LOGS = (
    "llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/"
)


def _benchmark():  # type: ignore[no-untyped-def]
    return load_script(ROOT / "benchmarks" / "serving.py", "serving_benchmark")


def test_hf_generate_peaks_within_target() -> None:
    bench = _benchmark()
    rows = bench.hf_rows()
    assert len(rows) >= 8  # issue 12 asks for at least 8 cases
    errors = [abs(r.error_pct) for r in rows]
    assert statistics.median(errors) <= bench.HF_MEDIAN_TARGET, bench.hf_table(rows)
    assert max(errors) <= bench.HF_WORST_TARGET, bench.hf_table(rows)


def test_vllm_kv_tokens_within_target() -> None:
    bench = _benchmark()
    rows = bench.vllm_rows()
    sets = bench.vllm_sets(rows)
    assert len(sets["tuning"]) >= 3 and len(sets["held out"]) >= 3
    for row in sets["tuning"] + sets["held out"]:
        assert abs(row.error_pct) <= bench.VLLM_TARGET, bench.vllm_table(rows)
    # Every log names the public page it was read from.
    assert all(r.url.startswith("https://github.com/") for r in rows)


def test_a_third_of_the_019_logs_held_to_the_target_are_held_out() -> None:
    bench = _benchmark()
    sets = bench.vllm_sets(bench.vllm_rows())
    current = [r for r in sets["tuning"] + sets["held out"] if r.version.startswith("0.19")]
    held_out = [r for r in current if r.held_out]
    assert len(held_out) * 3 >= len(current), (len(held_out), len(current))


def test_the_019_logs_cite_the_llm_d_planner_commit() -> None:
    bench = _benchmark()
    for row in bench.vllm_rows():
        if row.version.startswith("0.19"):
            assert LLM_D_LOGS in row.url, row.url


@pytest.mark.parametrize(
    ("served", "tensor_parallel"),
    [
        # Each was missed by more than 5 % by the v0.11-v0.13 rules this replaces (41 bytes per
        # logit in the sampler profile, 0.3 GiB non-torch, no padded KV groups, no MoE scratch):
        ("google/gemma-2-27b-it", 1),  # -30.9 %: 256k vocabulary, 2 groups of 23 layers
        ("Qwen/Qwen3-30B-A3B", 1),  # -21.2 %: fused-MoE workspace under the sampler
        ("Qwen/Qwen2.5-72B-Instruct", 2),  # -63.9 %: a 3 GiB pool beside 67.8 GiB of weights
        ("Qwen/Qwen2.5-7B-Instruct", 1),  # -6.3 %
        ("google/gemma-7b", 1),  # -11.5 %: a committed config (benchmarks/accuracy/configs/gemma-7b.json)
    ],
)
def test_vllm_019_logs_the_old_rules_missed(served: str, tensor_parallel: int) -> None:
    bench = _benchmark()
    rows = [r for r in bench.vllm_rows() if r.served == served and r.tensor_parallel == tensor_parallel]
    assert rows, served
    for row in rows:
        assert abs(row.error_pct) <= bench.VLLM_TARGET, bench.vllm_label(row)


def test_every_log_left_out_says_why() -> None:
    document = json.loads((ROOT / "benchmarks" / "serving" / "vllm_logs.json").read_text(encoding="utf-8"))
    assert all(e["why"] and LLM_D_LOGS in e["url"] for e in document["excluded"])
    # The FAILED logs: each one's cause as the log states it; those that ran out of memory
    # are named as such.
    causes = {e["log"]: e["cause"] for e in document["failed"]}
    assert all(log.endswith(".FAILED.log") and cause for log, cause in causes.items())
    assert {log for log, cause in causes.items() if cause.startswith("OOM")} == {
        "openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192.FAILED.log",
        "openai-gpt-oss-20b--h100-80gb--tp2pp1dp1--8192.FAILED.log",
    }


def test_log_reader_takes_vllms_own_lines() -> None:
    reader = load_script(ROOT / "benchmarks" / "serving" / "read_vllm_log.py", "read_vllm_log")
    # Ten lines of the Llama-3.1-8B 16k log, verbatim (LLM_D_LOGS +
    # meta-llama-llama-3-1-8b--h100-80gb--tp1pp1dp1--16384.log).
    excerpt = (ROOT / "tests" / "data" / "vllm-0.19.0-llama-3.1-8b-16k-excerpt.log").read_text(encoding="utf-8")
    read = reader.read_log(excerpt)
    assert read["args"]["max_model_len"] == 16384 and read["max_num_seqs"] == 1024
    assert read["logged"] == {
        "non_kv_gib": 17.12,
        "activation_gib": 1.89,
        "non_torch_gib": 0.25,
        "weights_gib": 14.99,
        "total_gib": 79.19,
        "requested_gib": 75.23,
        "cuda_graph_estimate_gib": 0.84,
        "kv_cache_gib": 58.11,
        "kv_cache_tokens": 476_016,
        "max_concurrency": 29.05,
    }


def test_logged_tokens_come_from_vllms_own_counts_when_printed() -> None:
    bench = _benchmark()
    rows = {r.entry_id: r for r in bench.vllm_rows()}
    # Issue #10517 printed "# GPU blocks: 1952": 1952 × 16 tokens.
    assert rows["llama31-8b-3090-20k"].logged_tokens == 1952 * 16

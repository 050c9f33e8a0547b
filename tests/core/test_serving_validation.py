"""Serving estimates against committed observations (run in CI from committed data).

(a) Hugging Face generate peaks measured by tools/measure's serving mode
    (benchmarks/serving/measured): median |error| ≤ 2 %, worst ≤ 5 % (issue 12's targets).
(b) vLLM start-up logs quoted in public GitHub threads (benchmarks/serving/vllm_logs.json,
    one URL per entry): GPU KV cache size within 5 % for every log held to the target.
Nothing in the estimator is fitted per case.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("serving_benchmark", ROOT / "benchmarks" / "serving.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


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
    held = [r for r in rows if not r.outside_target]
    assert len(held) >= 3
    for row in held:
        assert abs(row.error_pct) <= bench.VLLM_TARGET, bench.vllm_table(rows)
    # Every log names the public thread it was quoted from.
    assert all(r.url.startswith("https://github.com/") for r in rows)


def test_logged_tokens_come_from_vllms_own_counts_when_printed() -> None:
    bench = _benchmark()
    rows = {r.entry_id: r for r in bench.vllm_rows()}
    # Issue #10517 printed "# GPU blocks: 1952": 1952 × 16 tokens.
    assert rows["llama31-8b-3090-20k"].logged_tokens == 1952 * 16

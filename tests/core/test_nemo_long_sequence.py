"""NeMo 24.03's long-sequence table as a check on the time model (benchmarks/realgpu/nemo_long_sequence.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
check = load_script(ROOT / "benchmarks" / "realgpu" / "nemo_long_sequence.py", "nemo_long_sequence")


def test_the_flops_are_nemos_llama_formula_on_llama_2_7b() -> None:
    # NeMo's Llama count a token, every key (the corpus' NeMo 24.07 rows recompute to it): l·h²·(12 + 12g/a + 18f/h
    # + 12s/h) + 6Vh. Llama 2 7B (meta-llama/Llama-2-7b-hf config.json: 32 layers, 4,096 wide, 32 heads and KV heads,
    # MLP 11,008, vocab 32,000) at 4,096 tokens: 32 · 4,096² · (12 + 12 + 48.375 + 12) + 6 · 32,000 · 4,096.
    assert check.nemo_flops_per_token(4096) == 32 * 4096**2 * 84.375 + 6 * 32000 * 4096 == 46_084_915_200


def test_one_attention_rate_carries_the_context_parallel_rows_at_the_same_local_length() -> None:
    # NVIDIA/NeMo@0aa26711 docs/source/performance/performance_long_sequence.md, "With-CP": 64K TP 4 CP 2 574, 128K
    # TP 4 CP 4 555, 256K TP 4 CP 8 549 TFLOPS / GPU, 32,768 tokens a CP rank in each. A rate for attention and one for
    # the rest, set by CP 2 and CP 8, give CP 4 within 1 %: Transformer Engine's ring keeps its attention rate as the
    # degree grows, the rule the time model has (torchtitan's Dec-2024 rows do not: docs/TRAINING_TIME.md).
    attention, rest, middle = check.constant_rate_fit()
    assert middle == pytest.approx(555, rel=0.01)
    assert 0 < attention < rest  # attention at a lower rate than the FP8 matmuls and the rest, and positive

"""transformers PR #31172's GPT-2 SDPA training benchmark as a held-out source (issue 22; docs/REAL_GPU_MEMORY.md,
"New held-out figures: transformers' GPT-2 SDPA benchmark"): an outside contributor's gpt2-large runs in float16 on
his own RTX 3080 Ti, fxmarty's loop (huggingface/optimum 20c204f6
tests/benchmark/benchmark_bettertransformer_training_minimal.py): no optimizer, ``loss = outputs.logits.sum()``,
the previous ``outputs`` alive through the next forward. Recorded in full, listed as not expressible, fitting
nothing."""

from __future__ import annotations

from tests.core.memory_corpus import assert_held_out, recorded_figures

SOURCE = "transformers-gpt2-sdpa-pr-2024-06"


def test_the_source_and_its_figures_are_recorded() -> None:
    figures = recorded_figures(SOURCE)
    # Six rows read in full (batch 1 x 128 ... 1,024 tokens, batch 2 x 128 and 256), eager and SDPA each.
    assert len(figures) == 12
    for figure in figures:
        assert figure["metric"] == "allocated" and figure["unit"] == "MB", figure["id"]
        # The script prints max_memory_allocated * 1e-6 (optimum 20c204f6, the minimal training benchmark).
        assert figure["value_bytes"] == round(figure["value"] * 1e6), figure["id"]
        assert f" {figure['value']:g} |" in figure["quote"], figure["id"]  # the published cell, unchanged
        assert figure["location"]["url"].endswith("/pull/31172") and figure["assumptions"], figure["id"]
    # PR #31172's 1 x 1,024 row: eager 8,682.26 MB, SDPA 4,881.09 MB.
    by_id = {f["id"]: f["value"] for f in figures}
    assert by_id["gpt2sdpa-pr31172-gpt2-large-fp16-eager-b1-s1024"] == 8682.26
    assert by_id["gpt2sdpa-pr31172-gpt2-large-fp16-sdpa-b1-s1024"] == 4881.09


def test_it_is_held_out_not_expressible_and_moves_no_fit() -> None:
    mine = assert_held_out(SOURCE, "transformers-sdpa", 12, (), "realgpu_gpt2_sdpa")
    for m in mine:
        assert "a benchmark loop whose loss is logits.sum() (no cross-entropy)" in m.missing, m.id
        assert "optimizer none" in m.missing, m.id
        assert any("keeps the previous step's output" in why for why in m.missing), m.id

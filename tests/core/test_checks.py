"""Plan warnings: valid plans that a user should still hear about (issue 13, item 8)."""

from __future__ import annotations

from core.checks import plan_warnings
from core.estimate import estimate
from core.presets import plan_for_model


def test_a_sequence_past_the_context_window_is_warned_about() -> None:
    # Llama 3.1 8B's config.json: "max_position_embeddings": 131072 (resources/models.json).
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=1_000_000)
    assert plan.model.max_position_embeddings == 131_072
    warnings = plan_warnings(plan)
    assert len(warnings) == 1
    assert "1,000,000" in warnings[0] and "131,072" in warnings[0] and "Llama 3.1 8B" in warnings[0]
    assert estimate(plan).warnings == warnings


def test_a_sequence_at_the_context_window_is_fine() -> None:
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=131_072)
    assert plan_warnings(plan) == ()
    assert estimate(plan).warnings == ()


def test_a_serving_context_past_the_window_is_warned_about() -> None:
    plan = plan_for_model("llama-3.1-8b").with_inference(context=200_000)
    (warning,) = plan_warnings(plan)
    assert "200,000" in warning and "serving" in warning

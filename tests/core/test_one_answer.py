"""One answer everywhere (issue 26): for the same plan and mode, the command line (JSON and
text), comparisons and reports state the verdict and margin the estimate's one judgement
decided. Property-tested over generated plans."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from core.advice.compare import compare
from core.cli.render import estimate_to_json, render_estimate, render_serving
from core.estimate import VERDICT_LABELS, estimate
from core.files.report import build_report, to_markdown
from core.format import memory
from core.plan import Plan
from core.verdict import Mode
from tests.core.strategies import plans

SOME = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SOME
@given(plan=plans())
def test_the_command_line_states_the_judgement(plan: Plan) -> None:
    est = estimate(plan)
    for mode in Mode:
        judged = est.judgement(mode)
        doc = estimate_to_json(est, mode)
        assert doc["verdict"] == doc["judgement"]["verdict"] == judged.verdict.value
        assert doc["margin_bytes"] == round(judged.margin_bytes) and doc["total_bytes"] == round(judged.total_bytes)
        text = render_serving(est) if mode is Mode.INFERENCE else render_estimate(est)
        line = f"{VERDICT_LABELS[judged.verdict]}: {memory(judged.total_bytes)} of {memory(judged.capacity_bytes)}"
        assert line in text and f"margin {memory(judged.margin_bytes)}" in text
    assert estimate_to_json(est)["training"]["verdict"] == est.judgement(Mode.TRAINING).verdict.value


@SOME
@given(plan=plans())
def test_a_comparison_states_the_judgement(plan: Plan) -> None:
    est = estimate(plan)
    for mode in Mode:
        comparison = compare([("a", plan)], mode)
        rows = {row.key: row for row in comparison.rows()}
        assert rows["verdict"].values[0] == VERDICT_LABELS[est.judgement(mode).verdict]
        assert rows["total"].values[0] == est.judgement(mode).total_bytes
        # The memory rows of a serving comparison are the buckets its chart draws: they add up.
        parts = sum(float(row.values[0]) for row in rows.values() if row.key.startswith("bucket."))
        assert parts == pytest.approx(est.judgement(mode).total_bytes if mode is Mode.INFERENCE else parts)
        assert (comparison.cheapest_fit() is not None) <= est.judgement(mode).fits


@FEW
@given(plan=plans())
def test_a_report_states_the_judgement(plan: Plan) -> None:
    for mode in Mode:
        judged = estimate(plan).judgement(mode)
        markdown = to_markdown(build_report([("a", plan)], generated="2026-12-01T00:00:00Z", mode=mode))
        assert f"{VERDICT_LABELS[judged.verdict]}: {memory(judged.total_bytes)}" in markdown
        assert f"margin {memory(judged.margin_bytes)}" in markdown

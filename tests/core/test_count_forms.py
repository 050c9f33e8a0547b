"""One form per kind of quantity (core.format's docstring): counts of parameters, elements and FLOPs read
m × 10ⁿ wherever they are shown. Before (docs/GUI.md, 2026-12-07, left 2) the Arithmetic wrote "8.03e9" and
"427.8e6", the model box "8.03B" and the Compute tab "7.97 × 10¹⁷"."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings

from core.cli.render import render_estimate, render_serving
from core.estimate import estimate
from core.format import sci, scientific, tokens_per_s
from core.plan import Plan
from core.presets import default_plan
from tests.core.strategies import plans

# An e-notation count: "8.03e9", "427.8e6", "6.7e+09" (a version such as "0.5.23" or a hex commit is not one).
# Times are not counts: they are checked apart (E_NOTATION_TIME, core.format.duration's rule).
# A negative exponent is no count either (a typed allowance of 1.4e-120 GB, as Hypothesis types it).
# Nor is a per-element size ("× 1.10592e+06 B": ZeRO-3's gathered modules on a plan Hypothesis drew, {:g}).
E_NOTATION = re.compile(r"(?<![\w.])\d+(\.\d+)?e\+?\d+\b(?! (s|ms|µs|B)\b)")
# A time in e-notation, either sign of exponent: the Compute formula's step times wrote "per step 3.92e-05 s" and
# "1e+03 s" ({:.3g}), the collectives' latency "1.07e+03 ms latency" (docs/GUI.md, 2026-12-07, left 3).
E_NOTATION_TIME = re.compile(r"(?<![\w.])\d+(\.\d+)?e[+-]?\d+ (s|ms|µs|ns)\b")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # the lesson's 7B (seed lesson: P = 6.7e9) and a count that needs its fourth digit to redo its sum:
        # Gemma 2 2B's 2,614,341,888 parameters × 4 B = 10.46 GB, which three digits (2.61) would make 10.44
        (6.7e9, "6.7 × 10⁹"),
        (2_614_341_888, "2.614 × 10⁹"),
        (427.8e6, "4.278 × 10⁸"),
        # whole counts below 10⁸ stay exact: Gemma 2 2B's block matmul weights W (tests/data/golden)
        (77_856_768, "77,856,768"),
        (9.99996e9, "1 × 10¹⁰"),  # rounds up to the next power, never "10 × 10⁹"
        (0.5, "0.5"),
    ],
)
def test_a_formula_s_count_reads_m_times_ten_to_the_n(value: float, text: str) -> None:
    assert sci(value) == text


def test_a_token_rate_has_one_form() -> None:
    assert tokens_per_s(2885.6) == "2,886 tokens/s"
    assert tokens_per_s(float("inf")) == "—"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans())
def test_no_figure_or_formula_writes_a_count_or_a_time_in_e_notation(plan: Plan) -> None:
    est = estimate(plan)
    texts = [t.formula for p in est.phases for b in p.buckets for t in b.terms]
    texts += [est.compute.formula, *(t.formula for t in est.compute.flop_terms), render_estimate(est)]
    texts += [render_serving(est)] if est.inference.total_bytes else []
    texts += [est.compute.host_step_formula, est.compute.host_step_advice, *(t.formula for t in est.compute.comm_terms)]
    texts += [est.inference.speed.formula] if est.inference.total_bytes else []
    for text in texts:
        found = E_NOTATION.search(text) or E_NOTATION_TIME.search(text)
        assert not found, text[max(0, found.start() - 100) : found.end() + 40]


def test_the_model_s_count_reads_as_the_arithmetic_s() -> None:
    est = estimate(default_plan())
    line = render_estimate(est).splitlines()[1]
    assert line.startswith(f"parameters {scientific(est.params.total)} total")
    weights = est.buckets[0].terms[0].formula  # "P × 2 B = 8.03 × 10⁹ × 2 B": the window's first plan
    assert f"{sci(est.params.total)} × " in weights and " × 10⁹" in weights


@pytest.mark.parametrize(
    "text",
    # what the walk found before times took core.format.duration (docs/GUI.md, 2026-12-07, left 3)
    ["per step 3.92e-05 s compute", "= 1e+03 s; 12 steps", "+ 1.07e+03 ms latency (over nvlink)", "1e-04 µs"],
)
def test_the_time_check_catches_what_the_walk_found(text: str) -> None:
    assert E_NOTATION_TIME.search(text)

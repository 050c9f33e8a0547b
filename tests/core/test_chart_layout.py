"""The comparison chart's layout from its least width up (core/files/report.py): every piece of text inside the
chart, none touching another, none cut inside a word.

Before: the chart was never drawn under 360 px (CHART_MIN_WIDTH), so the Compare dock at 1024 × 768 (270 px, a
256 px pane beside its vertical scroll bar) scrolled sideways by 104 px; and at 360 px the phase names were cut
inside their words: "backw…", "optimi…", "nvidia-…" (core.files.report._name_lines clipped each line to its
group). These extents are the layout's own generous estimates (core.files.report._text_px);
tests/gui/test_report_legend.py measures the drawn SVG with Qt's metrics for the font it is painted in.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from core.advice.compare import Comparison, compare
from core.estimate import Mode
from core.files import report as report_module
from core.files.report import (
    CHART_MIN_HEIGHT,
    CHART_MIN_WIDTH,
    CHART_WIDTH,
    Extent,
    chart_extents,
    chart_least_height,
    chart_size,
    chart_svg,
)
from core.model import MAX_NAME_CHARS
from core.presets import default_plan
from tests.core.test_compare import four_plans

# Every width from the least up to past the widest a 1920 px window's dock gives the chart (672 px at 1920 × 1080,
# measured in gui/tools/compare.py's dock) and the report's CHART_WIDTH, in steps of 7 px (a prime: no width class
# skipped by a round step).
WIDTHS = range(CHART_MIN_WIDTH, 1100, 7)


def _comparisons() -> dict[str, Comparison]:
    long_names = [  # as gui/tools/compare.py names a pinned plan: model, method, card × count
        (f"#{i + 1} {name}, NVIDIA GeForce RTX 4090 × 2", plan) for i, (name, plan) in enumerate(four_plans())
    ]
    return {
        # tests/core/test_compare.py's four plans: five phase groups, the last "nvidia-smi / lesson sum (judged)"
        "four": compare(four_plans()),  # type: ignore[arg-type]
        "serving": compare(four_plans(), Mode.INFERENCE),  # type: ignore[arg-type]
        "long names": compare(long_names),  # type: ignore[arg-type]
        "one plan": compare([("The plan", default_plan())]),
    }


def _overlapping(extents: Sequence[Extent]) -> list[tuple[Extent, Extent]]:
    return [
        (a, b)
        for i, a in enumerate(extents)
        for b in extents[i + 1 :]
        if a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom
    ]


@pytest.mark.parametrize("case", ["four", "serving", "long names", "one plan"])
def test_from_the_least_width_up_every_text_lies_inside_and_touches_no_other(case: str) -> None:
    comparison = _comparisons()[case]
    for width in WIDTHS:
        height = chart_least_height(comparison, width)  # the box the Compare tab draws it in
        drawn_w, drawn_h = chart_size(comparison, width, CHART_MIN_HEIGHT)
        assert (drawn_w, drawn_h) == (width, height)
        extents = chart_extents(comparison, width, CHART_MIN_HEIGHT)
        outside = [e for e in extents if e.left < 0 or e.right > width or e.top < 0 or e.bottom > height]
        assert not outside, (width, outside)
        assert not _overlapping(extents), (width, _overlapping(extents)[:2])
        for e in extents:  # no text cut: the names are short enough to wrap whole within core's 3 rows a name
            assert "…" not in e.text, (width, e)


def test_phase_names_wrap_at_spaces_and_hyphens_then_read_upwards() -> None:
    comparison = _comparisons()["four"]
    names = comparison.phase_names()
    assert names[-1] == "nvidia-smi / lesson sum (judged)"  # Comparison.total_name: a lesson plan among detailed
    for width in WIDTHS:
        layout = report_module._layout(comparison, width)
        for name, lines in zip(names, layout.names, strict=True):
            whole = "".join(line if line.endswith("-") else line + " " for line in lines).strip()
            assert whole == name, (width, lines)  # every word whole, broken only at a space or after a hyphen
    # The report's width keeps the names across their groups, as before: one line each, the judged total on two.
    wide = report_module._layout(comparison, CHART_WIDTH)
    assert not wide.upright and wide.names[-1] == ("nvidia-smi / lesson", "sum (judged)")
    assert wide.names[:-1] == tuple((name,) for name in names[:-1])
    # The Compare dock at 1024 × 768 (256 px): "backward" (59 px by core's estimate) is wider than its 30 px group:
    # every name reads upwards, each in the lines its group holds side by side (two of _NAME_LINE's 13 px).
    narrow = report_module._layout(comparison, 256)
    assert narrow.upright and narrow.names[0] == ("forward", "+ loss") and narrow.names[1] == ("backward",)


def test_a_long_plan_name_wraps_onto_rows_of_its_own_under_its_number() -> None:
    comparison = _comparisons()["long names"]
    layout = report_module._layout(comparison, 256)
    first = [e for e in layout.legend if e.key == "1" and e.kind in ("plan", "more")]
    assert [e.kind for e in first][:2] == ["plan", "more"]  # wrapped, not cut
    assert all(e.x == first[1].x for e in first[1:])  # the further rows indented past the number
    assert " ".join(e.text for e in first) == comparison.plans[0].name
    rows = [e.row for e in layout.legend]
    assert rows == sorted(rows) and len(set(zip(rows, [e.x for e in layout.legend], strict=True))) == len(rows)


def test_a_name_longer_than_three_rows_is_cut_at_a_word_and_a_word_wider_than_a_row_inside_it() -> None:
    plans = four_plans()
    words = " ".join(["Llama"] * 60)  # 359 characters: more than _PLAN_LINES rows at any width
    named = [(words, plans[0][1]), ("W" * MAX_NAME_CHARS, plans[1][1])]  # core.model.MAX_NAME_CHARS: the longest
    comparison = compare(named)  # type: ignore[arg-type]
    for width in (CHART_MIN_WIDTH, CHART_WIDTH):
        legend = report_module._layout(comparison, width).legend
        first = [e.text for e in legend if e.key == "1"]
        assert len(first) == 3 and first[-1].endswith("Llama…") and all("Llama" in t for t in first)
        second = [e.text for e in legend if e.key == "2"]
        assert second == [second[0]] and second[0].endswith("W…")  # one word: nothing to break at
        extents = chart_extents(comparison, width, CHART_MIN_HEIGHT)
        assert all(e.left >= 0 and e.right <= width for e in extents)


def test_the_report_s_chart_keeps_its_width_and_its_text_across() -> None:
    # A report's chart (HTML, PDF, the exported SVG) is drawn at CHART_WIDTH (760 px): the phase names across
    # their groups and the plans' numbers at the SVG's 11 px, as before the narrow layout.
    comparison = _comparisons()["four"]
    svg = chart_svg(comparison)
    assert 'width="760"' in svg and svg.count("rotate(-90") == 1  # the axis title alone turned
    assert 'font-size="8"' not in svg and ">backward</text>" in svg

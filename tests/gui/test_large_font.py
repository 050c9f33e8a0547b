"""The window at the largest text an OS setting gives (the application font × 1.5: 13.5 pt offscreen)
on a 1366 × 768 laptop: every Details tab within reach, the panels' rows whole, the chart's legend and
the verdict's headline no smaller than the text around them (project check of 2026-12-07)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtGui import QFont, QFontDatabase, QFontMetricsF, QTextDocument
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from core.catalogue import find_model
from core.plan import Hardware, Plan
from gui.main_window import MainWindow
from gui.settings import Settings

# KDE's and GNOME's text scaling go to 1.5 × and beyond; Windows' "Make text bigger" to 225 %.
SCALE = 1.5


@pytest.fixture
def big_window(qtbot: Any, settings: Settings) -> Iterator[MainWindow]:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    before = QFont(app.font())
    big = QFont(before)
    big.setPointSizeF(before.pointSizeF() * SCALE)
    app.setFont(big)
    try:
        main = MainWindow(settings=settings)
        qtbot.addWidget(main)
        main.resize(1366, 768)
        main.show()
        qtbot.waitExposed(main)
        qtbot.wait(20)
        yield main
    finally:
        app.setFont(before)


def _content_fits(panel: QWidget) -> bool:
    """A scrolled panel's rows need no more width than it shows (it scrolls up and down only)."""
    if isinstance(panel, QScrollArea):
        inner = panel.widget()
        assert inner is not None
        return inner.minimumSizeHint().width() <= panel.viewport().width()
    return panel.minimumSizeHint().width() <= panel.width()


def test_every_details_tab_and_panel_fits_at_the_largest_text(qtbot: Any, big_window: MainWindow) -> None:
    # Before: the dock kept its 270 px least width measured at 9 pt: the tab bar (348 px of short names)
    # scrolled "Diagnosis" out of sight, and the Diagnosis' rows (352 px: "Show remedies for this symptom",
    # the symptom picker) were cut on the right ("nvidia-sm", "usable on NVIDIA A100 80G").
    window = big_window
    tabs = window.tabs
    assert tabs.tabBar().sizeHint().width() <= tabs.width()
    for panel in (window.diagnosis, window.inference_panel):
        tabs.setCurrentWidget(panel)
        qtbot.wait(20)
        assert _content_fits(panel), type(panel).__name__
    # Serving on vLLM, whose Serving tab has the most rows.
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="vllm", context=8192))
    tabs.setCurrentWidget(window.diagnosis)
    qtbot.wait(20)
    assert _content_fits(window.diagnosis)


def test_the_charts_legend_follows_the_text_size(big_window: MainWindow) -> None:
    # pyqtgraph's LegendItem draws its text at a fixed '9pt' (pyqtgraph 0.14 LegendItem.__init__
    # labelTextSize): at 13.5 pt the legend was the one small text in the window.
    legend = big_window.chart.legend
    assert legend.labelTextSize() == f"{big_window.font().pointSizeF():g}pt" == "13.5pt"
    assert all(label.opts["size"] == "13.5pt" for _, label in legend.items)


def _largest_pt(html: str) -> float:
    """The largest point size a rich text sets (QTextDocument's reading of the label's text)."""
    document = QTextDocument()
    document.setHtml(html)
    sizes, block = [], document.begin()
    while block.isValid():
        for fragment in _fragments(block):
            sizes.append(fragment.charFormat().fontPointSize())
        block = block.next()
    return max(sizes)


def _fragments(block: Any) -> Iterator[Any]:
    it = block.begin()
    while not it.atEnd():
        yield it.fragment()
        it += 1


def test_the_verdicts_headline_and_badges_stay_larger_than_the_text(qtbot: Any, big_window: MainWindow) -> None:
    # The banner's headline was a fixed 13 pt and its badge 17 pt (the Diagnosis' 13 pt), chosen at a 9 pt
    # font: at 13.5 pt the headline "34.8 GB of 77.3 GB usable" was smaller than the detail lines under it.
    body = big_window.font().pointSizeF()
    verdict = big_window.verdict
    assert _largest_pt(verdict.headline.text()) == pytest.approx(13 * SCALE)
    assert body < 13 * SCALE
    verdict.badge.ensurePolished()
    assert verdict.badge.font().pointSizeF() == pytest.approx(17 * SCALE)
    big_window.tabs.setCurrentWidget(big_window.diagnosis)
    qtbot.waitUntil(lambda: not big_window.diagnosis.stale, timeout=60_000)
    badge = big_window.diagnosis.badge
    badge.ensurePolished()
    assert badge.font().pointSizeF() == pytest.approx(13 * SCALE)


def test_the_bar_names_never_run_into_each_other(big_window: MainWindow) -> None:
    # At 13.5 pt the chart keeps ~350 px at 1366 × 768 (the forms and the Details take their least widths):
    # "backward" and "optimizer" (87 px each on two lines in a 64 px slot) ran into each other. A line wider
    # than its slot is cut with an ellipsis; the whole names are the axis's tooltip.
    chart = big_window.chart
    axis = chart.plot.getAxis("bottom")
    metrics = QFontMetricsF(axis.style["tickFont"] or chart.font())
    slot = chart._slot_width()
    names = [name for _, name in axis._tickLevels[0]]
    assert len(names) == 4
    assert all(metrics.horizontalAdvance(line) <= slot for name in names for line in name.split("\n"))
    assert any("…" in name for name in names) and "optimizer step" in axis.toolTip()


def test_the_arithmetics_sum_is_no_smaller_than_the_text(big_window: MainWindow) -> None:
    # The sum at the peak used the system fixed font as it is (9 pt offscreen) beside 13.5 pt text.
    assert big_window.arithmetic.summary.font().pointSizeF() >= big_window.font().pointSizeF() == 13.5
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    assert big_window.arithmetic.summary.font().family() == fixed.family()  # still the fixed-width face

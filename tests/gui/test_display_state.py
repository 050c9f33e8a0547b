"""Display state: unit, mode, measurement and selected bucket in one object with one signal."""

from __future__ import annotations

from typing import Any

from core.estimate import estimate
from core.plan import Method, Precision
from core.presets import default_plan, lesson_plan
from core.verdict import Mode, Verdict
from gui.display_state import Display, DisplayState
from gui.format import memory
from gui.main_window import MainWindow


def test_one_signal_only_on_a_real_change(qtbot: Any) -> None:
    state = DisplayState()
    seen: list[Display] = []
    state.changed.connect(seen.append)
    assert not state.set_unit("GB")  # already GB: nothing emitted
    assert state.set_unit("GiB") and seen == [Display(unit="GiB")]
    assert state.select_bucket("weights")
    assert state.set_mode(Mode.INFERENCE)
    # A pick belongs to the mode it was made in: the mode change cleared it in the same emission.
    assert seen[-1] == Display(unit="GiB", mode=Mode.INFERENCE, selected_bucket="")
    assert len(seen) == 3


def test_the_window_follows_the_display_state(window: MainWindow) -> None:
    window.display.set_unit("GiB")
    assert window.unit == "GiB" and window.unit_actions["GiB"].isChecked()
    assert window.chart.unit == "GiB" and window.verdict.unit == "GiB" and window.diagnosis.unit == "GiB"
    assert window.settings.unit == "GiB"
    window.display.set_mode(Mode.INFERENCE)
    assert window.inference_action.isChecked() and window.chart.mode == "inference"
    assert window.arithmetic.selected == "serving.kv_cache"  # the mode's own bucket
    window.display.select_bucket("kv_cache")
    assert window.chart.selected == "kv_cache"


def test_lesson_7b_on_an_a100_reads_over_headroom(window: MainWindow) -> None:
    """Issue 13 item 6: 81.9 GB on an A100 80GB said "Tight" beside "4.59 GB over"."""
    window.controller.set_plan(lesson_plan(Method.FULL, Precision.BF16))
    est = window.controller.estimate
    assert est.verdict is Verdict.OVER_HEADROOM
    badge = window.verdict.badge.text()
    assert "Over headroom" in badge and "Tight" not in badge and "Fits" not in badge
    headline = window.verdict.headline.text()
    assert memory(-est.margin_bytes) in headline and "headroom you keep free" in headline
    assert f"{memory(est.capacity_bytes - est.total_bytes)} under the card's capacity" in headline


def test_serving_verdict_has_the_over_headroom_band_too(qtbot: Any, window: MainWindow) -> None:
    """The serving badge was decided in the view as fits / out of memory only."""
    window.show()
    qtbot.waitExposed(window)
    window.tabs.setCurrentWidget(window.inference_panel)
    window.set_chart_mode("inference")
    base = default_plan()
    banded = next(
        plan
        for n in range(1, 400)
        if (plan := base.with_inference(concurrent=n, context=8192))
        and estimate(plan).inference.verdict is Verdict.OVER_HEADROOM
    )
    window.controller.set_plan(banded)
    assert "Serving: over headroom" in window.verdict.badge.text()
    assert "under the card's capacity" in window.verdict.headline.text()
    assert window.inference_panel.headline is not None
    assert "over headroom" in window.inference_panel.headline.text()  # the Serving tab said "fits"

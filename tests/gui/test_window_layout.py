"""The window at the sizes people use (issue 13, items 8-10, 13): 1024 × 700 usable, nothing
clipped at 1280 × 720 or 1920 × 1080, panels that grow, and a verdict that leads somewhere."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QScrollArea,
    QStyle,
    QStyleOptionComboBox,
    QWidget,
)

from core.estimate import Verdict
from core.plan import Method, Precision
from core.presets import lesson_plan, plan_for_model
from gui.main_window import MainWindow


def shown_at(qtbot: Any, window: MainWindow, width: int, height: int) -> None:
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(10)


def test_the_window_can_be_1024_by_700(qtbot: Any, window: MainWindow) -> None:
    # Before: the verdict's one-line headline and both docks' fixed minimums held it at 1,339 px.
    assert window.minimumSizeHint().width() <= 1024
    shown_at(qtbot, window, 1024, 700)
    assert (window.width(), window.height()) == (1024, 700)
    assert window.chart.plot.width() >= 300 and window.chart.plot.height() >= 250
    assert window.plan_dock.width() >= 280
    assert _cut_by_the_plan_column(window) == []
    assert _chart_overflows(window) == []


def test_the_time_tab_keeps_the_window_at_1024(qtbot: Any, window: MainWindow) -> None:
    # Before: the FLOPs-per-token line (run · MFU count · causal, issue 24) on one unwrapped
    # line held the Details dock at ~500 px: the window grew to 1,038 px and the chart shrank
    # to a sliver (seen on the README's 16-GPU example, rendered at 1024 × 700).
    from gui.screenshot import parallel_plan

    window.controller.reset(parallel_plan())
    window.tabs.setCurrentWidget(window.compute_panel)
    assert window.minimumSizeHint().width() <= 1024
    shown_at(qtbot, window, 1024, 700)
    assert (window.width(), window.height()) == (1024, 700)
    assert window.chart.plot.width() >= 300


def _cut_by_the_plan_column(window: MainWindow) -> list[str]:
    """Form fields whose right edge lies past the plan column's visible width (no side scroll)."""
    viewport = window.plan_dock.widget().viewport()
    cut = []
    for form in window.forms:
        for key, field in form.fields.items():
            if field.isVisibleTo(window) and field.mapTo(viewport, QPoint(field.width(), 0)).x() > viewport.width():
                cut.append(key)
    return cut


def _chart_overflows(window: MainWindow) -> list[str]:
    """The legend past the plot's edge, or bar names wider than their bar's slot."""
    found = []
    view = window.chart.view.sceneBoundingRect()
    legend = window.chart.legend.sceneBoundingRect()
    if legend.right() > view.right() + 1:
        found.append(f"legend ends at {legend.right():.0f} px, the plot at {view.right():.0f} px")
    axis = window.chart.plot.getAxis("bottom")
    metrics = QFontMetrics(axis.style["tickFont"] or window.chart.font())
    bars = window.chart.bars()
    slot = view.width() / (len(bars) + 0.2)  # the view spans n bars plus 0.2 of margins
    for _x, label in axis._tickLevels[0]:
        widest = max(metrics.horizontalAdvance(line) for line in label.split("\n"))
        if widest > slot:
            found.append(f"“{label}” is {widest} px in a {slot:.0f} px slot")
    return found


def _clipped(root: QWidget) -> list[str]:
    """Visible controls and labels narrower than the least they need to show their text."""
    found = []
    for widget in root.findChildren(QWidget):
        if not widget.isVisibleTo(root) or not isinstance(
            widget, (QLabel, QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit)
        ):
            continue
        if isinstance(widget, QLabel) and widget.wordWrap():
            continue
        need = widget.minimumSizeHint().width()
        if widget.width() < need:
            name = widget.objectName() or widget.accessibleName()
            found.append(f"{type(widget).__name__} {name}: {widget.width()} < {need}")
    return found


@pytest.mark.parametrize(("width", "height"), [(1280, 720), (1920, 1080)])
def test_nothing_is_clipped(qtbot: Any, window: MainWindow, width: int, height: int) -> None:
    shown_at(qtbot, window, width, height)
    assert (window.width(), window.height()) == (width, height)
    assert _clipped(window) == []
    assert _cut_by_the_plan_column(window) == []
    assert _chart_overflows(window) == []
    bar = window.tabs.tabBar()
    for index in range(bar.count()):
        rect = bar.tabRect(index)
        # Before: "Dia…" at 1920 × 1080, the Details dock kept at 340 px.
        assert bar.rect().contains(rect), bar.tabText(index)
        assert rect.width() >= bar.tabSizeHint(index).width(), bar.tabText(index)


def test_at_1920_every_details_tab_fits_its_dock(qtbot: Any, window: MainWindow) -> None:
    """A page that scrolls only up and down is cut on the right when it is wider than the dock
    (the Diagnosis, 628 px at least, was cut in a 595 px dock)."""
    shown_at(qtbot, window, 1920, 1080)
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        page = window.tabs.widget(index)
        if isinstance(page, QScrollArea) and page.widget() is not None:
            need = page.widget().minimumSizeHint().width()
            assert need <= page.viewport().width(), window.tabs.tabText(index)


def test_the_panels_grow_with_the_window(qtbot: Any, window: MainWindow) -> None:
    shown_at(qtbot, window, 1280, 720)
    narrow = window.details_dock.width(), window.plan_dock.width()
    shown_at(qtbot, window, 1920, 1080)
    wide = window.details_dock.width(), window.plan_dock.width()
    assert wide[0] > narrow[0] + 100
    assert wide[1] >= narrow[1]


def test_the_verdict_leads_to_the_diagnosis(qtbot: Any, window: MainWindow) -> None:
    shown_at(qtbot, window, 1280, 720)
    button = window.diagnosis_button
    assert window.controller.estimate.verdict is Verdict.FITS and button.isHidden()
    window.controller.set_plan(window.controller.plan.with_hardware(gpu="rtx-3060-12gb"))
    assert window.controller.estimate.verdict is Verdict.OOM
    assert button.isVisible() and button.accessibleName()
    window.tabs.setCurrentWidget(window.arithmetic)
    button.click()
    assert window.tabs.currentWidget() is window.diagnosis
    assert window.details_dock.isVisible()


def test_a_sequence_past_the_context_window_is_shown(qtbot: Any, window: MainWindow) -> None:
    shown_at(qtbot, window, 1280, 720)
    assert window.plan_warning.isHidden()
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=1_000_000)
    window.controller.set_plan(plan)
    assert window.plan_warning.isVisible()
    assert "131,072" in window.plan_warning.text() and "1,000,000" in window.plan_warning.text()
    qtbot.wait(10)
    # The banner grows for the warning instead of squeezing the verdict above it.
    verdict = window.verdict
    assert verdict.height() >= verdict.heightForWidth(verdict.width())
    warning = window.plan_warning
    assert warning.height() >= warning.heightForWidth(warning.width())
    window.controller.undo_stack.undo()
    assert window.plan_warning.isHidden()


def test_lesson_fields_sit_near_the_top(qtbot: Any, window: MainWindow) -> None:
    shown_at(qtbot, window, 1280, 720)
    window.controller.set_plan(lesson_plan(Method.FULL, Precision.BF16))
    qtbot.wait(10)
    scroll = window.plan_dock.widget()
    viewport = scroll.viewport()
    assert scroll.verticalScrollBar().value() == 0
    for field in (window.accounting_form.params, window.accounting_form.trainable):
        bottom = field.mapTo(viewport, QPoint(0, field.height())).y()
        assert field.isVisible() and bottom <= viewport.height(), field.accessibleName()


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1280, 720)])
def test_picker_names_show_whole(qtbot: Any, window: MainWindow, width: int, height: int) -> None:
    """Before: "NVIDIA GeForce RTX 3060 12GB" showed as "…RTX 3060 12GE" in a 190 px box."""
    shown_at(qtbot, window, width, height)
    for picker in (window.model_form.picker, window.hardware_form.gpu):
        line = picker.lineEdit()
        room = line.width() - 6  # the line edit's own text margins
        for index in range(picker.count()):
            text = picker.itemText(index)
            assert line.fontMetrics().horizontalAdvance(text) <= room, text


def test_another_card_changes_the_legend_text_not_its_columns(qtbot: Any, window: MainWindow) -> None:
    """The legend's columns were chosen afresh (up to three layouts) whenever the capacity's
    figure changed; they are chosen for the widest figure, once per plot width."""
    shown_at(qtbot, window, 1400, 900)
    legend = window.chart.legend
    columns = legend.columnCount
    rebuilt: list[int] = []
    original = type(legend).setColumnCount
    try:
        type(legend).setColumnCount = lambda self, n: (rebuilt.append(n), original(self, n))[1]  # type: ignore[method-assign]
        for card in ("rtx-3060-12gb", "h100-sxm", "rtx-4090"):
            window.controller.set_plan(window.controller.plan.with_hardware(gpu=card))
            qtbot.wait(5)
            assert any(label.text.startswith("capacity") and "GB" in label.text for _, label in legend.items)
            assert _chart_overflows(window) == []
        assert rebuilt == [] and legend.columnCount == columns
        # A custom card of 9,000 GB: wider than foreseen, so the legend takes fewer columns to fit.
        huge = window.controller.plan.with_hardware(gpu="custom", custom_memory_gb=9000.0)
        window.controller.set_plan(huge)
        qtbot.wait(5)
        assert _chart_overflows(window) == []
    finally:
        type(legend).setColumnCount = original  # type: ignore[method-assign]


def test_the_verdict_banner_never_lies_over_the_docks_below(qtbot: Any, window: MainWindow) -> None:
    """A banner that gave back room moved the docks below it up, but kept its own old height
    over them (the Plan dock's title hidden under it): its new least height reached the
    window after the docks were resized."""
    window.controller.set_plan(window.controller.plan.with_hardware(gpu="rtx-3060-12gb"))  # taller
    shown_at(qtbot, window, 1280, 720)
    window.controller.set_plan(window.controller.plan.with_hardware(gpu="h100-sxm"))
    window.settle_banner()  # as a pause in the edits does

    def apart() -> bool:
        verdict, plan = window.verdict_dock.geometry(), window.plan_dock.geometry()
        return verdict.bottom() < plan.top() and verdict.height() <= window._banner.minimumHeight() + 2

    assert apart(), (window.verdict_dock.geometry(), window.plan_dock.geometry(), window._banner.minimumHeight())
    window.resize(1024, 700)
    qtbot.wait(50)
    assert apart(), (window.verdict_dock.geometry(), window.plan_dock.geometry(), window._banner.minimumHeight())


def test_at_1024_by_700_the_details_show_whole(qtbot: Any, window: MainWindow) -> None:
    # Issue 26, cosmetic: at 1024 × 700 the Diagnosis text was cut on the right (its content
    # was wider than the dock) and the tab bar scrolled "Compute & time" out of sight.
    shown_at(qtbot, window, 1024, 700)
    window.controller.set_plan(lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090"))
    window.tabs.setCurrentWidget(window.diagnosis)
    qtbot.waitUntil(lambda: not window.diagnosis.stale, timeout=10_000)
    qtbot.wait(50)
    bar = window.tabs.tabBar()
    assert all(bar.tabRect(i).right() <= bar.width() for i in range(bar.count()))
    assert {bar.tabToolTip(i) for i in range(bar.count())} >= {"Compute & time", "Arithmetic"}
    panel = window.diagnosis
    assert panel.widget().minimumSizeHint().width() <= panel.viewport().width()
    # At a normal width the tabs keep their full names.
    shown_at(qtbot, window, 1600, 900)
    assert "Compute && time" in [bar.tabText(i) for i in range(bar.count())]


def test_a_first_start_opens_the_window_at_a_usable_size(qtbot: Any, window: MainWindow) -> None:
    """No saved geometry: 80 % of the screen, at least 1024 × 700 where the screen has room.

    Before: the window took its size hint, 780 × 533, and the two side docks' least widths
    left the chart 9 pixels wide in the first painted frame."""
    from PySide6.QtCore import QSize

    from gui.main_window import first_size

    assert first_size(QSize(1920, 1040)) == QSize(1536, 832)
    assert first_size(QSize(1280, 760)) == QSize(1024, 700)  # the least the layout is made for
    assert first_size(QSize(800, 600)) == QSize(800, 600)  # never past the screen
    assert window.settings.geometry is None
    window.restore_session()
    window.show()
    qtbot.waitExposed(window)
    assert window.size() == first_size(window.screen().availableGeometry().size())
    assert window.width() >= min(1024, window.screen().availableGeometry().width())
    # The offscreen test screen is 800 px wide: the plan column's least width (~420 px) and the
    # Details dock's (270) leave the chart ~90 px there, 9 before; >= 300 from 1024 px up (above).
    assert window.chart.plot.width() >= 60


def test_the_cards_notes_are_as_tall_as_their_lines(qtbot: Any, window: MainWindow) -> None:
    """The Hardware form's notes under the GPU picker (the card's memory and speed, what it
    cannot run, its price) take the height of their lines at the width they have.

    Before: a form row gave each wrapped note its size hint, worked out for a narrow width:
    the card's two lines got four lines' height, a blank line above and below them."""
    shown_at(qtbot, window, 1280, 900)
    form = window.hardware_form
    for note in (form.card, form.limits):
        assert note.text()  # the default card has both: its speed, and fp8 it cannot run
        assert note.height() == note.heightForWidth(note.width()), note.accessibleName()


def _squeezed(root: QWidget) -> list[str]:
    """Visible word-wrapped labels shorter than their wrapped text: the last lines cut off."""
    found = []
    for label in root.findChildren(QLabel):
        if label.isVisibleTo(root) and label.wordWrap() and label.text():
            need = label.heightForWidth(label.width())
            if label.height() < need:
                found.append(f"{label.accessibleName()}: {label.height()} < {need} px")
    return found


def test_the_serving_speed_shows_its_assumptions_whole_at_1280_by_720(qtbot: Any, window: MainWindow) -> None:
    """Before: Hugging Face generate's assumptions (four requests, three running, the rest
    waiting) were cut after four lines at 1280 × 720: the Compute tab did not scroll, so its
    wrapped labels were squeezed between the figures and the throughput plot."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    window.set_chart_mode("inference")
    window.controller.reset(plan.with_inference(engine="hf", context=8192, concurrent=4))
    shown_at(qtbot, window, 1280, 720)
    window.tabs.setCurrentWidget(window.compute_panel)
    qtbot.wait(100)
    assert _squeezed(window.compute_panel) == []
    assert window.compute_panel.serving.plot.height() >= 180


def _elided_choices(root: QWidget) -> list[str]:
    """Choices of the visible drop-down lists wider than the box that shows the chosen one."""
    found = []
    for combo in root.findChildren(QComboBox):
        if not combo.isVisibleTo(root) or combo.isEditable():
            continue
        option = QStyleOptionComboBox()
        combo.initStyleOption(option)
        field = QStyle.SubControl.SC_ComboBoxEditField
        room = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option, field, combo).width()
        for index in range(combo.count()):
            text = combo.itemText(index)
            if combo.fontMetrics().horizontalAdvance(text) > room:
                found.append(f"{combo.accessibleName()}: {text!r}")
    return found


def test_every_choice_shows_whole_in_the_plan_column_at_1280_by_720(qtbot: Any, window: MainWindow) -> None:
    """Before: four choices were cut once picked, e.g. vLLM's sampler "auto (pip install: no
    FlashInfer sampl", the precision "fp16 AMP (float32 weights, GradS"."""
    from gui.screenshot import parallel_plan

    shown_at(qtbot, window, 1280, 720)
    base = plan_for_model("llama-3.1-8b")
    found: set[str] = set()
    plans = [("training", base.with_changes(method=Method.QLORA)), ("training", parallel_plan())]
    plans += [("inference", base.with_inference(engine=engine)) for engine in ("vllm", "sglang", "hf", "llamacpp")]
    for mode, plan in plans:
        window.set_chart_mode(mode)
        window.controller.reset(plan)
        qtbot.wait(10)
        found.update(_elided_choices(window.plan_dock.widget()))
    assert sorted(found) == []

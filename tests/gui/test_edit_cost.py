"""What one edit costs the window (issue 13, item 14): which widgets it re-lays out.

Timing depends on the machine; these tests check the work instead. Qt passes every
re-layout upwards, so a label's new text used to re-lay out the main window and all its
docks at each edit; and the stack's Undo action, whose text names the last change, re-laid
out the toolbar (and so the window) too.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QObject, QPoint, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolBar, QToolButton, QToolTip, QWidget

from core.catalogue import find_model
from core.plan import Strategy
from gui.layout import LayoutFence
from gui.main_window import MainWindow
from gui.worker.process import StopChannel
from tests.gui import worker_jobs


class LayoutRequests(QObject):
    """Counts the layout passes (or, with ``kind``, other events) each watched widget gets."""

    def __init__(self, *widgets: QWidget, kind: QEvent.Type = QEvent.Type.LayoutRequest) -> None:
        super().__init__()
        self.kind = kind
        self.counts: Counter[QWidget] = Counter()
        for widget in widgets:
            widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == self.kind and isinstance(watched, QWidget):
            self.counts[watched] += 1
        return False


def shown(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(10)


def settle(qtbot: Any) -> None:
    for _ in range(6):
        QApplication.processEvents()


def quiet(qtbot: Any, window: QWidget) -> None:
    """Shown and done painting: the first paints and deferred layouts of a new window end at
    a time that depends on the machine's load, and would be counted as the edit's."""
    painted = LayoutRequests(window, *window.findChildren(QWidget), kind=QEvent.Type.Paint)
    for _ in range(100):
        painted.counts.clear()
        qtbot.wait(20)
        if not painted.counts:
            break
    for widget in (window, *window.findChildren(QWidget)):
        widget.removeEventFilter(painted)


def test_an_edit_lays_out_the_panels_but_not_the_window(qtbot: Any, window: MainWindow) -> None:
    shown(qtbot, window)
    window.workload_form.seq_len.setValue(512)  # the first edit enables Undo: a toolbar change
    settle(qtbot)
    toolbar = window.findChild(QToolBar, "mainToolbar")
    assert isinstance(toolbar, QToolBar)
    watched = LayoutRequests(window, toolbar, window.verdict, window.arithmetic)
    painted = LayoutRequests(window.tabs.tabBar(), window.arithmetic.summary, kind=QEvent.Type.Paint)
    before = window.verdict.headline.text()
    for sequence in (1024, 3072, 4096):
        window.workload_form.seq_len.setValue(sequence)
        settle(qtbot)
    # The edits changed the verdict's figures and the arithmetic: both re-laid themselves out...
    assert window.controller.plan.workload.seq_len == 4096
    assert window.verdict.headline.text() != before
    assert watched.counts[window.verdict] >= 3 and watched.counts[window.arithmetic] >= 1
    # ...and neither the toolbar nor the main window with its docks had to.
    assert watched.counts[toolbar] == 0
    assert watched.counts[window] == 0
    # The Details tabs: the page's new sum repainted (the label alone: it is opaque), not the
    # tab bar above it.
    assert painted.counts[window.arithmetic.summary] >= 1 and painted.counts[window.tabs.tabBar()] == 0


def test_undo_becoming_possible_or_not_lays_out_neither_the_toolbar_nor_the_window(
    qtbot: Any, window: MainWindow
) -> None:
    """An edit that returns a field to its value merges away with the one before it, so Undo
    turns off and on again as a user nudges a spin box back and forth: the toolbar button
    follows it without the toolbar (and so the main window and every dock) re-laid out."""
    shown(qtbot, window)
    toolbar = window.findChild(QToolBar, "mainToolbar")
    assert isinstance(toolbar, QToolBar)
    button = toolbar.widgetForAction(window.undo_button_action)
    assert isinstance(button, QToolButton)
    quiet(qtbot, window)
    watched = LayoutRequests(window, toolbar)
    old = window.controller.plan.workload.micro_batch
    states = []
    for value in (old + 1, old, old + 1, old):  # the second edit of the field merges with the first
        window.workload_form.micro_batch.setValue(value)
        settle(qtbot)
        states.append(button.isEnabled())
    assert states == [True, False, True, False]  # the button followed the stack each time
    assert watched.counts[toolbar] == 0 and watched.counts[window] == 0


def test_an_edit_sets_again_only_the_forms_whose_fields_show_something_else(
    qtbot: Any, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Setting every field of every form again at each edit was a sixth of its time."""
    shown(qtbot, window)
    redrawn: Counter[str] = Counter()
    for form in window.forms:
        original = form.show_plan

        def counted(plan: Any, original: Any = original, name: str = type(form).__name__) -> None:
            redrawn[name] += 1
            original(plan)

        monkeypatch.setattr(form, "show_plan", counted)
    window.workload_form.micro_batch.setValue(window.controller.plan.workload.micro_batch + 1)
    assert redrawn == Counter({"WorkloadForm": 1})
    # A change other forms read (the model: the method form's layer count and LoRA targets,
    # the hardware and parallel forms' rows) sets those again too.
    redrawn.clear()
    qwen = find_model("qwen2.5-3b")  # 36 layers (its config.json), Llama 3.1 8B's 32
    window.controller.set_plan(window.controller.plan.with_changes(model=qwen.spec, model_id=qwen.id))
    assert {"ModelForm", "MethodForm"} <= set(redrawn)
    assert window.method_form.frozen.maximum() == window.controller.plan.model.num_layers


def test_a_dock_still_follows_its_contents_least_size(qtbot: Any, window: MainWindow) -> None:
    shown(qtbot, window)
    fence = window.details_dock.widget()
    assert isinstance(fence, LayoutFence) and fence.inner is window.tabs
    watched = LayoutRequests(window)
    window.tabs.setMinimumWidth(window.details_dock.width() + 40)
    settle(qtbot)
    assert watched.counts[window] >= 1  # the change reached the main window...
    assert window.details_dock.width() >= window.tabs.minimumWidth()  # ...which made room
    assert window.tabs.geometry() == fence.rect()


def test_the_toolbar_undo_button_undoes_and_names_the_change(qtbot: Any, window: MainWindow) -> None:
    shown(qtbot, window)
    toolbar = window.findChild(QToolBar, "mainToolbar")
    assert isinstance(toolbar, QToolBar)
    button = toolbar.widgetForAction(window.undo_button_action)
    assert isinstance(button, QToolButton) and not button.isEnabled()
    assert button.text() == "Undo"
    old = window.controller.plan.workload.micro_batch
    window.workload_form.micro_batch.setValue(old + 1)
    assert button.isEnabled() and button.text() == "Undo"  # the button's own text stays
    # Its tooltip, asked for by hovering, names the change as the Edit menu does.
    event = QHelpEvent(QEvent.Type.ToolTip, QPoint(2, 2), button.mapToGlobal(QPoint(2, 2)))
    QApplication.sendEvent(button, event)
    assert QToolTip.isVisible() and QToolTip.text() == window.undo_action.toolTip()
    assert "micro" in QToolTip.text().lower()
    QToolTip.hideText()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert window.controller.plan.workload.micro_batch == old
    redo = toolbar.widgetForAction(window.redo_button_action)
    assert redo is not None and redo.isEnabled() and not button.isEnabled()
    qtbot.mouseClick(redo, Qt.MouseButton.LeftButton)
    assert window.controller.plan.workload.micro_batch == old + 1


def test_a_taller_verdict_gets_its_height_within_the_edit(qtbot: Any, window: MainWindow) -> None:
    window.resize(1024, 700)  # where the longer verdict wraps to more lines than the badge is tall
    shown(qtbot, window)
    short = window.verdict.height()
    # Out of memory on four 12 GB cards in two pipeline stages: the margin's longer wording,
    # and a line naming the rank that decides.
    oom = window.controller.plan.with_hardware(gpu="rtx-3060-12gb").on_gpus(4, Strategy.FSDP)
    window.controller.set_plan(oom.with_parallel(pipeline_parallel=2))
    assert len(window.controller.estimate.ranks) > 1
    # No event processed yet: the edit itself measured the verdict and made room for it, as
    # tall as its wrapped text needs at the width it has.
    verdict = window.verdict
    needed = verdict.heightForWidth(verdict.width())
    assert needed > short
    assert verdict.height() >= needed
    for label in (verdict.headline, verdict.detail):  # and no line of it is cut
        assert label.height() >= label.heightForWidth(label.width())


def test_the_verdict_gives_back_room_only_once_the_edits_pause(qtbot: Any, window: MainWindow) -> None:
    """A banner that shrank at the edit that needed less moved the chart up, and re-laid out
    and repainted the whole window, at every other keystroke (issue 13, item 14)."""
    window.resize(1024, 700)  # where the longer verdict wraps to more lines than the badge is tall
    shown(qtbot, window)
    window.workload_form.seq_len.setValue(1024)  # the first edit enables Undo: a toolbar change
    settle(qtbot)
    chart_top = window.chart.mapTo(window, QPoint(0, 0)).y()
    before = window.controller.plan
    # Out of memory on four 12 GB cards in two pipeline stages: a line naming the worst rank,
    # and the "What would make it fit?" button beside the verdict.
    window.controller.set_plan(
        before.with_hardware(gpu="rtx-3060-12gb").on_gpus(4, Strategy.FSDP).with_parallel(pipeline_parallel=2)
    )
    settle(qtbot)
    grown = window.chart.mapTo(window, QPoint(0, 0)).y()
    assert grown > chart_top  # the longer verdict got its room within the edit
    watched = LayoutRequests(window.verdict_dock)
    window.controller.set_plan(before)  # one GPU that fits again: shorter, and no button
    settle(qtbot)
    assert window.diagnosis_button.isHidden()
    assert window.verdict.sizeHint().height() < window.verdict.height()
    assert window.chart.mapTo(window, QPoint(0, 0)).y() == grown  # nothing moved under the user
    assert watched.counts[window.verdict_dock] == 0  # the banner's dock was not laid out again
    qtbot.waitUntil(lambda: window.chart.mapTo(window, QPoint(0, 0)).y() == chart_top, timeout=5000)


def test_a_form_that_grows_repaints_what_moved_not_the_column(qtbot: Any, window: MainWindow) -> None:
    shown(qtbot, window)
    quiet(qtbot, window)
    painted = LayoutRequests(window.model_form, kind=QEvent.Type.Paint)
    before = window.hardware_form.height()
    # A card without bf16 (the T4: Turing) adds the precision clash and its one-click fix under
    # the GPU: the Hardware form grows. (An Apple card no longer does: its notes took four
    # lines for two before they were sized to their width, tests/gui/test_window_layout.py.)
    window.controller.set_plan(window.controller.plan.with_hardware(gpu="t4"))
    settle(qtbot)
    assert window.hardware_form.height() > before
    # The form at the top kept its place: no paint (before: the whole column repainted). The
    # Method form below it is laid out again within the edit (moved and back) and repaints.
    assert painted.counts[window.model_form] == 0


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="suspends a process with SIGSTOP")
def test_stopping_a_diagnosis_never_waits_for_the_worker() -> None:
    """An edit stops the running diagnosis: the GUI thread must not wait for the worker's
    watcher to be scheduled (it did with a multiprocessing Event, whose set() waits until
    each waiting process has woken). Here the watcher is suspended: stop() still returns."""
    context = multiprocessing.get_context("spawn")
    channel = StopChannel(context)
    ready = context.Event()
    watcher = context.Process(target=worker_jobs.wait_for_a_stop, args=(channel, ready), daemon=True)
    watcher.start()
    try:
        assert ready.wait(30)
        time.sleep(0.3)  # now asleep in the semaphore
        assert watcher.pid is not None
        os.kill(watcher.pid, signal.SIGSTOP)
        caller = threading.Thread(target=channel.stop, args=(5,), daemon=True)
        caller.start()
        caller.join(2)
        assert not caller.is_alive()
        assert channel.job.value == 5
    finally:
        if watcher.pid is not None:
            os.kill(watcher.pid, signal.SIGCONT)
    watcher.join(30)  # and the watcher, running again, got the wake-up
    assert watcher.exitcode == 0


def test_a_new_y_range_does_not_resize_the_plot(qtbot: Any, window: MainWindow) -> None:
    """The y axis took the width of its widest tick text, and gave it back: going from a 24 GB
    card to an 80 GB one (tick text "5" to "100") resized the plot, which then redrew the
    chart a second time (issue 13, item 14)."""
    shown(qtbot, window)
    axis = window.chart.plot.getAxis("left")
    widths, views = set(), set()
    for card in ("rtx-3060-12gb", "rtx-4090", "h100-sxm", "a100-80gb-sxm", "b200"):
        window.controller.set_plan(window.controller.plan.with_hardware(gpu=card))
        settle(qtbot)
        widths.add(axis.width())
        views.add(round(window.chart.view.width()))
    assert len(widths) == 1 and len(views) == 1, (widths, views)


def test_an_edit_does_not_repaint_the_main_window_under_its_panels(qtbot: Any, window: MainWindow) -> None:
    """The verdict banner and the plan column are opaque: their new text repaints them, not
    the main window and the docks beneath them as well."""
    shown(qtbot, window)
    window.workload_form.seq_len.setValue(1024)  # the first edit enables Undo: a toolbar change
    settle(qtbot)
    painted = LayoutRequests(window, window.plan_dock, window.verdict_dock, kind=QEvent.Type.Paint)
    for micro_batch in (2, 3, 5):
        window.workload_form.micro_batch.setValue(micro_batch)
        settle(qtbot)
    assert window.verdict.headline.text()  # the verdict was redrawn...
    assert painted.counts[window] == 0  # ...over its own background
    assert painted.counts[window.plan_dock] == 0 and painted.counts[window.verdict_dock] == 0


def test_a_new_verdict_text_repaints_its_labels_not_the_banner_beneath(qtbot: Any, window: MainWindow) -> None:
    """The verdict's headline and figures are opaque: their new text repaints them alone. Before,
    each edit repainted the banner and the verdict panel under them as well (three layers of
    the banner's ~80,000 pixels; benchmarks/gui_latency.py counts paints)."""
    shown(qtbot, window)
    window.workload_form.seq_len.setValue(1024)
    settle(qtbot)
    painted = LayoutRequests(window._banner, window.verdict, kind=QEvent.Type.Paint)
    texts = set()
    for micro_batch in (2, 3):  # the same verdict (Fits): only the figures change
        window.workload_form.micro_batch.setValue(micro_batch)
        settle(qtbot)
        texts.add(window.verdict.headline.text())
    assert len(texts) == 2  # the headline was redrawn each time...
    assert painted.counts[window._banner] == 0 and painted.counts[window.verdict] == 0  # ...on its own


def test_a_new_sum_repaints_its_label_not_the_details_tabs_beneath(qtbot: Any, window: MainWindow) -> None:
    """The Arithmetic tab's sum line is opaque: a new sum repaints it alone. Before, each edit
    repainted the panel, the tab widget, its page stack and the dock's fence under it as well."""
    shown(qtbot, window)
    window.workload_form.seq_len.setValue(1024)
    settle(qtbot)
    painted = LayoutRequests(window.arithmetic, window.tabs, kind=QEvent.Type.Paint)
    sums = set()
    for micro_batch in (2, 3):
        window.workload_form.micro_batch.setValue(micro_batch)
        settle(qtbot)
        sums.add(window.arithmetic.summary.text())
    assert len(sums) == 2  # the sum was redrawn each time...
    assert painted.counts[window.arithmetic] == 0 and painted.counts[window.tabs] == 0  # ...on its own


def test_a_hidden_details_tab_is_brought_up_to_date_when_shown_not_at_each_edit(
    qtbot: Any, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the Diagnosis tab shown, each edit set the hidden Arithmetic's rich text (a
    thirtieth of an edit in benchmarks/gui_latency.py --diagnosis); now only the current tab's
    panel follows the edits, and another is shown the current estimate when its tab is."""
    shown(qtbot, window)
    set_by: Counter[str] = Counter()
    original = window.arithmetic.show_estimate

    def counted(estimate: Any) -> None:
        set_by["arithmetic"] += 1
        original(estimate)

    monkeypatch.setattr(window.arithmetic, "show_estimate", counted)
    window.tabs.setCurrentWidget(window.diagnosis)
    first = window.controller.plan.workload.micro_batch
    for micro_batch in (first + 1, first + 2, first + 3):
        window.workload_form.micro_batch.setValue(micro_batch)
    assert set_by["arithmetic"] == 0
    window.tabs.setCurrentWidget(window.arithmetic)
    assert set_by["arithmetic"] == 1  # the last edit's estimate, once
    assert window.arithmetic.summary.text() == window.controller.estimate.for_rank(window.chart.rank).summary_formula
    window.workload_form.micro_batch.setValue(first + 4)  # the current tab follows each edit
    assert set_by["arithmetic"] == 2
    assert window.arithmetic.summary.text() == window.controller.estimate.for_rank(window.chart.rank).summary_formula
    # A built panel of a hidden tab, asked for, shows the current estimate.
    window.workload_form.micro_batch.setValue(first + 5)
    assert window.compute_panel.training._estimate is window.controller.estimate
    window.workload_form.micro_batch.setValue(first + 6)
    assert window.compute_panel.training._estimate is window.controller.estimate

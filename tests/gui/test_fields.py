"""Number fields as a user types into them (issue 13, items 2-4): typing is kept as typed or
marked with its reason, a value applies when it is committed, and the keyboard's undo undoes
the plan."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget

from core.presets import default_plan
from gui.forms.fields import any_marked, is_marked_invalid, mark_invalid
from gui.main_window import MainWindow


def activate(qtbot: Any, window: MainWindow) -> None:
    window.show()
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow)


def type_over(qtbot: Any, widget: QWidget, text: str) -> None:
    widget.setFocus()
    line = widget.lineEdit() if hasattr(widget, "lineEdit") else widget
    line.selectAll()
    qtbot.keyClicks(line, text)


def shown_text(widget: Any) -> str:
    text = widget.lineEdit().text() if hasattr(widget, "lineEdit") else widget.text()
    return text.removesuffix(widget.suffix()).strip() if hasattr(widget, "suffix") else text.strip()


# Each typed text was rewritten before the fix: 1e30 → 130, 3.5 → 35, -5 → 5 (micro-batch,
# 1 to 4,096), 95 → 9.0 (headroom, 0 to 90 %): a keystroke the box's validator refused was dropped.
@pytest.mark.parametrize(
    ("form", "field", "typed", "reason"),
    [
        ("workload_form", "micro_batch", "1e30", "not a whole number"),
        ("workload_form", "micro_batch", "3.5", "not a whole number"),
        ("workload_form", "micro_batch", "-5", "below the minimum"),
        ("hardware_form", "headroom", "95", "above the maximum"),
    ],
)
def test_typing_is_kept_as_typed_and_marked_with_its_reason(
    qtbot: Any, window: MainWindow, form: str, field: str, typed: str, reason: str
) -> None:
    activate(qtbot, window)
    widget = getattr(getattr(window, form), field)
    before = window.controller.plan
    type_over(qtbot, widget, typed)
    assert shown_text(widget) == typed
    assert is_marked_invalid(widget)
    qtbot.keyClick(widget.lineEdit(), Qt.Key.Key_Return)
    assert shown_text(widget) == typed  # Enter on refused text leaves it there to correct
    assert is_marked_invalid(widget)
    assert window.controller.plan is before
    assert reason in window.problem.text() and f"“{typed}”" in window.problem.text()


def test_a_refused_final_value_never_leaves_the_plan_at_a_prefix(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    tokens = window.workload_form.tokens
    type_over(qtbot, tokens, "20,000,000")
    qtbot.keyClick(tokens, Qt.Key.Key_Return)
    assert window.controller.plan.workload.tokens == 20_000_000
    committed = window.controller.plan
    type_over(qtbot, tokens, "1e30")  # "1" and "1e3" parse on the way: neither may apply
    assert window.controller.plan is committed
    qtbot.keyClick(tokens, Qt.Key.Key_Return)
    assert window.controller.plan is committed
    window.workload_form.micro_batch.setFocus()  # leaving restores the plan's value
    assert tokens.value() == 20_000_000 and not is_marked_invalid(tokens)


def test_a_spin_box_applies_on_enter_and_focus_out_only(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    stack = window.controller.undo_stack
    seq = window.workload_form.seq_len
    type_over(qtbot, seq, "16384")
    assert window.controller.plan == default_plan() and stack.count() == 0  # not "1", "16", "163"...
    qtbot.keyClick(seq.lineEdit(), Qt.Key.Key_Return)
    assert window.controller.plan.workload.seq_len == 16384
    batch = window.workload_form.micro_batch
    type_over(qtbot, batch, "3")
    window.workload_form.grad_accum.setFocus()
    assert window.controller.plan.workload.micro_batch == 3


def test_the_warning_goes_when_the_field_is_restored(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    tokens = window.workload_form.tokens
    type_over(qtbot, tokens, "lots")
    assert "Token budget" in window.problem.text()
    window.workload_form.micro_batch.setFocus()
    assert not is_marked_invalid(tokens)
    assert window.problem.text() == ""


def test_the_warning_goes_when_the_typing_is_corrected(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    batch = window.workload_form.micro_batch
    type_over(qtbot, batch, "0")
    assert is_marked_invalid(batch) and "Micro-batch" in window.problem.text()
    qtbot.keyClick(batch.lineEdit(), Qt.Key.Key_Backspace)
    qtbot.keyClicks(batch.lineEdit(), "2")
    assert not is_marked_invalid(batch)
    assert window.problem.text() == ""


def test_escape_puts_the_plans_value_back(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    batch = window.workload_form.micro_batch
    type_over(qtbot, batch, "1e30")
    qtbot.keyClick(batch.lineEdit(), Qt.Key.Key_Escape)
    assert batch.value() == default_plan().workload.micro_batch
    assert shown_text(batch) == str(default_plan().workload.micro_batch)
    assert not is_marked_invalid(batch) and window.problem.text() == ""


@pytest.mark.parametrize("field", ["micro_batch", "tokens"])
def test_ctrl_z_in_a_focused_field_undoes_the_plan(qtbot: Any, window: MainWindow, field: str) -> None:
    activate(qtbot, window)
    widget = getattr(window.workload_form, field)
    type_over(qtbot, widget, "7")
    line = widget.lineEdit() if hasattr(widget, "lineEdit") else widget
    qtbot.keyClick(line, Qt.Key.Key_Return)
    assert getattr(window.controller.plan.workload, field) == 7
    focused = QApplication.focusWidget()  # where the application delivers the keys
    assert focused is widget
    undo = QKeySequence(QKeySequence.StandardKey.Undo)[0]
    qtbot.keyClick(focused, undo.key(), undo.keyboardModifiers())
    assert window.controller.plan == default_plan()
    redo = QKeySequence(QKeySequence.StandardKey.Redo)[0]
    qtbot.keyClick(focused, redo.key(), redo.keyboardModifiers())
    assert getattr(window.controller.plan.workload, field) == 7


def test_too_many_decimals_are_marked_not_cut(qtbot: Any, window: MainWindow) -> None:
    activate(qtbot, window)
    headroom = window.hardware_form.headroom  # one decimal place: 12.3 %
    type_over(qtbot, headroom, "12.25")
    assert shown_text(headroom) == "12.25" and is_marked_invalid(headroom)
    assert "more than one decimal place" in window.problem.text()


def test_a_field_destroyed_while_marked_no_longer_counts(qtbot: Any) -> None:
    # A window closed with a field marked (test_hostile's rejected count) left any_marked() true for
    # good: every later edit redrew every form, and test_edit_cost's count failed after test_hostile.
    assert not any_marked()
    field = QLineEdit()
    mark_invalid(field, "not a number")
    mark_invalid(field, "still not a number")  # marked twice, counted once
    assert any_marked()
    field.deleteLater()
    qtbot.waitUntil(lambda: not any_marked(), timeout=1000)
    kept = QLineEdit()
    qtbot.addWidget(kept)
    mark_invalid(kept, "wrong")
    mark_invalid(kept, None)
    assert not any_marked()

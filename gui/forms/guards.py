"""Input guards every plan field gets: a wheel never edits a field the user is not in, and the
plan's Undo / Redo reach the window from inside a picker's text box."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QLineEdit, QWidget


class _FieldGuard(QObject):
    """Installed on a field (and a combo box's line edit) by :func:`guard`."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() is QEvent.Type.Wheel and isinstance(watched, QWidget) and not watched.hasFocus():
            # Scrolling the Plan column over a field must scroll the column, not change the plan.
            event.ignore()
            return True
        if event.type() is QEvent.Type.ShortcutOverride and _undo_or_redo(event):
            # A picker's text box would take Ctrl+Z for its own text; the plan's undo is meant.
            event.ignore()
            return True
        return False


def _undo_or_redo(event: QEvent) -> bool:
    keys = (QKeySequence.StandardKey.Undo, QKeySequence.StandardKey.Redo)
    return isinstance(event, QKeyEvent) and any(event.matches(k) for k in keys)


_GUARD: _FieldGuard | None = None


def guard(widget: QWidget) -> None:
    """Give ``widget`` the guards: focus by click or Tab only, no wheel without focus, and the
    plan's undo from a picker's text."""
    global _GUARD
    if _GUARD is None:
        _GUARD = _FieldGuard()
    if isinstance(widget, QAbstractSpinBox | QComboBox):
        widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # a wheel no longer focuses it
        widget.installEventFilter(_GUARD)
    if isinstance(widget, QComboBox) and isinstance(widget.lineEdit(), QLineEdit):
        line = widget.lineEdit()
        assert line is not None
        line.installEventFilter(_GUARD)

"""Toolbar buttons for actions whose text changes at every edit (Undo, Redo).

A toolbar re-lays itself out whenever one of its actions changes, and that asks the main
window to lay out its docks again: with the undo stack's own actions on the toolbar, whose
text names the last change, every edit re-laid out the window and repainted the toolbar.
A button here has its own action, of fixed text, and its tooltip names the change when it is
asked for, not at every edit. The button itself, not its action, follows the stack's action's
enabled state: that changes whenever an edit merges back to the value before it (a spin box
nudged up and down again), and an action's change re-lays out the toolbar and the window.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QHelpEvent
from PySide6.QtWidgets import QToolBar, QToolTip

__all__ = ["add_follower"]


class _LiveToolTip(QObject):
    """Shows the followed action's current tooltip over the button."""

    def __init__(self, source: QAction, parent: QObject) -> None:
        super().__init__(parent)
        self._source = source

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            QToolTip.showText(event.globalPos(), self._source.toolTip(), watched)  # type: ignore[arg-type]
            return True
        return False


def add_follower(toolbar: QToolBar, source: QAction, text: str) -> QAction:
    """Add a button labelled ``text`` to ``toolbar`` that triggers ``source``."""
    follower = QAction(text, toolbar)
    follower.triggered.connect(lambda _checked=False: source.trigger())
    toolbar.addAction(follower)
    button = toolbar.widgetForAction(follower)
    if button is not None:
        button.setEnabled(source.isEnabled())
        source.enabledChanged.connect(button.setEnabled)
        button.installEventFilter(_LiveToolTip(source, button))
    return follower

"""Laying widgets out at once, before the next paint, instead of between paints."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent

__all__ = ["settle_layouts"]


def settle_layouts(passes: int = 5) -> None:
    """Run the layout passes that widgets have asked for, now.

    Left to the event loop, each pass runs after a paint of the window, and a layout that
    changes its widget's size asks its parent's again: new text in many labels would paint
    the window once per pass. Run here, the next paint is the only one.
    """
    for _ in range(passes):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)

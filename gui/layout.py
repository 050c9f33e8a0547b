"""Laying widgets out at once, before the next paint, instead of between paints."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

__all__ = ["LayoutFence", "settle_layouts"]


def settle_layouts(passes: int = 5) -> None:
    """Run the layout passes that widgets have asked for, now.

    Left to the event loop, each pass runs after a paint of the window, and a layout that
    changes its widget's size asks its parent's again: new text in many labels would paint
    the window once per pass. Run here, the next paint is the only one.
    """
    for _ in range(passes):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


class LayoutFence(QWidget):
    """Holds one widget and tells the layout above only of changes that concern it.

    Qt passes every re-layout upwards: a label's new text re-lays out its panel, the panel
    asks its dock again, and the dock asks the main window, which lays out all its docks and
    repaints their separators, at every edit. A dock does not care about a new size hint
    once it has its size (the main window keeps the docks' sizes), only about the least
    and largest sizes and the size policy; the fence passes those on when they change.
    """

    def __init__(self, inner: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inner = inner
        inner.setParent(self)
        self._limits = self._sync()

    def _sync(self) -> tuple[QSize, QSize, QSize, QSizePolicy]:
        inner = self.inner
        limits = (inner.minimumSizeHint(), inner.minimumSize(), inner.maximumSize(), inner.sizePolicy())
        self.setMinimumSize(limits[1])
        self.setMaximumSize(limits[2])
        self.setSizePolicy(limits[3])
        return limits

    def sizeHint(self) -> QSize:
        return self.inner.sizeHint()

    def minimumSizeHint(self) -> QSize:
        return self.inner.minimumSizeHint()

    def hasHeightForWidth(self) -> bool:
        return self.inner.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:
        return self.inner.heightForWidth(width)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self.inner.setGeometry(self.rect())
        super().resizeEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            limits = self._sync()
            if limits != self._limits:
                self._limits = limits
                self.updateGeometry()
            return True
        return super().event(event)

"""Laying widgets out at once, before the next paint, instead of between paints."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPoint, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QStackedWidget, QTabWidget, QWidget

__all__ = ["FlowLayout", "LayoutFence", "quiet_tab_layouts", "settle_layouts"]

# How long a fence waits, when nothing on screen has to move, before it passes new limits on.
FENCE_DELAY_MS = 600


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
        # Opaque: a change inside repaints from here, not from the dock and the window beneath.
        self.setAutoFillBackground(True)
        self._limits = self._sync()
        self._later = QTimer(self)
        self._later.setSingleShot(True)
        self._later.setInterval(FENCE_DELAY_MS)
        self._later.timeout.connect(self.updateGeometry)

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
                # Set limits (a least height the window gives the verdict) and the size policy
                # go up at once; so does a hint the present size no longer meets.
                set_limits_changed = limits[1:] != self._limits[1:]
                self._limits = limits
                if set_limits_changed or not self._holds(limits):
                    self._later.stop()
                    self.updateGeometry()
                else:
                    # Only the least size the contents hint at changed, and the widget still
                    # has room (a button hidden beside the verdict lowers it): nothing on screen
                    # has to move now; the window learns it once the edits pause.
                    self._later.start()
            return True
        return super().event(event)

    def pass_limits(self) -> None:
        """Take the widget's limits and tell the layout above now (a least height just set)."""
        self._limits = self._sync()
        self._later.stop()
        self.updateGeometry()

    def _holds(self, limits: tuple[QSize, QSize, QSize, QSizePolicy]) -> bool:
        """The fence's present size lies within ``limits``."""
        hint, least, most, _ = limits
        size = self.size()
        return (
            max(hint.width(), least.width()) <= size.width() <= most.width()
            and max(hint.height(), least.height()) <= size.height() <= most.height()
        )


def quiet_tab_layouts(tabs: QTabWidget) -> None:
    """Let ``tabs`` lay itself out (and repaint whole) only when its tab bar or least size changed.

    A tab widget answers every layout request of its current page by laying out its bar and
    page again and repainting all of itself, tab bar and dock frame included, though only the
    page's text changed: at each edit, for the Arithmetic or Diagnosis page.
    """
    tabs.installEventFilter(_TabLayoutFilter(tabs))


class _TabLayoutFilter(QObject):
    def __init__(self, tabs: QTabWidget) -> None:
        super().__init__(tabs)
        self._tabs = tabs
        self._stack = tabs.findChild(
            QStackedWidget, "qt_tabwidget_stackedwidget", Qt.FindChildOption.FindDirectChildrenOnly
        )
        self._seen = self._limits()

    def _limits(self) -> tuple[object, ...]:
        bar = self._tabs.tabBar()
        stack = self._stack
        limits: tuple[object, ...] = (bar.sizeHint(), bar.minimumSizeHint(), bar.isVisible())
        if stack is not None:
            limits += (stack.minimumSizeHint(), stack.minimumSize(), stack.maximumSize(), stack.sizePolicy())
        return limits

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._tabs and event.type() == QEvent.Type.LayoutRequest:
            limits = self._limits()
            if limits == self._seen:
                return True  # the page laid itself out; the bar and the page keep their places
            self._seen = limits
        return False


class FlowLayout(QLayout):
    """Widgets left to right, wrapping onto a new row where the width runs out (Qt's "Flow
    Layout" example): a row of buttons that never holds a narrow dock wide. Its least width is
    its widest widget's; its height follows its width."""

    def __init__(self, spacing: int = 6) -> None:
        super().__init__()
        self._items: list[QLayoutItem] = []
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _arrange(self, rect: QRect, *, move: bool) -> int:
        """Place the items in rows within ``rect`` (when ``move``); the height they take."""
        x, y, row_height, gap = rect.x(), rect.y(), 0, self.spacing()
        for item in self._items:
            hint = item.sizeHint()
            if x > rect.x() and x + hint.width() > rect.right() + 1:
                x, y, row_height = rect.x(), y + row_height + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + gap
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y()

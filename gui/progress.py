"""Long work's row under what it will answer: what it is doing, how far it got, and Cancel.

Shared by the tools' searches (:mod:`gui.tools.live`) and the forms' reads of this machine
(the Hugging Face cache scan in the model form): one look for every job that runs in the
worker and can be cancelled.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

SHOW_AFTER_MS = 250  # work quicker than this never flashes its progress


class SearchProgress(QWidget):
    """Under a tool's answer: what its search is doing, how far it got, and Cancel (or, once
    cancelled or failed, ``again``: "Search again")."""

    cancelRequested = Signal()
    againRequested = Signal()

    def __init__(self, steps: str = "", parent: QWidget | None = None, *, again: str = "Search again") -> None:
        super().__init__(parent)
        self.setObjectName("searchProgress")
        self.steps = steps  # the bar's text: "%v of %m cards"
        self._again = again  # the button's text once cancelled or failed
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.status = QLabel()
        self.status.setObjectName("searchStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setObjectName("searchBar")
        self.bar.setAccessibleName("Search progress")
        self.bar.setMaximumWidth(180)
        self.button = QPushButton("Cancel")
        self.button.setObjectName("searchCancel")
        self.button.clicked.connect(self._clicked)
        row.addWidget(self.status, 1)
        row.addWidget(self.bar)
        row.addWidget(self.button)
        self._searching = False
        self._text = ""
        self._reveal = QTimer(self)
        self._reveal.setSingleShot(True)
        self._reveal.setInterval(SHOW_AFTER_MS)
        self._reveal.timeout.connect(self._show_running)
        self.idle("")

    def searching(self, text: str) -> None:
        """A search started: shown as running once it has taken :data:`SHOW_AFTER_MS`."""
        self._searching = True
        self._text = text
        if not self._reveal.isActive() and self.bar.isHidden():
            self._reveal.start()

    def progressed(self, done: int, total: int) -> None:
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(done)
            self.bar.setFormat(self.steps or "%p%")
        else:
            self.bar.setRange(0, 0)  # busy: how far is not known

    def idle(self, text: str, *, again: bool = False) -> None:
        """No search running; ``again`` offers to search again (after a cancel or a failure)."""
        self._searching = False
        self._reveal.stop()
        self.status.setText(text)
        self.bar.hide()
        self.button.setText(self._again)
        self.button.setVisible(again)

    def _show_running(self) -> None:
        if not self._searching:
            return
        self.status.setText(self._text)
        self.bar.setRange(0, 0)
        self.bar.show()
        self.button.setText("Cancel")
        self.button.show()

    def _clicked(self) -> None:
        if self._searching:
            self.cancelRequested.emit()
        else:
            self.againRequested.emit()

"""Tool panels that follow the current plan while they are shown, searching in the worker.

:class:`SearchPanel` asks its search again when it is shown and, while shown, once a burst
of edits settles; the search runs in the "tools" worker process (a new request stops the
one running: the latest wins), with its progress and a Cancel button under the answer
(:class:`SearchProgress`). Hidden, a panel does no work: its search is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from core.estimate import Estimate
from gui.tools.context import ToolContext
from gui.worker.runner import JobFailed, LatestJobRunner

# A search over the catalogue takes well under a minute even on a slow laptop; one still
# running after this is stuck, and its worker is killed.
SEARCH_DEADLINE_S = 120.0
PROGRESS_MS = 100  # how often a running search's progress is read
SHOW_AFTER_MS = 250  # a search quicker than this never flashes its progress


class SearchProgress(QWidget):
    """Under a tool's answer: what its search is doing, how far it got, and Cancel (or, once
    cancelled or failed, "Search again")."""

    cancelRequested = Signal()
    againRequested = Signal()

    def __init__(self, steps: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchProgress")
        self._steps = steps  # the bar's text: "%v of %m cards"
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
            self.bar.setFormat(self._steps or "%p%")
        else:
            self.bar.setRange(0, 0)  # busy: how far is not known

    def idle(self, text: str, *, again: bool = False) -> None:
        """No search running; ``again`` offers to search again (after a cancel or a failure)."""
        self._searching = False
        self._reveal.stop()
        self.status.setText(text)
        self.bar.hide()
        self.button.setText("Search again")
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


class SearchPanel(QWidget):
    """A tool panel whose answer comes from ``run(request)`` in the worker. Subclasses say what
    the request is (:meth:`request`) and show the answer (:meth:`show_answer`)."""

    def __init__(
        self,
        context: ToolContext,
        run: Callable[[Any], Any],
        refresh_ms: int,
        texts: tuple[str, str, str],
        parent: QWidget | None = None,
    ) -> None:
        """``texts``: what the progress row says while idle (a hint), while searching, and what
        the bar counts ("%v of %m cards"; "" when the search cannot tell how far it got)."""
        super().__init__(parent)
        self.context = context
        self.controller = context.controller
        self.answer: Any = None
        self._hint, self._what, steps = texts
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(refresh_ms)
        self._timer.timeout.connect(self.refresh)
        self.jobs: LatestJobRunner[Any, Any] = LatestJobRunner(
            run, lane="tools", deadline_s=SEARCH_DEADLINE_S, progress_ms=PROGRESS_MS, parent=self
        )
        self.jobs.finished.connect(self._answered)
        self.jobs.failed.connect(self._failed)
        self.progress = SearchProgress(steps)
        self.progress.idle(self._hint)
        self.jobs.progressed.connect(self.progress.progressed)
        self.progress.cancelRequested.connect(self.cancel)
        self.progress.againRequested.connect(self.refresh)
        self.controller.estimateChanged.connect(self._estimate_changed)

    # ---- what subclasses say ---------------------------------------------------------
    def request(self) -> object:
        """The request for the current plan and options."""
        raise NotImplementedError

    def show_answer(self, answer: Any) -> None:
        raise NotImplementedError

    # ---- following the plan ----------------------------------------------------------
    @property
    def searching(self) -> bool:
        return self.jobs.busy

    def refresh(self) -> None:
        """Search for the current plan, unless the answer shown is already for it."""
        self._timer.stop()
        request = self.request()
        if self.answer is not None and self.answer.request == request and not self.jobs.busy:
            return
        self.jobs.submit(request)
        self.progress.searching(self._what)

    def cancel(self) -> None:
        self._timer.stop()
        if self.jobs.busy:
            self.jobs.cancel()
            self.progress.idle("Cancelled: what is shown is for an earlier plan.", again=True)

    def _estimate_changed(self, _estimate: Estimate) -> None:
        if self.isVisible():
            self._timer.start()

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh()
        super().showEvent(event)

    def hideEvent(self, event: QHideEvent) -> None:
        self._timer.stop()
        if self.jobs.busy:  # hidden, the panel does no work; shown again, it searches again
            self.jobs.cancel()
            self.progress.idle(self._hint)
        super().hideEvent(event)

    def _answered(self, request: object, answer: Any) -> None:
        if request != self.request():
            return  # an option changed since, and its search is on its way
        self.answer = answer
        self.progress.idle(self._hint)
        self.show_answer(answer)

    def _failed(self, _request: object, error: BaseException) -> None:
        if isinstance(error, JobFailed):
            self.progress.idle(f"The search {error}.", again=True)
            return
        self.progress.idle("The search failed.", again=True)
        raise error  # a bug in the search: to the crash handler, like any slot's error

"""Tool panels that follow the current plan while they are shown, searching in the worker.

:class:`SearchPanel` asks its search again when it is shown and, while shown, once a burst
of edits settles; the search runs in the "tools" worker process (a new request stops the
one running: the latest wins), with its progress and a Cancel button under the answer
(:class:`gui.progress.SearchProgress`). Hidden, a panel does no work: its search is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QWidget

from core.estimate import Estimate
from gui.progress import SearchProgress
from gui.tools.context import ToolContext
from gui.worker.runner import JobFailed, LatestJobRunner

# A search over the catalogue takes well under a minute even on a slow laptop; one still
# running after this is stuck, and its worker is killed.
SEARCH_DEADLINE_S = 120.0
PROGRESS_MS = 100  # how often a running search's progress is read


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

"""Runs the diagnosis beside the plan controller, off the GUI thread, the latest plan winning.

Diagnosis, both memory curves and the limit searches estimate dozens of modified plans (tens
of milliseconds of pure Python); :func:`core.advice.diagnosis.report` does them in a worker, never
on the GUI thread. The worker is a separate process: a thread would hold the interpreter
lock while it computes and make the window wait for it at every edit. A request names
everything the answer depends on (plan, mode, pins, picked symptom). At most one job runs;
a request made meanwhile replaces any waiting one, and a finished job is announced only if
its request is still the latest, so a burst of edits gives one answer for the last plan.
A job whose request is no longer the latest is stopped in the worker (gui.diagnosis_worker)
rather than left to finish: its answer would be thrown away, and it would compete with the
edit that made it old for the machine's cores.
The answer arrives as one signal, :attr:`DiagnosisController.diagnosed`, in the GUI thread;
the Diagnosis tab only renders it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Literal, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from core.advice.diagnosis import DiagnosisReport, DiagnosisRequest, Failure, Pin, report
from gui.controller import PlanController
from gui.diagnosis_worker import JobStopped, StopChannel, run_job, start_worker
from gui.display_state import Display, DisplayState

__all__ = ["DiagnosisController", "DiagnosisReport", "DiagnosisRequest", "run_request"]

# Coalesces a burst of edits (typing, a spin box held down) into one request.
SETTLE_MS = 120
run_request = report  # the work itself, pure: core.advice.diagnosis.report

Worker = Literal["process", "thread"]
_PROCESS_POOL: ProcessPoolExecutor | None = None
_STOP_CHANNELS: dict[Executor, StopChannel] = {}  # how to stop a job in a pool's worker process
_JOB_NUMBERS = itertools.count(1)  # every controller's jobs share the one worker process
# Set when the worker process could not run (a script without an ``if __name__ == "__main__"``
# guard re-runs itself in a spawned process and breaks it): this session then uses threads.
_PROCESSES_BROKEN = False


_T = TypeVar("_T")
_paused_lock = threading.Lock()
_paused_threads = 0
_enabled_before = True


def _collector_paused(function: Callable[..., _T], *args: object) -> _T:
    """``function(*args)`` off the GUI thread with Python's cycle collector paused.

    A collection runs in whichever thread allocates when it is due. Run in a worker thread,
    it may free a Qt object left in a reference cycle (a closed window, a dialog), and
    destroying a QObject off the GUI thread takes Qt's lock and then waits for the
    interpreter lock the GUI thread holds while it waits for Qt's lock: both stop for good
    (a test hung so). Paused here, cycles are collected in the GUI thread once the job ends.
    """
    global _paused_threads, _enabled_before
    with _paused_lock:
        if _paused_threads == 0:
            _enabled_before = gc.isenabled()  # off for good where gui.collector runs it
            gc.disable()
        _paused_threads += 1
    try:
        return function(*args)
    finally:
        with _paused_lock:
            _paused_threads -= 1
            if _paused_threads == 0 and _enabled_before:
                gc.enable()


class _WorkerLost(Exception):
    """The worker process died: the request is run again in a thread."""


def _process_pool() -> ProcessPoolExecutor:
    """One worker process for the application, started at the first diagnosis. "spawn":
    a fork of a process running Qt is unsafe, and the frozen app supports it
    (multiprocessing.freeze_support in gui.launcher)."""
    global _PROCESS_POOL
    if _PROCESS_POOL is None:
        context = multiprocessing.get_context("spawn")
        channel = StopChannel(context)
        _PROCESS_POOL = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=start_worker, initargs=(channel,)
        )
        _STOP_CHANNELS[_PROCESS_POOL] = channel
    return _PROCESS_POOL


def _drop_process_pool(pool: Executor) -> None:
    global _PROCESS_POOL, _PROCESSES_BROKEN
    _PROCESSES_BROKEN = True
    _STOP_CHANNELS.pop(pool, None)
    if pool is _PROCESS_POOL:
        _PROCESS_POOL = None
        pool.shutdown(wait=False, cancel_futures=True)


class DiagnosisController(QObject):
    """Follows the plan controller and the display mode while :attr:`active` (the tab shown).

    ``worker="thread"`` runs jobs in a thread instead (tests that substitute :attr:`run`
    with a function a process could not receive).
    """

    diagnosed = Signal(object)  # DiagnosisReport, for the latest request only
    _finished = Signal(object, object)  # (request, report or exception), from the worker

    def __init__(
        self,
        plans: PlanController,
        display: DisplayState,
        parent: QObject | None = None,
        *,
        worker: Worker = "process",
    ) -> None:
        super().__init__(parent)
        self.plans = plans
        self.display = display
        self.pins: frozenset[Pin] = frozenset()
        self.symptom: Failure | None = None
        self.report: DiagnosisReport | None = None
        self.active = False
        self.runs = 0  # jobs started; tests read it to check the coalescing
        self.stopped = 0  # jobs stopped in the worker because their plan had changed
        self.run: Callable[[DiagnosisRequest], DiagnosisReport] = run_request
        self._worker = worker
        self._thread_pool: ThreadPoolExecutor | None = None
        self._running: DiagnosisRequest | None = None
        self._running_job = 0  # its number in the worker process, 0 when it cannot be stopped
        self._stop_channel: StopChannel | None = None
        self._waiting: DiagnosisRequest | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self._submit_latest)
        self._finished.connect(self._on_finished)
        plans.estimateChanged.connect(self._on_plan)
        display.changed.connect(self._on_display)

    # ---- reading -------------------------------------------------------------------
    @property
    def latest(self) -> DiagnosisRequest:
        """The request for what the window shows now."""
        return DiagnosisRequest(self.plans.plan, self.display.mode, self.pins, self.symptom)

    @property
    def stale(self) -> bool:
        """True while the last report is not for the latest request."""
        return self.report is None or self.report.request != self.latest

    @property
    def busy(self) -> bool:
        return self._running is not None or self._waiting is not None or self._timer.isActive()

    # ---- writing -------------------------------------------------------------------
    def set_active(self, on: bool) -> None:
        """The tab became visible (diagnose at once if stale) or hidden (no more work)."""
        self.active = on
        if on and self.stale:
            self.request_now()

    def set_pins(self, pins: frozenset[Pin]) -> None:
        if pins != self.pins:
            self.pins = pins
            self.request_now()

    def set_symptom(self, symptom: Failure | None) -> None:
        if symptom != self.symptom:
            self.symptom = symptom
            self.request_now()

    def request_now(self) -> None:
        """Ask for the latest request without waiting for edits to settle."""
        self._timer.stop()
        if self.active:
            self._submit_latest()

    def shutdown(self) -> None:
        """Stop this controller's thread, if it has one (the shared process stays)."""
        self._timer.stop()
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=True, cancel_futures=True)
            self._thread_pool = None

    # ---- reacting ------------------------------------------------------------------
    def _on_plan(self, _estimate: object) -> None:
        self._stop_stale_job()
        if self.active and self.stale:
            self._timer.start()  # restarts: a burst of edits gives one request

    def _on_display(self, _display: Display) -> None:
        if self.active and self.stale:  # a new mode: judged and remedied differently
            self.request_now()

    def _submit_latest(self) -> None:
        request = self.latest
        if self.report is not None and self.report.request == request:
            return
        if self._running is not None:
            if self._running != request:
                self._waiting = request  # replaces any older waiting request
                self._stop_stale_job()
            return
        self._start(request)

    def _stop_stale_job(self) -> None:
        """The running job is for an older request: stop it, its answer would be thrown away."""
        if self._running_job and self._running != self.latest and self._stop_channel is not None:
            self._stop_channel.stop(self._running_job)
            self._running_job = 0  # asked once

    def _pool(self) -> Executor:
        if self._worker == "process" and not _PROCESSES_BROKEN:
            return _process_pool()
        if self._thread_pool is None:
            self._thread_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diagnosis")
            pool = self._thread_pool  # not self: the Python wrapper may outlive the C++ object
            self.destroyed.connect(lambda *_: pool.shutdown(wait=False, cancel_futures=True))
        return self._thread_pool

    def _start(self, request: DiagnosisRequest) -> None:
        self._running = request
        self._waiting = None
        self.runs += 1
        pool = self._pool()
        self._stop_channel = _STOP_CHANNELS.get(pool)
        if self._stop_channel is not None:
            self._running_job = next(_JOB_NUMBERS)
            future = pool.submit(run_job, self._running_job, self.run, request)
        else:
            self._running_job = 0  # a thread cannot be stopped: it runs to its end
            future = pool.submit(_collector_paused, self.run, request)
        future.add_done_callback(lambda done: _collector_paused(self._done, pool, request, done))

    def _done(self, pool: Executor, request: DiagnosisRequest, future: Future[DiagnosisReport]) -> None:
        # In a thread of the pool's own. The signal is queued to the GUI thread, where self lives.
        outcome: object
        try:
            outcome = future.result()
        except BrokenProcessPool:
            _drop_process_pool(pool)
            outcome = _WorkerLost()
        except JobStopped as stopped:  # a BaseException: not caught below
            outcome = stopped
        except Exception as error:  # handed to the GUI thread, which raises it there
            outcome = error
        with contextlib.suppress(RuntimeError):  # the window closed meanwhile: nobody is waiting
            self._finished.emit(request, outcome)

    def _on_finished(self, request: DiagnosisRequest, outcome: object) -> None:
        self._running = None
        self._running_job = 0
        waiting, self._waiting = self._waiting, None
        if isinstance(outcome, JobStopped):
            self.stopped += 1
            if waiting is not None:
                self._start(waiting)
            return
        if isinstance(outcome, _WorkerLost):
            self._start(waiting or request)  # in a thread from now on
            return
        if isinstance(outcome, Exception):
            if waiting is not None:
                self._start(waiting)
            raise outcome  # to the crash handler, like any slot's error
        assert isinstance(outcome, DiagnosisReport)
        if waiting is not None and waiting != request:
            self._start(waiting)  # a newer request: this answer is already old
            return
        if request != self.latest:
            return
        self.report = outcome
        self.diagnosed.emit(outcome)

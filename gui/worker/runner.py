"""Long work off the GUI thread, the latest request winning: :class:`LatestJobRunner`.

A runner is given requests (a plan and whatever else the answer depends on) and a pure
function that answers one. At most one of its jobs runs; a request made meanwhile replaces
any waiting one and stops the running job, whose answer would be thrown away. An answer is
announced (:attr:`LatestJobRunner.finished`, in the GUI thread) only if its request is still
the latest, so a burst of edits gives one answer, for the last plan.

Jobs run in a worker process (:mod:`gui.worker.process`), one per *lane*: the runners of one
kind share it (two windows' diagnoses), and other kinds have their own, so a search over the
catalogue never delays a diagnosis. The lane keeps its worker alive:

- a worker that died (killed, crashed) is started again at the next job, and the job it was
  running is tried once more;
- a job past the runner's deadline, or one that ignores a stop for :data:`STOP_GRACE_S`
  (stuck in a blocking call or C code, where no interrupt reaches), is killed with its
  process, and the lane starts another;
- a worker that cannot start at all (a script without an ``if __name__ == "__main__"``
  guard re-runs itself in a spawned process and breaks it) sends the lane to threads for the
  rest of the session. ``worker="thread"`` asks for threads from the start (tests that run a
  function a process could not receive).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from gui.worker import process
from gui.worker.process import DONE, FAILED, LOST, READY, STOPPED, JobStopped, WorkerProcess

__all__ = ["JobFailed", "LatestJobRunner", "Worker", "shutdown_lanes"]

LOG = logging.getLogger(__name__)
Worker = Literal["process", "thread"]
Request = TypeVar("Request")
Answer = TypeVar("Answer")

STOP_GRACE_S = 2.0  # a stopped job that has not ended after this is stuck: its process is killed
TRIES = 2  # a job whose worker died is tried once more; a job that kills its worker twice has failed
_JOB_NUMBERS = itertools.count(1)  # unique across lanes: a stop names one job only
WORKER_MAIN: Callable[..., None] = process.serve  # what a new worker process runs (tests substitute)


class JobFailed(Exception):
    """A job ended without an answer through no error of its own: killed past its deadline,
    or its worker lost twice. The message says which, for the window to show."""


class _Remote(Exception):
    """The traceback of an error raised in the worker process (the error's ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


@dataclass(eq=False)
class _Job:
    runner: LatestJobRunner[Any, Any]
    request: Any
    run: Callable[[Any], Any]
    number: int = field(default_factory=lambda: next(_JOB_NUMBERS))
    tries: int = 1
    stop_asked: bool = False
    progress: tuple[int, int] | None = None  # a thread job's (done, total)


# ---- lanes: one worker each, shared by the runners of one kind ---------------------------
class _Lane(QObject):
    """Runs its runners' jobs one at a time, in order, in one worker process (or in threads)."""

    _arrived = Signal(object, object)  # (worker or job, message), from a reader or job thread

    def __init__(self, name: str, threads: bool) -> None:
        super().__init__()
        self.name = name
        self.threads = threads
        self.worker: WorkerProcess | None = None
        self.queue: deque[_Job] = deque()
        self.current: _Job | None = None
        self._arrived.connect(self._on_message)

    # -- jobs --
    def submit(self, job: _Job) -> None:
        self.queue.append(job)
        self._pump()

    def withdraw(self, job: _Job) -> bool:
        """Take a job that has not started off the queue; False if it has started."""
        if job in self.queue:
            self.queue.remove(job)
            return True
        return False

    def stop(self, job: _Job) -> None:
        """Ask the running ``job`` to stop (in a process, at once; in a thread, at its next
        progress report, or never)."""
        job.stop_asked = True
        if self.current is job and self.worker is not None:
            self.worker.channel.stop(job.number)

    def kill(self, job: _Job) -> None:
        """End the running ``job`` now: its process is killed (a thread is left to finish,
        unheard). The job's runner hears KILLED at once."""
        if self.current is not job:
            return
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.kill()  # its LOST message is ignored: it is no longer the lane's worker
        self._end(job, (_KILLED, None))

    def progress(self, job: _Job) -> tuple[int, int] | None:
        if self.current is not job:
            return None
        if self.worker is not None:
            return self.worker.channel.progress_of(job.number)
        return job.progress

    def close(self) -> None:
        self.queue.clear()
        self.current = None
        if self.worker is not None:
            self.worker.kill()
            self.worker = None

    def _pump(self) -> None:
        if self.current is not None or not self.queue:
            return
        job = self.queue.popleft()
        self.current = job
        with contextlib.suppress(RuntimeError):  # its runner is gone: the job still ends
            job.runner._job_started(job)
        if self.threads:
            self._start_thread(job)
        else:
            self._send(job)

    def _send(self, job: _Job) -> None:
        if self.worker is None:
            self.worker = WorkerProcess(self.name, self._post, WORKER_MAIN)
        try:
            self.worker.send(job.number, job.run, job.request)
        except Exception as error:  # the job cannot be sent (a function a process cannot receive)
            self._end(job, (FAILED, (error, "")))
        # Not sent because the worker has gone: its LOST message, queued, ends the job.

    def _start_thread(self, job: _Job) -> None:
        def sink(done: int, total: int) -> None:
            job.progress = (done, total)
            if job.stop_asked:
                raise JobStopped

        def work() -> None:
            outcome: tuple[str, Any]
            try:
                outcome = (DONE, process.run_in_thread(job.number, job.run, job.request, sink))
            except JobStopped:
                outcome = (STOPPED, None)
            except Exception as error:
                outcome = (FAILED, (error, ""))
            self._post(job, (job.number, *outcome))

        threading.Thread(
            target=process.collector_paused, args=(work,), name=f"vramplan-{self.name}", daemon=True
        ).start()

    # -- messages, in the GUI thread --
    def _post(self, source: object, message: tuple[Any, ...]) -> None:
        """From a reader or job thread: hand the message to the GUI thread."""
        with contextlib.suppress(RuntimeError):  # the lane was deleted (the application is closing)
            self._arrived.emit(source, message)

    def _on_message(self, source: object, message: tuple[Any, ...]) -> None:
        if isinstance(source, _Job):  # a thread's job ended
            if source is self.current:
                self._end(source, message[1:])
            return
        if not isinstance(source, WorkerProcess) or source is not self.worker:
            return  # from a worker this lane killed or replaced
        kind = message[0]
        if kind == READY:
            source.ready = True
        elif kind == LOST:
            self._lost(source)
        elif self.current is not None and kind == self.current.number:
            self._end(self.current, message[1:])

    def _lost(self, worker: WorkerProcess) -> None:
        self.worker = None
        if not worker.ready:
            # It never ran: spawned processes cannot start here. Threads, for the rest of the session.
            exit_code = worker.process.exitcode
            LOG.warning("the %s worker process could not start (exit code %s); using threads", self.name, exit_code)
            self.threads = True
        job = self.current
        if job is not None:
            self._end(job, (LOST, None))
        else:
            self._pump()

    def _end(self, job: _Job, outcome: tuple[Any, ...]) -> None:
        self.current = None
        with contextlib.suppress(RuntimeError):  # its runner was deleted with its window
            job.runner._job_ended(job, outcome[0], outcome[1])
        self._pump()


_KILLED = "killed"
_LANES: dict[str, _Lane] = {}


def _lane(name: str, worker: Worker) -> _Lane:
    key = f"{name}/{worker}"
    lane = _LANES.get(key)
    if lane is None:
        lane = _LANES[key] = _Lane(name, threads=worker == "thread")
    return lane


def shutdown_lanes() -> None:
    """End every worker process now (the application quits; tests that replaced the lanes)."""
    for lane in _LANES.values():
        lane.close()


# ---- the runner ---------------------------------------------------------------------
class LatestJobRunner(QObject, Generic[Request, Answer]):
    """Answers requests with ``run`` off the GUI thread; the latest request wins.

    :attr:`finished` ``(request, answer)`` comes for the latest request only; :attr:`failed`
    ``(request, error)`` for a job's own error (whatever its request), and for a latest job
    that ended without an answer (:class:`JobFailed`: past its deadline, or its worker lost
    twice). :attr:`progressed` ``(done, total)`` while a job reports it, every ``progress_ms``.
    """

    finished = Signal(object, object)
    failed = Signal(object, object)
    progressed = Signal(int, int)

    def __init__(
        self,
        run: Callable[[Request], Answer],
        *,
        lane: str,
        deadline_s: float,
        worker: Worker = "process",
        progress_ms: int = 0,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.run = run  # the work itself, pure (tests substitute it)
        self.deadline_s = deadline_s
        self.runs = 0  # jobs started; tests read it to check the coalescing
        self.stopped = 0  # jobs stopped because a newer request replaced them
        self._lane_name = lane
        self._worker: Worker = worker
        self._latest: Request | None = None
        self._running: _Job | None = None
        self._waiting: Request | None = None
        self._deadline = self._timer(self._past_deadline)
        self._grace = self._timer(self._stop_ignored)
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(progress_ms)
        self._progress_timer.timeout.connect(self._poll_progress)
        self._progress_ms = progress_ms

    def _timer(self, slot: Callable[[], None]) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.timeout.connect(slot)
        return timer

    # ---- reading -----------------------------------------------------------------------
    @property
    def running(self) -> Request | None:
        """The request of the job running (or queued in its lane), if any."""
        return self._running.request if self._running is not None else None

    @property
    def busy(self) -> bool:
        return self._running is not None or self._waiting is not None

    @property
    def worker(self) -> Worker:
        """What this runner asked to run its jobs in (its lane may have fallen back to threads)."""
        return self._worker

    # ---- writing -----------------------------------------------------------------------
    def submit(self, request: Request) -> None:
        """Answer ``request``: at once if idle, else once the running job (now stopped) has ended."""
        self._latest = request
        running = self._running
        if running is None:
            self._start(request)
        elif running.request == request and not running.stop_asked:
            self._waiting = None  # the job running is the one wanted after all
        else:
            self._waiting = request  # replaces any older waiting request
            self._stop(running)

    def stop_unless(self, request: object) -> None:
        """The running job is for an older request than ``request``: stop it (its answer would be
        thrown away) without asking for another."""
        running = self._running
        if running is not None and not running.stop_asked and running.request != request:
            self._stop(running)

    def cancel(self) -> None:
        """Want nothing: the waiting request is dropped and the running job stopped, unheard."""
        self._waiting = None
        self._latest = None
        if self._running is not None:
            self._stop(self._running)

    def shutdown(self) -> None:
        self.cancel()

    # ---- the jobs ----------------------------------------------------------------------
    def _start(self, request: Request) -> None:
        self._waiting = None
        self.runs += 1
        job = _Job(self, request, self.run)
        self._running = job
        _lane(self._lane_name, self._worker).submit(job)

    def _retry(self, job: _Job) -> None:
        self.runs += 1
        again = _Job(self, job.request, self.run, tries=job.tries + 1)
        self._running = again
        _lane(self._lane_name, self._worker).submit(again)

    def _stop(self, job: _Job) -> None:
        lane = _lane(self._lane_name, self._worker)
        if lane.withdraw(job):  # it had not started: it ends here
            self._job_ended(job, STOPPED, None)
            return
        if job.stop_asked:
            return
        lane.stop(job)
        self._grace.start(round(STOP_GRACE_S * 1000))

    def _job_started(self, job: _Job) -> None:
        if job is self._running:
            self._deadline.start(round(self.deadline_s * 1000))
            if self._progress_ms > 0:
                self._progress_timer.start()

    def _past_deadline(self) -> None:
        if self._running is not None:
            _lane(self._lane_name, self._worker).kill(self._running)

    def _stop_ignored(self) -> None:
        if self._running is not None and self._running.stop_asked:
            LOG.warning("a %s job ignored its stop for %.0f s: its worker is killed", self._lane_name, STOP_GRACE_S)
            _lane(self._lane_name, self._worker).kill(self._running)

    def _poll_progress(self) -> None:
        if self._running is None:
            self._progress_timer.stop()
            return
        progress = _lane(self._lane_name, self._worker).progress(self._running)
        if progress is not None:
            self.progressed.emit(*progress)

    def _job_ended(self, job: _Job, kind: str, value: Any) -> None:
        if job is not self._running:
            return
        self._running = None
        for timer in (self._deadline, self._grace, self._progress_timer):
            timer.stop()
        waiting, self._waiting = self._waiting, None
        if kind == DONE:
            if waiting is not None and waiting != job.request:
                self._start(waiting)  # a newer request: this answer is already old
            elif job.request == self._latest:
                self.finished.emit(job.request, value)
            return
        if kind == STOPPED or (kind == _KILLED and job.stop_asked):
            self.stopped += 1
        elif kind == LOST and waiting is None and job.tries < TRIES and job.request == self._latest:
            self._retry(job)
            return
        if waiting is not None:
            self._start(waiting)
        if kind == FAILED:
            error, text = value
            if text:
                error.__cause__ = _Remote(text)
            self.failed.emit(job.request, error)
        elif kind in (LOST, _KILLED) and not job.stop_asked and waiting is None and job.request == self._latest:
            self.failed.emit(job.request, JobFailed(self._why(kind)))

    def _why(self, kind: str) -> str:
        if kind == _KILLED:
            return f"took longer than {self.deadline_s:g} s and was stopped"
        return f"stopped: its worker process ended {TRIES} times while running it"

"""The worker process: runs the GUI's long jobs one at a time, stops one the GUI no longer wants,
and never outlives the GUI's process.

A diagnosis or a search over cards is tens of milliseconds to seconds of pure Python. Run in
a thread, it would hold the interpreter lock and make the window wait at every edit; so it
runs in a process of its own (:class:`WorkerProcess`, "spawn": a fork of a process running
Qt is unsafe), which receives ``(job number, pickled (function, request))`` on a pipe and
answers ``(job number, outcome, value)``.

Stopping: while a job runs, the user may already have changed the plan; its answer will
then be thrown away, yet it would keep one of the machine's cores busy during the very edit
that made it old (on a two-core machine, next to the GUI thread). :class:`StopChannel`
lets the GUI stop it: the GUI writes the job's number into shared memory and wakes a
watcher thread in the worker, which interrupts the worker's main thread the way a signal
would (``_thread.interrupt_main``, which also works on Windows). The handler raises
:class:`JobStopped` only if that job is the one running, so a request that arrives after its
job ended stops nothing. A job stuck where no interrupt reaches (a blocking call, C code)
is ended by killing its process (:meth:`WorkerProcess.kill`); the GUI's side decides when.

Its parent's death: a thread in the worker waits on the parent's sentinel (the pipe that
``spawn`` keeps open to the parent, or its process handle on Windows) and exits the worker
when it fires; a worker was once seen alive 22 minutes after its window had been killed.

This module runs in the worker process: it imports neither Qt nor the rest of the GUI
(import-linter contract in pyproject.toml), so the worker starts with core alone.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:  # multiprocessing is imported when a first worker process starts, not at start-up
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext

__all__ = [
    "DONE",
    "FAILED",
    "LOST",
    "READY",
    "STOPPED",
    "JobStopped",
    "StopChannel",
    "WorkerProcess",
    "collector_paused",
    "report_progress",
    "run_job",
    "serve",
]

Request = TypeVar("Request")
Answer = TypeVar("Answer")
Message = tuple[Any, ...]

# What the worker says about a job: (job, DONE, answer), (job, STOPPED, None), (job, FAILED,
# (error, its traceback as text)); and about itself: (READY,) once it runs, (LOST, exit code)
# from the GUI's side when it has gone.
DONE: Final = "done"
STOPPED: Final = "stopped"
FAILED: Final = "failed"
READY: Final = "ready"
LOST: Final = "lost"

# The handler the watcher thread calls in the worker's main thread. SIGINT has a Python
# handler on every platform; the worker's own replaces the default (KeyboardInterrupt),
# so a Ctrl-C in the terminal no longer kills the worker between jobs either.
_STOP_SIGNAL = signal.SIGINT
_SWITCH_INTERVAL_S = 0.001


class JobStopped(BaseException):
    """Raised inside a job when the GUI stopped it. A BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` in the job swallows it."""


class StopChannel:
    """Shared by the GUI and the worker process: which job to stop, a wake-up call, and the
    running job's progress."""

    def __init__(self, context: BaseContext) -> None:
        self.job = context.Value("q", 0, lock=False)  # the number of the job to stop
        # A semaphore, not an Event: Event.set() waits until every waiting process has woken
        # (multiprocessing.Condition.notify_all), so the GUI thread waited, at each edit, for
        # the worker's watcher to be scheduled on a busy machine. release() never waits.
        self.wake = context.Semaphore(0)
        self.progress = context.Array("q", 3, lock=False)  # job number, steps done, steps in all

    def stop(self, job: int) -> None:
        """In the GUI process: stop job number ``job`` if it is running (or about to)."""
        self.job.value = job
        self.wake.release()

    def progress_of(self, job: int) -> tuple[int, int] | None:
        """(done, total) last reported by job number ``job``; None if it reported none."""
        number, done, total = self.progress[:]
        return (done, total) if number == job else None


_T = TypeVar("_T")
_paused_lock = threading.Lock()
_paused_threads = 0
_enabled_before = True


def collector_paused(function: Callable[..., _T], *args: object) -> _T:
    """``function(*args)`` in a thread of the GUI's process with Python's cycle collector paused.

    A collection runs in whichever thread allocates when it is due. Run in another thread
    than the GUI's, it may free a Qt object left in a reference cycle (a closed window, a
    dialog), and destroying a QObject off the GUI thread takes Qt's lock and then waits for
    the interpreter lock the GUI thread holds while it waits for Qt's lock: both stop for
    good (a test hung so). Paused here, cycles are collected in the GUI thread afterwards.
    """
    global _paused_threads, _enabled_before
    with _paused_lock:
        if _paused_threads == 0:
            _enabled_before = gc.isenabled()  # off for good where gui.collector runs collections
            gc.disable()
        _paused_threads += 1
    try:
        return function(*args)
    finally:
        with _paused_lock:
            _paused_threads -= 1
            if _paused_threads == 0 and _enabled_before:
                gc.enable()


# ---- the GUI's side ------------------------------------------------------------------
class WorkerProcess:
    """One worker process, from the GUI's process: started at once, sent jobs, killed at will.

    ``on_message(worker, message)`` is called in a reader thread of this process (its cycle
    collector paused) for each message the worker sends, and once with ``(LOST, exit code)``
    when the process has ended, whatever ended it.
    """

    def __init__(
        self, name: str, on_message: Callable[[WorkerProcess, Message], None], main: Callable[..., None] | None = None
    ) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.channel = StopChannel(context)
        self.ready = False  # set by the owner when READY arrives
        self._on_message = on_message
        self._conn, child_end = context.Pipe()
        self.process = context.Process(
            target=main or serve, args=(child_end, self.channel), name=f"vramplan-{name}", daemon=True
        )
        self.process.start()
        child_end.close()
        threading.Thread(target=self._read, name=f"vramplan-{name}-reader", daemon=True).start()

    def send(self, job: int, run: Callable[[Any], Any], request: object) -> None:
        """Hand the worker job number ``job``. If it has gone, its LOST message follows anyway."""
        payload = pickle.dumps((run, request))  # a job that cannot be sent fails here, in the caller
        with contextlib.suppress(OSError, ValueError):  # a broken pipe, or closed by the reader
            self._conn.send((job, payload))

    def kill(self) -> None:
        """End the process now, whatever it is doing (a job stuck where no interrupt reaches)."""
        if self.process.is_alive():
            self.process.kill()

    def _read(self) -> None:
        from multiprocessing.connection import wait

        conn, sentinel = self._conn, self.process.sentinel
        try:
            while True:
                ready = wait([conn, sentinel])
                if conn not in ready and not conn.poll():
                    break  # the process ended and said nothing more
                message = collector_paused(conn.recv)
                collector_paused(self._on_message, self, message)
        except (EOFError, OSError):
            pass
        self.process.join(5)  # reaped, not left a zombie
        conn.close()
        collector_paused(self._on_message, self, (LOST, self.process.exitcode))


# ---- in the worker process ---------------------------------------------------------
_channel: StopChannel | None = None
_running_job = 0  # the number of the job running now; 0 between jobs
_local = threading.local()  # .sink: where report_progress sends the progress of this thread's job


def report_progress(done: int, total: int = 0) -> None:
    """Called by a job as it goes: ``done`` of ``total`` steps (0: not known). A job running in a
    thread (no process to interrupt) stops here when it is no longer wanted."""
    sink: Callable[[int, int], None] | None = getattr(_local, "sink", None)
    if sink is not None:
        sink(done, total)


def start_worker(channel: StopChannel) -> None:
    """The worker process's set-up (runs in its main thread)."""
    global _channel
    _channel = channel
    signal.signal(_STOP_SIGNAL, _stop_if_asked)
    # The watcher needs the interpreter lock to interrupt, and a busy main thread hands it
    # over only after the switch interval (5 ms by default): 1 ms stops a job sooner. The
    # watcher waits without the lock, so the job pays nothing for it otherwise.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    threading.Thread(target=_watch, args=(channel,), name="worker-stop", daemon=True).start()
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), name="worker-parent", daemon=True).start()


def _watch(channel: StopChannel) -> None:
    while True:
        channel.wake.acquire()  # one wake-up per request; a spare one stops nothing
        _thread.interrupt_main(_STOP_SIGNAL)


def _exit_with(parent_sentinel: int) -> None:
    """Exit the worker, at once, when the GUI's process has ended (however it ended)."""
    from multiprocessing.connection import wait

    wait([parent_sentinel])
    os._exit(0)


def _stop_if_asked(_signum: int, _frame: object) -> None:
    if _running_job and _channel is not None and _channel.job.value == _running_job:
        raise JobStopped


def _progress_to_channel(job: int) -> Callable[[int, int], None]:
    def sink(done: int, total: int) -> None:
        if _channel is not None:
            progress = _channel.progress
            progress[1], progress[2], progress[0] = done, total, job

    return sink


def run_job(job: int, run: Callable[[Request], Answer], request: Request) -> Answer:
    """Run one job, numbered ``job``, unless the GUI has already asked to stop it."""
    global _running_job
    _running_job = job
    _local.sink = _progress_to_channel(job)
    try:
        if _channel is not None and _channel.job.value == job:
            raise JobStopped  # stopped while it waited in the queue
        return run(request)
    finally:
        _running_job = 0
        _local.sink = None


def run_in_thread(
    job: int, run: Callable[[Request], Answer], request: Request, sink: Callable[[int, int], None]
) -> Answer:
    """Run one job in a thread of the GUI's process: ``sink`` hears its progress (and may stop it)."""
    _local.sink = sink
    try:
        return run(request)
    finally:
        _local.sink = None


def serve(conn: Connection, channel: StopChannel) -> None:
    """The worker process's main: run each job the GUI sends, answer, until the pipe closes."""
    start_worker(channel)
    conn.send((READY,))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the GUI's side closed its end
        job, payload = message
        outcome = _outcome(job, payload)
        try:
            conn.send(outcome)
        except (pickle.PicklingError, TypeError, AttributeError) as error:  # an answer that cannot travel
            conn.send(_failed(job, error))


def _outcome(job: int, payload: bytes) -> Message:
    try:
        run, request = pickle.loads(payload)
        return (job, DONE, run_job(job, run, request))
    except JobStopped:
        return (job, STOPPED, None)
    except Exception as error:  # the job's own error, handed to the GUI to report
        return _failed(job, error)


def _failed(job: int, error: Exception) -> Message:
    text = "".join(traceback.format_exception(error))
    try:
        pickle.dumps(error)
    except Exception:
        error = RuntimeError(f"{type(error).__name__}: {error}")
    return (job, FAILED, (error, text))

"""The Diagnosis tab's worker process: runs diagnosis jobs, and stops one the GUI no longer wants.

A diagnosis is tens of milliseconds of pure Python. While it runs, the user may already
have changed the plan; its answer will then be thrown away, yet it would keep one of the
machine's cores busy during the very edit that made it old (on a two-core machine, next
to the GUI thread). :class:`StopChannel` lets the GUI stop it: the GUI writes the job's
number into shared memory and wakes a watcher thread in the worker, which interrupts the
worker's main thread the way a signal would (``_thread.interrupt_main``, which also works
on Windows). The handler raises :class:`JobStopped` only if that job is the one running,
so a request that arrives after its job ended stops nothing.

This module runs in the worker process, which imports it to run :func:`run_job`: it imports
neither Qt nor the rest of the GUI (import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import TypeVar

__all__ = ["JobStopped", "StopChannel", "run_job", "start_worker"]

Request = TypeVar("Request")
Answer = TypeVar("Answer")

# The handler the watcher thread calls in the worker's main thread. SIGINT has a Python
# handler on every platform; the worker's own replaces the default (KeyboardInterrupt),
# so a Ctrl-C in the terminal no longer kills the worker between jobs either.
_STOP_SIGNAL = signal.SIGINT
_SWITCH_INTERVAL_S = 0.001


class JobStopped(BaseException):
    """Raised inside the worker's job when the GUI stopped it. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` in the job swallows it."""


class StopChannel:
    """Shared by the GUI and the worker process: which job to stop, and a wake-up call."""

    def __init__(self, context: BaseContext) -> None:
        self.job = context.Value("q", 0, lock=False)  # the number of the job to stop
        # A semaphore, not an Event: Event.set() waits until every waiting process has woken
        # (multiprocessing.Condition.notify_all), so the GUI thread waited, at each edit, for
        # the worker's watcher to be scheduled on a busy machine. release() never waits.
        self.wake = context.Semaphore(0)

    def stop(self, job: int) -> None:
        """In the GUI process: stop job number ``job`` if it is running (or about to)."""
        self.job.value = job
        self.wake.release()


# ---- in the worker process ---------------------------------------------------------
_channel: StopChannel | None = None
_running_job = 0  # the number of the job running now; 0 between jobs


def start_worker(channel: StopChannel) -> None:
    """The worker process's initializer (runs in its main thread)."""
    global _channel
    _channel = channel
    signal.signal(_STOP_SIGNAL, _stop_if_asked)
    # The watcher needs the interpreter lock to interrupt, and a busy main thread hands it
    # over only after the switch interval (5 ms by default): 1 ms stops a job sooner. The
    # watcher waits without the lock, so the job pays nothing for it otherwise.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    threading.Thread(target=_watch, args=(channel,), name="diagnosis-stop", daemon=True).start()


def _watch(channel: StopChannel) -> None:
    while True:
        channel.wake.acquire()  # one wake-up per request; a spare one stops nothing
        _thread.interrupt_main(_STOP_SIGNAL)


def _stop_if_asked(_signum: int, _frame: object) -> None:
    if _running_job and _channel is not None and _channel.job.value == _running_job:
        raise JobStopped


def run_job(job: int, run: Callable[[Request], Answer], request: Request) -> Answer:
    """Run one job, numbered ``job``, unless the GUI has already asked to stop it."""
    global _running_job
    _running_job = job
    try:
        if _channel is not None and _channel.job.value == job:
            raise JobStopped  # stopped while it waited in the queue
        return run(request)
    finally:
        _running_job = 0

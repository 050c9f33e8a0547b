"""Stand-ins for the diagnosis job that a worker process can import by name (no Qt here)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from core.advice.diagnosis import DiagnosisReport, DiagnosisRequest, report
from gui.tools.searches import CardsAnswer, CardsRequest, find_cards
from gui.worker.process import StopChannel, report_progress

SLOW_MICRO_BATCH = 7  # the plan whose diagnosis takes a minute
SLOW_SECONDS = 60.0
STUCK_MICRO_BATCH = 9  # the plan whose diagnosis never ends
SEARCH_STEPS = 600  # a slow search's steps, a tenth of a second each


def started_marker(parent_pid: int, kind: str = "slow") -> Path:
    """A file the slow (or stuck) job creates once it runs, named after the process that asked for it."""
    return Path(tempfile.gettempdir()) / f"vramplan-{kind}-diagnosis-{parent_pid}"


def slow_for_one_plan(request: DiagnosisRequest) -> DiagnosisReport:
    """The real report, except for micro-batch 7: a minute of pure Python first, which an
    interrupt reaches between bytecodes as it would reach the real diagnosis."""
    if request.plan.workload.micro_batch == SLOW_MICRO_BATCH:
        started_marker(os.getppid()).touch()
        end = time.monotonic() + SLOW_SECONDS
        while time.monotonic() < end:
            pass
    return report(request)


def stuck_for_one_plan(request: DiagnosisRequest) -> DiagnosisReport:
    """The real report, except for micro-batch 9: the job blocks for good in a call no
    interrupt reaches (a lock acquired twice), as a job stuck in C code or I/O would."""
    if request.plan.workload.micro_batch == STUCK_MICRO_BATCH:
        started_marker(os.getppid(), "stuck").touch()
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    return report(request)


def dies_at_start(_conn: Any, _channel: StopChannel) -> None:
    """A worker process that ends before it can run anything (as a script without a main guard
    breaks a spawned process)."""
    os._exit(3)


def slow_search(request: CardsRequest) -> CardsAnswer:
    """Which cards fit, after a minute of pure Python that reports its progress."""
    for step in range(SEARCH_STEPS):
        report_progress(step, SEARCH_STEPS)
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            pass
    return find_cards(request)


def wait_for_a_stop(channel: StopChannel, ready: Any) -> None:
    """Waits for one stop request as the worker's watcher thread does, then returns."""
    ready.set()
    channel.wake.acquire()


def slow_scan(request: Any) -> Any:
    """A Hugging Face cache scan that takes a minute, reporting its progress as it goes."""
    for step in range(SEARCH_STEPS):
        report_progress(step, SEARCH_STEPS)
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            pass
    raise AssertionError("the slow scan should have been stopped")


def slow_report(request: Any) -> Any:
    """A report that takes a minute to build (its file is never written)."""
    end = time.monotonic() + SLOW_SECONDS
    while time.monotonic() < end:
        pass
    raise AssertionError("the slow report should have been stopped")


def scan_of_nothing(request: Any) -> Any:
    """The scan of a cache that is not there (what "Scan again" finds after a cancel)."""
    from core.files.hfcache import scan_cache

    return scan_cache(os.path.join(tempfile.gettempdir(), "vramplan-no-such-cache"))

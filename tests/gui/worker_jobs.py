"""Stand-ins for the diagnosis job that a worker process can import by name (no Qt here)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from core.advice.diagnosis import DiagnosisReport, DiagnosisRequest, report
from gui.diagnosis_worker import StopChannel

SLOW_MICRO_BATCH = 7  # the plan whose diagnosis takes a minute
SLOW_SECONDS = 60.0


def started_marker(parent_pid: int) -> Path:
    """A file the slow job creates once it runs, named after the process that asked for it."""
    return Path(tempfile.gettempdir()) / f"vramplan-slow-diagnosis-{parent_pid}"


def slow_for_one_plan(request: DiagnosisRequest) -> DiagnosisReport:
    """The real report, except for micro-batch 7: a minute of pure Python first, which an
    interrupt reaches between bytecodes as it would reach the real diagnosis."""
    if request.plan.workload.micro_batch == SLOW_MICRO_BATCH:
        started_marker(os.getppid()).touch()
        end = time.monotonic() + SLOW_SECONDS
        while time.monotonic() < end:
            pass
    return report(request)


def wait_for_a_stop(channel: StopChannel, ready: Any) -> None:
    """Waits for one stop request as the worker's watcher thread does, then returns."""
    ready.set()
    channel.wake.acquire()

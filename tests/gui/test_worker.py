"""The diagnosis worker process survives what befalls it (issue 28, items 9, 16 and 17): killed
while idle, it is started again at the next request; a job stuck where no interrupt reaches is
killed with its process; and the worker ends when the window's process dies."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.advice.diagnosis import DiagnosisReport
from core.presets import default_plan
from gui.controller import PlanController
from gui.diagnosis_controller import DiagnosisController
from gui.display_state import DisplayState
from tests.gui import worker_jobs

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """The process runs (a zombie no parent has reaped yet counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        try:
            return "\nState:\tZ" not in status.read_text()
        except OSError:
            return False
    return True


def _diagnoser(plan: Any = None) -> tuple[PlanController, DiagnosisController, list[DiagnosisReport]]:
    plans = PlanController(plan if plan is not None else default_plan())
    diagnoser = DiagnosisController(plans, DisplayState())
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    return plans, diagnoser, reports


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="kills the worker with SIGKILL")
def test_a_worker_killed_while_idle_is_started_again_at_the_next_request(qtbot: Any) -> None:
    """Killed between jobs, the worker left a broken pool: a "BrokenProcessPool" crash dialog at
    the next edit, and no diagnosis for the rest of the session."""
    plans, diagnoser, reports = _diagnoser()
    diagnoser.set_active(True)
    qtbot.waitUntil(lambda: len(reports) == 1, timeout=30_000)
    workers = multiprocessing.active_children()
    assert workers
    for worker in workers:
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: not any(_alive(w.pid or 0) for w in workers), timeout=10_000)
    qtbot.wait(200)  # the pool notices its worker is gone
    plans.set_plan(plans.plan.with_workload(micro_batch=3), key="micro_batch")
    diagnoser.request_now()
    qtbot.waitUntil(lambda: len(reports) == 2, timeout=30_000)
    assert reports[-1].request.plan.workload.micro_batch == 3
    diagnoser.shutdown()


def test_a_stale_job_stuck_where_no_interrupt_reaches_is_killed(qtbot: Any) -> None:
    """A job stuck in a blocking call or C code ignores the stop request: the tab never
    updated again. Now its worker is killed after a grace and started again."""
    marker = worker_jobs.started_marker(os.getpid(), "stuck")
    marker.unlink(missing_ok=True)
    plans, diagnoser, reports = _diagnoser(default_plan().with_workload(micro_batch=worker_jobs.STUCK_MICRO_BATCH))
    diagnoser.run = worker_jobs.stuck_for_one_plan
    diagnoser.set_active(True)
    qtbot.waitUntil(marker.exists, timeout=30_000)  # stuck in the worker
    marker.unlink()
    plans.set_plan(plans.plan.with_workload(micro_batch=2), key="micro_batch")
    diagnoser.request_now()
    qtbot.waitUntil(lambda: bool(reports), timeout=40_000)
    assert [r.request.plan.workload.micro_batch for r in reports] == [2]
    diagnoser.shutdown()


def test_a_job_past_its_deadline_is_killed_and_said_so(qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The latest job itself stuck: past the deadline its worker is killed, the window is told,
    and the next request is answered by a new worker."""
    import gui.diagnosis_controller as module

    monkeypatch.setattr(module, "DEADLINE_S", 3.0)
    marker = worker_jobs.started_marker(os.getpid(), "stuck")
    marker.unlink(missing_ok=True)
    plans, diagnoser, reports = _diagnoser(default_plan().with_workload(micro_batch=worker_jobs.STUCK_MICRO_BATCH))
    diagnoser.run = worker_jobs.stuck_for_one_plan
    failures: list[str] = []
    diagnoser.failed.connect(failures.append)
    diagnoser.set_active(True)
    qtbot.waitUntil(lambda: bool(failures), timeout=40_000)
    assert marker.exists() and "took longer than" in failures[0]
    marker.unlink()
    assert not diagnoser.busy and not reports
    plans.set_plan(plans.plan.with_workload(micro_batch=2), key="micro_batch")
    diagnoser.request_now()
    qtbot.waitUntil(lambda: bool(reports), timeout=40_000)
    assert reports[-1].request.plan.workload.micro_batch == 2
    diagnoser.shutdown()


# The window's side, in a process of its own that the test kills: it diagnoses once, prints
# its worker processes' ids, and waits.
PARENT = """
import multiprocessing, os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from PySide6.QtWidgets import QApplication
app = QApplication(["worker-parent"])
from core.presets import default_plan
from gui.controller import PlanController
from gui.diagnosis_controller import DiagnosisController
from gui.display_state import DisplayState
diagnoser = DiagnosisController(PlanController(default_plan()), DisplayState())
def answered(_report):
    print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
diagnoser.diagnosed.connect(answered)
diagnoser.set_active(True)
app.exec()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="kills the window's process with SIGKILL")
def test_the_worker_ends_when_the_window_s_process_dies(tmp_path: Path) -> None:
    """A worker was seen alive 22 minutes after its window had been killed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # Its errors, and the resource tracker's note on the semaphore the killed process leaves
    # behind (which the tracker then removes), go to a file rather than the test's output.
    errors = tmp_path / "stderr.txt"
    with (
        errors.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=ROOT
        ) as parent,
    ):
        assert parent.stdout is not None
        if not select.select([parent.stdout], [], [], 60)[0]:
            parent.kill()
            raise AssertionError(f"the window's process printed nothing in a minute: {errors.read_text()}")
        line = parent.stdout.readline()
        workers = [int(pid) for pid in line.split()]
        assert workers, f"the window's process printed no worker: {errors.read_text()}"
        parent.kill()
        parent.wait(30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.1)
        survivors = [pid for pid in workers if _alive(pid)]
        for pid in survivors:  # leave nothing behind, then fail
            os.kill(pid, signal.SIGKILL)
        assert not survivors, f"worker processes {survivors} outlived the window's process"

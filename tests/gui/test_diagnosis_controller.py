"""The diagnosis controller: the work runs off the GUI thread (a worker process in the app), and
the latest plan wins."""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any

from core.advice.diagnosis import DiagnosisReport
from core.presets import default_plan
from core.verdict import Mode
from gui import collector
from gui.controller import PlanController
from gui.diagnosis_controller import DiagnosisController, DiagnosisRequest, run_request
from gui.display_state import DisplayState
from tests.gui import worker_jobs


def test_diagnosis_runs_off_the_gui_thread_and_the_latest_plan_wins(qtbot: Any) -> None:
    plans = PlanController(default_plan())
    diagnoser = DiagnosisController(plans, DisplayState(), worker="thread")  # a stand-in `run` below
    gate = threading.Event()
    ran: list[tuple[int, bool]] = []  # (micro-batch, on the GUI thread?)

    def run(request: DiagnosisRequest) -> DiagnosisReport:
        ran.append((request.plan.workload.micro_batch, threading.current_thread() is threading.main_thread()))
        if len(ran) == 1:
            assert gate.wait(10)  # hold the first job while the user keeps editing
        return run_request(request)

    diagnoser.run = run
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.set_active(True)  # the tab is shown: diagnose the plan at once
    qtbot.waitUntil(lambda: len(ran) == 1, timeout=3000)
    for value in (2, 3, 4, 5):  # edits while the first job runs
        plans.set_plan(plans.plan.with_workload(micro_batch=value), key="micro_batch")
        diagnoser.request_now()
    gate.set()
    qtbot.waitUntil(lambda: bool(reports), timeout=10_000)
    qtbot.wait(50)

    # Two jobs: the held one and the latest edit; 2, 3 and 4 were replaced before they ran.
    assert [value for value, _ in ran] == [default_plan().workload.micro_batch, 5]
    assert not any(on_gui for _, on_gui in ran)
    # One answer, for the latest plan only: the first job's answer was already old.
    assert len(reports) == 1 and reports[0].request.plan == plans.plan
    assert reports[0].diagnosis.estimate.plan.workload.micro_batch == 5
    assert not diagnoser.stale
    diagnoser.shutdown()


def test_a_hidden_tab_asks_for_nothing_and_a_new_mode_asks_again(qtbot: Any) -> None:
    """With the app's own worker: a separate process (not the GUI thread, nor any thread)."""
    plans = PlanController(default_plan())
    display = DisplayState()
    diagnoser = DiagnosisController(plans, display)
    assert diagnoser._jobs.worker == "process"
    plans.set_plan(plans.plan.with_workload(micro_batch=3))
    qtbot.wait(200)
    assert diagnoser.runs == 0  # inactive: no work
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.set_active(True)
    qtbot.waitUntil(lambda: len(reports) == 1, timeout=10_000)
    assert [p.name for p in multiprocessing.active_children()]  # the worker process that ran it
    display.set_mode(Mode.INFERENCE)
    qtbot.waitUntil(lambda: len(reports) == 2, timeout=10_000)
    assert reports[-1].diagnosis.mode is Mode.INFERENCE
    diagnoser.shutdown()


def test_an_error_in_the_worker_reaches_the_gui_thread(qtbot: Any) -> None:
    """A failure in the worker is raised again in the GUI thread, where the crash handler
    reports it, and the controller stays usable."""
    plans = PlanController(default_plan())
    diagnoser = DiagnosisController(plans, DisplayState(), worker="thread")

    def broken(request: DiagnosisRequest) -> DiagnosisReport:
        raise ValueError("broken on purpose")

    diagnoser.run = broken
    with qtbot.capture_exceptions() as exceptions:
        diagnoser.set_active(True)
        qtbot.waitUntil(lambda: bool(exceptions), timeout=5000)
    assert isinstance(exceptions[0][1], ValueError)
    assert not diagnoser.busy
    diagnoser.run = run_request
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.request_now()
    qtbot.waitUntil(lambda: bool(reports), timeout=10_000)
    diagnoser.shutdown()


def test_a_worker_process_that_cannot_start_falls_back_to_a_thread(qtbot: Any, monkeypatch: Any) -> None:
    """A script without a main guard breaks a spawned worker; the tab must still answer."""
    import gui.worker.runner as runner

    monkeypatch.setattr(runner, "_LANES", {})  # lanes of this test's own, closed below
    monkeypatch.setattr(runner, "WORKER_MAIN", worker_jobs.dies_at_start)
    diagnoser = DiagnosisController(PlanController(default_plan()), DisplayState())
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.set_active(True)
    qtbot.waitUntil(lambda: bool(reports), timeout=20_000)
    assert runner._lane("diagnosis", "process").threads and diagnoser.runs == 2  # the lost job, then in a thread
    diagnoser.shutdown()
    runner.shutdown_lanes()


def test_a_job_for_a_changed_plan_is_stopped_in_the_worker_process(qtbot: Any) -> None:
    """Its answer would be thrown away: the worker stops it instead of finishing it, and the
    next plan's diagnosis does not wait behind it (the stopped job would run for a minute)."""
    marker = worker_jobs.started_marker(os.getpid())
    marker.unlink(missing_ok=True)
    plans = PlanController(default_plan().with_workload(micro_batch=worker_jobs.SLOW_MICRO_BATCH))
    display = DisplayState()
    diagnoser = DiagnosisController(plans, display)
    diagnoser.run = worker_jobs.slow_for_one_plan
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.set_active(True)
    qtbot.waitUntil(marker.exists, timeout=20_000)  # the slow job runs in the worker
    marker.unlink()
    display.set_unit("GiB")  # the unit is no part of the request: the job is still wanted
    qtbot.wait(300)
    assert diagnoser.stopped == 0 and diagnoser.busy
    plans.set_plan(plans.plan.with_workload(micro_batch=2), key="micro_batch")
    diagnoser.request_now()
    qtbot.waitUntil(lambda: bool(reports), timeout=20_000)
    assert diagnoser.stopped == 1 and diagnoser.runs == 2
    assert [r.request.plan.workload.micro_batch for r in reports] == [2]
    diagnoser.shutdown()


def test_no_cycle_collection_runs_off_the_gui_thread(qtbot: Any) -> None:
    """A collection in the diagnosis thread freed Qt objects left in cycles by earlier windows;
    destroying a QObject off the GUI thread deadlocked with it (the GUI test suite hung in the
    test above). The collector is paused while the thread runs, and resumes after."""
    import gc

    plans = PlanController(default_plan())
    diagnoser = DiagnosisController(plans, DisplayState(), worker="thread")
    seen: list[tuple[bool, bool]] = []  # (collector on?, on the GUI thread?)

    def run(request: DiagnosisRequest) -> DiagnosisReport:
        seen.append((gc.isenabled(), threading.current_thread() is threading.main_thread()))
        return run_request(request)

    diagnoser.run = run
    reports: list[DiagnosisReport] = []
    diagnoser.diagnosed.connect(reports.append)
    diagnoser.set_active(True)
    qtbot.waitUntil(lambda: bool(reports), timeout=10_000)
    assert seen == [(False, False)]
    # As it was before the job: off for good once gui.collector runs collections (any window).
    assert gc.isenabled() is not collector.collecting_on_gui_thread()
    diagnoser.shutdown()

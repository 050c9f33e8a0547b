"""Runs the diagnosis beside the plan controller, off the GUI thread, the latest plan winning.

Diagnosis, both memory curves and the limit searches estimate dozens of modified plans (tens
of milliseconds); they run here in one worker thread, never on the GUI thread. A request
names everything the answer depends on (plan, mode, pins, picked symptom). At most one job
runs; a request made meanwhile replaces any waiting one, and a finished job is announced
only if its request is still the latest, so a burst of edits gives one answer for the last
plan. The answer arrives as one signal, :attr:`DiagnosisController.diagnosed`, in the GUI
thread; the Diagnosis tab only renders it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from core.diagnosis import (
    Curve,
    Diagnosis,
    Failure,
    Pin,
    Remedy,
    Symptom,
    diagnose,
    memory_curve,
    remedies_for_symptom,
)
from core.limits import AXES
from core.plan import Plan
from core.verdict import Mode
from gui.controller import PlanController
from gui.display_state import Display, DisplayState

# Coalesces a burst of edits (typing, a spin box held down) into one request.
SETTLE_MS = 120


@dataclass(frozen=True)
class DiagnosisRequest:
    plan: Plan
    mode: Mode = Mode.TRAINING
    pins: frozenset[Pin] = frozenset()
    symptom: Failure | None = None  # a symptom the user picked: its remedies are found too


@dataclass(frozen=True)
class DiagnosisReport:
    request: DiagnosisRequest
    diagnosis: Diagnosis
    curves: Mapping[str, Curve]  # "micro_batch" and "seq_len"
    symptom: Symptom | None
    symptom_remedies: tuple[Remedy, ...]


def run_request(request: DiagnosisRequest) -> DiagnosisReport:
    """Everything the Diagnosis tab shows for one request: pure, runs in the worker."""
    plan = request.plan
    diagnosis = diagnose(plan, request.mode, request.pins)
    curves = {axis: memory_curve(plan, axis, crossing=diagnosis.limits.largest(axis)) for axis in AXES}
    symptom: Symptom | None = None
    found: tuple[Remedy, ...] = ()
    if request.symptom is not None and request.symptom is not Failure.NONE:
        known = diagnosis.remedies if request.mode is Mode.TRAINING and diagnosis.remedies else None
        symptom, found = remedies_for_symptom(plan, request.symptom, known, request.pins)
    return DiagnosisReport(request, diagnosis, curves, symptom, found)


class DiagnosisController(QObject):
    """Follows the plan controller and the display mode while :attr:`active` (the tab shown)."""

    diagnosed = Signal(object)  # DiagnosisReport, for the latest request only
    _finished = Signal(object, object)  # (request, report or exception), from the worker

    def __init__(self, plans: PlanController, display: DisplayState, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.plans = plans
        self.display = display
        self.pins: frozenset[Pin] = frozenset()
        self.symptom: Failure | None = None
        self.report: DiagnosisReport | None = None
        self.active = False
        self.runs = 0  # jobs started; tests read it to check the coalescing
        self.run: Callable[[DiagnosisRequest], DiagnosisReport] = run_request
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diagnosis")
        self._running: DiagnosisRequest | None = None
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
        self._timer.stop()
        self._executor.shutdown(wait=True, cancel_futures=True)

    # ---- reacting ------------------------------------------------------------------
    def _on_plan(self, _estimate: object) -> None:
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
            return
        self._start(request)

    def _start(self, request: DiagnosisRequest) -> None:
        self._running = request
        self._waiting = None
        self.runs += 1
        self._executor.submit(self._work, request)

    def _work(self, request: DiagnosisRequest) -> None:
        # In the worker thread. The signal is queued to the GUI thread, where self lives.
        outcome: object
        try:
            outcome = self.run(request)
        except Exception as error:  # handed to the GUI thread, which raises it there
            outcome = error
        with contextlib.suppress(RuntimeError):  # the window closed meanwhile: nobody is waiting
            self._finished.emit(request, outcome)

    def _on_finished(self, request: DiagnosisRequest, outcome: object) -> None:
        self._running = None
        waiting, self._waiting = self._waiting, None
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

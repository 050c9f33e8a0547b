"""Runs the diagnosis beside the plan controller, off the GUI thread, the latest plan winning.

Diagnosis, both memory curves and the limit searches estimate dozens of modified plans (tens
of milliseconds of pure Python); :func:`core.advice.diagnosis.report` does them in the
"diagnosis" worker process of :class:`gui.worker.runner.LatestJobRunner`, never on the GUI
thread. A request names everything the answer depends on (plan, mode, pins, picked
symptom). Edits are coalesced for :data:`SETTLE_MS` into one request; a job whose plan has
changed meanwhile is stopped at once, at the edit, rather than left to compete with it for
the machine's cores; a finished job is announced only if its request is still the latest.
The answer arrives as one signal, :attr:`DiagnosisController.diagnosed`, in the GUI thread;
the Diagnosis tab only renders it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from core.advice.request import DiagnosisRequest, Pin, pins_for, run_report, symptoms_for
from core.advice.symptoms import Failure
from core.inputs import Engine
from core.verdict import Mode
from gui.controller import PlanController
from gui.display_state import Display, DisplayState
from gui.worker.runner import JobFailed, LatestJobRunner, Worker

if TYPE_CHECKING:
    from core.advice.diagnosis import DiagnosisReport

__all__ = ["DiagnosisController", "DiagnosisRequest", "run_request"]

# Coalesces a burst of edits (typing, a spin box held down) into one request.
SETTLE_MS = 120
# A diagnosis takes tens of milliseconds to a second or two; one still running after this is
# stuck, and its worker is killed (the window says so; the next edit asks again).
DEADLINE_S = 30.0
# The work itself, pure: core.advice.diagnosis.report, loaded (in the worker) when first run.
run_request = run_report


class DiagnosisController(QObject):
    """Follows the plan controller and the display mode while :attr:`active` (the tab shown).

    ``worker="thread"`` runs jobs in a thread instead (tests that substitute :attr:`run`
    with a function a process could not receive).
    """

    diagnosed = Signal(object)  # DiagnosisReport, for the latest request only
    failed = Signal(str)  # the latest diagnosis ended without an answer, and why (for the status bar)

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
        # Each mode keeps its own pins: one ticked in Training never constrains the serving advice.
        self._pins: dict[Mode, frozenset[Pin]] = {mode: frozenset() for mode in Mode}
        self._offered: dict[tuple[Mode, Engine | None], tuple[Pin, ...]] = {}  # pins_for, per mode and engine
        # Each mode keeps its own picked symptom, one of the mode's (core.advice.request.symptoms_for).
        self._symptoms: dict[Mode, Failure | None] = {mode: None for mode in Mode}
        self.report: DiagnosisReport | None = None
        self.active = False
        self._jobs: LatestJobRunner[DiagnosisRequest, DiagnosisReport] = LatestJobRunner(
            run_request, lane="diagnosis", deadline_s=DEADLINE_S, worker=worker, parent=self
        )
        self._jobs.finished.connect(self._on_finished)
        self._jobs.failed.connect(self._on_failed)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self._submit_latest)
        plans.estimateChanged.connect(self._on_plan)
        display.changed.connect(self._on_display)

    # ---- reading -------------------------------------------------------------------
    @property
    def pins(self) -> frozenset[Pin]:
        """The pins the current mode's advice keeps: those ticked in this mode that mean
        something for it (core.advice.request.pins_for; serving: for the plan's engine)."""
        ticked = self._pins[self.display.mode]
        return ticked & frozenset(self.offered_pins()) if ticked else ticked

    def offered_pins(self) -> tuple[Pin, ...]:
        """The pins shown for the current mode and, serving, the plan's engine."""
        mode = self.display.mode
        engine = self.plans.plan.inference.engine if mode is Mode.INFERENCE else None
        offered = self._offered.get((mode, engine))
        if offered is None:
            offered = self._offered[(mode, engine)] = pins_for(mode, engine or Engine.HF)
        return offered

    def ticked_pins(self) -> frozenset[Pin]:
        """The pins ticked in the current mode, shown or not (a llama.cpp pin on vLLM)."""
        return self._pins[self.display.mode]

    @property
    def symptom(self) -> Failure | None:
        """The symptom picked in the current mode."""
        return self._symptoms[self.display.mode]

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
        return self._jobs.busy or self._timer.isActive()

    @property
    def runs(self) -> int:
        """Jobs started; tests read it to check the coalescing."""
        return self._jobs.runs

    @property
    def stopped(self) -> int:
        """Jobs stopped in the worker because their plan had changed."""
        return self._jobs.stopped

    @property
    def run(self) -> Callable[[DiagnosisRequest], DiagnosisReport]:
        """The work itself (tests substitute it)."""
        return self._jobs.run

    @run.setter
    def run(self, function: Callable[[DiagnosisRequest], DiagnosisReport]) -> None:
        self._jobs.run = function

    # ---- writing -------------------------------------------------------------------
    def set_active(self, on: bool) -> None:
        """The tab became visible (diagnose at once if stale) or hidden (no more work)."""
        self.active = on
        if on and self.stale:
            self.request_now()

    def set_pins(self, pins: frozenset[Pin]) -> None:
        """The pins ticked in the current mode (the other mode's stay as they were)."""
        mode = self.display.mode
        if pins != self._pins[mode]:
            self._pins[mode] = pins
            self.request_now()

    def set_symptom(self, symptom: Failure | None) -> None:
        """Pick ``symptom`` in the current mode; one the mode does not offer is refused."""
        mode = self.display.mode
        if symptom is not None and symptom not in symptoms_for(mode):
            raise ValueError(f"{symptom.value!r} is not a symptom of {mode.value}")
        if symptom != self._symptoms[mode]:
            self._symptoms[mode] = symptom
            self.request_now()

    def request_now(self) -> None:
        """Ask for the latest request without waiting for edits to settle."""
        self._timer.stop()
        if self.active:
            self._submit_latest()

    def shutdown(self) -> None:
        """No more work for this controller (the shared worker process stays)."""
        self._timer.stop()
        self._jobs.shutdown()

    # ---- reacting ------------------------------------------------------------------
    def _on_plan(self, _estimate: object) -> None:
        if self._jobs.running is not None:
            self._jobs.stop_unless(self.latest)  # its answer would be thrown away
        if self.active and self.stale:
            self._timer.start()  # restarts: a burst of edits gives one request

    def _on_display(self, _display: Display) -> None:
        if self.active and self.stale:  # a new mode: judged and remedied differently
            self.request_now()

    def _submit_latest(self) -> None:
        request = self.latest
        if self.report is not None and self.report.request == request:
            return
        self._jobs.submit(request)

    def _on_finished(self, request: DiagnosisRequest, answer: DiagnosisReport) -> None:
        if request != self.latest:
            return  # the plan changed since, and its request is on its way
        self.report = answer
        self.diagnosed.emit(answer)

    def _on_failed(self, _request: DiagnosisRequest, error: BaseException) -> None:
        if isinstance(error, JobFailed):
            self.failed.emit(f"The diagnosis {error}; it runs again at the next change.")
            return
        raise error  # a bug in the diagnosis: to the crash handler, like any slot's error

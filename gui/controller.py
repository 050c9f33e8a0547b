"""The one object that holds the current Plan and turns it into an Estimate.

Forms never touch each other: they hand the controller a change (a function from the
current Plan to a new one); the controller validates it by building the Plan and
estimating it, pushes it on the undo stack and emits :attr:`estimateChanged` once.
Every view redraws from that signal, and reads the Plan back from ``estimate.plan``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from core.errors import PlanError, one_line
from core.estimate import Estimate, estimate, keep_calibration
from core.inputs import BY_PATH
from core.plan import Plan

PlanChange = Callable[[Plan], Plan]

# QUndoCommand.id() must be an int; edits of the same field share one so that a burst of
# keystrokes in one box undoes as one step.
_MERGE_IDS: dict[str, int] = {}


def _merge_id(key: str) -> int:
    return _MERGE_IDS.setdefault(key, len(_MERGE_IDS) + 1)


def refusal_text(error: PlanError, plan: Plan) -> str:
    """A refused edit's message as the window shows it: the field named by the label beside it on the form
    (core.inputs, for this plan: ``Tensor parallel``), not by the plan's attribute path (``parallel.tensor_parallel``)
    that the command line and plan files use."""
    text = str(error)
    spec = BY_PATH.get(error.field)
    prefix = f"{one_line(error.field)}: "
    if spec is None or not text.startswith(prefix):
        return text
    return f"{spec.label_in(plan)}: {text.removeprefix(prefix)}"


class PlanEdit(QUndoCommand):
    """Replace the plan; consecutive edits of the same field merge into one undo step."""

    def __init__(self, controller: PlanController, before: Plan, after: Plan, key: str, text: str) -> None:
        super().__init__(text)
        self._controller = controller
        self.before = before
        self.after = after
        self.key = key

    def id(self) -> int:
        return _merge_id(self.key) if self.key else -1

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, PlanEdit) or other.key != self.key:
            return False
        self.after = other.after
        # An edit typed and then typed back leaves nothing to undo.
        self.setObsolete(self.after == self.before)
        return True

    def redo(self) -> None:
        self._controller._show(self.after)

    def undo(self) -> None:
        self._controller._show(self.before)


ESTIMATES_KEPT = 64


class PlanController(QObject):
    """Holds the current Plan and its Estimate; the only caller of ``estimate()``."""

    estimateChanged = Signal(object)  # Estimate
    # A rejected edit: (field key, message). Forms mark the field; the window shows the text.
    editRejected = Signal(str, str)

    def __init__(self, plan: Plan, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # Recent plans' estimates (frozen, so shared safely): undo, redo and a value tried
        # and then put back come round to a plan already estimated.
        self._recent: OrderedDict[Plan, Estimate] = OrderedDict()
        self._estimate = self._estimate_of(plan)
        self._validated: Estimate | None = None
        self.undo_stack = QUndoStack(self)
        self.undo_stack.setUndoLimit(500)

    # ---- reading -------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self._estimate.plan

    @property
    def estimate(self) -> Estimate:
        return self._estimate

    # ---- writing -------------------------------------------------------------------
    def update(self, key: str, change: PlanChange, text: str = "") -> PlanError | None:
        """Apply ``change`` to the current plan as one undoable edit of field ``key``.

        Returns the PlanError (and emits :attr:`editRejected`) when the result is not a
        valid plan; the current plan is then left exactly as it was.
        """
        try:
            # The calibrated plan's check estimate is kept: set_plan finds it (one estimate() an edit).
            new_plan = keep_calibration(self.estimate, change(self.plan), self._estimate_of)
        except PlanError as error:
            self.editRejected.emit(key, refusal_text(error, self.plan))
            return error
        return self.set_plan(new_plan, key=key, text=text)

    def set_plan(self, plan: Plan, *, key: str = "", text: str = "") -> PlanError | None:
        """Make ``plan`` current as one undoable step (merged with the last edit of ``key``)."""
        if plan == self.plan:
            return None
        try:
            # A plan the estimator refuses (unknown GPU, ...) never becomes current.
            self._validated = self._estimate_of(plan)
        except PlanError as error:
            self.editRejected.emit(key, refusal_text(error, plan))
            return error
        self.undo_stack.push(PlanEdit(self, self.plan, plan, key, text or f"Change {key or 'plan'}"))
        return None

    def reset(self, plan: Plan) -> PlanError | None:
        """Start a new document (New, Open): not undoable, and the stack starts clean."""
        try:
            result = self._estimate_of(plan)
        except PlanError as error:
            self.editRejected.emit("", refusal_text(error, plan))
            return error
        self.undo_stack.clear()
        self.undo_stack.setClean()
        changed = result.plan != self.plan
        self._estimate = result
        if changed:
            self.estimateChanged.emit(result)
        return None

    def refresh(self) -> None:
        """Emit the current estimate again (a view that was just built wants it)."""
        self.estimateChanged.emit(self._estimate)

    def _show(self, plan: Plan) -> None:
        if plan == self.plan:
            return
        # The estimate made while validating is reused: one estimate() per edit.
        validated = self._validated
        self._validated = None
        self._estimate = validated if validated is not None and validated.plan == plan else self._estimate_of(plan)
        self.estimateChanged.emit(self._estimate)

    def _estimate_of(self, plan: Plan) -> Estimate:
        """``estimate(plan)``, or the one made for an equal plan among the last few."""
        known = self._recent.get(plan)
        if known is not None:
            self._recent.move_to_end(plan)
            return known
        result = estimate(plan)  # raises PlanError for a plan the estimator refuses
        self._recent[plan] = result
        if len(self._recent) > ESTIMATES_KEPT:
            self._recent.popitem(last=False)
        return result

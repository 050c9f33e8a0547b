"""The controller: one signal per real change, invalid plans refused, undo/redo."""

from __future__ import annotations

from typing import Any

from core.errors import PlanError
from core.estimate import Estimate
from core.plan import Method
from core.presets import default_plan
from gui.controller import PlanController


def test_update_emits_one_estimate_for_a_real_change(qtbot: Any, controller: PlanController) -> None:
    seen: list[Estimate] = []
    controller.estimateChanged.connect(seen.append)
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=8))
    assert len(seen) == 1
    assert seen[0].plan.workload.micro_batch == 8
    assert controller.plan.workload.micro_batch == 8
    assert controller.estimate is seen[0]


def test_no_signal_when_the_plan_does_not_change(qtbot: Any, controller: PlanController) -> None:
    seen: list[Estimate] = []
    controller.estimateChanged.connect(seen.append)
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=p.workload.micro_batch))
    controller.set_plan(controller.plan)
    assert seen == []
    assert controller.undo_stack.count() == 0


def test_invalid_change_keeps_the_last_valid_plan(qtbot: Any, controller: PlanController) -> None:
    before = controller.plan
    rejected: list[tuple[str, str]] = []
    controller.editRejected.connect(lambda key, message: rejected.append((key, message)))
    error = controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=0))
    assert isinstance(error, PlanError)
    assert controller.plan is before
    assert rejected and rejected[0][0] == "workload.micro_batch"
    assert "micro_batch" in rejected[0][1]


def test_a_plan_the_estimator_refuses_is_not_taken(qtbot: Any, controller: PlanController) -> None:
    before = controller.plan
    error = controller.update("hardware.gpu", lambda p: p.with_hardware(gpu="no-such-card"))
    assert isinstance(error, PlanError)
    assert controller.plan is before


def test_undo_redo_and_merging_of_one_field(qtbot: Any, controller: PlanController) -> None:
    start = controller.plan
    for value in (2, 3, 4):  # typing "234" into one box is one undo step
        controller.update("workload.seq_len", lambda p, v=value: p.with_workload(seq_len=v))
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=16))
    stack = controller.undo_stack
    assert stack.count() == 2
    stack.undo()
    assert controller.plan.workload.micro_batch == start.workload.micro_batch
    assert controller.plan.workload.seq_len == 4
    stack.undo()
    assert controller.plan == start
    stack.redo()
    stack.redo()
    assert controller.plan.workload.seq_len == 4 and controller.plan.workload.micro_batch == 16


def test_edit_typed_back_leaves_nothing_to_undo(qtbot: Any, controller: PlanController) -> None:
    original = controller.plan.workload.micro_batch
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=original + 1))
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=original))
    assert controller.undo_stack.count() == 0


def test_reset_starts_a_clean_history(qtbot: Any, controller: PlanController) -> None:
    controller.update("method", lambda p: p.with_changes(method=Method.FULL))
    seen: list[Estimate] = []
    controller.estimateChanged.connect(seen.append)
    assert controller.reset(default_plan()) is None
    assert controller.undo_stack.count() == 0 and controller.undo_stack.isClean()
    assert len(seen) == 1 and controller.plan == default_plan()


def test_a_plan_come_back_to_is_not_estimated_again(qtbot: Any, controller: PlanController, monkeypatch: Any) -> None:
    """Undo, redo and a value tried and put back reach a plan estimated a moment ago."""
    import gui.controller as module

    calls: list[object] = []
    real = module.estimate
    monkeypatch.setattr(module, "estimate", lambda plan: (calls.append(plan), real(plan))[1])
    first = controller.estimate
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=p.workload.micro_batch + 1))
    second = controller.estimate
    assert len(calls) == 1
    controller.undo_stack.undo()
    assert controller.estimate is first and len(calls) == 1
    controller.undo_stack.redo()
    assert controller.estimate is second and len(calls) == 1
    # Typed back by hand: an equal plan, not the same object, still known.
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=p.workload.micro_batch - 1))
    assert controller.estimate is first and len(calls) == 1
    assert controller.plan == first.plan

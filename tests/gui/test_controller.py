"""The controller: one signal per real change, invalid plans refused, undo/redo."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import PlanError
from core.estimate import Estimate
from core.plan import Method, Plan
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
    # The message names the field as the Workload form labels it (core.inputs), the error keeps the path.
    assert rejected[0][1].startswith("Micro-batch: 0 is not allowed") and error.field == "workload.micro_batch"


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


def test_an_edit_of_a_plan_with_a_measured_speed_estimates_once(
    qtbot: Any, controller: PlanController, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_calibration estimates the calibrated plan to check the factor holds; the controller
    then estimated the same plan again (two estimate() runs per edit of a measured plan)."""
    import core.estimate
    import gui.controller

    modelled = controller.estimate.compute
    speed = modelled.tokens_per_second_per_gpu * 0.8  # a plausible measurement: 80 % of the modelled speed
    assert controller.set_plan(controller.plan.with_hardware(measured_tokens_per_s=speed)) is None
    assert controller.estimate.compute.calibration_factor > 0
    runs: list[Plan] = []
    original = core.estimate.estimate

    def counted(plan: Plan, gpu: Any = None) -> Estimate:
        runs.append(plan)
        return original(plan, gpu)

    monkeypatch.setattr(core.estimate, "estimate", counted)
    monkeypatch.setattr(gui.controller, "estimate", counted)
    micro_batch = controller.plan.workload.micro_batch + 1
    assert controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=micro_batch)) is None
    assert controller.plan.hardware.calibration > 0  # the measurement became a calibration
    assert len(runs) == 1 and runs[0] == controller.plan

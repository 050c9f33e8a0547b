"""The Method form's checkpointing policy: shown only with checkpointing on, N only for the
layer policy; widget edits reach the plan and the plan reaches the widgets."""

from __future__ import annotations

from typing import Any

from core.plan import CheckpointPolicy
from gui.main_window import MainWindow
from tests.gui.test_forms import type_into


def _shown(window: MainWindow, key: str) -> bool:
    form = window.method_form
    return bool(form.form.isRowVisible(form.fields[key]))


def test_policy_rows_follow_the_checkbox_and_edits_reach_the_plan(qtbot: Any, window: MainWindow) -> None:
    form, c = window.method_form, window.controller
    form.checkpointing.setChecked(False)
    assert not _shown(window, "checkpoint_policy") and not _shown(window, "checkpoint_every")
    form.checkpointing.setChecked(True)
    assert c.plan.checkpointing and c.plan.checkpoint_policy is CheckpointPolicy.FULL
    assert _shown(window, "checkpoint_policy") and not _shown(window, "checkpoint_every")
    before = c.estimate.peak_bytes
    form.checkpoint_policy.setCurrentIndex(form.checkpoint_policy.findData("op"))
    assert c.plan.checkpoint_policy is CheckpointPolicy.OP
    assert c.estimate.peak_bytes >= before  # op SAC keeps more than full checkpointing
    assert not _shown(window, "checkpoint_every")
    form.checkpoint_policy.setCurrentIndex(form.checkpoint_policy.findData("layer"))
    assert _shown(window, "checkpoint_every")
    type_into(qtbot, form.checkpoint_every, "3")
    assert (c.plan.checkpoint_policy, c.plan.checkpoint_every) == (CheckpointPolicy.LAYER, 3)


def test_plan_to_policy_widgets(window: MainWindow) -> None:
    plan = window.controller.plan.with_changes(
        checkpointing=True, checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=4
    )
    window.controller.set_plan(plan)
    form = window.method_form
    assert form.checkpoint_policy.value() == "layer" and form.checkpoint_every.value() == 4
    assert _shown(window, "checkpoint_policy") and _shown(window, "checkpoint_every")
    window.controller.set_plan(plan.with_changes(checkpointing=False))
    assert not _shown(window, "checkpoint_policy")

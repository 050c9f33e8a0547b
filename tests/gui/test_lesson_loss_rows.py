"""The loss group under Lesson accounting (core.losses.lesson_ignores): the Method form greys the Loss,
transformers, "Output kept in backward" and "K/V cache kept in training" rows, each saying why in its tooltip.

Before (the window review, h83ux): under Lesson accounting those rows stood enabled beside a bar whose
activations are the typed allowance, so no choice in them moved a figure (tests/core/test_losses.py checks
that on the estimate).
"""

from __future__ import annotations

from core.inputs import Accounting
from core.losses import LESSON_IGNORES_REASON
from core.plan import LoraSettings, Method, Precision
from core.presets import lesson_plan, plan_for_model
from gui.forms.method import LOSS_GROUP_ROWS
from gui.main_window import MainWindow


def _row(window: MainWindow, key: str) -> tuple[bool, str, str]:
    form = window.method_form
    field = form.fields[key]
    label = form.labels.get(key)
    return field.isEnabled(), field.toolTip(), label.toolTip() if label is not None else ""


def test_lesson_greys_the_loss_group_with_its_reason_and_detailed_restores_it(window: MainWindow) -> None:
    window.show()
    form = window.method_form
    plan = lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090")  # the lesson's own 7B example
    window.controller.reset(plan)
    for key in LOSS_GROUP_ROWS:
        enabled, tip, label_tip = _row(window, key)
        assert form.form.isRowVisible(form.fields[key]), key  # in place: switching the accounting moves no row
        assert not enabled and tip.endswith(LESSON_IGNORES_REASON), key
        assert str(form.fields[key].property("plainToolTip")) in tip
        assert label_tip in ("", LESSON_IGNORES_REASON)
    window.controller.reset(plan.with_changes(accounting=Accounting.DETAILED))
    for key in LOSS_GROUP_ROWS:
        enabled, tip, label_tip = _row(window, key)
        assert enabled and LESSON_IGNORES_REASON not in tip and not label_tip, key
    window.controller.undo_stack.setClean()


def test_the_transformers_row_stays_where_the_release_moves_a_lesson_s_adapters(window: MainWindow) -> None:
    # Qwen3-30B-A3B LoRA on every linear layer: transformers 5 keeps the MLP targets off the routed experts
    # (core.plan.Plan.release_moves_adapters), so the lesson's trainable count reads the release.
    window.show()
    lora = LoraSettings(rank=16, alpha=32, targets=("all-linear",))
    plan = plan_for_model("qwen3-30b-a3b").with_changes(accounting=Accounting.LESSON, method=Method.LORA, lora=lora)
    window.controller.reset(plan)
    assert _row(window, "training_transformers")[0]
    assert not _row(window, "loss")[0] and not _row(window, "loop_keeps_output")[0]
    window.controller.undo_stack.setClean()

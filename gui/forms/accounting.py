"""Accounting: the lesson's four buckets with typed figures, or the detailed estimate."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QWidget

from core.plan import Accounting, Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, CountField, FloatField

ACCOUNTING_LABELS = {
    # Short enough to show whole in the plan column; the tooltip says what each one counts.
    Accounting.DETAILED: "Detailed (every tensor)",
    Accounting.LESSON: "Lesson (four buckets)",
}
LESSON_KEYS = ("lesson.activations_gb", "lesson.trainable_override")


def _with_params_override(plan: Plan, value: int) -> Plan:
    # 0 (an empty box) means "derive P from the architecture".
    return plan.with_changes(model=replace(plan.model, params_override=value or None))


class AccountingForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Accounting", controller, parent)
        self.mode = ChoiceField(
            "Accounting",
            [(label, mode.value) for mode, label in ACCOUNTING_LABELS.items()],
            "Lesson: weights, gradients, optimizer state and a typed activation allowance, "
            "exactly as the lesson adds them.\nDetailed: every tensor of a real training step, phase by phase, "
            "plus framework overhead.",
        )
        self.bind("accounting", "Accounting", self.mode, lambda p, v: p.with_changes(accounting=Accounting(v)))
        self.activations = FloatField(
            "Activation allowance",
            0.0,
            1e6,
            "GB",
            "The lesson's activation term: memory for the activations, typed rather than derived "
            "(the lesson uses 1.5 GB).",
            decimals=2,
            step=0.5,
        )
        self.bind(
            "lesson.activations_gb", "Activations", self.activations, lambda p, v: p.with_lesson(activations_gb=v)
        )
        self.trainable = CountField(
            "Trainable parameters T",
            0,
            10**16,
            "parameters",
            "T as the lesson gives it (e.g. 4,194,304 for LoRA r = 8 on q, k, v, o). "
            "Leave empty to derive T from the method and the architecture.",
            blank_means=0,
            placeholder="derived",
        )
        self.bind(
            "lesson.trainable_override", "Trainable T", self.trainable, lambda p, v: p.with_lesson(trainable_override=v)
        )
        self.params = CountField(
            "Parameter count P",
            0,
            10**16,
            "parameters",
            "P as typed (the lesson's 7B model has P = 6.7e9), used instead of the count derived from the "
            "architecture in both accountings. Leave empty to derive it.",
            blank_means=0,
            placeholder="derived from the architecture",
        )
        self.bind("model.params_override", "Parameters P", self.params, _with_params_override)

    def show_plan(self, plan: Plan) -> None:
        self.mode.show_value(plan.accounting.value)
        self.activations.show_value(plan.lesson.activations_gb)
        self.trainable.show_value(plan.lesson.trainable_override)
        self.params.show_value(plan.model.params_override or 0)
        lesson = plan.accounting is Accounting.LESSON
        for key in LESSON_KEYS:
            self.set_row_visible(key, lesson)

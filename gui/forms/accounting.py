"""Accounting: the lesson's four buckets with typed figures, or the detailed estimate."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from gui.controller import PlanController
from gui.forms.base import PlanForm


class AccountingForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Accounting", controller, parent)
        self.mode = self.add_input("accounting")
        self.activations = self.add_input("lesson.activations_gb")
        self.trainable = self.add_input("lesson.trainable_override")
        self.params = self.add_input("model.params_override")  # 0 (an empty box): derived from the architecture

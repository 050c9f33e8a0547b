"""Workload: batch, sequence, accumulation and the run's token budget."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from gui.controller import PlanController
from gui.forms.base import PlanForm


class WorkloadForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Workload", controller, parent)
        self.micro_batch = self.add_input("workload.micro_batch")
        self.seq_len = self.add_input("workload.seq_len")
        self.grad_accum = self.add_input("workload.grad_accum")
        self.tokens = self.add_input("workload.tokens")
        self.eval_batch = self.add_input("workload.eval_batch")

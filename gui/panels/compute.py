"""Compute and time: FLOPs, hours, throughput, cost and energy for the token budget."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QFormLayout, QLabel, QVBoxLayout, QWidget

from core.estimate import Estimate
from gui.format import count, hours, money, plain_number


class ComputePanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Compute and time")
        self._estimate: Estimate | None = None
        self._stale = False
        layout = QVBoxLayout(self)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        layout.addLayout(form)
        self.values: dict[str, QLabel] = {}
        rows = (
            ("flops", "Training FLOPs", "Total floating-point operations for the token budget."),
            (
                "flops_per_token",
                "FLOPs per token",
                "6·P for full training, ≈ 4·P with a frozen base, +2·P when checkpointing.",
            ),
            ("peak", "Peak per GPU", "Dense datasheet peak of one card for the plan's precision."),
            ("hours", "Time", "FLOPs ÷ (peak × utilisation × GPUs)."),
            ("tokens_per_second", "Throughput", "Tokens trained per second across all GPUs."),
            ("steps", "Optimizer steps", "Token budget ÷ (micro-batch × accumulation × GPUs × sequence)."),
            ("cost", "Cost", "Hours × GPUs × price per GPU-hour."),
            ("energy", "Energy", "Hours × GPUs × board power (an upper bound)."),
        )
        for key, label, tooltip in rows:
            value = QLabel()
            value.setAccessibleName(label)
            value.setToolTip(tooltip)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.values[key] = value
            form.addRow(label + ":", value)
        self.formula = QLabel()
        self.formula.setAccessibleName("Compute formula")
        self.formula.setWordWrap(True)
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.formula)
        layout.addStretch(1)

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        # A hidden tab's labels would be measured again on every layout pass of the window
        # (a tab widget sizes itself to all its pages): it catches up when it is shown.
        if self.isVisible():
            self._show(estimate)
        else:
            self._stale = True

    def showEvent(self, event: QShowEvent) -> None:
        if self._stale and self._estimate is not None:
            self._stale = False
            self._show(self._estimate)
        super().showEvent(event)

    def _show(self, estimate: Estimate) -> None:
        c = estimate.compute
        v = self.values
        v["flops"].setText(plain_number(c.flops))
        v["flops_per_token"].setText(plain_number(c.flops_per_token))
        v["peak"].setText(f"{c.peak_tflops:g} TFLOP/s")
        v["hours"].setText(hours(c.hours))
        v["tokens_per_second"].setText(f"{c.tokens_per_second:,.0f} tokens/s")
        v["steps"].setText(f"{c.steps:,}")
        v["cost"].setText(money(c.cost))
        v["energy"].setText(f"{c.energy_kwh:,.1f} kWh" if c.energy_kwh else "— (board power unknown)")
        self.formula.setText(c.formula)
        self.setToolTip(f"{count(c.flops)} FLOPs")

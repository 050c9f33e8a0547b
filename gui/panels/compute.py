"""Compute and time: FLOPs, hours, throughput, cost and energy for the token budget."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.estimate import Estimate
from gui.format import count, hours, money, plain_number
from gui.panels.figures import FiguresPanel

ROWS = (
    ("flops", "Training FLOPs", "Total floating-point operations for the token budget."),
    ("flops_per_token", "FLOPs per token", "6·P for full training, ≈ 4·P with a frozen base, +2·P when checkpointing."),
    ("peak", "Peak per GPU", "Dense datasheet peak of one card for the plan's precision."),
    ("hours", "Time", "FLOPs ÷ (peak × utilisation × GPUs)."),
    ("tokens_per_second", "Throughput", "Tokens trained per second across all GPUs."),
    ("steps", "Optimizer steps", "Token budget ÷ (micro-batch × accumulation × GPUs × sequence)."),
    ("cost", "Cost", "Hours × GPUs × price per GPU-hour."),
    ("energy", "Energy", "Hours × GPUs × board power (an upper bound)."),
)


class ComputePanel(FiguresPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Compute and time", ROWS, "Compute formula", parent)

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

"""Compute and time: training FLOPs and hours, or in Inference mode the serving speed."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QStackedLayout, QWidget

from core.estimate import Estimate
from gui.format import count, hours, money, plain_number
from gui.panels.figures import FiguresPanel
from gui.plotstyle import OKABE_ITO

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

SERVING_ROWS = (
    ("ttft", "Time to first token", "Prefill FLOPs ÷ (peak × utilisation × tensor-parallel GPUs)."),
    ("running", "Requests decoding", "The plan's requests, or as many as fit."),
    (
        "step",
        "Time per output token",
        "One decode step (the longer of bytes read ÷ bandwidth and FLOPs ÷ compute, plus all-reduces) and the "
        "prefills of the requests admitted alongside, averaged over the answer.",
    ),
    ("per_request", "Per request", "Output tokens per second one request sees."),
    ("total", "In total", "Output tokens per second over all requests and replicas."),
    ("bound", "Bound by", "Memory bandwidth (weights + KV read each step) or compute."),
    ("card", "Card", "Dense peak for the weights' compute type, and memory bandwidth."),
    ("assumptions", "Assumptions", "What the speed model takes for granted."),
)


class TrainingComputePanel(FiguresPanel):
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


class ServingSpeedPanel(FiguresPanel):
    """Serving speed from the roofline, with tokens/s against concurrency."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Serving speed", SERVING_ROWS, "Speed formula", parent)
        self.values["assumptions"].setWordWrap(True)
        self.plot = pg.PlotWidget()
        self.plot.setAccessibleName("Throughput against concurrency")
        self.plot.setMinimumHeight(180)
        self.plot.setLabel("bottom", "concurrent requests")
        self.plot.setLabel("left", "output tokens/s")
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        palette = self.palette()
        self.plot.setBackground(palette.color(palette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis.setPen(pg.mkPen(palette.color(palette.ColorRole.Text)))
            axis.setTextPen(pg.mkPen(palette.color(palette.ColorRole.Text)))
        legend = self.plot.addLegend(offset=(10, 10), labelTextColor=palette.color(palette.ColorRole.Text))
        self.total_curve = self.plot.plot([], [], pen=pg.mkPen(OKABE_ITO["blue"], width=2), symbol="o", name="total")
        self.per_curve = self.plot.plot(
            [], [], pen=pg.mkPen(OKABE_ITO["orange"], width=2), symbol="t", name="per request"
        )
        legend.setParentItem(self.plot.getPlotItem().vb)
        layout = self.layout()
        assert layout is not None
        layout.addWidget(self.plot)

    def _show(self, estimate: Estimate) -> None:
        speed = estimate.inference.speed
        v = self.values
        v["ttft"].setText(f"{speed.ttft_s * 1e3:,.0f} ms")
        v["running"].setText(f"{speed.running:,}")
        v["step"].setText(f"{speed.token_latency_s * 1e3:,.1f} ms (decode step {speed.step_s * 1e3:,.1f} ms)")
        v["per_request"].setText(f"{speed.per_request_tokens_per_s:,.0f} tokens/s")
        v["total"].setText(f"<b>{speed.total_tokens_per_s:,.0f} tokens/s</b>")
        here = next((p for p in speed.curve if p.concurrent == speed.running), None)
        v["bound"].setText("memory bandwidth" if here is None or here.memory_bound else "compute")
        v["card"].setText(f"{speed.peak_tflops:g} TFLOP/s · {speed.bandwidth_gb_s:,.0f} GB/s")
        v["assumptions"].setText(speed.assumptions)
        self.formula.setText(speed.formula)
        xs = [p.concurrent for p in speed.curve]
        self.total_curve.setData(xs, [p.total_tokens_per_s for p in speed.curve])
        self.per_curve.setData(xs, [p.per_request_tokens_per_s for p in speed.curve])


class ComputePanel(QWidget):
    """The Compute tab: training figures, or serving speed in Inference mode."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Compute and time")
        self.training = TrainingComputePanel()
        self.serving = ServingSpeedPanel()
        self.stack = QStackedLayout(self)
        self.stack.addWidget(self.training)
        self.stack.addWidget(self.serving)
        self.mode = "training"

    @property
    def values(self) -> dict[str, object]:
        return dict(self.current.values)

    @property
    def current(self) -> FiguresPanel:
        return self.serving if self.mode == "inference" else self.training

    def set_mode(self, mode: str) -> None:
        self.mode = "inference" if mode == "inference" else "training"
        self.stack.setCurrentWidget(self.current)

    def show_estimate(self, estimate: Estimate) -> None:
        self.training.show_estimate(estimate)
        self.serving.show_estimate(estimate)

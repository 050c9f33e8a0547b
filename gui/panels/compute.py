"""Compute and time: training FLOPs and hours, or in Inference mode the serving speed."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QFormLayout, QStackedLayout, QWidget

from core.estimate import MFU_CONVENTION, Estimate, UtilisationSource
from core.format import TOTAL_RATE_BASIS, tokens_per_s
from gui.format import duration, hours, latency, money, plain_number
from gui.panels.figures import FiguresPanel
from gui.plotstyle import OKABE_ITO

ROWS = (
    ("flops", "Training FLOPs", "What the step's kernels run over the token budget: causal attention, the recompute."),
    (
        "flops_per_token",
        "FLOPs per token",
        "The kernels' count (causal attention, the checkpointing's recompute), then the count logs compare "
        "with: torchtitan's and Megatron-LM's 6·N + 12·l·s·H·hd (every query against every key, no "
        "recompute), and the FlashAttention causal count.",
    ),
    ("peak", "Peak per GPU", "Dense datasheet peak of one card for the matmuls' dtype (fp8 for float8 linears)."),
    (
        "utilisation",
        "Utilisation",
        "The share of the peak the step's compute reaches: modelled from the card, the matmul sizes and the "
        "software stack (fitted on published runs), typed, or solved from your run's measured speed.",
    ),
    ("mfu", "MFU", MFU_CONVENTION + "."),
    (
        "hours",
        "Time",
        "Optimizer steps × the step: compute × (1 + pipeline bubble) + optimizer + exposed communication.",
    ),
    ("tokens_per_second", "Throughput", "Tokens trained per second across all GPUs, and per GPU."),
    ("steps", "Optimizer steps", "Token budget ÷ (micro-batch × accumulation × GPUs × sequence)."),
    (
        "cost",
        "Cost",
        "Hours × GPUs × price per GPU-hour: the price you type (Hardware → Price, in your currency), "
        "else the catalogue's typical cloud price in US dollars.",
    ),
    ("energy", "Energy", "Hours × GPUs × board power (an upper bound)."),
)

_SOURCES = {
    UtilisationSource.MODELLED: "modelled",
    UtilisationSource.TYPED: "typed",
    UtilisationSource.CALIBRATED: "calibrated",
    UtilisationSource.MEASURED: "from your run",
}

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
    (
        "total",
        "In total",
        f"Output tokens per second {TOTAL_RATE_BASIS}: lower than one request's rate when prefill dominates.",
    ),
    ("bound", "Bound by", "Memory bandwidth (weights + KV read each step) or compute."),
    ("card", "Card", "Dense peak for the weights' compute type, and memory bandwidth."),
    ("assumptions", "Assumptions", "What the speed model takes for granted."),
)


def _cost(estimate: Estimate) -> str:
    """The cost with its currency and the price it is at: a typed price is in the user's
    currency, the catalogue's (GpuSpec.hourly_price) in US dollars; no price says what to do."""
    c = estimate.compute
    if not math.isfinite(c.cost):
        return f"{money(c.cost)} — {c.price_source}"
    where = c.price_source if c.currency else "your price"
    return f"{money(c.cost, c.currency)} at {money(c.price_per_gpu_hour, c.currency)} per GPU-hour ({where})"


class TrainingComputePanel(FiguresPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Compute and time", ROWS, "Compute formula", parent)
        # The rows whose text runs long (three FLOPs counts; a typed utilisation beside the
        # modelled one; the speed in total and per GPU) wrap, so they never widen the dock.
        for key in ("flops_per_token", "utilisation", "mfu", "tokens_per_second", "cost"):
            self.values[key].setWordWrap(True)

    def _show(self, estimate: Estimate) -> None:
        c = estimate.compute
        v = self.values
        v["flops"].setText(plain_number(c.flops))
        v["flops_per_token"].setText(
            f"{plain_number(c.flops_per_token)} run · {plain_number(c.model_flops_per_token)} "
            f"(MFU count) · {plain_number(c.causal_flops_per_token)} (causal)"
        )
        v["peak"].setText(f"{c.gemm_peak_tflops:g} TFLOP/s" + (" (fp8)" if c.gemm_peak_tflops != c.peak_tflops else ""))
        text = f"{c.utilisation:.1%} ({_SOURCES[c.utilisation_source]})"
        if c.utilisation_source is not UtilisationSource.MODELLED:
            text += f" · modelled {c.modelled_utilisation:.1%}"
        if c.host_pace:  # the device's share while it works; the step waits on the host (the formula says why)
            text += " · the host paces the step"
        v["utilisation"].setText(text)
        v["mfu"].setText(c.mfu_text)
        v["hours"].setText(hours(c.hours))
        v["tokens_per_second"].setText(
            f"{tokens_per_s(c.tokens_per_second)} · {c.tokens_per_second_per_gpu:,.0f} per GPU"
        )
        v["steps"].setText(f"{c.steps:,}")
        v["cost"].setText(_cost(estimate))
        v["energy"].setText(f"{c.energy_kwh:,.1f} kWh" if c.energy_kwh else "— (board power unknown)")
        parts = c.parts_sentence
        problem = f"\n⚠ {c.float8_problem}" if c.float8_problem else ""
        problem += f"\n⚠ {c.attention_note}" if c.attention_note else ""
        host = f"\nOptimizer step on the host (CPU offload): {c.host_step_formula}." if c.host_step_formula else ""
        if c.host_step_advice:
            host += f"\n⚑ Host threads: {c.host_step_advice}."
        self.formula.setText(c.formula + (f"\nCompute per step: {parts}." if parts else "") + host + problem)
        self.setToolTip(f"{plain_number(c.flops)} FLOPs")


# Below this width (the Details dock at 1024 × 700) the serving figures stand under their names,
# as the Diagnosis tab's limits do (gui.panels.diagnosis.NARROW_WIDTH).
NARROW_WIDTH = 300
LEGEND_ROW_PX = 24  # one row of two entries, the legend's own 9 pt text


class _CountAxis(pg.AxisItem):
    """An axis of counts: ticks only at whole numbers."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        levels = super().tickValues(minVal, maxVal, size)
        return [(max(spacing, 1.0), [v for v in values if float(v).is_integer()]) for spacing, values in levels]


class ServingSpeedPanel(FiguresPanel):
    """Serving speed from the roofline, with tokens/s against concurrency."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Serving speed", SERVING_ROWS, "Speed formula", parent)
        # Every figure wraps: at 1024 × 700 the one-line ones ("95.6 ms (decode step …)", the
        # card's peak and bandwidth) held the panel wider than the Details dock, cut on the right.
        for label in self.values.values():
            label.setWordWrap(True)
        self._wide_rows = self.form.rowWrapPolicy()  # the style's, kept where the panel is wide
        self._estimate: Estimate | None = None
        self._plot: pg.PlotWidget | None = None

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Narrow (the Details dock at 1024 × 700), each figure under its name, across the panel:
        beside it the assumptions took a 94 px column, 25 lines of two or three words."""
        super().resizeEvent(event)
        narrow = self.width() < NARROW_WIDTH
        policy = QFormLayout.RowWrapPolicy.WrapAllRows if narrow else self._wide_rows
        if self.form.rowWrapPolicy() != policy:
            self.form.setRowWrapPolicy(policy)

    # The plot is built when the panel is first shown (Inference mode, Compute tab): a
    # pyqtgraph plot costs tens of milliseconds that a training start-up need not pay.
    def showEvent(self, event: QShowEvent) -> None:
        self._build_plot()
        super().showEvent(event)

    @property
    def plot(self) -> pg.PlotWidget:
        return self._build_plot()

    def _build_plot(self) -> pg.PlotWidget:
        if self._plot is not None:
            return self._plot
        # Concurrency is a count of requests: whole-number ticks (_CountAxis), nothing left of
        # zero (one point drew an axis from -0.5 to 2.5); tokens/s are never negative.
        self._plot = pg.PlotWidget(axisItems={"bottom": _CountAxis("bottom")})
        self._plot.setAccessibleName("Throughput against concurrency")
        self._plot.setMinimumHeight(180)
        self._plot.setLabel("bottom", "concurrent requests")
        self._plot.setLabel("left", "output tokens/s")
        self._plot.showGrid(x=True, y=True, alpha=0.2)
        item = self._plot.getPlotItem()
        item.setLimits(xMin=0, yMin=0)
        palette = self.palette()
        self._plot.setBackground(palette.color(palette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self._plot.getAxis(name)
            axis.setPen(pg.mkPen(palette.color(palette.ColorRole.Text)))
            axis.setTextPen(pg.mkPen(palette.color(palette.ColorRole.Text)))
        # The legend takes the (unused) title's row, above the data: anchored in the view box it
        # lay over the first points, where "per request" is highest and "total" lowest.
        legend = item.legend = pg.LegendItem(colCount=2, labelTextColor=palette.color(palette.ColorRole.Text))
        item.layout.removeItem(item.titleLabel)
        item.layout.addItem(legend, 0, 1)
        item.layout.setRowFixedHeight(0, LEGEND_ROW_PX)
        self.total_curve = self._curve(OKABE_ITO["blue"], "o", "in total")
        self.per_curve = self._curve(OKABE_ITO["orange"], "t", "per request")
        self.content.addWidget(self._plot)
        self._draw()
        return self._plot

    def _curve(self, colour: str, symbol: str, name: str) -> pg.PlotDataItem:
        """A line with its markers in its own colour (both series' markers were the same navy)."""
        assert self._plot is not None
        return self._plot.plot(
            [], [], pen=pg.mkPen(colour, width=2), symbol=symbol, symbolBrush=colour, symbolPen=colour, name=name
        )

    def _show(self, estimate: Estimate) -> None:
        speed = estimate.inference.speed
        v = self.values
        v["ttft"].setText(latency(speed.ttft_s))
        v["running"].setText(f"{speed.running:,}")
        v["step"].setText(f"{duration(speed.token_latency_s)} (decode step {duration(speed.step_s)})")
        # The words of the CLI's and the report's speed line (ServingSpeed.rates_sentence), for every engine:
        # "Per request: 53 tokens/s" over "In total: 38 tokens/s" read as a contradiction (docs/GUI.md, 2026-12-07).
        v["per_request"].setText(speed.per_request_rate)
        v["total"].setText(f"<b>{speed.total_rate}</b> ({TOTAL_RATE_BASIS})")
        here = next((p for p in speed.curve if p.concurrent == speed.running), None)
        v["bound"].setText("memory bandwidth" if here is None or here.memory_bound else "compute")
        v["card"].setText(f"{speed.peak_tflops:g} TFLOP/s · {speed.bandwidth_gb_s:,.0f} GB/s")
        v["assumptions"].setText(speed.assumptions)
        note = estimate.inference.speed_note
        self.formula.setText(f"{note}\n{speed.formula}" if note else speed.formula)
        self._estimate = estimate
        if self._plot is not None:
            self._draw()

    def _draw(self) -> None:
        if self._estimate is None:
            return
        speed = self._estimate.inference.speed
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

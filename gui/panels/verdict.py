"""The verdict: Fits / Tight / Out of memory, in words and symbol as well as colour."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QWidget

from core.estimate import VERDICT_LABELS, Estimate, Verdict
from core.measurement import Measurement
from gui.format import Unit, measurement_label, memory

# Okabe-Ito bluish green / orange / vermillion, with a symbol so colour is never the only cue.
VERDICT_STYLE = {
    Verdict.FITS: ("✔", "#009E73"),
    Verdict.TIGHT: ("⚠", "#E69F00"),
    Verdict.OOM: ("✖", "#D55E00"),
}
SERVING_LABELS = {Verdict.FITS: "Serving fits", Verdict.TIGHT: "Serving: tight", Verdict.OOM: "Serving: out of memory"}


def _headline(total: str, usable: str, margin: str = "") -> str:
    tail = f" — {margin}" if margin else ""
    return f"<span style='font-size:13pt'><b>{total}</b> of {usable} usable{tail}</span>"


HEADLINE_TEMPLATES = {
    "training": _headline("88.8 GB", "88.8 GB", "88.8 GB to spare"),
    "inference": _headline("88.8 GB", "88.8 GB"),
}


def badge_style(verdict: Verdict) -> str:
    text_colour = "#000000" if verdict is Verdict.TIGHT else "#FFFFFF"
    return (
        f"QLabel {{ background: {VERDICT_STYLE[verdict][1]}; color: {text_colour};"
        " border-radius: 6px; padding: 8px 14px; font-size: 17pt; font-weight: 600; }"
    )


class VerdictPanel(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("verdictPanel")
        self.setAccessibleName("Verdict")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.unit: Unit = "GB"
        self.measurement: Measurement | None = None
        self._estimate: Estimate | None = None
        self.mode = "training"
        grid = QGridLayout(self)
        grid.setContentsMargins(14, 10, 14, 10)
        grid.setHorizontalSpacing(18)
        self.badge = QLabel()
        self.badge.setAccessibleName("Verdict")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setMinimumWidth(200)
        grid.addWidget(self.badge, 0, 0, 2, 1)
        self.headline = QLabel()
        self.headline.setAccessibleName("Verdict detail")
        # Wide enough for the mode's usual headline on one line, the width the window is laid
        # out for; a longer one ("over the usable memory") wraps instead of widening the window
        # at an edit, or squeezing the badge.
        self.headline.ensurePolished()
        self._headline_widths: dict[str, int] = {}
        for mode, template in HEADLINE_TEMPLATES.items():
            self.headline.setText(template)
            self._headline_widths[mode] = self.headline.sizeHint().width()
        self.headline.setText("")
        self.headline.setWordWrap(True)
        self.headline.setMinimumWidth(self._headline_widths["training"])
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.headline, 0, 1)
        self.detail = QLabel()
        self.detail.setAccessibleName("Verdict figures")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.detail, 1, 1)
        grid.setColumnStretch(1, 1)

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        if self.mode == "inference":
            self._show_serving(estimate)
        else:
            self._show_training(estimate)

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def set_measurement(self, measurement: Measurement | None) -> None:
        self.measurement = measurement
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.headline.setMinimumWidth(self._headline_widths["inference" if mode == "inference" else "training"])
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def _show_badge(self, verdict: Verdict, label: str) -> None:
        text = f"{VERDICT_STYLE[verdict][0]}  {label}"
        style = badge_style(verdict)
        if text == self.badge.text() and style == self.badge.styleSheet():
            return
        self.badge.setText(text)
        if style != self.badge.styleSheet():
            # Only on a change of colour: a new style sheet re-polishes the widget.
            self.badge.setStyleSheet(style)
        self.badge.ensurePolished()
        self.badge.setMinimumWidth(max(200, self.badge.sizeHint().width()))  # never clipped

    def _show_serving(self, estimate: Estimate) -> None:
        # The core decides the serving verdict (InferenceEstimate.verdict: for vLLM "tight"
        # means requests wait in the queue) and what the engine may use (budget_bytes).
        inf = estimate.inference
        plan = estimate.plan.inference
        verdict = Verdict(inf.verdict)
        self._show_badge(verdict, SERVING_LABELS[verdict])
        u = self.unit
        self.headline.setText(_headline(memory(inf.total_bytes, u), memory(inf.budget_bytes, u)))
        self.detail.setText(
            f"{plan.concurrent:,} request(s) × {plan.context:,} tokens · at most {inf.max_concurrent:,} requests "
            f"of this context, or {inf.max_context:,} tokens each at this concurrency · {estimate.gpu.name}"
        )
        self._describe(f"Serving {'fits' if inf.fits else 'does not fit'}: {memory(inf.total_bytes, u)}.")

    def _describe(self, text: str) -> None:
        if self.accessibleDescription() != text:
            self.setAccessibleDescription(text)

    def _show_training(self, estimate: Estimate) -> None:
        label = VERDICT_LABELS[estimate.verdict]
        self._show_badge(estimate.verdict, label)
        u = self.unit
        margin = estimate.margin_bytes
        if margin >= 0:
            margin_text = f"{memory(margin, u)} to spare"
        else:
            margin_text = f"{memory(-margin, u)} over the usable memory"
        self.headline.setText(_headline(memory(estimate.total_bytes, u), memory(estimate.usable_bytes, u), margin_text))
        plan = estimate.plan
        gpus = f" × {plan.hardware.gpu_count}" if plan.hardware.gpu_count > 1 else ""
        text = (
            f"Peak at the <b>{estimate.peak_phase}</b>: {memory(estimate.peak_bytes, u)} allocated · "
            f"{estimate.gpu.name}{gpus}: {memory(estimate.capacity_bytes, u)}, "
            f"{plan.hardware.headroom:.0%} kept as headroom"
        )
        if self.measurement is not None:
            text += f"<br>Measured peak: <b>{memory(self.measurement.peak_allocated_bytes, u)}</b> allocated"
            text += f" — {escape(measurement_label(self.measurement))}"
        self.detail.setText(text)
        self._describe(f"{label}. {memory(estimate.total_bytes, u)}; {margin_text}.")

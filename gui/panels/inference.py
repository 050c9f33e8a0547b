"""Serving: weights + KV cache for the plan's requests, and the most that fit."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.estimate import Estimate
from core.verdict import VERDICT_LABELS
from gui.format import Unit, memory
from gui.panels.figures import FiguresPanel
from gui.panels.verdict import VERDICT_STYLE

ROWS = (
    ("weights", "Weights", "The model's weights as stored for serving."),
    ("kv_cache", "KV cache", "2 · layers · KV heads · head width · tokens · requests · bytes."),
    ("kv_per_token", "KV per token", "Cache bytes one token adds, over all layers."),
    ("activations", "Activations", "Working memory of a prefill pass."),
    ("overhead", "Overhead", "CUDA context and runtime buffers."),
    ("total", "Total", "Weights + KV cache + activations + overhead."),
    ("max_concurrent", "Most requests", "Most concurrent requests of this context that fit the usable memory."),
    ("max_context", "Longest context", "Longest context per request, at this concurrency, that fits."),
)


class InferencePanel(FiguresPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Serving", ROWS, "KV cache formula", parent, headline_name="Serving verdict")
        self.unit: Unit = "GB"

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        self.refresh()

    def _show(self, estimate: Estimate) -> None:
        inf = estimate.inference
        u = self.unit
        plan = estimate.plan.inference
        v = self.values
        v["weights"].setText(memory(inf.weights_bytes, u))
        v["kv_cache"].setText(memory(inf.kv_cache_bytes, u))
        v["kv_per_token"].setText(f"{inf.kv_bytes_per_token:,.0f} bytes")
        v["activations"].setText(memory(inf.activation_bytes, u))
        v["overhead"].setText(memory(inf.overhead_bytes, u))
        v["total"].setText(f"<b>{memory(inf.total_bytes, u)}</b>")
        v["max_concurrent"].setText(
            f"{inf.max_concurrent:,} × {plan.context:,} tokens"
            if inf.max_concurrent
            else "none: the weights alone do not fit"
        )
        v["max_context"].setText(
            f"{inf.max_context:,} tokens × {plan.concurrent:,}" if inf.max_context else "none at this concurrency"
        )
        # The core's serving verdict, three states as for training (core.verdict.judge).
        verdict = f"{VERDICT_STYLE[inf.verdict][0]} {VERDICT_LABELS[inf.verdict].lower()}"
        assert self.headline is not None
        self.headline.setText(
            f"<b>{verdict}</b>: {plan.concurrent:,} request(s) of {plan.context:,} tokens need "
            f"{memory(inf.total_bytes, u)} of {memory(estimate.usable_bytes, u)} usable."
        )
        self.formula.setText(inf.formula)

"""Serving: weight and KV-cache storage, concurrent requests and their context."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.plan import KV_DTYPES, MAX_BATCH, MAX_SEQ, WEIGHT_DTYPES, Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, IntField


class ServingForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Serving", controller, parent)
        self.weights = ChoiceField(
            "Weight storage",
            [(d, d) for d in WEIGHT_DTYPES],
            "How the served weights are stored; int8 and nf4 keep embeddings, head and norms in 16 bits.",
        )
        self.bind("inference.weight_dtype", "Weights", self.weights, lambda p, v: p.with_inference(weight_dtype=v))
        self.kv = ChoiceField(
            "KV cache storage", [(d, d) for d in KV_DTYPES], "Element type of the cached keys and values."
        )
        self.bind("inference.kv_dtype", "KV cache", self.kv, lambda p, v: p.with_inference(kv_dtype=v))
        self.concurrent = IntField(
            "Concurrent requests", 1, MAX_BATCH, "requests", "Requests served at once, each with its own KV cache."
        )
        self.bind("inference.concurrent", "Concurrent", self.concurrent, lambda p, v: p.with_inference(concurrent=v))
        self.context = IntField(
            "Context per request", 1, MAX_SEQ, "tokens", "Prompt plus generated tokens of one request."
        )
        self.context.setSingleStep(1024)
        self.bind("inference.context", "Context", self.context, lambda p, v: p.with_inference(context=v))

    def show_plan(self, plan: Plan) -> None:
        inf = plan.inference
        self.weights.show_value(inf.weight_dtype)
        self.kv.show_value(inf.kv_dtype)
        self.concurrent.show_value(inf.concurrent)
        self.context.show_value(inf.context)

"""Workload: batch, sequence, accumulation and the run's token budget."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.plan import MAX_BATCH, MAX_SEQ, MAX_TOKENS, Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import CountField, IntField


class WorkloadForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Workload", controller, parent)
        self.micro_batch = IntField(
            "Micro-batch", 1, MAX_BATCH, "sequences", "Sequences in one forward/backward pass on one GPU."
        )
        self.bind("workload.micro_batch", "Micro-batch", self.micro_batch, lambda p, v: p.with_workload(micro_batch=v))
        self.seq_len = IntField(
            "Sequence length",
            1,
            MAX_SEQ,
            "tokens",
            "Tokens per sequence; activations grow with it (eager attention: with its square).",
        )
        self.seq_len.setSingleStep(256)
        self.bind("workload.seq_len", "Sequence", self.seq_len, lambda p, v: p.with_workload(seq_len=v))
        self.grad_accum = IntField(
            "Gradient accumulation",
            1,
            MAX_BATCH,
            "steps",
            "Micro-batches summed before each optimizer step: a larger effective batch for no extra activation memory.",
        )
        self.bind("workload.grad_accum", "Accumulation", self.grad_accum, lambda p, v: p.with_workload(grad_accum=v))
        self.tokens = CountField(
            "Token budget",
            0,
            MAX_TOKENS,
            "tokens",
            "Tokens the whole run trains on (D in FLOPs ≈ 6·P·D): sets time and cost.",
        )
        self.bind("workload.tokens", "Token budget", self.tokens, lambda p, v: p.with_workload(tokens=v))
        self.eval_batch = IntField(
            "Evaluation batch",
            0,
            MAX_BATCH,
            "sequences",
            "Batch used for evaluation passes; 0 uses the training micro-batch.",
        )
        self.eval_batch.setSpecialValueText("same as training")
        self.bind("workload.eval_batch", "Eval batch", self.eval_batch, lambda p, v: p.with_workload(eval_batch=v))

    def show_plan(self, plan: Plan) -> None:
        w = plan.workload
        self.micro_batch.show_value(w.micro_batch)
        self.seq_len.show_value(w.seq_len)
        self.grad_accum.show_value(w.grad_accum)
        self.tokens.show_value(w.tokens)
        self.eval_batch.show_value(w.eval_batch)

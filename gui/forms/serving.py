"""Serving: the engine, how the weights and cache are stored, the requests, the GPUs."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from gui.controller import PlanController
from gui.forms.base import PlanForm


class ServingForm(PlanForm):
    """Rows only one engine reads (vLLM's scheduler limits, SGLang's static fraction) show
    for that engine only: the input table says which."""

    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Serving", controller, parent)
        self.engine = self.add_input("inference.engine")
        self.weights = self.add_input("inference.weight_dtype")
        self.kv = self.add_input("inference.kv_dtype")
        self.concurrent = self.add_input("inference.concurrent")
        self.context = self.add_input("inference.context")
        self.new_tokens = self.add_input("inference.new_tokens")
        self.tensor_parallel = self.add_input("inference.tensor_parallel")
        self.pipeline_parallel = self.add_input("inference.pipeline_parallel")
        self.replicas = self.add_input("inference.replicas")
        self.utilisation = self.add_input("inference.gpu_memory_utilization")
        self.max_num_seqs = self.add_input("inference.max_num_seqs")
        self.max_batched = self.add_input("inference.max_num_batched_tokens")
        self.mem_fraction = self.add_input("inference.mem_fraction_static")

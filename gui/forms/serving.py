"""Serving: the engine, how the weights and cache are stored, the requests, the GPUs."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.dtypes import WEIGHT_LABELS, KvDtype
from core.plan import ENGINE_LABELS, MAX_BATCH, MAX_PARALLEL, MAX_SEQ, Engine, Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, FloatField, IntField

# Rows only one engine reads; hidden for the others.
ENGINE_ROWS = {
    "inference.gpu_memory_utilization": Engine.VLLM,
    "inference.max_num_seqs": Engine.VLLM,
    "inference.max_num_batched_tokens": Engine.VLLM,
    "inference.mem_fraction_static": Engine.SGLANG,
}


class ServingForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Serving", controller, parent)
        self.engine = ChoiceField(
            "Engine",
            [(label, engine.value) for engine, label in ENGINE_LABELS.items()],
            "Hugging Face generate runs one static batch; vLLM sizes a paged KV pool at start-up.",
        )
        self.bind("inference.engine", "Engine", self.engine, lambda p, v: p.with_inference(engine=v))
        self.weights = ChoiceField(
            "Weight storage",
            [(label, fmt.value) for fmt, label in WEIGHT_LABELS.items()],
            "How the served weights are stored; quantised formats keep embeddings, head and norms in 16 bits.",
        )
        self.bind("inference.weight_dtype", "Weights", self.weights, lambda p, v: p.with_inference(weight_dtype=v))
        self.kv = ChoiceField(
            "KV cache storage", [(k.value, k.value) for k in KvDtype], "Element type of the cached keys and values."
        )
        self.bind("inference.kv_dtype", "KV cache", self.kv, lambda p, v: p.with_inference(kv_dtype=v))
        self.concurrent = IntField(
            "Concurrent requests", 1, MAX_BATCH, "requests", "Requests served at once, each with its own KV cache."
        )
        self.bind("inference.concurrent", "Concurrent", self.concurrent, lambda p, v: p.with_inference(concurrent=v))
        self.context = IntField(
            "Context per request",
            1,
            MAX_SEQ,
            "tokens",
            "Prompt plus generated tokens of one request (vLLM: max_model_len).",
        )
        self.context.setSingleStep(1024)
        self.bind("inference.context", "Context", self.context, lambda p, v: p.with_inference(context=v))
        self.new_tokens = IntField(
            "Generated tokens", 0, MAX_SEQ, "tokens", "Tokens each request generates; the rest is prompt."
        )
        self.bind("inference.new_tokens", "Generated", self.new_tokens, lambda p, v: p.with_inference(new_tokens=v))
        self.tensor_parallel = IntField(
            "Tensor parallel", 1, MAX_PARALLEL, "GPUs", "GPUs each layer is split across (weights and KV heads)."
        )
        self.bind(
            "inference.tensor_parallel",
            "Tensor parallel",
            self.tensor_parallel,
            lambda p, v: p.with_inference(tensor_parallel=v),
        )
        self.pipeline_parallel = IntField(
            "Pipeline parallel", 1, MAX_PARALLEL, "stages", "Stages the layers are split into, one GPU group each."
        )
        self.bind(
            "inference.pipeline_parallel",
            "Pipeline parallel",
            self.pipeline_parallel,
            lambda p, v: p.with_inference(pipeline_parallel=v),
        )
        self.replicas = IntField("Replicas", 1, MAX_BATCH, "", "Independent copies of the served model.")
        self.bind("inference.replicas", "Replicas", self.replicas, lambda p, v: p.with_inference(replicas=v))
        self.utilisation = FloatField(
            "GPU memory utilisation",
            0.01,
            1.0,
            "%",
            "vLLM's gpu_memory_utilization: the share of each GPU it may use (default 90 %).",
            decimals=0,
            step=1,
            scale=100,
        )
        self.bind(
            "inference.gpu_memory_utilization",
            "GPU memory use",
            self.utilisation,
            lambda p, v: p.with_inference(gpu_memory_utilization=v),
        )
        self.max_num_seqs = IntField(
            "max_num_seqs", 0, MAX_BATCH, "", "Most requests vLLM schedules at once; 0: its default for the card."
        )
        self.max_num_seqs.setSpecialValueText("default")
        self.bind(
            "inference.max_num_seqs", "max_num_seqs", self.max_num_seqs, lambda p, v: p.with_inference(max_num_seqs=v)
        )
        self.max_batched = IntField(
            "max_num_batched_tokens",
            0,
            MAX_SEQ,
            "",
            "Tokens vLLM runs per step (chunked prefill); its profiling forward uses this many. 0: its default.",
        )
        self.max_batched.setSpecialValueText("default")
        self.bind(
            "inference.max_num_batched_tokens",
            "Batched tokens",
            self.max_batched,
            lambda p, v: p.with_inference(max_num_batched_tokens=v),
        )

        self.mem_fraction = FloatField(
            "mem_fraction_static",
            0.0,
            1.0,
            "%",
            "SGLang's share of the GPU for weights and the token pool; 0: its default for the tensor-parallel size.",
            decimals=0,
            step=1,
            scale=100,
        )
        self.mem_fraction.setSpecialValueText("default")
        self.bind(
            "inference.mem_fraction_static",
            "Static fraction",
            self.mem_fraction,
            lambda p, v: p.with_inference(mem_fraction_static=v),
        )

    def show_plan(self, plan: Plan) -> None:
        inf = plan.inference
        self.engine.show_value(inf.engine)
        self.weights.show_value(inf.weight_dtype)
        self.kv.show_value(inf.kv_dtype)
        self.concurrent.show_value(inf.concurrent)
        self.context.show_value(inf.context)
        self.new_tokens.show_value(inf.new_tokens)
        self.tensor_parallel.show_value(inf.tensor_parallel)
        self.pipeline_parallel.show_value(inf.pipeline_parallel)
        self.replicas.show_value(inf.replicas)
        self.utilisation.show_value(inf.gpu_memory_utilization)
        self.max_num_seqs.show_value(inf.max_num_seqs)
        self.max_batched.show_value(inf.max_num_batched_tokens)
        self.mem_fraction.show_value(inf.mem_fraction_static)
        for key, engine in ENGINE_ROWS.items():
            self.set_row_visible(key, inf.engine is engine)

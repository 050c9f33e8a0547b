"""Serving: the engine, how the weights and cache are stored, the requests, the GPUs."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from core.catalogue import LinkKind
from core.estimate import gpu_for
from core.inputs import input_at
from core.plan import Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.parallel import LinkField, link_choices


def with_ollama_line(plan: Plan, value: object) -> Plan:
    """The plan through the chosen Ollama release line, with that line's defaults for what a user of
    Ollama does not set (num_ctx, OLLAMA_NUM_PARALLEL, flash attention): the CLI's ``--ollama`` rule."""
    from core.serving.ollama import ollama_defaults  # the serving rules load with the first serving figure

    chosen = plan.with_input("inference.ollama_version", value)
    return ollama_defaults(chosen, gpu_for(chosen), frozenset())


class ServingForm(PlanForm):
    """Rows only one engine reads (transformers' release, vLLM's release and scheduler limits,
    SGLang's release and static fraction, llama.cpp's GGUF type, GPU layers and cache type) show
    for that engine only: the input table says which."""

    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Serving", controller, parent)
        self.engine = self.add_input("inference.engine")
        self.vllm_version = self.add_input("inference.vllm_version")
        self.vllm_sampler = self.add_input("inference.vllm_sampler")
        self.sglang_version = self.add_input("inference.sglang_version")
        # vLLM --enforce-eager / SGLang --disable-cuda-graph, and vLLM's prefix caching (a hybrid's state blocks).
        self.cuda_graphs = self.add_input("inference.cuda_graphs")
        self.prefix_caching = self.add_input("inference.prefix_caching")
        self.transformers_version = self.add_input("inference.transformers_version")
        self.weights = self.add_input("inference.weight_dtype")
        # Image-text checkpoints only (the input table's matters): serve text alone, the vision tower left out.
        self.text_only = self.add_input("inference.text_only")
        self.gguf = self.add_input("inference.gguf_quant")
        # Ollama in front of llama.cpp: it picks the GPU layers itself, and a release line brings its
        # num_ctx, parallel and flash-attention defaults, as the CLI's --ollama does (core.serving.ollama).
        self.ollama_version = self.add_input("inference.ollama_version", apply=with_ollama_line)
        self.kv = self.add_input("inference.kv_dtype")
        self.cache_type = self.add_input("inference.cache_type")
        self.gpu_layers = self.add_input("inference.gpu_layers")
        # A mixture of experts under llama-server only (the input table's matters; Ollama has no such option):
        # --n-cpu-moe, the first layers' routed experts kept in host RAM.
        self.cpu_moe_layers = self.add_input("inference.cpu_moe_layers")
        # What the CPU reads those experts and the layers -ngl leaves on the host at (shown only then).
        self.host_bandwidth = self.add_input("inference.host_bandwidth_gb_s")
        # llama.cpp judges its host part against the host RAM, whose field is the Parallelism
        # form's, hidden in Inference mode: the same input here (one plan value, two fields).
        self.host_ram = self.add_input("parallel.host_ram_gb")
        self.flash_attention = self.add_input("inference.flash_attention")
        self.ubatch = self.add_input("inference.ubatch")
        self.llamacpp_build = self.add_input("inference.llamacpp_build")
        self.llamacpp_backend = self.add_input("inference.llamacpp_backend")
        self.concurrent = self.add_input("inference.concurrent")
        self.context = self.add_input("inference.context")
        self.new_tokens = self.add_input("inference.new_tokens")
        self.tensor_parallel = self.add_input("inference.tensor_parallel")
        # The all-reduce's link: the card's own, another within a node, or a network between nodes.
        link = input_at("inference.link")
        choices = link_choices(LinkKind.INTRA) + link_choices(LinkKind.INTER)
        self.link = LinkField(link.name, choices, link.tooltip)
        self.add_input("inference.link", widget=self.link)
        self.pipeline_parallel = self.add_input("inference.pipeline_parallel")
        self.replicas = self.add_input("inference.replicas")
        self.utilisation = self.add_input("inference.gpu_memory_utilization")
        self.max_num_seqs = self.add_input("inference.max_num_seqs")
        self.max_batched = self.add_input("inference.max_num_batched_tokens")
        self.mem_fraction = self.add_input("inference.mem_fraction_static")

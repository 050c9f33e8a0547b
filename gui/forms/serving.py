"""Serving: the engine, how the weights and cache are stored, the requests, the GPUs.

Under llama.cpp's host RAM and its speed, what this machine has of both (detected off the GUI
thread with its GPUs, :class:`gui.local_machine.LocalMachine`) and where each figure came from,
with "Use this machine's RAM": detection never changes a figure by itself (the Hardware form's rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton, QVBoxLayout, QWidget

from core.catalogue import LinkKind
from core.estimate import gpu_for
from core.inputs import input_at
from core.plan import RELEASE_CHOICES, Plan, refused_choices
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField
from gui.forms.hardware import note_label
from gui.forms.parallel import LinkField, link_choices

if TYPE_CHECKING:  # this machine is looked at once the window has painted: not imported before
    from core.files.local_gpus import LocalGpus
    from core.files.local_host import LocalHost
    from gui.local_machine import LocalMachine


def with_ollama_line(plan: Plan, value: object) -> Plan:
    """The plan through the chosen Ollama release line, with that line's defaults for what a user of
    Ollama does not set (num_ctx, OLLAMA_NUM_PARALLEL, flash attention): the CLI's ``--ollama`` rule."""
    from core.serving.ollama import ollama_defaults  # the serving rules load with the first serving figure

    chosen = plan.with_input("inference.ollama_version", value)
    return ollama_defaults(chosen, gpu_for(chosen), frozenset())


class ServingForm(PlanForm):
    """Rows only one engine reads (transformers' release, vLLM's release and scheduler limits,
    SGLang's release and static fraction, llama.cpp's GGUF type, GPU layers and cache type) show
    for that engine only: the input table says which. The release, weight and KV lists grey the entries the plan's
    engine release refuses (core.plan.refused_choices), each one's tooltip saying why."""

    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Serving", controller, parent)
        self.engine = self.add_input("inference.engine")
        self.vllm_version = self.add_input("inference.vllm_version")
        self.vllm_sampler = self.add_input("inference.vllm_sampler")
        self.sglang_version = self.add_input("inference.sglang_version")
        # SGLang --enable-multimodal: shown for Gemma 3 on SGLang 0.4.6 on alone (core.inputs.sglang_multimodal_opt_in).
        self.sglang_multimodal = self.add_input("inference.sglang_enable_multimodal")
        # vLLM --enforce-eager / SGLang --disable-cuda-graph, and vLLM's prefix caching (a hybrid's state blocks).
        self.cuda_graphs = self.add_input("inference.cuda_graphs")
        self.prefix_caching = self.add_input("inference.prefix_caching")
        # vLLM V1's torch.compile cache: a cold start compiles inside the profile that sizes the KV cache.
        self.compile_cache = self.add_input("inference.compile_cache")
        self.transformers_version = self.add_input("inference.transformers_version")
        self.weights = self.add_input("inference.weight_dtype")
        # Image-text checkpoints on a vLLM line that skips their tower only (core.inputs.text_only_offered): serve
        # text alone, the vision tower left out. Other engines refuse it, so the form does not offer it there.
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
        self.host_here: LocalHost | None = None  # this machine's, once detected
        self.host_row = self._host_row()
        self.form.addRow("", self.host_row)
        self.set_widget_row_visible(self.host_row, False)
        self.flash_attention = self.add_input("inference.flash_attention")
        self.ubatch = self.add_input("inference.ubatch")
        self.llamacpp_build = self.add_input("inference.llamacpp_build")
        self.llamacpp_backend = self.add_input("inference.llamacpp_backend")
        self.concurrent = self.add_input("inference.concurrent")
        self.context = self.add_input("inference.context")
        # vLLM / SGLang: their variable for a context past the model's limit (core.context_limit)
        self.long_context = self.add_input("inference.long_context")
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

    # ---- this machine's host RAM -------------------------------------------------------
    def _host_row(self) -> QWidget:
        row = QWidget()
        column = QVBoxLayout(row)
        column.setContentsMargins(0, 0, 0, 0)
        self.host_note = note_label("This machine's host RAM")  # plain text: it quotes the firmware's labels
        self.host_note.setObjectName("machineHost")
        column.addWidget(self.host_note)
        self.use_host = QPushButton("Use this machine's RAM")
        self.use_host.setObjectName("useLocalHostServing")
        self.use_host.setToolTip("Plan with this machine's host RAM and its speed (one undoable step)")
        self.use_host.clicked.connect(self._use_host)
        column.addWidget(self.use_host, 0, Qt.AlignmentFlag.AlignLeft)
        return row

    def attach_local(self, local: LocalMachine) -> None:
        """Show what ``local`` finds of this machine's host RAM from now on."""
        local.gpusDetected.connect(self._detected)
        if local.gpus is not None:
            self._detected(local.gpus)

    def _detected(self, found: LocalGpus) -> None:
        self.host_here = found.host
        if found.host is not None:
            self.host_note.setText("This machine: " + found.host.label)
        self._redraw(self.controller.plan)

    def _use_host(self) -> None:
        host = self.host_here
        if host is not None and host.plan_values():
            self.controller.update("", host.apply, "Use this machine's RAM")

    def _refused(self, plan: Plan) -> dict[str, dict[str, str]] | None:
        """The entries the plan's engine release refuses (core.plan.refused_choices), in Inference mode, where the
        form shows; None in Training mode, where it is hidden (switching mode redraws it)."""
        return refused_choices(plan.model, plan.inference) if self.mode == "inference" else None

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        # the refused entries depend on the model as well as the form's inputs
        return (*super().shown_key(plan), self._refused(plan))

    def show_plan(self, plan: Plan) -> None:
        super().show_plan(plan)
        host = self.host_here
        shown = self.form.isRowVisible(self.host_bandwidth) or self.form.isRowVisible(self.host_ram)
        self.set_widget_row_visible(self.host_row, host is not None and shown)
        self.use_host.setVisible(host is not None and bool(host.plan_values()) and not host.applied(plan))
        # The releases, weight formats and KV formats Plan validation would refuse with the rest of the plan: greyed,
        # each entry's tooltip saying why, so the lists offer only what loads.
        refused = self._refused(plan)
        if refused is None:
            return
        for path in RELEASE_CHOICES:
            field = self.fields[path]
            assert isinstance(field, ChoiceField)
            field.show_refused(refused[path])

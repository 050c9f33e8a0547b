"""Parallelism: how many GPUs on how many nodes, how the work is split over them, what moves
to the host, and the frameworks' own knobs (shown only for the strategy that reads them).

The one home of the GPU count and the data-parallel strategy. Whether a split fits the model
(heads divisible by the tensor-parallel degree, ...) is the Plan's to decide: a refused edit
shows the Plan's reason in red under the split, never a dialog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from core.catalogue import CARD_LINK, LinkKind, load_links
from core.estimate import Estimate
from core.inputs import input_at
from core.plan import PipelineSchedule, Plan, Strategy
from gui import colours
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField


def link_choices(kind: LinkKind) -> list[tuple[str, str]]:
    """(short name, id) of the catalogue's links of one kind (resources/links.json); within a
    node, first the card's own. The full names are the items' tooltips (link_tooltips): in the
    box they were cut ("InfiniBand NDR 400 Gb/s, one NIC per GP…")."""
    own = [("Card's own", CARD_LINK)] if kind is LinkKind.INTRA else []
    return own + [(_short(link.name), link.id) for link in load_links() if link.kind is kind]


def link_tooltips(kind: LinkKind) -> dict[str, str]:
    """Each link's full name, by id."""
    own = {CARD_LINK: "The card's own link: NVLink on SXM parts, else its PCIe generation"}
    return (own if kind is LinkKind.INTRA else {}) | {link.id: link.name for link in load_links() if link.kind is kind}


def _short(name: str) -> str:
    """ "InfiniBand NDR 400 Gb/s, one NIC per GPU (DGX H100)" reads "InfiniBand NDR 400 Gb/s"."""
    return name.split(" (")[0].split(", one NIC")[0]


def _pair(first: QWidget, joiner: str, second: QWidget, *more: QWidget) -> QWidget:
    """Fields side by side in one form row ("[2 nodes] × [8 GPUs]")."""
    holder = QWidget()
    row = QHBoxLayout(holder)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(4)
    row.addWidget(first, 1)
    if joiner:
        row.addWidget(QLabel(joiner))
    row.addWidget(second, 1)
    for widget in more:
        row.addWidget(widget, 1)
    return holder


class LinkField(ChoiceField):
    """A link from the catalogue; an id the catalogue lacks (a newer plan file) is kept and shown."""

    def show_value(self, value: object) -> None:
        if self.findData(value) < 0:
            self.addItem(f"{value} (not in the catalogue)", value)
        super().show_value(value)


class ParallelForm(PlanForm):
    fewestRequested = Signal()  # "Fewest GPUs that fit…"

    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Parallelism", controller, parent)
        self._problem_key = ""  # the field the reason under the split is about
        self.nodes = self.add_input("parallel.nodes", row=False)
        self.gpus_per_node = self.add_input("parallel.gpus_per_node", row=False)
        self.gpus_row = _pair(self.nodes, "×", self.gpus_per_node)
        self._add_row("GPUs:", self.gpus_row, self.nodes)
        self.strategy = self.add_input("parallel.strategy", _with_strategy)
        self.tensor_parallel = self._degree("parallel.tensor_parallel", "TP ")
        self.pipeline_parallel = self._degree("parallel.pipeline_parallel", "PP ")
        self.context_parallel = self._degree("parallel.context_parallel", "CP ")
        self.split_row = _pair(self.tensor_parallel, "", self.pipeline_parallel, self.context_parallel)
        self._add_row("Split:", self.split_row, self.tensor_parallel)
        self.expert_parallel = self.add_input("parallel.expert_parallel")  # its row shows for MoE models
        # Beside it: the busiest EP rank's routed tokens ÷ the mean (MoE, EP > 1) and Megatron's capacity factor
        # and padding (MoE on the Megatron stack); a factor set back to 0 (dropless) takes the padding off with it.
        self.expert_imbalance = self.add_input("parallel.expert_imbalance")
        self.capacity_factor = self.add_input(
            "parallel.capacity_factor",
            lambda p, v: p.with_parallel(capacity_factor=v, pad_to_capacity=p.parallel.pad_to_capacity and v > 0),
        )
        self.pad_to_capacity = self.add_input("parallel.pad_to_capacity")
        self.dp_replicate = self.add_input("parallel.dp_replicate")  # its row shows for FSDP on 2+ GPUs
        self._add_split_notes()
        self.sequence_parallel = self.add_input("parallel.sequence_parallel")
        self.tp_overlap = self.add_input("parallel.tp_overlap")
        self.schedule = self.add_input(
            "parallel.schedule",
            lambda p, v: p.with_parallel(schedule=PipelineSchedule(v), virtual_stages=_virtual(p, v)),
        )
        self.virtual_stages = self.add_input("parallel.virtual_stages")
        self.stage_split = self.add_input("parallel.stage_split")  # even, or nanotron's split by compute
        self.offload = self.add_input("parallel.offload")
        self.host_ram = self.add_input("parallel.host_ram_gb")
        self.intra_link = self._link("parallel.intra_link", LinkKind.INTRA)
        self.inter_link = self._link("parallel.inter_link", LinkKind.INTER)
        self.reshard = self.add_input("parallel.reshard_after_forward")
        self.fsdp_units = self.add_input("parallel.fsdp_units")  # FSDP2's units for the embedding and head
        self.param_dtype = self.add_input("parallel.fsdp_param_dtype")
        self.reduce_dtype = self.add_input("parallel.fsdp_reduce_dtype")
        self._add_buttons()
        # The frameworks' finer knobs (the input table marks them advanced): behind the disclosure.
        self.ddp_bucket = self.add_input("parallel.ddp_bucket_mb")
        self.bucket_view = self.add_input("parallel.ddp_bucket_view")
        self.host_memory = self.add_input("parallel.host_memory_gbs")
        self.host_threads = self.add_input("parallel.host_threads_per_rank")
        self.zero_bucket = self.add_input("parallel.zero_bucket_elements")
        self.zero_overlap = self.add_input("parallel.zero_overlap_comm")  # DeepSpeed ZeRO-1/2 overlap_comm
        # DeepSpeed bf16.bf16_master_weights_and_grads / bf16_optimizer_states (shown under its bf16 engine)
        # as a pair where DeepSpeed accepts only the pair (Parallelism.with_bf16_option)
        self.bf16_master = self.add_input("parallel.bf16_master_weights", _bf16_option("bf16_master_weights"))
        self.bf16_states = self.add_input("parallel.bf16_optimizer_states", _bf16_option("bf16_optimizer_states"))
        self.zero3_overlap = self.add_input("parallel.zero3_overlap_comm")  # DeepSpeed ZeRO-3 overlap_comm
        self.zero3_prefetch = self.add_input("parallel.zero3_prefetch_elements")
        self.zero3_live = self.add_input("parallel.zero3_max_live_elements")
        self.zero3_reuse = self.add_input("parallel.zero3_max_reuse_elements")
        self.float8_gather = self.add_input("parallel.fsdp_float8_all_gather")
        self.fsdp1_wrap = self.add_input("parallel.fsdp1_wrap")
        self.grad_sync = self.add_input("parallel.grad_sync")  # FSDP no_sync under accumulation
        self.grad_reduce_fp32 = self.add_input("parallel.grad_reduce_in_fp32")
        self.grad_accum_fusion = self.add_input("parallel.grad_accum_fusion")
        self.moe_dispatcher = self.add_input("parallel.moe_dispatcher")  # Megatron MoE under expert parallel
        self.cp_rotate = self.add_input("parallel.cp_rotate_method")  # PyTorch ring attention under CP > 1
        controller.editRejected.connect(self._rejected)
        self.problemCleared.connect(self._cleared)

    def _degree(self, path: str, prefix: str) -> Any:
        """One of the split's degrees ("TP 2"), shown in the Split row."""
        field = self.add_input(path, row=False)
        field.setPrefix(prefix)
        return field

    def _link(self, path: str, kind: LinkKind) -> LinkField:
        spec = input_at(path)
        field = LinkField(spec.name, link_choices(kind), spec.tooltip)
        tips = link_tooltips(kind)
        for index in range(field.count()):
            field.setItemData(index, tips.get(str(field.itemData(index)), ""), Qt.ItemDataRole.ToolTipRole)
        self.add_input(path, widget=field)
        return field

    def _add_split_notes(self) -> None:
        """Under the split: the factorisation the plan derives (DP is what is left), and a
        refused layout's reason."""
        self.degrees = QLabel()
        self.degrees.setObjectName("parallelDegrees")
        self.degrees.setAccessibleName("GPUs by parallel degree")
        self.degrees.setTextFormat(Qt.TextFormat.PlainText)
        self.degrees.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.form.addRow("", self.degrees)
        self.problem = QLabel()
        self.problem.setObjectName("parallelProblem")
        self.problem.setAccessibleName("Parallel layout refused")
        self.problem.setTextFormat(Qt.TextFormat.PlainText)  # the message quotes typed values
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(colours.PROBLEM_TEXT_STYLE)
        self.form.addRow("", self.problem)

    def _add_buttons(self) -> None:
        """ "Advanced" (the frameworks' finer knobs: most runs keep their defaults) and "Fewest GPUs"."""
        self.advanced = QToolButton()
        self.advanced.setObjectName("parallelAdvanced")
        self.advanced.setText("Advanced")
        self.advanced.setAccessibleName("Show the frameworks' advanced settings")
        self.advanced.setToolTip("The frameworks' finer settings (most runs keep their defaults)")
        self.advanced.setCheckable(True)
        self.advanced.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced.setArrowType(Qt.ArrowType.RightArrow)
        self.advanced.setAutoRaise(True)
        self.advanced.toggled.connect(self._advanced_toggled)
        self.fewest = QPushButton("Fewest GPUs that fit…")
        self.fewest.setObjectName("fewestGpusButton")
        self.fewest.setAccessibleName("Find the fewest GPUs of this card that fit")
        self.fewest.setToolTip("Search GPU counts and splits for the fewest of this card that fit, with the hours.")
        self.fewest.clicked.connect(self.fewestRequested)
        self.form.addRow("", _pair(self.advanced, "", self.fewest))

    def _add_row(self, text: str, row: QWidget, buddy: QWidget) -> None:
        label = QLabel(text)
        label.setBuddy(buddy)
        self.form.addRow(label, row)

    def _advanced_toggled(self, shown: bool) -> None:
        self.advanced.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self._redraw(self.controller.plan)

    def _rejected(self, key: str, message: str) -> None:
        if key.startswith("parallel."):
            self._problem_key = key
            self.problem.setText(f"⚠ {message}")
            self.set_widget_row_visible(self.problem, True)

    def _cleared(self, key: str) -> None:
        """The field's mark went away (Escape, corrected typing): so does the reason under the split."""
        if key == self._problem_key and self.problem.text():
            self.problem.clear()
            self.set_widget_row_visible(self.problem, False)

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        # The advanced rows' disclosure and a refused layout's reason redraw when they change.
        return (*super().shown_key(plan), plan.parallel, plan.world_size, self.advanced.isChecked())

    def show_plan(self, plan: Plan) -> None:
        self.show_inputs(plan, advanced=self.advanced.isChecked())
        world = plan.world_size
        self.degrees.setText(f"{world:,} GPU{'s' if world > 1 else ''} = {plan.parallel.split}")
        split = input_at("parallel.tensor_parallel").matters(plan)  # more than one GPU
        self.set_widget_row_visible(self.split_row, split)
        self.set_widget_row_visible(self.degrees, split)
        self.set_widget_row_visible(self.problem, bool(self.problem.text()))

    def show_estimate(self, estimate: Estimate) -> None:
        # A valid plan arrived: a refused layout's reason is no longer current.
        if self.problem.text():
            self.problem.clear()
            self.set_widget_row_visible(self.problem, False)


def _with_strategy(plan: Plan, value: object) -> Plan:
    """Another strategy; settings it refuses (HSDP replicas are FSDP's) drop to 1 (Plan.with_layout)."""
    return plan.with_layout(strategy=Strategy(str(value)))


def _virtual(plan: Plan, schedule: object) -> int:
    """Virtual stages only mean something to the interleaved schedule: another one resets them."""
    return plan.parallel.virtual_stages if schedule == PipelineSchedule.INTERLEAVED.value else 1


def _bf16_option(name: str) -> Callable[[Plan, bool], Plan]:
    """The checkbox of DeepSpeed's bf16 master option ``name``: the plan with it, and its partner where needed."""
    return lambda plan, on: replace(plan, parallel=plan.parallel.with_bf16_option(name, on))

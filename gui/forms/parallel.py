"""Parallelism: how many GPUs on how many nodes, how the work is split over them, what moves
to the host, and the frameworks' own knobs (shown only for the strategy that reads them).

The one home of the GPU count and the data-parallel strategy. Whether a split fits the model
(heads divisible by the tensor-parallel degree, ...) is the Plan's to decide: a refused edit
shows the Plan's reason in red under the split, never a dialog.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from core.catalogue import LinkKind, load_links
from core.dtypes import MpDtype
from core.estimate import Estimate
from core.plan import (
    MAX_BUCKET_ELEMENTS,
    MAX_DEGREE,
    MAX_GPUS,
    OFFLOAD_LABELS,
    SCHEDULE_LABELS,
    STRATEGY_LABELS,
    Offload,
    PipelineSchedule,
    Plan,
    Strategy,
)
from gui import colours
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, CountField, FloatField, IntField

MP_DTYPE_LABELS = {
    MpDtype.STORED: "as stored (None)",
    MpDtype.FP32: "float32",
    MpDtype.BF16: "bf16",
    MpDtype.FP16: "fp16",
}
ZERO_STAGES = (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3)


def link_choices(kind: LinkKind) -> list[tuple[str, str]]:
    """(name, id) of the catalogue's links of one kind (resources/links.json)."""
    return [(link.name, link.id) for link in load_links() if link.kind is kind]


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
        self.nodes = IntField("Nodes", 1, MAX_GPUS, "nodes", "Machines in the run, each with the same GPUs.")
        self.bind("parallel.nodes", "Nodes", self.nodes, lambda p, v: p.with_parallel(nodes=v), row=False)
        self.gpus_per_node = IntField(
            "GPUs per node", 1, MAX_DEGREE, "GPUs", "GPUs in each node; memory is shown per GPU."
        )
        self.bind(
            "parallel.gpus_per_node",
            "GPUs per node",
            self.gpus_per_node,
            lambda p, v: p.with_parallel(gpus_per_node=v),
            row=False,
        )
        self.gpus_row = _pair(self.nodes, "×", self.gpus_per_node)
        self._add_row("GPUs:", self.gpus_row, self.nodes)
        self.strategy = ChoiceField(
            "Strategy",
            [(label, s.value) for s, label in STRATEGY_LABELS.items()],
            "How the data-parallel GPUs hold the model: DDP keeps a full copy on each; DeepSpeed ZeRO stages "
            "split the optimizer state, then gradients, then the weights; FSDP2 splits all three.",
        )
        self.bind("parallel.strategy", "Strategy", self.strategy, lambda p, v: p.with_parallel(strategy=Strategy(v)))
        self.tensor_parallel = self._degree(
            "tensor_parallel", "Tensor parallel", "TP ", "GPUs each layer's matrices are split across; within a node."
        )
        self.pipeline_parallel = self._degree(
            "pipeline_parallel", "Pipeline parallel", "PP ", "Stages the layers are split into, each on its own GPUs."
        )
        self.context_parallel = self._degree(
            "context_parallel",
            "Context parallel",
            "CP ",
            "GPUs each sequence is split across (ring attention), in 2 × CP chunks.",
        )
        self.split_row = _pair(self.tensor_parallel, "", self.pipeline_parallel, self.context_parallel)
        self._add_row("Split:", self.split_row, self.tensor_parallel)
        # The factorisation the plan derives (DP is what is left), and a refused layout's reason.
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
        self.sequence_parallel = QCheckBox("Sequence parallel")
        self.sequence_parallel.setAccessibleName("Sequence parallel")
        self.sequence_parallel.setToolTip(
            "Megatron sequence parallelism with tensor parallel: norms and dropout on 1/TP of the tokens each."
        )
        self.bind(
            "parallel.sequence_parallel",
            "Sequence parallel",
            self.sequence_parallel,
            lambda p, v: p.with_parallel(sequence_parallel=v),
        )
        self.schedule = ChoiceField(
            "Pipeline schedule",
            [(label, s.value) for s, label in SCHEDULE_LABELS.items()],
            "GPipe runs every forward, then every backward; 1F1B alternates them and keeps at most one "
            "micro-batch per stage in flight; interleaved 1F1B splits each stage into virtual chunks.",
        )
        self.bind(
            "parallel.schedule",
            "Schedule",
            self.schedule,
            lambda p, v: p.with_parallel(schedule=PipelineSchedule(v), virtual_stages=_virtual(p, v)),
        )
        self.virtual_stages = IntField(
            "Virtual stages", 1, MAX_DEGREE, "chunks", "Model chunks per pipeline rank (interleaved 1F1B)."
        )
        self.bind(
            "parallel.virtual_stages",
            "Virtual stages",
            self.virtual_stages,
            lambda p, v: p.with_parallel(virtual_stages=v),
        )
        self.offload = ChoiceField(
            "CPU offload",
            [(label, o.value) for o, label in OFFLOAD_LABELS.items()],
            "What lives in host memory: the optimizer state and its step (DeepSpeed ZeRO-Offload), or the "
            "parameters and gradients too (FSDP2 CPUOffloadPolicy, ZeRO-3 offload_param).",
        )
        self.bind("parallel.offload", "Offload", self.offload, lambda p, v: p.with_parallel(offload=Offload(v)))
        self.host_ram = FloatField(
            "Host RAM per node", 0.01, 1e9, "GB", "Memory of each node's CPUs (a DGX H100 has 2 TB).", step=64
        )
        self.bind("parallel.host_ram_gb", "Host RAM", self.host_ram, lambda p, v: p.with_parallel(host_ram_gb=v))
        self.intra_link = LinkField(
            "Link within a node",
            link_choices(LinkKind.INTRA),
            "How the GPUs of one node talk to each other (per GPU and direction, the catalogue's peak).",
        )
        self.bind("parallel.intra_link", "In a node", self.intra_link, lambda p, v: p.with_parallel(intra_link=v))
        self.inter_link = LinkField(
            "Link between nodes", link_choices(LinkKind.INTER), "The network between nodes, per GPU and direction."
        )
        self.bind("parallel.inter_link", "Between", self.inter_link, lambda p, v: p.with_parallel(inter_link=v))
        self.reshard = QCheckBox("Reshard after forward")
        self.reshard.setAccessibleName("FSDP reshard after forward")
        self.reshard.setToolTip(
            "FSDP2 fully_shard(reshard_after_forward=True), its default: each block's gathered weights are "
            "freed after its forward and gathered again for the backward. Off keeps them (ZeRO-2-like)."
        )
        self.bind(
            "parallel.reshard_after_forward",
            "Reshard after forward",
            self.reshard,
            lambda p, v: p.with_parallel(reshard_after_forward=v),
        )
        mp = [(label, d.value) for d, label in MP_DTYPE_LABELS.items()]
        self.param_dtype = ChoiceField(
            "FSDP parameter dtype", mp, "MixedPrecisionPolicy.param_dtype: the dtype of the gathered weights."
        )
        self.bind(
            "parallel.fsdp_param_dtype",
            "FSDP params",
            self.param_dtype,
            lambda p, v: p.with_parallel(fsdp_param_dtype=MpDtype(v)),
        )
        self.reduce_dtype = ChoiceField(
            "FSDP reduce dtype", mp, "MixedPrecisionPolicy.reduce_dtype: the dtype gradients are reduced in."
        )
        self.bind(
            "parallel.fsdp_reduce_dtype",
            "FSDP reduce",
            self.reduce_dtype,
            lambda p, v: p.with_parallel(fsdp_reduce_dtype=MpDtype(v)),
        )
        # The frameworks' finer knobs, behind a disclosure: most runs keep their defaults.
        self.advanced = QToolButton()
        self.advanced.setObjectName("parallelAdvanced")
        self.advanced.setText("Advanced")
        self.advanced.setAccessibleName("Show the frameworks' advanced settings")
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
        self.ddp_bucket = FloatField(
            "DDP bucket size", 0.01, 1e6, "MiB", "DistributedDataParallel(bucket_cap_mb=...): 25 MiB by default."
        )
        self.bind(
            "parallel.ddp_bucket_mb", "DDP bucket", self.ddp_bucket, lambda p, v: p.with_parallel(ddp_bucket_mb=v)
        )
        self.bucket_view = QCheckBox("Gradients as bucket views")
        self.bucket_view.setAccessibleName("DDP gradient as bucket view")
        self.bucket_view.setToolTip(
            "DistributedDataParallel(gradient_as_bucket_view=True): the gradients are views into the "
            "communication buckets instead of a second copy beside them."
        )
        self.bind(
            "parallel.ddp_bucket_view",
            "Gradients as bucket views",
            self.bucket_view,
            lambda p, v: p.with_parallel(ddp_bucket_view=v),
        )
        self.zero_bucket = CountField(
            "ZeRO bucket",
            1,
            MAX_BUCKET_ELEMENTS,
            "elements",
            "DeepSpeed reduce_bucket_size / allgather_bucket_size (5e8 by default).",
        )
        self.bind(
            "parallel.zero_bucket_elements",
            "ZeRO bucket",
            self.zero_bucket,
            lambda p, v: p.with_parallel(zero_bucket_elements=v),
        )
        self.zero3_prefetch = CountField(
            "ZeRO-3 prefetch",
            1,
            MAX_BUCKET_ELEMENTS,
            "elements",
            "DeepSpeed stage3_prefetch_bucket_size (5e7 by default).",
        )
        self.bind(
            "parallel.zero3_prefetch_elements",
            "ZeRO-3 prefetch",
            self.zero3_prefetch,
            lambda p, v: p.with_parallel(zero3_prefetch_elements=v),
        )
        self.zero3_live = CountField(
            "ZeRO-3 live parameters",
            1,
            MAX_BUCKET_ELEMENTS,
            "elements",
            "DeepSpeed stage3_max_live_parameters (1e9 by default).",
        )
        self.bind(
            "parallel.zero3_max_live_elements",
            "ZeRO-3 live",
            self.zero3_live,
            lambda p, v: p.with_parallel(zero3_max_live_elements=v),
        )
        controller.editRejected.connect(self._rejected)
        self.problemCleared.connect(self._cleared)

    def _degree(self, attribute: str, name: str, prefix: str, tooltip: str) -> IntField:
        """One of the split's degrees ("TP 2"), bound to ``parallel.<attribute>``; shown in the Split row."""
        field = IntField(name, 1, MAX_DEGREE, "", tooltip)
        field.setPrefix(prefix)
        self.bind(f"parallel.{attribute}", name, field, lambda p, v: p.with_parallel(**{attribute: v}), row=False)
        return field

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

    def show_plan(self, plan: Plan) -> None:
        par = plan.parallel
        world = plan.world_size
        self.nodes.show_value(par.nodes)
        self.gpus_per_node.show_value(par.gpus_per_node)
        self.strategy.show_value(par.strategy.value)
        self.tensor_parallel.show_value(par.tensor_parallel)
        self.pipeline_parallel.show_value(par.pipeline_parallel)
        self.context_parallel.show_value(par.context_parallel)
        self.sequence_parallel.setChecked(par.sequence_parallel)
        self.schedule.show_value(par.schedule.value)
        self.virtual_stages.show_value(par.virtual_stages)
        self.offload.show_value(par.offload.value)
        self.host_ram.show_value(par.host_ram_gb)
        self.intra_link.show_value(par.intra_link)
        self.inter_link.show_value(par.inter_link)
        self.reshard.setChecked(par.reshard_after_forward)
        self.bucket_view.setChecked(par.ddp_bucket_view)
        self.param_dtype.show_value(par.fsdp_param_dtype.value)
        self.reduce_dtype.show_value(par.fsdp_reduce_dtype.value)
        self.ddp_bucket.show_value(par.ddp_bucket_mb)
        self.zero_bucket.show_value(par.zero_bucket_elements)
        self.zero3_prefetch.show_value(par.zero3_prefetch_elements)
        self.zero3_live.show_value(par.zero3_max_live_elements)
        self.degrees.setText(f"{world:,} GPU{'s' if world > 1 else ''} = {par.split}")
        split = world > 1
        fsdp, advanced = par.strategy is Strategy.FSDP, self.advanced.isChecked()
        self.set_widget_row_visible(self.split_row, split)
        self.set_widget_row_visible(self.degrees, split)
        self.set_row_visible("parallel.sequence_parallel", par.tensor_parallel > 1)
        self.set_row_visible("parallel.schedule", par.pipeline_parallel > 1)
        self.set_row_visible("parallel.virtual_stages", par.schedule is PipelineSchedule.INTERLEAVED)
        self.set_row_visible("parallel.host_ram_gb", par.offload is not Offload.NONE or split)
        self.set_row_visible("parallel.intra_link", par.gpus_per_node > 1)
        self.set_row_visible("parallel.inter_link", par.nodes > 1)
        self.set_row_visible("parallel.reshard_after_forward", split and fsdp)
        self.set_row_visible("parallel.fsdp_param_dtype", fsdp)  # the dtype FSDP2 computes in
        self.set_row_visible("parallel.fsdp_reduce_dtype", fsdp)
        self.set_row_visible("parallel.ddp_bucket_mb", advanced and split and par.strategy is Strategy.DDP)
        self.set_row_visible("parallel.ddp_bucket_view", advanced and split and par.strategy is Strategy.DDP)
        self.set_row_visible("parallel.zero_bucket_elements", advanced and par.strategy in ZERO_STAGES)
        self.set_row_visible("parallel.zero3_prefetch_elements", advanced and par.strategy is Strategy.ZERO3)
        self.set_row_visible("parallel.zero3_max_live_elements", advanced and par.strategy is Strategy.ZERO3)
        self.set_widget_row_visible(self.problem, bool(self.problem.text()))

    def show_estimate(self, estimate: Estimate) -> None:
        # A valid plan arrived: a refused layout's reason is no longer current.
        if self.problem.text():
            self.problem.clear()
            self.set_widget_row_visible(self.problem, False)


def _virtual(plan: Plan, schedule: object) -> int:
    """Virtual stages only mean something to the interleaved schedule: another one resets them."""
    return plan.parallel.virtual_stages if schedule == PipelineSchedule.INTERLEAVED.value else 1

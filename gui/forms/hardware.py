"""Hardware: the card (or a custom one), utilisation and price; how many is the Parallelism form's."""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

from core.catalogue import GROUP_LABELS, GpuGroup, GpuSpec, load_gpus, search
from core.estimate import Estimate
from core.inputs import input_at
from core.plan import Plan, Preset
from core.units import GB, GiB, MiB
from gui import dialogs
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.pickers import USER_PREFIX, Entry, SearchingPicker, words_match
from gui.settings import CustomGpu, Settings

CUSTOM = "custom"
MINE = USER_PREFIX  # id prefix of the user's saved cards in the picker
CUSTOM_LABEL = "Custom GPU (type memory and speed)"
GROUP_ORDER = (GpuGroup.LAPTOP, GpuGroup.DESKTOP, GpuGroup.DATACENTRE, GpuGroup.APPLE)


def gpu_label(gpu: GpuSpec) -> str:
    """The card as the list shows it: its name (the box must show it whole at 1024 px)."""
    return gpu.name


def gpu_tooltip(gpu: GpuSpec) -> str:
    """Memory and the limit people trip over, for the list entry's tooltip."""
    if gpu.unified_memory_gb is not None:
        memory = f"{gpu.memory_bytes / GiB:.3g} GiB of {gpu.unified_memory_gb:g} GB unified memory for the GPU"
    else:
        memory = f"{gpu.memory_marketing_gb:g} GB ({gpu.memory_bytes / MiB:,.0f} MiB as the driver reports it)"
    missing = ", ".join(gpu.unsupported_dtypes)
    return memory + (f"; cannot run {missing}" if missing else "")


def gpu_sections(cards: list[CustomGpu]) -> list[tuple[str, list[Entry]]]:
    """The picker's list: catalogue groups, smallest memory first, then the user's cards."""
    gpus = load_gpus()
    sections: list[tuple[str, list[Entry]]] = []
    for group in GROUP_ORDER:
        members = sorted((g for g in gpus if g.group is group), key=lambda g: (g.memory_bytes, g.name))
        sections.append((GROUP_LABELS[group], [(gpu_label(g), g.id) for g in members]))
    mine = [(f"{c.name} · {c.memory_gb:g} GB (yours)", MINE + c.name) for c in cards]
    sections.append((GROUP_LABELS[GpuGroup.CUSTOM], [*mine, (CUSTOM_LABEL, CUSTOM)]))
    return sections


@cache
def _gpus_by_id() -> dict[str, GpuSpec]:
    return {g.id: g for g in load_gpus()}


def _gpu_matches(entry_id: str, label: str, text: str) -> bool:
    gpu = _gpus_by_id().get(entry_id)
    return bool(search((gpu,), text)) if gpu is not None else words_match(entry_id, label, text)


def limits_text(gpu: GpuSpec) -> tuple[str, str]:
    """What the card cannot run, Apple's GPU share and a typical price: (short text, details)."""
    lines, details = [], []
    if gpu.unsupported_dtypes:
        lines.append("Cannot run: " + ", ".join(gpu.unsupported_dtypes))
        details += [f"No {dtype}: {reason}." for dtype, reason in gpu.unsupported_dtypes.items()]
    if gpu.unified_memory_gb is not None:
        share = f"{gpu.memory_bytes / GiB:.3g} GiB ({gpu.memory_bytes / GB:.1f} GB)"
        lines.append(f"By default the GPU may use {share} of the {gpu.unified_memory_gb:g} GB unified memory")
        details.append(
            "macOS lets the GPU wire only part of unified memory. Raise the limit until the next restart with\n"
            "sudo sysctl iogpu.wired_limit_mb=<MB> (leave several GB for macOS); 0 restores the default."
        )
    if gpu.price_per_hour_usd is not None:
        lines.append(f"Typical price: ${gpu.price_per_hour_usd:,.2f} per GPU-hour ({gpu.price_date})")
    elif gpu.price_purchase_usd is not None:
        lines.append(f"Typical price: ${gpu.price_purchase_usd:,.0f} to buy ({gpu.price_date})")
    if gpu.price_per_hour_usd is not None or gpu.price_purchase_usd is not None:
        details.append(f"Price source: {gpu.price_source}.")
    return "\n".join(lines), "\n".join(details)


def _note(name: str) -> QLabel:
    """A read-only line under the picker: plain text (it quotes the catalogue), selectable."""
    label = QLabel()
    label.setAccessibleName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class HardwareForm(PlanForm):
    def __init__(
        self, controller: PlanController, parent: QWidget | None = None, *, settings: Settings | None = None
    ) -> None:
        super().__init__("Hardware", controller, parent)
        self.settings = settings
        gpu = input_at("hardware.gpu")
        self.gpu = SearchingPicker(gpu.name, gpu_sections(self._saved_cards()), gpu.tooltip, matcher=_gpu_matches)
        self.bind(gpu.path, gpu.label, self.gpu, self._pick)
        self._describe_entries()
        self.card = _note("GPU summary")
        self.form.addRow("", self.card)
        # The card's limits (no bf16 on Turing/Volta, Apple's GPU share) and the plan's clash with them.
        self.limits = _note("GPU limits")  # reasons and sources come from the catalogue file
        self.form.addRow("", self.limits)
        self.problem_row = self._precision_problem()
        self.form.addRow("", self.problem_row)
        self.save_card = QToolButton()
        self.save_card.setText("Save as my card…")
        self.save_card.setAccessibleName("Save the custom GPU under a name")
        self.save_card.setToolTip("Keep this card's memory and speed in the list under a name (in your settings).")
        self.save_card.clicked.connect(self._save_card)
        self.custom_memory = self.add_input("hardware.custom_memory_gb")
        self.custom_tflops = self.add_input("hardware.custom_tflops")
        self.form.addRow("", self.save_card)
        self.utilisation = self.add_input("hardware.utilisation")
        self.headroom = self.add_input("hardware.headroom")
        self.price = self.add_input("hardware.price_per_gpu_hour")
        self.peak_override = self.add_input("hardware.peak_tflops_override")
        self.alloc_conf = self.add_input("hardware.alloc_conf")

    def _precision_problem(self) -> QWidget:
        """The plan's precision the card cannot run, with the switch to fp16 AMP."""
        self.precision_problem = QLabel()
        self.precision_problem.setAccessibleName("Precision not supported by this GPU")
        self.precision_problem.setTextFormat(Qt.TextFormat.PlainText)
        self.precision_problem.setWordWrap(True)
        bold = self.precision_problem.font()
        bold.setBold(True)
        self.precision_problem.setFont(bold)
        self.use_fp16 = QPushButton("Use fp16 AMP")
        self.use_fp16.setAccessibleName("Switch the plan to fp16 mixed precision")
        self.use_fp16.setToolTip("fp16 autocast with fp32 master weights and a GradScaler: runs on cards without bf16.")
        self.use_fp16.clicked.connect(self._use_fp16)
        row = QWidget()
        layout = QVBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.precision_problem)
        layout.addWidget(self.use_fp16, 0, Qt.AlignmentFlag.AlignLeft)
        return row

    # ---- the picker and the user's cards -------------------------------------------
    def _describe_entries(self) -> None:
        for gpu in load_gpus():
            self.gpu.setItemData(self.gpu.findData(gpu.id), gpu_tooltip(gpu), Qt.ItemDataRole.ToolTipRole)

    def _saved_cards(self) -> list[CustomGpu]:
        return self.settings.custom_gpus if self.settings is not None else []

    def _pick(self, plan: Plan, entry_id: str) -> Plan:
        if entry_id.startswith(MINE):
            for card in self._saved_cards():
                if MINE + card.name == entry_id:
                    return plan.with_hardware(gpu=CUSTOM, custom_memory_gb=card.memory_gb, custom_tflops=card.tflops)
        return plan.with_hardware(gpu=entry_id)

    def _shown_gpu_id(self, plan: Plan) -> str:
        hw = plan.hardware
        if hw.gpu != CUSTOM:
            return hw.gpu
        for card in self._saved_cards():  # a saved card is the custom card with its figures
            if (card.memory_gb, card.tflops) == (hw.custom_memory_gb, hw.custom_tflops):
                return MINE + card.name
        return CUSTOM

    def _save_card(self) -> None:
        hw = self.controller.plan.hardware
        if self.settings is None:
            return
        name = dialogs.ask_text(self, "Save as my card", "Name for this card:", f"My GPU ({hw.custom_memory_gb:g} GB)")
        if name is None:
            return
        self.settings.add_custom_gpu(CustomGpu(name, hw.custom_memory_gb, hw.custom_tflops))
        self.gpu.set_sections(gpu_sections(self._saved_cards()))
        self._describe_entries()
        self.show_plan(self.controller.plan)

    def _use_fp16(self) -> None:
        self.controller.update("preset", lambda p: p.with_changes(preset=Preset.FP16_AMP), text="Use fp16 AMP")

    def show_plan(self, plan: Plan) -> None:
        self.gpu.show_value(self._shown_gpu_id(plan), plan.hardware.gpu)
        self.show_inputs(plan)
        self.set_widget_row_visible(self.save_card, plan.hardware.gpu == CUSTOM and self.settings is not None)

    def show_estimate(self, estimate: Estimate) -> None:
        gpu = estimate.gpu
        reported = gpu.memory_reported or f"{gpu.memory_bytes / MiB:,.0f} MiB"
        peak = estimate.compute.peak_tflops
        speed = f"{peak:g} TFLOP/s dense at this precision" if peak else "no published TFLOP/s: type a peak override"
        self.card.setText(f"{reported} · {speed}")
        limits, details = limits_text(gpu)
        self.limits.setText(limits)
        self.limits.setToolTip(details)
        self.limits.setAccessibleDescription(details)
        self.set_widget_row_visible(self.limits, bool(limits))
        dtype, problem = estimate.compute.dtype, estimate.compute.dtype_problem
        if problem:
            clash = f"⚠ This plan computes in {dtype}, which the {gpu.name} cannot run"
            self.precision_problem.setText(f"{clash}: {problem}.")
        self.use_fp16.setVisible(bool(problem) and dtype == "bf16")
        self.set_widget_row_visible(self.problem_row, bool(problem))

"""Hardware: the card (or a custom one), utilisation and price; how many is the Parallelism form's.

Under the card, what this machine has (:class:`gui.local_machine.LocalMachine`, detected off the
GUI thread): its GPUs, "Use this card", what is free now beside the plan's card when it is this
machine's, and "Judge against what is free now" (the plan's "Held by others" set to what other
processes hold now). A driver that did not answer is a quiet line here, never a dialog.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from PySide6.QtCore import QSignalBlocker, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

from core.catalogue import GROUP_LABELS, GpuGroup, GpuSpec, load_gpus, search, share_rule
from core.estimate import Estimate, serving_utilisation_text
from core.inputs import input_at
from core.plan import Plan, Preset
from core.units import GB, GiB, MiB
from gui.controller import PlanController
from gui.format import grouped
from gui.forms.base import PlanForm
from gui.forms.pickers import USER_PREFIX, Entry, SearchingPicker, words_match
from gui.forms.saved_entries import ask_entry_name, store_entry
from gui.settings import CustomGpu, Settings

if TYPE_CHECKING:  # this machine is looked at once the window has painted: not imported before
    from core.files.local_gpus import LocalGpu, LocalGpus
    from gui.local_machine import LocalMachine

CUSTOM = "custom"
MINE = USER_PREFIX  # id prefix of the user's saved cards in the picker
CUSTOM_LABEL = "Custom GPU (type memory and speed)"
GROUP_ORDER = (GpuGroup.LAPTOP, GpuGroup.DESKTOP, GpuGroup.DATACENTRE, GpuGroup.APPLE, GpuGroup.UNIFIED)
MAX_LOCAL_LINES = 8  # cards listed one a line; a machine with more says how many more


def local_card(plan: Plan, found: LocalGpus | None) -> LocalGpu | None:
    """This machine's card that the plan's hardware is (its catalogue entry, or the custom card
    of its reported memory), if any."""
    hw = plan.hardware
    for gpu in found.gpus if found is not None else ():
        changes = found.hardware_changes(gpu) if found is not None else gpu.hardware_changes()
        memory = changes.get("custom_memory_gb")
        # The same card under another platform (WSL2's whole-card total) is not this machine's yet.
        if changes["gpu"] != hw.gpu or changes.get("platform", hw.platform) != hw.platform:
            continue
        if hw.gpu != CUSTOM or (isinstance(memory, float) and abs(memory - hw.custom_memory_gb) < 1e-6):
            return gpu
    return None


def local_text(found: LocalGpus) -> str:
    """What this machine has, in a few plain lines: its cards and what is free on them, the notes."""
    if not found.gpus:
        looked = f" (looked for {', '.join(found.tried)})" if found.tried else ""
        lines = [f"This machine: no GPU found{looked}."]
    elif len(found.gpus) == 1:
        lines = [f"This machine: {found.gpus[0].label}"]
    else:
        lines = [f"This machine: {found.summary}"]
        lines += [f"  {gpu.index}: {gpu.label}" for gpu in found.gpus[:MAX_LOCAL_LINES]]
        if len(found.gpus) > MAX_LOCAL_LINES:
            lines.append(f"  … and {len(found.gpus) - MAX_LOCAL_LINES} more")
    lines += [f"Note: {note}" for note in found.notes]
    if found.host is not None:
        lines.append(found.host.label)
        lines += [f"Note: {note}" for note in found.host.notes]
    return "\n".join(lines)


def free_now_text(gpu: LocalGpu) -> str:
    """Beside the plan's card when it is this machine's: what is free now, and what is held."""
    if gpu.free_bytes is None:
        return ""
    # Short lines of their own: a wrapped label in the form is given the height of a narrower one.
    held = f"\n{gpu.used_bytes / MiB:,.0f} MiB held by other processes" if gpu.used_bytes else ""
    return f"{gpu.free_bytes / MiB:,.0f} MiB free now on this machine{held}"


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
    mine = [(f"{c.name} · {c.memory_gb:g} GB · {c.bandwidth_gb_s:,.0f} GB/s (yours)", MINE + c.name) for c in cards]
    sections.append((GROUP_LABELS[GpuGroup.CUSTOM], [*mine, (CUSTOM_LABEL, CUSTOM)]))
    return sections


@cache
def _gpus_by_id() -> dict[str, GpuSpec]:
    return {g.id: g for g in load_gpus()}


def _gpu_matches(entry_id: str, label: str, text: str) -> bool:
    gpu = _gpus_by_id().get(entry_id)
    return bool(search((gpu,), text)) if gpu is not None else words_match(entry_id, label, text)


def limits_text(gpu: GpuSpec) -> tuple[str, str]:
    """What the card cannot run, a unified-memory machine's GPU share and a typical price: (short text, details)."""
    lines, details = [], []
    if gpu.unsupported_dtypes:
        lines.append("Cannot run: " + ", ".join(gpu.unsupported_dtypes))
        details += [f"No {dtype}: {reason}." for dtype, reason in gpu.unsupported_dtypes.items()]
    if gpu.unified_memory_gb is not None:
        share = f"{gpu.memory_bytes / GiB:.3g} GiB ({gpu.memory_bytes / GB:.1f} GB)"
        lines.append(f"By default the GPU may use {share} of the {gpu.unified_memory_gb:g} GB unified memory")
        details.append(
            share_rule(gpu.id)
            or "macOS lets the GPU wire only part of unified memory. Raise the limit until the next restart with\n"
            "sudo sysctl iogpu.wired_limit_mb=<MB> (leave several GB for macOS); 0 restores the default."
        )
    if gpu.price_per_hour_usd is not None:
        lines.append(f"Typical price: ${gpu.price_per_hour_usd:,.2f} per GPU-hour ({gpu.price_date})")
    elif gpu.price_purchase_usd is not None:
        lines.append(f"Typical price: ${gpu.price_purchase_usd:,.0f} to buy ({gpu.price_date})")
    if gpu.price_per_hour_usd is not None or gpu.price_purchase_usd is not None:
        details.append(f"Price source: {gpu.price_source}.")
    return "\n".join(lines), "\n".join(details)


class _Note(QLabel):
    """A wrapped label as tall as its lines at the width it has.

    A form row takes a label's size hint, which wraps the text for a narrow width: the card's
    two lines got four lines' height, a blank line above and below the text."""

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        if self.wordWrap() and self.width() > 0:
            return QSize(hint.width(), self.heightForWidth(self.width()))
        return hint

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # as many lines as the new width takes


def note_label(name: str) -> QLabel:
    """A read-only line under the picker: plain text (it quotes the catalogue), selectable."""
    label = _Note()
    label.setAccessibleName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class HardwareForm(PlanForm):
    def __init__(
        self,
        controller: PlanController,
        parent: QWidget | None = None,
        *,
        settings: Settings | None = None,
        local: LocalMachine | None = None,
    ) -> None:
        super().__init__("Hardware", controller, parent)
        self.settings = settings
        self.local: LocalMachine | None = None
        self._free_judged: tuple[float, float] | None = None  # (held by others before, after) of the last judge
        gpu = input_at("hardware.gpu")
        self.gpu = SearchingPicker(gpu.name, gpu_sections(self._saved_cards()), gpu.tooltip, matcher=_gpu_matches)
        self.bind(gpu.path, gpu.label, self.gpu, self._pick)
        self._describe_entries()
        self.card = note_label("GPU summary")
        self.form.addRow("", self.card)
        self.machine_row = self._machine_row()
        self.form.addRow("", self.machine_row)
        self.set_widget_row_visible(self.machine_row, False)
        # The card's limits (no bf16 on Turing/Volta, Apple's GPU share) and the plan's clash with them.
        self.limits = note_label("GPU limits")  # reasons and sources come from the catalogue file
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
        self.custom_bandwidth = self.add_input("hardware.custom_bandwidth_gb_s")
        self.form.addRow("", self.save_card)
        self.utilisation = self.add_input("hardware.utilisation")
        self._serving_zero: dict[str, str] = {}  # card id -> what utilisation 0 means to serving on it
        # Calibrate from a short real run: its speed (or step time) solves the utilisation.
        self.measured_speed = self.add_input("hardware.measured_tokens_per_s")
        self.measured_step = self.add_input("hardware.measured_step_s")
        self.calibration = self.add_input("hardware.calibration")
        self.headroom = self.add_input("hardware.headroom")
        self.held_by_others = self.add_input("hardware.held_by_others")
        self.platform = self.add_input("hardware.platform")  # the OS CUDA runs under: WSL2's whole-card total
        self.price = self.add_input("hardware.price_per_gpu_hour")
        self.peak_override = self.add_input("hardware.peak_tflops_override")
        self.alloc_conf = self.add_input("hardware.alloc_conf")
        self.torch_version = self.add_input("hardware.torch_version")
        self.avoid_record_streams = self.add_input("hardware.nccl_avoid_record_streams")
        if local is not None:
            self.attach_local(local)

    # ---- this machine ----------------------------------------------------------------
    def _machine_row(self) -> QWidget:
        row = QWidget()
        row.setObjectName("thisMachine")
        column = QVBoxLayout(row)
        column.setContentsMargins(0, 0, 0, 0)
        self.machine = note_label("This machine's GPUs")  # names the drivers report, their notes
        self.machine.setObjectName("machineGpus")
        column.addWidget(self.machine)
        buttons = QHBoxLayout()
        self.use_local = QPushButton("Use this machine's card")
        self.use_local.setObjectName("useLocalGpu")
        self.use_local.setToolTip("Plan on the GPU this machine has (one undoable step)")
        self.use_local.clicked.connect(self._use_local)
        self.judge_free = QCheckBox("Judge against what is free now")
        self.judge_free.setObjectName("judgeFreeNow")
        self.judge_free.setToolTip(
            "Set Held by others to what other processes hold on this card now, so the verdict (and each\n"
            "serving engine's own rule) says whether the plan fits in what is free on this machine now."
        )
        self.judge_free.toggled.connect(self._judge_free)
        self.use_host = QPushButton("Use this machine's RAM")
        self.use_host.setObjectName("useLocalHost")
        self.use_host.clicked.connect(self._use_host)
        self.detect_again = QToolButton()
        self.detect_again.setObjectName("detectAgain")
        self.detect_again.setText("Look again")
        self.detect_again.clicked.connect(self._detect_again)
        for widget in (self.use_local, self.judge_free, self.detect_again):
            buttons.addWidget(widget)
        buttons.addStretch(1)
        column.addLayout(buttons)
        # A row of its own: beside the card's buttons it would widen the form past a 1024-px window.
        # In a widget of its own, hidden with its button: an empty row would still take the layout's spacing.
        self.host_buttons = QWidget()
        host_row = QHBoxLayout(self.host_buttons)
        host_row.setContentsMargins(0, 0, 0, 0)
        host_row.addWidget(self.use_host)
        host_row.addStretch(1)
        column.addWidget(self.host_buttons)
        return row

    def attach_local(self, local: LocalMachine) -> None:
        """Show what ``local`` finds of this machine's GPUs from now on."""
        self.local = local
        self.detect_again.setToolTip(f"Ask the drivers again, waiting up to {local.again_timeout_s:g} s")
        local.gpusDetected.connect(self._gpus_detected)
        if local.gpus is not None:
            self._gpus_detected(local.gpus)

    def _gpus_detected(self, found: LocalGpus) -> None:
        self.machine.setText(local_text(found))
        self.set_widget_row_visible(self.machine_row, True)
        self._redraw(self.controller.plan)
        self.show_estimate(self.controller.estimate)

    def _detect_again(self) -> None:
        if self.local is not None:
            self.machine.setText("This machine: looking for GPUs…")
            self.local.detect(self.local.again_timeout_s)

    def _found(self) -> LocalGpus | None:
        return self.local.gpus if self.local is not None else None

    def _use_local(self) -> None:
        found = self._found()
        if found is None or not found.gpus:
            return
        changes = found.hardware_changes(found.gpus[0])  # its platform too (WSL2, Windows), where known
        self.controller.update("hardware.gpu", lambda p: p.with_hardware(**changes), "Use this machine's card")

    def _use_host(self) -> None:
        found = self._found()
        host = found.host if found is not None else None
        if host is not None and host.plan_values():
            # Key "": one undo step of its own, never merged with a typed edit of either field.
            self.controller.update("", host.apply, "Use this machine's RAM")

    def _judged_free(self, plan: Plan) -> bool:
        return self._free_judged is not None and plan.hardware.held_by_others == self._free_judged[1]

    def _judge_free(self, on: bool) -> None:
        plan = self.controller.plan
        gpu = local_card(plan, self._found())
        if on and gpu is not None:
            before = plan.hardware.held_by_others
            after = float(gpu.held_now_bytes)
            self._free_judged = (before, after)
            # Key "": each toggle is an undo step of its own (never merged with the next).
            self.controller.update(
                "", lambda p: p.with_hardware(held_by_others=after), "Judge against what is free now"
            )
        elif not on and self._judged_free(plan) and self._free_judged is not None:
            before = self._free_judged[0]  # kept: an undo of this brings the judged memory back
            self.controller.update("", lambda p: p.with_hardware(held_by_others=before), "Judge against the whole card")

    def _show_machine(self, plan: Plan) -> None:
        found = self._found()
        if found is None:
            return
        gpu = local_card(plan, found)
        self.use_local.setVisible(bool(found.gpus) and gpu is None)
        self.judge_free.setVisible(gpu is not None and gpu.held_fraction is not None)
        with QSignalBlocker(self.judge_free):
            self.judge_free.setChecked(self._judged_free(plan))
        host = found.host
        offered = host is not None and bool(host.plan_values()) and not host.applied(plan)
        self.use_host.setVisible(offered)
        self.host_buttons.setVisible(offered)
        if host is not None:
            values = ", ".join(
                f"{input_at(path).label} {value:g} {input_at(path).unit}" for path, value in host.plan_values().items()
            )
            self.use_host.setToolTip(f"Plan with {values} (one undoable step)")
        self.detect_again.setVisible(not found.gpus or bool(found.notes))

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

    def zero_in_serving(self, path: str, plan: Plan) -> str:
        """Utilisation 0 in Inference mode: the chosen card's serving share ("40 % (serving)" on
        an L4, "78 % (serving on an Apple GPU)" on an M2 Max), never both."""
        if path != "hardware.utilisation":
            return super().zero_in_serving(path, plan)
        card = plan.hardware.gpu
        text = self._serving_zero.get(card)
        if text is None or card == "custom":
            text = self._serving_zero[card] = serving_utilisation_text(plan)
        return text

    def _pick(self, plan: Plan, entry_id: str) -> Plan:
        if entry_id.startswith(MINE):
            for card in self._saved_cards():
                if MINE + card.name == entry_id:
                    return plan.with_hardware(
                        gpu=CUSTOM,
                        custom_memory_gb=card.memory_gb,
                        custom_tflops=card.tflops,
                        custom_bandwidth_gb_s=card.bandwidth_gb_s,
                    )
        return plan.with_hardware(gpu=entry_id)

    def _shown_gpu_id(self, plan: Plan) -> str:
        hw = plan.hardware
        if hw.gpu != CUSTOM:
            return hw.gpu
        for card in self._saved_cards():  # a saved card is the custom card with its figures
            if (card.memory_gb, card.tflops, card.bandwidth_gb_s) == (
                hw.custom_memory_gb,
                hw.custom_tflops,
                hw.custom_bandwidth_gb_s,
            ):
                return MINE + card.name
        return CUSTOM

    def _save_card(self) -> None:
        hw = self.controller.plan.hardware
        if self.settings is None:
            return
        settings = self.settings
        title = "Save as my card"
        name = ask_entry_name(self, title, "Name for this card:", f"My GPU ({hw.custom_memory_gb:g} GB)")
        if name is None:
            return
        card = CustomGpu(name, hw.custom_memory_gb, hw.custom_tflops, hw.custom_bandwidth_gb_s)
        names = [c.name for c in settings.custom_gpus]
        if not store_entry(
            self, title, "card", names, lambda: settings.add_custom_gpu(card), settings.forget_custom_gpu
        ):
            return
        self.gpu.set_sections(gpu_sections(self._saved_cards()))
        self._describe_entries()
        self.show_plan(self.controller.plan)

    def _use_fp16(self) -> None:
        self.controller.update("preset", lambda p: p.with_changes(preset=Preset.FP16_AMP), text="Use fp16 AMP")

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        # This machine's card and its free memory read the layout too (gui.local_machine).
        return (*super().shown_key(plan), plan.hardware, plan.parallel, plan.world_size)

    def show_plan(self, plan: Plan) -> None:
        self.gpu.show_value(self._shown_gpu_id(plan), plan.hardware.gpu)
        self.show_inputs(plan)
        self._show_machine(plan)
        self.set_widget_row_visible(self.save_card, plan.hardware.gpu == CUSTOM and self.settings is not None)

    def show_estimate(self, estimate: Estimate) -> None:
        gpu = estimate.gpu
        reported = grouped(gpu.memory_reported) or f"{gpu.memory_bytes / MiB:,.0f} MiB"
        peak = estimate.compute.peak_tflops
        speed = f"{peak:g} TFLOP/s dense at this precision" if peak else "no published TFLOP/s: type a peak override"
        here = local_card(estimate.plan, self._found())
        free = free_now_text(here) if here is not None else ""
        self.card.setText(f"{reported} · {speed}" + (f"\n{free}" if free else ""))
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

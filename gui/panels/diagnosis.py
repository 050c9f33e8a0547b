"""Diagnosis: why a plan does not fit, where it would fail, and what to change.

This view only renders. Every figure, verdict and cost comes from a
:class:`core.advice.diagnosis.DiagnosisReport`, which the diagnosis controller computes
off the GUI thread (only while this tab is visible; the latest plan wins) and hands over in
one signal; a report or a unit switch that comes while the tab is hidden is drawn when it is
shown again. The pins ("keep the model"...) and the picked symptom are requests to that
controller. Applying a remedy hands its plan to the plan controller as one undoable step.
Past 400 lines because the tab has five sections laid out and filled here; the remedy rows
are in :mod:`gui.panels.remedy_list`.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QHideEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from core.advice.request import PIN_LABELS, AdviceKind, Pin, pin_label, symptoms_for
from core.advice.symptoms import SEEN, SYMPTOM_BY_FAILURE, Failure, Symptom
from core.estimate import Estimate
from core.plan import Accounting
from core.verdict import NARROW_LABEL, NARROW_MEANING, Mode
from gui.curve import MemoryCurve
from gui.diagnosis_controller import DiagnosisController
from gui.display_state import Display, DisplayState
from gui.format import Unit, counted, memory
from gui.layout import settle_layouts
from gui.panels.remedy_list import RemedyEntry, RemedyList
from gui.panels.verdict import badge_background, badge_text_colour, margin_text, text_pt, verdict_style
from gui.plaintext import html as escape  # the one escape for text shown in rich labels

if TYPE_CHECKING:  # the diagnosis itself is loaded when it first runs (core.advice.request)
    from core.advice.diagnosis import Curve, Diagnosis, DiagnosisReport

AXES = (("micro_batch", "Memory against micro-batch"), ("seq_len", "Memory against sequence"))


def _wrapping_label(name: str, rich: bool = True) -> QLabel:
    label = QLabel()
    label.setAccessibleName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


WORKING_TEXT = "Working out where the plan fails and what would make it fit…"


# The picker names each symptom in a few words under "Start from a symptom": the sentence a
# run prints (up to 156 characters) was cut to its first 30 in the 191 px box at 1024 × 700.
# The whole sentence is the choice's tooltip and is shown under the picker once chosen.
SYMPTOM_NAMES: dict[Failure, str] = {
    Failure.FIRST_STEP: "At the first step",
    Failure.LONG_BATCHES: "Forward or backward pass",
    Failure.EVALUATION: "Only during evaluation",
    Failure.SERVING: "Serving many users",
    Failure.SERVING_WEIGHTS: "Loading the model to serve",
    Failure.SERVING_START: "Refused at start-up",
}
PICK_A_SYMPTOM = "Where did it run out?…"

# Below this viewport width (the Details dock at 1024 × 700) the limits stack their names above
# their values, so no row is wider than the panel.
NARROW_WIDTH = 300


class DiagnosisPanel(QScrollArea):
    """The "Diagnosis" tab: renders the diagnosis controller's reports."""

    def __init__(self, diagnoser: DiagnosisController, display: DisplayState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Diagnosis")
        self.diagnoser = diagnoser
        self.controller = diagnoser.plans
        self.unit: Unit = display.unit
        self.report: DiagnosisReport | None = None
        self.curve: Curve | None = None
        self._symptom_entries: tuple[RemedyEntry, ...] = ()
        self.refresh_count = 0  # reports shown; tests read it to check the coalescing
        self._render_when_shown = False  # a report or unit came while the tab was hidden

        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        content = QWidget()
        content.setObjectName("diagnosisContent")
        column = QVBoxLayout(content)
        column.setContentsMargins(8, 8, 8, 8)
        column.setSpacing(10)
        column.addWidget(self._build_header())
        column.addWidget(self._build_failure())
        column.addWidget(self._build_remedies())
        column.addWidget(self._build_symptoms())
        column.addWidget(self._build_limits())
        column.addStretch(1)
        self.setWidget(content)

        # Until the first report, and where a diagnosis ends without one (stopped after 30 s), the panel says so:
        # it stood as an empty header over empty figures, the reason only in the status bar for 8 s.
        self.headline.setText(WORKING_TEXT)
        diagnoser.failed.connect(self._show_failure)
        diagnoser.diagnosed.connect(self._show_report)
        self.controller.estimateChanged.connect(self._on_estimate)
        display.changed.connect(self._on_display)
        self._show_pins()  # the window may open in Inference mode

    # ---- layout --------------------------------------------------------------------
    def _build_header(self) -> QWidget:
        header = self._header = QFrame()
        header.setFrameShape(QFrame.Shape.StyledPanel)
        column = QVBoxLayout(header)
        column.setContentsMargins(10, 8, 10, 8)
        column.setSpacing(6)
        self.badge = QLabel()
        self.badge.setAccessibleName("Diagnosis verdict")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        column.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignLeft)
        self.headline = _wrapping_label("Margin and dominant bucket")
        column.addWidget(self.headline)
        return header

    def _build_failure(self) -> QWidget:
        box = QGroupBox("Where it fails")
        layout = QVBoxLayout(box)
        self.failure = _wrapping_label("Failing phase")
        layout.addWidget(self.failure)
        self.explanation = _wrapping_label("Explanation", rich=False)
        layout.addWidget(self.explanation)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self._figures_form = form
        self.figures: dict[str, QLabel] = {}
        for key, label, tip in (
            (
                "state",
                "State before activations",
                "The chart's optimizer-step bar (weights, gradients, optimizer state) + the overhead that needs "
                "no activation (CUDA context, workspaces)",
            ),
            (
                "total",
                "nvidia-smi (judged)",
                "The training step's allocated peak plus what the caching allocator "
                "reserves beyond it and the runtime's own memory (CUDA context, NCCL): what nvidia-smi shows (amd-smi "
                "on an AMD card, on a Mac the MPS driver), the figure the verdict reads",
            ),
            ("eval", "Evaluation pass", "An evaluation forward with the plan's evaluation batch"),
            ("usable", "Usable", "The card's capacity less the headroom kept free"),
        ):
            value = QLabel()
            value.setAccessibleName(label)
            value.setToolTip(tip)
            value.setWordWrap(True)  # the state's sum names its parts: it wraps, never widens the tab
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = QLabel(label + ":")
            name.setToolTip(tip)
            form.addRow(name, value)
            self.figures[key] = value
        layout.addLayout(form)
        return box

    _pins: QGridLayout | None = None
    _pin_columns = 2
    _pins_laid_out: tuple[QCheckBox, ...] = ()
    # (mode, pins offered, pins ticked) as the boxes show them
    _pins_shown: tuple[Mode, tuple[Pin, ...], frozenset[Pin]] = (Mode.TRAINING, tuple(Pin), frozenset())

    # (mode, symptoms listed, the one picked) as the picker shows them; None: not listed yet
    _symptoms_listed: tuple[Mode, tuple[Failure, ...], Failure | None] | None = None
    _badge_words: tuple[str, str, str] = ("", "", "")  # (symbol, "Serving:" or "", verdict)
    _badge_room = -1  # the width the badge was fitted to

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_pins()
        self._fit_badge()
        form = getattr(self, "_limits_form", None)
        if form is not None:  # narrow: each limit's name above its value, not beside it
            narrow = self.viewport().width() < NARROW_WIDTH
            policy = QFormLayout.RowWrapPolicy.WrapAllRows if narrow else QFormLayout.RowWrapPolicy.WrapLongRows
            if form.rowWrapPolicy() != policy:
                form.setRowWrapPolicy(policy)

    def _list_symptoms(self) -> None:
        """The current mode's symptoms (core.advice.request.symptoms_for), its own pick chosen."""
        mode = self.diagnoser.display.mode
        listed = (mode, symptoms_for(mode), self.diagnoser.symptom)
        if listed == self._symptoms_listed:
            return
        self._symptoms_listed = listed
        picker = self.symptom_picker
        with QSignalBlocker(picker):
            picker.clear()
            picker.addItem(PICK_A_SYMPTOM, None)
            for failure in listed[1]:
                picker.addItem(SYMPTOM_NAMES[failure], failure.value)
                picker.setItemData(picker.count() - 1, SYMPTOM_BY_FAILURE[failure].symptom, Qt.ItemDataRole.ToolTipRole)
            picker.setCurrentIndex(max(0, picker.findData(listed[2].value)) if listed[2] is not None else 0)

    def _fit_badge(self) -> None:
        """The verdict badge on one line where it fits the panel, else "Serving:" above the
        verdict: at 1024 × 700 "✖  Serving: Out of memory" (13 pt) was wider than the Details
        dock, and the whole tab was laid out wider and cut on the right."""
        symbol, serving, verdict = self._badge_words
        if not verdict:
            return
        header = self._header
        margins = header.layout().contentsMargins()  # type: ignore[union-attr]
        column = self.widget().layout().contentsMargins()  # type: ignore[union-attr]
        room = self.viewport().width() - column.left() - column.right()
        room -= margins.left() + margins.right() + 2 * header.frameWidth()
        if room == self._badge_room:
            return
        self._badge_room = room
        one_line = f"{symbol}  {serving} {verdict}" if serving else f"{symbol}  {verdict}"
        self.badge.setText(one_line)
        if serving and self.badge.sizeHint().width() > room:
            self.badge.setText(f"{symbol}  {serving}\n{verdict}")

    def _fit_pins(self) -> None:
        """The pins in two columns where they fit the panel, else one: at 1024 × 700 two
        columns were wider than the dock and the panel's text was cut on the right."""
        pins = self._pins
        if pins is None:
            return
        boxes = tuple(self.pin_boxes[pin] for pin in self._pins_shown[1])
        widest = max((box.sizeHint().width() for box in boxes), default=0)
        columns = 2 if self.viewport().width() >= 2 * widest + pins.horizontalSpacing() + 40 else 1
        if columns == self._pin_columns and boxes == self._pins_laid_out:
            return
        self._pin_columns = columns
        self._pins_laid_out = boxes
        for box in self.pin_boxes.values():
            pins.removeWidget(box)
        for index, box in enumerate(boxes):  # the shown pins only, without gaps
            pins.addWidget(box, index // columns, index % columns)

    def _show_pins(self) -> None:
        """The pins of the current mode (and, serving, the engine), each ticked as it was left in
        this mode, in its words there ("Keep the context length" when serving)."""
        diagnoser = self.diagnoser
        shown = (diagnoser.display.mode, diagnoser.offered_pins(), diagnoser.ticked_pins())
        if shown == self._pins_shown:
            return  # the usual edit: nothing to redo
        self._pins_shown = shown
        mode, offered, ticked = shown
        for pin, box in self.pin_boxes.items():
            with QSignalBlocker(box):
                box.setChecked(pin in ticked)
            label = pin_label(pin, mode)
            if box.text() != label:
                box.setText(label)
                box.setAccessibleName(label)
            box.setVisible(pin in offered)
        self._pin_columns = 0  # laid out again for the shown pins
        self._fit_pins()

    def _build_remedies(self) -> QWidget:
        box = QGroupBox("What to change")
        layout = QVBoxLayout(box)
        self.remedy_note = _wrapping_label("Remedies note")
        layout.addWidget(self.remedy_note)
        pins = QGridLayout()
        pins.setHorizontalSpacing(12)
        pins.setVerticalSpacing(2)
        self.pin_boxes: dict[Pin, QCheckBox] = {}
        for index, (pin, label) in enumerate(PIN_LABELS.items()):
            check = QCheckBox(label)
            check.setAccessibleName(label)
            check.setToolTip("Leave out the changes that would change this")
            check.toggled.connect(self._pins_changed)
            pins.addWidget(check, index // 2, index % 2)
            self.pin_boxes[pin] = check
        pins.setColumnStretch(2, 1)
        self._pins = pins
        layout.addLayout(pins)
        self.show_symptom_button = QPushButton("Show remedies for this symptom")
        self.show_symptom_button.setAccessibleName("Show remedies for this symptom")
        self.show_symptom_button.setToolTip(
            "Pick, under 'Start from a symptom', what the run would show where it fails, and list its remedies"
        )
        self.show_symptom_button.clicked.connect(self._show_diagnosed_symptom)
        # Shown only where a report says the step fits but the run fails later (_show_remedies): before the first
        # report it stood under empty pins and did nothing.
        self.show_symptom_button.setVisible(False)
        layout.addWidget(self.show_symptom_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.combination_list = RemedyList()
        self.combination_list.setAccessibleName("Combined remedy")
        self.combination_list.applyRequested.connect(self.apply)
        layout.addWidget(self.combination_list)
        self.remedy_list = RemedyList()
        self.remedy_list.setAccessibleName("Remedies")
        self.remedy_list.applyRequested.connect(self.apply)
        layout.addWidget(self.remedy_list)
        return box

    def _build_symptoms(self) -> QWidget:
        box = QGroupBox("Start from a symptom")
        layout = QVBoxLayout(box)
        self.symptom_picker = QComboBox()
        self.symptom_picker.setAccessibleName("Symptom")
        self.symptom_picker.setToolTip("What you saw when the run failed")
        self.symptom_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.symptom_picker.setMinimumContentsLength(20)
        self._list_symptoms()
        self.symptom_picker.currentIndexChanged.connect(self._symptom_picked)
        layout.addWidget(self.symptom_picker)
        self.symptom_cause = _wrapping_label("Likely cause")
        layout.addWidget(self.symptom_cause)
        self.symptom_list = RemedyList()
        self.symptom_list.setAccessibleName("Remedies for the symptom")
        self.symptom_list.applyRequested.connect(self.apply)
        layout.addWidget(self.symptom_list)
        self.symptom_cause.setVisible(False)
        self.symptom_list.setVisible(False)
        return box

    def _build_limits(self) -> QWidget:
        box = QGroupBox("How far it goes")
        layout = QVBoxLayout(box)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.limits: dict[str, QLabel] = {}
        for key, label, tip in (
            ("micro_batch", "Largest micro-batch", "The largest micro-batch that fits the usable memory with margin"),
            ("seq_len", "Longest sequence", "The longest sequence that fits the usable memory with margin"),
            ("concurrent", "Most requests (serving)", "Most concurrent requests of the serving context that fit"),
            ("context", "Longest context (serving)", "Longest context per request, at the serving concurrency"),
        ):
            value = QLabel()
            value.setAccessibleName(label)
            value.setToolTip(tip)
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            form.addRow(label + ":", value)
            self.limits[key] = value
        self._limits_form = form
        layout.addLayout(form)
        self.lesson_note = _wrapping_label("Lesson accounting note")
        self.lesson_note.setText(
            "<i>Lesson accounting: activations are the typed allowance, so memory does not "
            "grow with the micro-batch or the sequence here.</i>"
        )
        layout.addWidget(self.lesson_note)
        picker_row = QHBoxLayout()  # one combo, no label beside it: it fits a narrow dock
        self.axis_picker = QComboBox()
        self.axis_picker.setAccessibleName("Curve axis")
        self.axis_picker.setToolTip("The input the curve below varies, the rest of the plan kept")
        for key, label in AXES:
            self.axis_picker.addItem(label, key)
        self.axis_picker.currentIndexChanged.connect(self._axis_picked)
        picker_row.addWidget(self.axis_picker)
        picker_row.addStretch(1)
        layout.addLayout(picker_row)
        self.curve_view = MemoryCurve()
        layout.addWidget(self.curve_view)
        return box

    # ---- public --------------------------------------------------------------------
    @property
    def axis(self) -> str:
        return str(self.axis_picker.currentData())

    @property
    def stale(self) -> bool:
        """True while the shown report is not for the current plan, mode, pins and symptom."""
        return self.report is None or self.report.request != self.diagnoser.latest

    @property
    def diagnosis(self) -> Diagnosis | None:
        return self.report.diagnosis if self.report is not None else None

    @property
    def symptom(self) -> Symptom | None:
        return self.report.symptom if self.report is not None else None

    @property
    def max_micro_batch(self) -> int:
        return self.report.diagnosis.limits.max_micro_batch if self.report is not None else 0

    @property
    def max_sequence(self) -> int:
        return self.report.diagnosis.limits.max_sequence if self.report is not None else 0

    def set_unit(self, unit: Unit) -> None:
        if unit == self.unit:
            return
        self.unit = unit
        if not self.isVisible():  # a hidden tab is not drawn: it catches up when shown
            self._render_when_shown = True
            return
        self.curve_view.set_unit(unit)
        if self.report is not None:
            self._show_diagnosis()
        self._show_symptom()

    def apply(self, entry: RemedyEntry) -> None:
        """Make the remedy's plan current: one undoable step through the plan controller."""
        if self.stale:
            return  # the row belongs to an older plan; it is about to be redrawn
        self.controller.set_plan(entry.plan, text=f"Apply remedy: {entry.title}")

    def select_symptom(self, failure: Failure) -> None:
        """Pick a symptom as the user would (tests, and the "Show remedies" button)."""
        index = self.symptom_picker.findData(failure.value)
        with QSignalBlocker(self.symptom_picker):
            self.symptom_picker.setCurrentIndex(index)
        self._symptom_picked(index)

    # ---- reacting ------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._render_when_shown:
            self._render_when_shown = False
            self.curve_view.set_unit(self.unit)
            self._render()
        self.diagnoser.set_active(True)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self.diagnoser.set_active(False)

    def _on_estimate(self, _estimate: Estimate) -> None:
        self._show_pins()  # another engine offers other pins
        self._set_applicable(not self.stale)

    def _on_display(self, display: Display) -> None:
        self.set_unit(display.unit)
        self._show_pins()
        self._list_symptoms()
        self._set_applicable(not self.stale)

    def _pins_changed(self, _on: bool = False) -> None:
        """The ticks of the shown pins; a pin hidden here (llama.cpp's offload on vLLM) keeps its tick."""
        offered = self.diagnoser.offered_pins()
        hidden = frozenset(pin for pin in self.diagnoser.ticked_pins() if pin not in offered)
        self.diagnoser.set_pins(hidden | {pin for pin in offered if self.pin_boxes[pin].isChecked()})
        self._pins_shown = (self.diagnoser.display.mode, offered, self.diagnoser.ticked_pins())
        self._set_applicable(not self.stale)

    def _set_applicable(self, on: bool) -> None:
        for remedies in (self.remedy_list, self.combination_list, self.symptom_list):
            remedies.set_applicable(on)

    def _axis_picked(self, _index: int) -> None:
        if self.report is not None:
            self._show_curve()

    def _symptom_picked(self, _index: int) -> None:
        value = self.symptom_picker.currentData()
        self.diagnoser.set_symptom(Failure(value) if value is not None else None)
        mode = self.diagnoser.display.mode
        self._symptoms_listed = (mode, symptoms_for(mode), self.diagnoser.symptom)  # as the picker shows
        self._set_applicable(not self.stale)

    def _show_diagnosed_symptom(self) -> None:
        if self.diagnosis is not None:
            index = self.symptom_picker.findData(self.diagnosis.failure.value)
            if index >= 0:
                self.symptom_picker.setCurrentIndex(index)

    # ---- showing -------------------------------------------------------------------
    def _show_failure(self, text: str) -> None:
        if self.report is None:  # a shown report stays until the next one (the status bar says why)
            self.headline.setText(escape(text))

    def _show_report(self, report: DiagnosisReport) -> None:
        self.report = report
        self.refresh_count += 1
        self._symptom_entries = tuple(RemedyEntry.from_remedy(r) for r in report.symptom_remedies)
        if not self.isVisible():  # its job ended after the tab was hidden
            self._render_when_shown = True
            return
        self._render()

    def _render(self) -> None:
        self._show_diagnosis()
        self._show_curve()
        self._show_symptom()
        self._set_applicable(not self.stale)
        settle_layouts()  # the new rows and texts are laid out now, so the panel paints once

    def _show_curve(self) -> None:
        if self.report is None:
            return
        plan = self.report.request.plan
        drawn = self.axis in self.report.curves  # training only: serving has no such curve
        self.axis_picker.setVisible(drawn)
        self.curve_view.setVisible(drawn)
        if drawn:
            self.curve = self.report.curves[self.axis]
            self.curve_view.show_curve(self.curve, getattr(plan.workload, self.axis))

    def _show_diagnosis(self) -> None:
        d = self.diagnosis
        if d is None:
            return
        u = self.unit
        est = d.estimate
        judged = d.judgement
        narrow = judged.fits_narrowly  # core.verdict's narrow fit: its own label and colour, as the banner's
        symbol = verdict_style(d.verdict, narrow)[0]
        colour = badge_background(d.verdict, narrow)  # the verdict's colour, 4.5:1 to the badge's text (h95ui)
        serving = "Serving:" if d.mode is Mode.INFERENCE else ""
        words = (symbol, serving, judged.label)
        if words != self._badge_words:
            self._badge_words = words
            self.badge.setStyleSheet(
                f"QLabel {{ background: {colour}; color: {badge_text_colour(d.verdict, narrow)}; border-radius: 6px;"
                f" padding: 6px 12px; font-size: {text_pt(13)}; font-weight: 600; }}"
            )
            self._badge_room = -1
            self._fit_badge()
        margin = margin_text(judged, est.plan.hardware.headroom, u)
        what = "serving total" if d.mode is Mode.INFERENCE else f"{est.judged_figure} figure"
        largest, largest_bytes = d.largest
        card = escape(est.gpu.name)
        self.headline.setText(
            f"{margin} ({what} {memory(judged.total_bytes, u)} of {memory(judged.usable_bytes, u)} usable on {card})"
            f"<br>Largest part: <b>{largest}</b>, {memory(largest_bytes, u)}"
        )

        # What fails, in core's one sentence (the report says the same): the window sets its head in bold and the
        # error the user would see on a line of its own.
        said = d.outcome
        seen = f" {SEEN}<br>“{escape(said.seen)}”" if said.seen else ""
        self.failure.setText(f"{escape(said.lead)}<b>{escape(said.head)}</b>{escape(said.rest)}{seen}")
        self.explanation.setText(d.explanation)
        self.figures["state"].setText(d.state_sentence(u))  # what it sums beside the optimizer-step bar
        self.figures["total"].setText(memory(est.total_bytes, u))
        total_name = self._figures_form.labelForField(self.figures["total"])
        if isinstance(total_name, QLabel):  # "nvidia-smi", or on a Mac the MPS driver's figure
            # a row name starts with a capital ("lesson sum (judged)" sat among "State before activations",
            # "Evaluation pass"), a tool's own lower-case name (nvidia-smi, amd-smi) stays as the tool writes it
            figure = est.judged_figure
            total_name.setText(f"{figure if figure.endswith('-smi') else figure[:1].upper() + figure[1:]} (judged):")
        self.figures["eval"].setText(memory(d.eval_bytes, u))
        self.figures["usable"].setText(f"{memory(d.usable_bytes, u)} of {memory(d.judgement.capacity_bytes, u)}")
        for key in ("state", "total", "eval"):  # the training step's figures: not what serving is judged on
            self._figures_form.setRowVisible(self.figures[key], d.mode is Mode.TRAINING)

        self._show_remedies(d)
        self._show_limits(d)

    def _show_remedies(self, d: Diagnosis) -> None:
        u = self.unit
        entries = tuple(RemedyEntry.from_remedy(r) for r in d.remedies)
        combination = (RemedyEntry.from_combination(d.combination),) if d.combination else ()
        self.remedy_list.show_entries(entries, u)
        self.combination_list.show_entries(combination, u)
        self._order_tabs()
        advice = d.advice
        show_symptom = d.offers_symptom
        when = d.when
        note = {
            AdviceKind.FITS: "The plan fits: nothing needs to change.",
            AdviceKind.FITS_NARROWLY: f"<b>{NARROW_LABEL}</b>: the plan {NARROW_MEANING}.",
            AdviceKind.FITS_QUEUED: (
                f"Fits, but <b>{counted(advice.queued, 'request')} {'waits' if advice.queued == 1 else 'wait'} "
                f"in the queue</b>: the pool holds "
                f"{advice.at_once:,} at once. Fewer or shorter requests, or more memory, serve them all."
            ),
            AdviceKind.STEP_FITS_BUT: f"The training step fits, but it would fail {when}.",
            AdviceKind.NO_CHANGE_KNOWN: "No single change the planner knows lowers this plan's memory.",
            AdviceKind.ONLY_TOGETHER: "<b>No single change fits.</b> Together, these do:",
            AdviceKind.TOGETHER_CHEAPEST: (
                f"<b>Cheapest: these together</b>, for less than any single change that fits "
                f"({advice.fitting} of {advice.offered} fit on their own, listed below, cheapest first)."
            ),
            AdviceKind.SOME_FIT: f"{advice.fitting} of {advice.offered} changes fit on their own; cheapest first.",
            AdviceKind.NONE_FITS: (
                f"<b>No change fits, alone or combined (up to {advice.combined_at_most}).</b> The closest are listed."
            ),
        }[advice.kind]
        if d.pins:
            kept = ", ".join(pin_label(p, d.mode).removeprefix("Keep ") for p in d.pins)
            note += f"<br><i>Kept as pinned: {kept}.</i>"
        self.remedy_note.setText(note)
        self.show_symptom_button.setVisible(show_symptom)

    def _order_tabs(self) -> None:
        """Tab goes down the tab as it reads: the pins, the combination's Apply ("Together",
        shown above), then each remedy's; rows made later sat last in the focus chain."""
        chain: list[QWidget] = [self.pin_boxes[pin] for pin in self._pins_shown[1]]
        chain.append(self.show_symptom_button)
        chain += [row.apply for row in self.combination_list.rows if not row.isHidden()]
        chain += [row.apply for row in self.remedy_list.rows if not row.isHidden()]
        for first, second in itertools.pairwise(chain):
            QWidget.setTabOrder(first, second)

    def _show_limits(self, d: Diagnosis) -> None:
        plan = d.estimate.plan
        wl = plan.workload
        limits = d.limits
        # Each limit as core.verdict words it: the largest that fits with margin, a larger narrow fit noted.
        micro, micro_note = limits.parts("micro_batch")
        now = f"now {wl.micro_batch:,}"
        if limits.micro_batch_unbounded:
            micro_text = f"memory does not limit it ({now})"
        elif micro:
            micro_text = f"<b>{micro:,}</b> ({micro_note}; {now})" if micro_note else f"<b>{micro:,}</b> ({now})"
        else:
            micro_text = f"none fits, not even 1 ({now})"
        self.limits["micro_batch"].setText(micro_text)
        seq, seq_note = limits.parts("seq_len")
        now = f"now {wl.seq_len:,}"
        if limits.sequence_unbounded:
            seq_text = f"memory does not limit it ({now})"
        elif seq:
            seq_text = f"<b>{seq:,}</b> tokens ({seq_note}; {now})" if seq_note else f"<b>{seq:,}</b> tokens ({now})"
        else:
            seq_text = f"none fits, not even 1 token ({now})"
        self.limits["seq_len"].setText(seq_text)
        # core's words (core.advice.limits.serving_limits): an engine that refuses the context says so
        for key, limit in zip(("concurrent", "context"), d.serving_limits, strict=True):
            figure = f"<b>{limit.figure}</b> " if limit.figure else ""
            self.limits[key].setText(f"{figure}{limit.words}")  # core's own words, no outside text (as before)
        in_serving = d.mode is Mode.INFERENCE  # each mode shows its own limits (issue 26, item 11)
        for key in ("micro_batch", "seq_len"):
            self._limits_form.setRowVisible(self.limits[key], not in_serving)
        self.lesson_note.setVisible(plan.accounting is Accounting.LESSON and not in_serving)

    def _show_symptom(self) -> None:
        symptom = self.symptom
        if symptom is None:
            self.symptom_cause.setVisible(False)
            self.symptom_list.show_entries((), self.unit)
            return
        entries = self._symptom_entries
        text = (
            f"What you saw: “{escape(symptom.symptom)}”<br>Likely cause: <b>{escape(symptom.cause)}</b>."
            f"<br>Usual remedies: {escape(symptom.remedies)}."
        )
        if not entries:
            text += "<br><i>None of the changes the planner knows lowers this plan's memory for this symptom.</i>"
        self.symptom_cause.setText(text)
        self.symptom_cause.setVisible(True)
        self.symptom_list.show_entries(entries, self.unit)

"""Diagnosis: why a plan does not fit, where it would fail, and what to change.

Every figure comes from :mod:`core.diagnosis` (which estimates modified plans); this view
only formats them. ``diagnose()`` and the curve solvers cost tens of milliseconds, so they
run lazily: when the tab becomes visible, or, while it is visible, once a burst of edits
has settled (a restartable single-shot timer). Applying a remedy hands its plan to the
controller as one undoable step; the controller's one signal then redraws everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QPalette, QShowEvent
from PySide6.QtWidgets import (
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

from core import diagnosis
from core.breakdown import BUCKET_LABELS
from core.diagnosis import SYMPTOMS, Combination, Curve, Diagnosis, Failure, Remedy, Symptom
from core.estimate import VERDICT_LABELS, Estimate, Verdict
from core.plan import Accounting, Plan
from gui.controller import PlanController
from gui.curve import MemoryCurve
from gui.format import Unit, hours, memory
from gui.panels.verdict import VERDICT_STYLE

# Coalesces a burst of edits (typing, a spin box held down) into one diagnosis.
SETTLE_MS = 120

FAILURE_PHASES = {
    Failure.FIRST_STEP: "at load / the first optimizer step",
    Failure.LONG_BATCHES: "on long batches",
    Failure.EVALUATION: "during evaluation",
    Failure.SERVING: "when serving many users",
}
AXES = (("micro_batch", "Micro-batch"), ("seq_len", "Sequence length"))
_COST_NOTES = {kind.key: kind.cost_note for kind in diagnosis.KINDS}


@dataclass(frozen=True)
class RemedyEntry:
    """One row of a remedy list: a plan to apply and the core's figures for it."""

    key: str
    title: str
    plan: Plan
    total_bytes: float
    verdict: Verdict
    cost: str
    serving: bool = False

    @classmethod
    def from_remedy(cls, remedy: Remedy) -> RemedyEntry:
        est = remedy.estimate
        if remedy.addresses == {Failure.SERVING}:
            # A serving remedy is judged on the serving total (weights + KV cache), not the training step.
            inf = est.inference
            return cls(remedy.key, remedy.title, remedy.plan, inf.total_bytes, Verdict(inf.verdict), remedy.cost, True)
        return cls(remedy.key, remedy.title, remedy.plan, est.total_bytes, est.verdict, remedy.cost)

    @classmethod
    def from_combination(cls, combination: Combination, base: Estimate) -> RemedyEntry:
        est = combination.estimate
        notes = "; ".join(_COST_NOTES.get(r.key, "") for r in combination.remedies if _COST_NOTES.get(r.key))
        time = f"training time {hours(est.compute.hours)} (now {hours(base.compute.hours)})"
        return cls(
            "combination",
            f"Together: {combination.title}",
            combination.plan,
            est.total_bytes,
            est.verdict,
            f"{notes}; {time}" if notes else time,
        )


def _verdict_text(verdict: Verdict) -> str:
    symbol, _ = VERDICT_STYLE[verdict]
    return f"{symbol} {VERDICT_LABELS[verdict]}"


def _verdict_html(verdict: Verdict) -> str:
    _, colour = VERDICT_STYLE[verdict]
    # Tight's orange is too light for text on a light background: a darker shade of it.
    colour = "#B07800" if verdict is Verdict.TIGHT else colour
    return f"<span style='color:{colour}; font-weight:600'>{_verdict_text(verdict)}</span>"


class _RemedyRow(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("remedyRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.entry: RemedyEntry | None = None
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(2)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.title.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        grid.addWidget(self.title, 0, 0)
        self.apply = QPushButton("Apply")
        self.apply.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        grid.addWidget(self.apply, 0, 1, 2, 1, Qt.AlignmentFlag.AlignVCenter)
        figures = QHBoxLayout()
        figures.setSpacing(12)
        self.total = QLabel()
        self.total.setAccessibleName("New total")
        self.total.setFont(bold)
        figures.addWidget(self.total)
        self.status = QLabel()
        self.status.setAccessibleName("Fits")
        self.status.setTextFormat(Qt.TextFormat.RichText)
        figures.addWidget(self.status)
        figures.addStretch(1)
        grid.addLayout(figures, 1, 0)
        self.cost = QLabel()
        self.cost.setAccessibleName("Cost")
        self.cost.setWordWrap(True)
        self.cost.setTextFormat(Qt.TextFormat.PlainText)
        self.cost.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        small = self.cost.font()
        small.setPointSizeF(small.pointSizeF() * 0.92)
        self.cost.setFont(small)
        grid.addWidget(self.cost, 2, 0, 1, 2)
        grid.setColumnStretch(0, 1)

    def show_entry(self, entry: RemedyEntry, unit: Unit) -> None:
        self.entry = entry
        self.title.setText(entry.title)
        self.total.setText(memory(entry.total_bytes, unit))
        self.total.setToolTip("New serving total" if entry.serving else "New peak + overhead")
        self.status.setText(_verdict_html(entry.verdict))
        self.cost.setText(entry.cost)
        self.apply.setAccessibleName(f"Apply: {entry.title}")
        self.apply.setToolTip(f"Change the plan: {entry.title} (one undoable step)")
        self.setAccessibleName(f"{entry.title}: {memory(entry.total_bytes, unit)}, {VERDICT_LABELS[entry.verdict]}")


class RemedyList(QWidget):
    """Rows of remedies, each with an Apply button; row widgets are reused between updates."""

    applyRequested = Signal(object)  # RemedyEntry

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self._pool: list[_RemedyRow] = []
        self._count = 0
        self.unit: Unit = "GB"
        self._entries: tuple[RemedyEntry, ...] = ()

    @property
    def rows(self) -> list[_RemedyRow]:
        return self._pool[: self._count]

    @property
    def entries(self) -> tuple[RemedyEntry, ...]:
        return self._entries

    def show_entries(self, entries: tuple[RemedyEntry, ...], unit: Unit) -> None:
        self._entries = entries
        self.unit = unit
        while len(self._pool) < len(entries):
            row = _RemedyRow(self)
            row.apply.clicked.connect(lambda _checked=False, r=row: self._clicked(r))
            self._layout.addWidget(row)
            self._pool.append(row)
        for row, entry in zip(self._pool, entries, strict=False):
            row.show_entry(entry, unit)
            row.setVisible(True)
        for row in self._pool[len(entries) :]:
            row.setVisible(False)
        self._count = len(entries)
        self.setVisible(bool(entries))

    def set_unit(self, unit: Unit) -> None:
        if unit != self.unit:
            self.show_entries(self._entries, unit)

    def set_applicable(self, on: bool) -> None:
        for row in self._pool:
            row.apply.setEnabled(on)

    def _clicked(self, row: _RemedyRow) -> None:
        if row.entry is not None:
            self.applyRequested.emit(row.entry)


def _wrapping_label(name: str, rich: bool = True) -> QLabel:
    label = QLabel()
    label.setAccessibleName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class DiagnosisPanel(QScrollArea):
    """The "Diagnosis" tab. Connects itself to the controller; call :meth:`set_unit` on unit changes."""

    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Diagnosis")
        self.controller = controller
        self.unit: Unit = "GB"
        self._estimate: Estimate = controller.estimate
        self.diagnosis: Diagnosis | None = None
        self.curve: Curve | None = None
        self.max_micro_batch = 0
        self.max_sequence = 0
        self.symptom: Symptom | None = None
        self._symptom_entries: tuple[RemedyEntry, ...] = ()
        self._stale = True
        self.refresh_count = 0  # diagnoses run; tests read it to check the coalescing

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.refresh)

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

        controller.estimateChanged.connect(self._on_estimate)

    # ---- layout --------------------------------------------------------------------
    def _build_header(self) -> QWidget:
        header = QFrame()
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
        self.figures: dict[str, QLabel] = {}
        for key, label, tip in (
            ("state", "State before activations", "Weights + gradients + optimizer state + overhead"),
            ("total", "Peak + overhead", "The training step's peak plus the framework's overhead"),
            ("eval", "Evaluation pass", "An evaluation forward with the plan's evaluation batch"),
            ("usable", "Usable", "The card's capacity less the headroom kept free"),
        ):
            value = QLabel()
            value.setAccessibleName(label)
            value.setToolTip(tip)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = QLabel(label + ":")
            name.setToolTip(tip)
            form.addRow(name, value)
            self.figures[key] = value
        layout.addLayout(form)
        return box

    def _build_remedies(self) -> QWidget:
        box = QGroupBox("What to change")
        layout = QVBoxLayout(box)
        self.remedy_note = _wrapping_label("Remedies note")
        layout.addWidget(self.remedy_note)
        self.show_symptom_button = QPushButton("Show remedies for this symptom")
        self.show_symptom_button.clicked.connect(self._show_diagnosed_symptom)
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
        self.symptom_picker.addItem("What did you see? Pick a symptom…", None)
        for symptom in SYMPTOMS:
            self.symptom_picker.addItem(symptom.symptom, symptom.failure.value)
            self.symptom_picker.setItemData(
                self.symptom_picker.count() - 1, symptom.symptom, Qt.ItemDataRole.ToolTipRole
            )
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
            ("micro_batch", "Largest micro-batch", "The largest micro-batch that fits the usable memory"),
            ("seq_len", "Longest sequence", "The longest sequence that fits the usable memory"),
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
        layout.addLayout(form)
        self.lesson_note = _wrapping_label("Lesson accounting note")
        self.lesson_note.setText(
            "<i>Lesson accounting: activations are the typed allowance, so memory does not "
            "grow with the micro-batch or the sequence here.</i>"
        )
        layout.addWidget(self.lesson_note)
        picker_row = QHBoxLayout()
        picker_row.addWidget(QLabel("Memory against:"))
        self.axis_picker = QComboBox()
        self.axis_picker.setAccessibleName("Curve axis")
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
        """True while the shown diagnosis is for an older plan than the controller's."""
        return self._stale

    def set_unit(self, unit: Unit) -> None:
        if unit == self.unit:
            return
        self.unit = unit
        self.curve_view.set_unit(unit)
        if self.diagnosis is not None:
            self._show_diagnosis()
        self._show_symptom()

    def refresh(self) -> None:
        """Diagnose the controller's current plan now (the timer and showEvent call this)."""
        self._timer.stop()
        est = self._estimate
        plan = est.plan
        self.refresh_count += 1
        self.diagnosis = diagnosis.diagnose(plan)
        curve = self._update_curve()
        # The curve's crossing is the solver's answer for its axis: solve only the other one.
        if curve.axis == "micro_batch":
            self.max_micro_batch, self.max_sequence = curve.crossing, diagnosis.max_sequence(plan)
        else:
            self.max_micro_batch, self.max_sequence = diagnosis.max_micro_batch(plan), curve.crossing
        self._update_symptom()
        self._stale = False
        self._show_diagnosis()
        self._show_symptom()
        self._set_applicable(True)

    def apply(self, entry: RemedyEntry) -> None:
        """Make the remedy's plan current: one undoable step through the controller."""
        if self._stale:
            return  # the row belongs to an older plan; it is about to be redrawn
        self.controller.set_plan(entry.plan, text=f"Apply remedy: {entry.title}")

    # ---- reacting ------------------------------------------------------------------
    def _on_estimate(self, estimate: Estimate) -> None:
        if estimate is self._estimate and not self._stale:
            return
        self._estimate = estimate
        if not self._stale:
            self._stale = True
            self._set_applicable(False)
        if self.isVisible():
            self._timer.start()  # restarts: a burst of edits gives one diagnosis

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def _set_applicable(self, on: bool) -> None:
        for remedies in (self.remedy_list, self.combination_list, self.symptom_list):
            remedies.set_applicable(on)

    def _axis_picked(self, _index: int) -> None:
        if self.diagnosis is None or self._stale:
            return
        self._update_curve()

    def _symptom_picked(self, _index: int) -> None:
        if self.diagnosis is None or self._stale:
            return
        self._update_symptom()
        self._show_symptom()

    def _show_diagnosed_symptom(self) -> None:
        if self.diagnosis is not None:
            index = self.symptom_picker.findData(self.diagnosis.failure.value)
            if index >= 0:
                self.symptom_picker.setCurrentIndex(index)

    # ---- computing (all figures from core.diagnosis) ---------------------------------
    def _update_curve(self) -> Curve:
        plan = self._estimate.plan
        curve = self.curve = diagnosis.memory_curve(plan, self.axis)
        self.curve_view.show_curve(curve, getattr(plan.workload, self.axis))
        return curve

    def _update_symptom(self) -> None:
        value = self.symptom_picker.currentData()
        if value is None:
            self.symptom = None
            self._symptom_entries = ()
            return
        self.symptom, remedies = diagnosis.remedies_for_symptom(self._estimate.plan, Failure(value))
        self._symptom_entries = tuple(RemedyEntry.from_remedy(r) for r in remedies)

    # ---- showing -------------------------------------------------------------------
    def _show_diagnosis(self) -> None:
        d = self.diagnosis
        if d is None:
            return
        u = self.unit
        est = d.estimate
        symbol, colour = VERDICT_STYLE[d.verdict]
        badge = f"{symbol}  {VERDICT_LABELS[d.verdict]}"
        if badge != self.badge.text():
            self.badge.setText(badge)
            text_colour = "#000000" if d.verdict is Verdict.TIGHT else "#FFFFFF"
            self.badge.setStyleSheet(
                f"QLabel {{ background: {colour}; color: {text_colour}; border-radius: 6px;"
                " padding: 6px 12px; font-size: 13pt; font-weight: 600; }"
            )
        if d.margin_bytes >= 0:
            margin = f"<b>{memory(d.margin_bytes, u)}</b> to spare"
        else:
            margin = f"<b>{memory(-d.margin_bytes, u)}</b> over the usable memory"
        dominant = BUCKET_LABELS[d.dominant]
        card = escape(est.gpu.name)
        self.headline.setText(
            f"{margin} ({memory(est.total_bytes, u)} of {memory(d.usable_bytes, u)} usable on {card})<br>"
            f"Largest bucket: <b>{dominant}</b>, {memory(est.bucket(d.dominant).bytes, u)}"
        )

        # Tight runs may start: they fail later, on fragmentation, if at all.
        fails = "Likely to fail" if d.verdict is Verdict.TIGHT else "Fails"
        if d.symptom is None:
            self.failure.setText("<b>Nothing fails</b>: the training step, evaluation and serving all fit.")
        else:
            self.failure.setText(
                f"{fails} <b>{FAILURE_PHASES[d.failure]}</b>. What you would see:<br>“{escape(d.symptom.symptom)}”"
            )
        self.explanation.setText(d.explanation)
        self.figures["state"].setText(memory(d.state_bytes, u))
        self.figures["total"].setText(memory(est.total_bytes, u))
        self.figures["eval"].setText(memory(d.eval_bytes, u))
        self.figures["usable"].setText(f"{memory(d.usable_bytes, u)} of {memory(est.capacity_bytes, u)}")

        self._show_remedies(d)
        self._show_limits(d)

    def _show_remedies(self, d: Diagnosis) -> None:
        u = self.unit
        entries = tuple(RemedyEntry.from_remedy(r) for r in d.remedies)
        combination = (RemedyEntry.from_combination(d.combination, d.estimate),) if d.combination else ()
        self.remedy_list.show_entries(entries, u)
        self.combination_list.show_entries(combination, u)
        fitting = sum(1 for r in d.remedies if r.fits)
        show_symptom = False
        if d.verdict is Verdict.FITS:
            if d.failure in (Failure.EVALUATION, Failure.SERVING) and d.symptom is not None:
                note = f"The training step fits, but it would fail {FAILURE_PHASES[d.failure]}."
                show_symptom = True
            else:
                note = "The plan fits: nothing needs to change."
        elif not entries:
            note = "No single change the planner knows lowers this plan's memory."
        elif combination:
            note = "<b>No single change fits.</b> Together, these do:"
        elif fitting:
            note = f"{fitting} of {len(entries)} changes fit on their own; cheapest first."
        else:
            note = "<b>No change fits, alone or combined (up to three).</b> The closest are listed."
        self.remedy_note.setText(note)
        self.show_symptom_button.setVisible(show_symptom)

    def _show_limits(self, d: Diagnosis) -> None:
        plan = d.estimate.plan
        wl = plan.workload
        inf = d.estimate.inference
        serving = plan.inference
        self.limits["micro_batch"].setText(
            f"<b>{self.max_micro_batch:,}</b> (now {wl.micro_batch:,})"
            if self.max_micro_batch
            else f"none fits, not even 1 (now {wl.micro_batch:,})"
        )
        self.limits["seq_len"].setText(
            f"<b>{self.max_sequence:,}</b> tokens (now {wl.seq_len:,})"
            if self.max_sequence
            else f"none fits, not even 1 token (now {wl.seq_len:,})"
        )
        self.limits["concurrent"].setText(
            f"<b>{inf.max_concurrent:,}</b> of {serving.context:,} tokens (now {serving.concurrent:,})"
            if inf.max_concurrent
            else "none: the weights alone do not fit"
        )
        self.limits["context"].setText(
            f"<b>{inf.max_context:,}</b> tokens at {serving.concurrent:,} request(s) (now {serving.context:,})"
            if inf.max_context
            else f"none at {serving.concurrent:,} request(s)"
        )
        self.lesson_note.setVisible(plan.accounting is Accounting.LESSON)

    def _show_symptom(self) -> None:
        symptom = self.symptom
        if symptom is None:
            self.symptom_cause.setVisible(False)
            self.symptom_list.show_entries((), self.unit)
            return
        entries = self._symptom_entries
        text = f"Likely cause: <b>{escape(symptom.cause)}</b>.<br>Usual remedies: {escape(symptom.remedies)}."
        if not entries:
            text += "<br><i>None of the changes the planner knows lowers this plan's memory for this symptom.</i>"
        self.symptom_cause.setText(text)
        self.symptom_cause.setVisible(True)
        self.symptom_list.show_entries(entries, self.unit)

    def select_symptom(self, failure: Failure) -> None:
        """Pick a symptom as the user would (tests, and the "Show remedies" button)."""
        index = self.symptom_picker.findData(failure.value)
        with QSignalBlocker(self.symptom_picker):
            self.symptom_picker.setCurrentIndex(index)
        self._symptom_picked(index)

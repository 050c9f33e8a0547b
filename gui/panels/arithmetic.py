"""“Show the arithmetic”: the selected bucket's terms with the numbers substituted."""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QComboBox, QLabel, QTextBrowser, QVBoxLayout, QWidget

from core.estimate import Estimate
from core.plan import training_refusal
from core.verdict import Mode
from gui.format import Unit, memory
from gui.plaintext import html as escape  # the one escape for text shown in rich labels
from gui.theme import fixed_font

INFERENCE = "inference"


class ArithmeticPanel(QWidget):
    """Emits ``bucketSelected(key)`` when the user picks a bucket from the list."""

    bucketSelected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Arithmetic")
        self.unit: Unit = "GB"
        self._estimate: Estimate | None = None
        self.mode = Mode.TRAINING
        self.selected = "weights"
        self._terms_html = ""  # what the browser shows: setHtml re-lays out and repaints it all
        self._entries: list[tuple[str, str]] = []  # (text, key) of the picker's items
        layout = QVBoxLayout(self)
        self.summary = QLabel()
        self.summary.setAccessibleName("Summary formula")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mono = fixed_font()
        self.summary.setFont(mono)
        self.summary.setAutoFillBackground(True)  # opaque: a new sum repaints the label alone
        self.summary_title = QLabel("<b>The sum at the peak</b>")
        layout.addWidget(self.summary_title)
        layout.addWidget(self.summary)
        self.picker = QComboBox()
        self.picker.setAccessibleName("Bucket")
        self.picker.setToolTip("The bucket whose arithmetic is shown; clicking a bar segment picks it too.")
        self.picker.currentIndexChanged.connect(self._picked)
        layout.addWidget(self.picker)
        self.terms = QTextBrowser()
        self.terms.setAccessibleName("Arithmetic of the selected bucket")
        self.terms.setOpenLinks(False)
        layout.addWidget(self.terms, 1)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setAccessibleName("Notes")
        italic = QFont(self.notes.font())
        italic.setItalic(True)
        self.notes.setFont(italic)
        layout.addWidget(self.notes)

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def set_mode(self, mode: Mode) -> None:
        """Training shows the step's sum and buckets; Inference the serving figure's."""
        if mode is not self.mode:
            self.mode = mode
            self.summary_title.setText(
                "<b>The sum judged</b>" if mode is Mode.INFERENCE else "<b>The sum at the peak</b>"
            )
            if self._estimate is not None:
                self.show_estimate(self._estimate)

    def select(self, key: str) -> None:
        if self.mode is Mode.INFERENCE and not key.startswith(SERVING):
            key = SERVING + ("kv_cache" if key == INFERENCE else key)  # a chart segment, or the default
        self.selected = key
        index = self.picker.findData(key)
        if index >= 0:
            with QSignalBlocker(self.picker):
                self.picker.setCurrentIndex(index)
        self._show_terms()

    def _picked(self, index: int) -> None:
        key = str(self.picker.itemData(index) or "")
        if key:
            self.selected = key
            self._show_terms()
            self.bucketSelected.emit(key)

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        serving = self.mode is Mode.INFERENCE
        untrained = not serving and training_refusal(estimate.plan) is not None
        summary = estimate.inference.summary_in(self.unit) if serving else estimate.summary_in(self.unit)
        self.summary.setText(UNTRAINED_SUMMARY if untrained else summary)
        if serving:
            buckets = estimate.inference.buckets
            entries = [(f"{b.label} — {memory(b.bytes, self.unit)}", SERVING + b.key.value) for b in buckets]
        elif untrained:
            entries = []
        else:
            entries = [(f"{b.label} — {memory(b.bytes, self.unit)}", b.key.value) for b in estimate.buckets]
        with QSignalBlocker(self.picker):
            if [k for _, k in self._entries] != [k for _, k in entries]:
                self.picker.clear()
                for text, key in entries:
                    self.picker.addItem(text, key)
            else:
                for index, ((text, _key), (old_text, _)) in enumerate(zip(entries, self._entries, strict=True)):
                    if text != old_text:
                        self.picker.setItemText(index, text)
            self._entries = entries
            index = self.picker.findData(self.selected)
            if max(index, 0) != self.picker.currentIndex():
                self.picker.setCurrentIndex(max(index, 0))
            self.selected = str(self.picker.currentData())
        notes = () if untrained else estimate.notes
        self.notes.setText("\n".join(notes))
        if self.notes.isHidden() == bool(notes):
            self.notes.setVisible(bool(notes))
        self._show_terms()

    def _show_terms(self) -> None:
        estimate = self._estimate
        if estimate is None:
            return
        u = self.unit
        parts: list[str] = []
        if not self._entries:  # a training step that is not estimated (core.plan.training_refusal): no terms
            self._set_terms("")
            return
        if self.selected.startswith(SERVING):
            inf = estimate.inference
            key = self.selected.removeprefix(SERVING)
            bucket = next((b for b in inf.buckets if b.key.value == key), None)
            if bucket is not None:
                parts.append(f"<h3>{escape(bucket.label)} — {memory(bucket.bytes, u)}</h3>")
                parts += [_term(t.label, t.formula, memory(t.bytes, u)) for t in bucket.terms]
            # How the engine lays the card out, and the roofline of its speed (core.serving).
            parts.append(f"<p><code>{escape(inf.formula)}</code></p>")
            parts.append(f"<p><code>{escape(inf.speed.formula)}</code></p>")
        else:
            bucket = next((b for b in estimate.buckets if b.key.value == self.selected), None)
            if bucket is None:
                self._set_terms("")
                return
            parts.append(f"<h3>{escape(bucket.label)} — {memory(bucket.bytes, u)}</h3>")
            if not bucket.terms:
                parts.append("<p><i>Nothing in this bucket for this plan.</i></p>")
            parts += [_term(t.label, t.formula, memory(t.bytes, u)) for t in bucket.terms]
            if len(bucket.terms) > 1:
                total_line = bucket.total_line(u)
                parts.append(f"<p style='margin-top:8px'><code><b>{escape(total_line)}</b></code></p>")
            if bucket.note:
                parts.append(f"<p><i>{escape(bucket.note)}</i></p>")
        self._set_terms("".join(parts))

    def _set_terms(self, html: str) -> None:
        if html != self._terms_html:
            self._terms_html = html
            self.terms.setHtml(html)


SERVING = "serving."  # the picker's keys for the serving figure's buckets
# The training sum of a plan whose step is not estimated (core.plan.training_refusal): none, and where its figures are.
UNTRAINED_SUMMARY = "Training is not estimated for this plan: switch to Inference for its serving figures."


def _term(label: str, formula: str, size: str) -> str:
    return f"<p style='margin-bottom:6px'><b>{escape(label)}</b> — {size}<br><code>{escape(formula)}</code></p>"

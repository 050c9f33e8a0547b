"""Tools → Fewest GPUs that fit: the fewest of the plan's card on which some split fits, with
the hours and cost for the plan's token budget and the arithmetic that found them.

The answer is :func:`core.advice.fit.fewest_gpus`'s, found in the worker process
(:func:`gui.tools.searches.find_fewest`, with Cancel); this panel only shows it. "Apply"
makes the found count and split the plan's (one undoable edit). While hidden it does no
work; while shown, bursts of edits are coalesced into one search.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from core.format import counted
from gui.theme import fixed_font
from gui.tools.context import ToolContext
from gui.tools.live import SearchPanel
from gui.tools.searches import FewestAnswer, FewestRequest, find_fewest

REFRESH_MS = 150


APPLY_TIP = "Make this count and split the plan's (Edit → Undo takes it back)"
APPLY_WAITING = "Waiting for the answer for this plan"


class FewestGpusPanel(SearchPanel):
    applied = Signal(int)  # the GPU count made the plan's

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        texts = ("Apply uses this count and split (Edit → Undo takes it back).", "Trying GPU counts…", "")
        super().__init__(context, find_fewest, REFRESH_MS, texts, parent)
        self.setObjectName("fewestGpusPanel")
        self.setAccessibleName("Fewest GPUs that fit")
        self.answer: FewestAnswer | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.summary = QLabel()
        self.summary.setObjectName("fewestSummary")
        self.summary.setAccessibleName("Fewest GPUs: the answer")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # model names come from files
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bold = self.summary.font()
        bold.setBold(True)
        self.summary.setFont(bold)
        layout.addWidget(self.summary)
        self.model_parallel = QCheckBox("Try tensor and pipeline parallel too")
        self.model_parallel.setChecked(True)
        self.model_parallel.setToolTip(
            "Off: only the plan's strategy and FSDP2 are tried. On: also FSDP2 + TP 2/4/8 within a node, "
            "then + pipeline parallel across nodes."
        )
        self.model_parallel.toggled.connect(self.refresh)
        layout.addWidget(self.model_parallel)
        self.arithmetic = QPlainTextEdit()
        self.arithmetic.setObjectName("fewestArithmetic")
        self.arithmetic.setAccessibleName("Fewest GPUs: the arithmetic")
        self.arithmetic.setReadOnly(True)
        self.arithmetic.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.arithmetic.setFont(fixed_font())
        layout.addWidget(self.arithmetic, 1)
        layout.addWidget(self.progress)
        buttons = QHBoxLayout()
        self.apply_button = QPushButton("&Apply")
        self.apply_button.setObjectName("fewestApply")
        self.apply_button.setAccessibleName("Use this GPU count and split")
        self._set_apply(False, APPLY_WAITING)
        self.apply_button.clicked.connect(self.apply)
        buttons.addWidget(self.apply_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)

    def request(self) -> FewestRequest:
        return FewestRequest(self.controller.plan, self.model_parallel.isChecked())

    def refresh(self) -> None:
        self._set_apply(False, APPLY_WAITING)  # until the answer for this plan is in
        super().refresh()
        if not self.searching and self.answer is not None:
            self.show_answer(self.answer)  # the answer shown is for this plan already

    def show_answer(self, answer: FewestAnswer) -> None:
        self.summary.setText(answer.summary)
        self.arithmetic.setPlainText("\n".join(answer.arithmetic))
        found = answer.found_plan
        if found is None:
            self._set_apply(False, "No GPU count fits: there is nothing to apply")
        elif found == self.controller.plan:
            self._set_apply(False, "The plan already uses this count and split")
        else:
            self._set_apply(True, APPLY_TIP)

    def _set_apply(self, enabled: bool, why: str) -> None:
        """Apply on or off, its tooltip saying what it does or why it is off."""
        self.apply_button.setEnabled(enabled)
        self.apply_button.setToolTip(why)

    def apply(self) -> None:
        answer = self.answer
        if answer is None or answer.found_plan is None or answer.request.plan != self.controller.plan:
            return
        text = f"Use {counted(answer.found_count, 'GPU')} ({answer.found_layout})"
        error = self.controller.set_plan(answer.found_plan, text=text)
        if error is None:
            self.applied.emit(answer.found_count)

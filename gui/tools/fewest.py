"""Tools → Fewest GPUs that fit: the fewest of the plan's card on which some split fits, with
the hours and cost for the plan's token budget and the arithmetic that found them.

The answer is :func:`core.advice.fit.fewest_gpus`'s; this panel only shows it. "Apply" makes the
found count and split the plan's (one undoable edit). While hidden it does no work; while
shown, bursts of edits are coalesced into one search.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from core.advice.fit import FewestGpus, fewest_gpus
from gui.tools.context import ToolContext
from gui.tools.fitcards import LivePlanPanel

REFRESH_MS = 150


class FewestGpusPanel(LivePlanPanel):
    applied = Signal(int)  # the GPU count made the plan's

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        super().__init__(context, REFRESH_MS, parent)
        self.setObjectName("fewestGpusPanel")
        self.setAccessibleName("Fewest GPUs that fit")
        self.answer: FewestGpus | None = None
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
        self.arithmetic.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.arithmetic, 1)
        buttons = QHBoxLayout()
        self.apply_button = QPushButton("&Apply")
        self.apply_button.setObjectName("fewestApply")
        self.apply_button.setAccessibleName("Use this GPU count and split")
        self.apply_button.setToolTip("Make this count and split the plan's (Edit → Undo takes it back)")
        self.apply_button.clicked.connect(self.apply)
        buttons.addWidget(self.apply_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)

    def refresh(self) -> None:
        super().refresh()
        plan = self.controller.plan
        self.answer = fewest_gpus(plan, model_parallel=self.model_parallel.isChecked())
        found = self.answer.found
        self.summary.setText(self.answer.summary())
        self.arithmetic.setPlainText("\n".join(self.answer.arithmetic()))
        self.apply_button.setEnabled(found is not None and found.plan != plan)

    def apply(self) -> None:
        found = self.answer.found if self.answer is not None else None
        if found is None:
            return
        error = self.controller.set_plan(found.plan, text=f"Use {found.count} GPUs ({found.layout})")
        if error is None:
            self.applied.emit(found.count)

"""File → Export launch config…: the plan as the config or command of the tool that will run it.

A dialog that follows the current plan: the tool (TRL, accelerate, DeepSpeed, axolotl,
LLaMA-Factory, torchtune, torchtitan, torchrun, accelerate launch, vllm, llama-server, SGLang,
Ollama; in Inference mode the plan's engine's first), the model the file names (the catalogue's
Hub id, a model's read from the cache, or what the user types), the text as
:func:`core.files.launch.export` writes it, and the plan fields the tool cannot express, each
with why. Save writes through the one atomic writer; Copy puts the text
on the clipboard. Exporting one plan takes milliseconds: it runs at each change, here.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Final

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.estimate import Estimate
from core.files.fileio import write_file
from core.files.launch import DEFAULT_COMMAND, SERVING_TARGETS, TARGET_LABELS, Export, Target, export, serving_target
from core.files.model_source import default_model_ref
from core.verdict import Mode
from gui import dialogs, plaintext, saving
from gui.theme import fixed_font
from gui.tools.context import ToolContext

LAUNCHERS: Final = frozenset({Target.TORCHRUN, Target.ACCELERATE_LAUNCH})
MAX_REF_CHARS: Final = 500  # as the command line's --model-ref
MAX_COMMAND_CHARS: Final = 4000
SERVING_NOTE: Final = " (a server reads the plan's serving settings)"


class LaunchExportDialog(QDialog):
    """The export of the current plan, redone at each change of the plan or of the choices."""

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        super().__init__(parent if parent is not None else context.parent)
        self.context = context
        self.exported: Export | None = None
        self.setObjectName("launchExportDialog")
        self.setWindowTitle("Export launch config")
        self.resize(760, 620)
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.target = QComboBox()
        self.target.setObjectName("launchTarget")
        self.target.setAccessibleName("Tool")
        for target in Target:
            self.target.addItem(TARGET_LABELS[target], target.value)
        # In Inference mode, the server of the plan's engine (SGLang, Ollama or llama-server, vLLM).
        serving = context.display.mode is Mode.INFERENCE
        first = serving_target(context.controller.plan) if serving else Target.TRL
        self.target.setCurrentIndex(self.target.findData(first.value))
        form.addRow("Tool:", self.target)
        self.model_ref = QLineEdit()
        self.model_ref.setObjectName("launchModelRef")
        self.model_ref.setAccessibleName("Model the file names")
        self.model_ref.setMaxLength(MAX_REF_CHARS)
        self.model_ref.setPlaceholderText("the catalogue's Hub id")
        self.model_ref.setToolTip("The Hub id or the folder the file names for the model; empty: the catalogue's")
        self.model_ref.setText(default_model_ref(context.controller.plan) or "")
        form.addRow("Model:", self.model_ref)
        self.command = QLineEdit(shlex.join(DEFAULT_COMMAND))
        self.command.setObjectName("launchCommand")
        self.command.setAccessibleName("Script the launcher starts")
        self.command.setMaxLength(MAX_COMMAND_CHARS)
        self.command.setToolTip("What torchrun or accelerate launch starts: the script and its arguments")
        form.addRow("Script:", self.command)
        self._form = form
        layout.addLayout(form)
        self.preview = QPlainTextEdit()
        self.preview.setObjectName("launchPreview")
        self.preview.setAccessibleName("Launch config")
        self.preview.setReadOnly(True)
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.preview.setFont(fixed_font())
        layout.addWidget(self.preview, 3)
        self.unexpressed_title = plaintext.plain_label(QLabel())
        layout.addWidget(self.unexpressed_title)
        layout.addWidget(self._build_table(), 2)
        self.status = plaintext.plain_label(QLabel())  # saved paths come from the user
        self.status.setObjectName("launchStatus")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.save_button = QPushButton("Save…")
        self.save_button.setObjectName("launchSave")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setObjectName("launchCopy")
        buttons.addButton(self.save_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        self.save_button.clicked.connect(self.save)
        self.copy_button.clicked.connect(self.copy)
        layout.addWidget(buttons)
        self.target.currentIndexChanged.connect(self.refresh)
        self.model_ref.textChanged.connect(self.refresh)
        self.command.textChanged.connect(self.refresh)
        context.controller.estimateChanged.connect(self._plan_changed)
        self.refresh()

    def _build_table(self) -> QTableWidget:
        self.table = QTableWidget(0, 2)
        self.table.setObjectName("launchUnexpressed")
        self.table.setAccessibleName("What the tool cannot express")
        self.table.setHorizontalHeaderLabels(["Plan field", "Why the tool cannot say it"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        return self.table

    @property
    def chosen(self) -> Target:
        return Target(self.target.currentData())

    def _command(self) -> tuple[str, ...] | None:
        try:
            words = tuple(shlex.split(self.command.text()))
        except ValueError as error:
            self.status.setText(f"Script: {error}")
            return None
        return words or DEFAULT_COMMAND

    def _plan_changed(self, _estimate: Estimate) -> None:
        if self.isVisible():
            self.refresh()

    def refresh(self) -> None:
        target = self.chosen
        self._form.setRowVisible(self.command, target in LAUNCHERS)
        command = self._command()
        if command is None:
            return
        self.status.clear()
        ref = self.model_ref.text().strip() or None
        result = self.exported = export(self.context.controller.plan, target, model_ref=ref, command=command)
        self.preview.setPlainText(result.text)
        count = len(result.unexpressed)
        serving_note = SERVING_NOTE if target in SERVING_TARGETS else ""
        self.unexpressed_title.setText(
            f"The {result.label} cannot express {count} of the plan's fields{serving_note}:"
            if count
            else f"The {result.label} expresses every field of the plan it reads{serving_note}."
        )
        self.table.setRowCount(count)
        for row, item in enumerate(result.unexpressed):
            self.table.setItem(row, 0, QTableWidgetItem(item.field))
            self.table.setItem(row, 1, QTableWidgetItem(item.why))
        self.table.resizeRowsToContents()
        self.table.setVisible(bool(count))

    def _suggested(self, result: Export) -> str:
        path = self.context.document.path
        stem = Path(path).name.removesuffix(".json").removesuffix(".vramplan") if path else "plan"
        return os.path.join(self.context.document.folder(), f"{stem}-{result.target.value}{result.suffix}")

    def save(self) -> bool:
        result = self.exported
        if result is None:
            return False
        name_filter = f"{result.label} (*{result.suffix});;All files (*)"
        path = dialogs.save_file(self, "Save launch config", name_filter, self._suggested(result))
        if not path:
            return False
        if not Path(path).suffix:
            path += result.suffix
        text = result.text
        if not saving.write_confirmed(
            self, "Cannot save the launch config", path, lambda force: write_file(path, text, force=force)
        ):
            return False
        self.status.setText(f"Saved {path}")
        self.context.document.message.emit(f"Saved {path}")
        return True

    def copy(self) -> str:
        text = self.exported.text if self.exported is not None else ""
        QGuiApplication.clipboard().setText(text)
        self.status.setText("Copied to the clipboard.")
        return text


def show_launch_export(context: ToolContext, dialog: LaunchExportDialog | None = None) -> LaunchExportDialog:
    """The dialog (made once, then shown again), following the current plan."""
    if dialog is None:
        dialog = LaunchExportDialog(context)
    dialog.refresh()
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog

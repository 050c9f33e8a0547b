"""File → Open training config…: what the file says, where each value came from, then apply.

The dialog lists every field read (setting, value, the key it came from), the values noted
but not modelled, and every key not understood; the model is the one the file names
(a local folder or a catalogue match), or the user picks it when the name is not found.
Applying is one undoable step. Everything from the file is shown as plain text.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.catalogue import load_models
from core.errors import PlanError, PlanFileError
from core.files.runconfig import (
    ModelChoice,
    RunConfig,
    choice_from_catalogue,
    plan_from_run,
    read_run_config,
)
from core.plan import Plan
from gui import colours, dialogs, offthread, plaintext
from gui.tools.context import ToolContext
from gui.worker.runner import JobFailed

TRAINING_CONFIG_FILTER = (
    "Training configs (*.json *.yaml *.yml *.toml);;PEFT adapter_config.json (adapter_config.json);;All files (*)"
)
KEEP = "__keep__"
LOCAL = "__local__"


def _plain_label(text: str, *, wrap: bool = True) -> QLabel:
    label = plaintext.plain_label(QLabel(plaintext.escape_controls(text)))
    label.setWordWrap(wrap)
    return label


def _shown(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


class RunConfigDialog(QDialog):
    """Shows an imported config and the model choice; :meth:`plan` is the plan to apply."""

    def __init__(self, run: RunConfig, choice: ModelChoice | None, base: Plan, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run = run
        self.choice = choice
        self.base = base
        self.setObjectName("runConfigDialog")
        self.setWindowTitle(plaintext.window_title(f"Open training config — {Path(run.path).name}"))
        layout = QVBoxLayout(self)
        layout.addWidget(_plain_label(f"{Path(run.path).name}: {run.kind_label}"))

        form = QFormLayout()
        self.model_box = QComboBox()
        self.model_box.setObjectName("configModel")
        self.model_box.setAccessibleName("Model")
        self._fill_models()
        form.addRow("Model", self.model_box)
        self.model_note = _plain_label(self._model_text())
        self.model_note.setObjectName("configModelNote")
        form.addRow("", self.model_note)
        layout.addLayout(form)

        layout.addWidget(_plain_label("Read from the file"))
        self.fields_table = QTableWidget(len(run.fields), 3)
        self.fields_table.setObjectName("configFields")
        self.fields_table.setHorizontalHeaderLabels(["Setting", "Value", "From"])
        self.fields_table.verticalHeader().setVisible(False)
        self.fields_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for row, read in enumerate(run.fields):
            for column, text in enumerate((read.label, _shown(read.value), read.source)):
                item = QTableWidgetItem(plaintext.escape_controls(text))
                item.setToolTip(plaintext.tooltip(text))
                self.fields_table.setItem(row, column, item)
        header = self.fields_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        layout.addWidget(self.fields_table, 3)

        layout.addWidget(_plain_label(f"Noted, not modelled ({len(run.notes)})"))
        self.notes_list = QListWidget()
        self.notes_list.setObjectName("configNotes")
        for note in run.notes:
            suffix = f" = {_shown(note.value)}" if note.value is not None else ""
            self.notes_list.addItem(plaintext.escape_controls(f"{note.source}{suffix}"))
        layout.addWidget(self.notes_list, 1)

        layout.addWidget(_plain_label(f"Not understood ({len(run.unknown)})"))
        self.unknown_list = QListWidget()
        self.unknown_list.setObjectName("configUnknown")
        unknown = [plaintext.escape_controls(u) for u in run.unknown]
        self.unknown_list.addItems(unknown or ["none: every key was understood"])
        layout.addWidget(self.unknown_list, 1)

        self.problem = _plain_label("")
        self.problem.setObjectName("configProblem")
        self.problem.setStyleSheet(f"color: {colours.PROBLEM};")
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Apply to the plan")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        self.buttons = buttons
        layout.addWidget(buttons)
        self.resize(760, 640)

    # ---- model choice -------------------------------------------------------------
    def _fill_models(self) -> None:
        box = self.model_box
        choice = self.choice
        if choice is not None and choice.spec is not None and not choice.model_id:
            box.addItem(plaintext.escape_controls(f"{choice.spec.name} (local folder)"), LOCAL)
        box.addItem(plaintext.escape_controls(f"Keep the plan's model ({self.base.model.name})"), KEEP)
        first = [choice.model_id] if choice is not None and choice.model_id else []
        if choice is not None:
            first += [c for c in choice.candidates if c not in first]
        models = {m.id: m for m in load_models()}
        for model_id in first + [m for m in models if m not in first]:
            box.addItem(models[model_id].name, model_id)
        if choice is not None and choice.spec is not None:
            box.setCurrentIndex(box.findData(LOCAL if not choice.model_id else choice.model_id))
        elif choice is not None and choice.candidates:
            box.setCurrentIndex(box.findData(choice.candidates[0]))
        else:
            box.setCurrentIndex(box.findData(KEEP))

    def _model_text(self) -> str:
        choice = self.choice
        if choice is None:
            return "The file names no model; the plan's model is kept unless you choose one."
        if choice.spec is None:
            return f"{choice.how}. Choose the model it is (the closest names are first)."
        return f"Found: {choice.how}."

    def selected_choice(self) -> ModelChoice | None:
        data = self.model_box.currentData()
        if data == KEEP:
            return None
        if data == LOCAL:
            return self.choice
        return choice_from_catalogue(str(data))

    def plan(self) -> Plan:
        """The plan to apply; raises PlanFileError when a value does not fit the plan."""
        return plan_from_run(self.run, self.base, self.selected_choice())

    def _accept(self) -> None:
        try:
            self.plan()
        except (PlanError, PlanFileError) as error:
            self.problem.setText(str(error))
            return
        self.accept()


def run_dialog(dialog: RunConfigDialog) -> bool:
    """Shown modally; tests replace this to answer without blocking."""
    return dialog.exec() == QDialog.DialogCode.Accepted


def open_training_config(context: ToolContext, path: str | None = None) -> bool:
    """File → Open training config…: read, show, and apply as one undoable edit."""
    parent, controller = context.parent, context.controller
    if path is None:
        path = dialogs.open_file(parent, "Open training config", TRAINING_CONFIG_FILTER, context.document.folder())
    if not path:
        return False
    try:
        read = read_off_the_gui_thread(parent, path)
    except (PlanFileError, PlanError, JobFailed) as error:
        dialogs.error(parent, "Cannot read the training config", str(error))
        return False
    if read is None:
        return False  # cancelled
    run, choice = read
    dialog = RunConfigDialog(run, choice, controller.plan, parent)
    try:
        if not run_dialog(dialog):
            return False
        plan = dialog.plan()
    except (PlanFileError, PlanError) as error:
        dialogs.error(parent, "Cannot use the training config", str(error))
        return False
    finally:
        dialog.deleteLater()
    text = plaintext.menu_text(f"Open training config {Path(path).name}")
    refused = controller.set_plan(plan, key="", text=text)
    if refused is not None:
        dialogs.error(parent, "Cannot use the training config", str(refused))
        return False
    return True


def read_off_the_gui_thread(parent: QWidget, path: str) -> tuple[RunConfig, ModelChoice | None] | None:
    """:func:`read_run_config` in a worker thread while the window keeps painting, with a
    progress dialog and Cancel after 250 ms; None when cancelled.

    Parsing a 1 MB YAML file took 0.5-0.6 s with libyaml and several seconds without it, all
    on the GUI thread (issue 28 item 15). The one pattern is :mod:`gui.offthread`: a file over
    its :data:`~gui.offthread.SMALL_BYTES` is read in the worker process.
    """
    return offthread.read_off_the_gui_thread(
        parent,
        read_run_config,  # looked up now: tests substitute it
        path,
        lane="training-config",
        title="Open training config",
        text=f"Reading {Path(path).name}…",
        name="configProgress",
        # A large JSON config parsed in a thread would hold the interpreter lock (1 MB: 0.1-0.25 s).
        worker=offthread.worker_for([path]) or "thread",
    )

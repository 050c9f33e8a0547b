"""File → Paste launch command…: a vLLM / SGLang / llama.cpp / Ollama command read into the serving plan.

The dialog reads the text as it is typed or pasted (:func:`core.files.launch.serve_command.read_command`, no model
lookup: fast) and lists what each flag sets, the flags ignored (no effect on memory or speed), the flags the plan
cannot express and the words not understood. Apply builds the plan on the current one (its card and the rest) with the
command's model, as one undoable step, switches the window to Inference, and says once more what was not used.
Everything from the text is shown as plain text. *Load YAML…* reads a vLLM ``--config`` file: the command's
``--config`` stands for it (with no command, the file alone is read as ``vllm serve --config FILE``).
"""

from __future__ import annotations

import os
import shlex

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.catalogue import load_models
from core.errors import PlanError, PlanFileError
from core.files.fileio import read_regular_file
from core.files.launch.serve_command import (
    CONFIG_SUFFIXES,
    MAX_COMMAND_CHARS,
    CommandPlan,
    CommandRead,
    ModelNotFound,
    plan_from_command,
    read_command,
)
from core.files.runconfig import ModelChoice, choice_from_catalogue
from core.files.runconfig.reading import MAX_CONFIG_BYTES
from core.plan import Plan
from core.verdict import Mode
from gui import colours, dialogs, plaintext
from gui.tools.context import ToolContext

AS_NAMED = "__command__"  # the model combo's first entry: the model the command names
PLACEHOLDER = (
    "vllm serve Qwen/Qwen3-8B --max-model-len 16384 --gpu-memory-utilization 0.9 --port 8000\n"
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2 --context-length 32768\n"
    "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 16384 -np 2 -ngl 99 -fa on\n"
    "OLLAMA_FLASH_ATTENTION=1 OLLAMA_NUM_PARALLEL=2 ollama run qwen3:8b"
)


def summary(read: CommandRead) -> str:
    """What the command set and what it did not, one line an entry: the dialog's and the message's text."""
    lines = [f"{read.engine_label} · model {read.model_ref or '(none named)'}"]
    lines += [read.stops] if read.stops else []
    lines += [f"  {n.words}  →  {n.why}" for n in read.read]
    lines.append(f"Ignored, no effect on memory or speed ({len(read.ignored)})")
    lines += [f"  {n.ignored_line}" for n in read.ignored]
    lines.append(f"Not expressed in the plan ({len(read.unexpressed)})")
    lines += [f"  {n.words} — {n.why}" for n in read.unexpressed]
    lines.append(f"Not understood ({len(read.unknown)})")
    lines += [f"  {u}" for u in read.unknown]
    lines += [f"Note: {note}" for note in read.notes]
    return "\n".join(plaintext.escape_controls(line) for line in lines)


class CommandEditor(QPlainTextEdit):
    """The text box; a paste or drop longer than any launch command the reader takes is refused whole, the box left
    as it was: QPlainTextEdit lays a 10 MB line out for seconds on the GUI thread (7.2 s measured, 2026-12-07)."""

    refused = Signal(str)

    def insertFromMimeData(self, source: QMimeData) -> None:  # Qt's name
        size = len(source.text()) if source.hasText() else 0
        if size > MAX_COMMAND_CHARS:
            self.refused.emit(
                f"The pasted text is {size:,} characters: a launch command is at most {MAX_COMMAND_CHARS:,}; "
                "not pasted, the box keeps its text"
            )
            return
        super().insertFromMimeData(source)


class PasteCommandDialog(QDialog):
    """A text box for the command and, below it, what was read of it; :meth:`result_plan` is the plan to apply."""

    def __init__(self, base: Plan, parent: QWidget | None = None, text: str = "") -> None:
        super().__init__(parent)
        self.base = base
        self.read: CommandRead | None = None
        self.built: CommandPlan | None = None
        self._named = ""  # the model the text named when last read
        self.config_name = ""  # a vLLM --config YAML loaded: its file name and bytes
        self.config_bytes = b""
        self.setObjectName("pasteCommandDialog")
        self.setWindowTitle("Paste launch command")
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Paste a vllm serve, vLLM api_server, SGLang launch_server / sglang serve, llama-server / llama-cli "
            "or ollama serve / run command (a docker run around it, variables, env, nohup or sudo in front, "
            "backslash continuations and an Ollama Modelfile are fine). Load YAML… reads a vLLM or SGLang --config "
            "file. The card and what the command does not set stay the plan's."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.editor = CommandEditor()
        self.editor.setObjectName("launchCommandText")
        self.editor.setAccessibleName("Launch command")
        self.editor.setPlaceholderText(PLACEHOLDER)
        self.editor.setTabChangesFocus(True)
        layout.addWidget(self.editor, 2)
        layout.addWidget(QLabel("Read from the command"))
        self.found = QPlainTextEdit()
        self.found.setObjectName("launchCommandRead")
        self.found.setAccessibleName("Read from the command")
        self.found.setReadOnly(True)
        layout.addWidget(self.found, 3)
        form = QFormLayout()
        self.model_box = QComboBox()
        self.model_box.setObjectName("launchCommandModel")
        self.model_box.setAccessibleName("Model")
        self._fill_models(())
        form.addRow("Model", self.model_box)
        self.yaml_button = QPushButton("Load YAML…")
        self.yaml_button.setObjectName("launchCommandYaml")
        self.yaml_button.setToolTip("A vLLM or SGLang --config file: the command's --config is read from it")
        self.yaml_button.clicked.connect(self._choose_yaml)
        self.yaml_label = plaintext.plain_label(QLabel("no --config file loaded"))
        self.yaml_label.setObjectName("launchCommandYamlName")
        yaml_row = QHBoxLayout()
        yaml_row.addWidget(self.yaml_button)
        yaml_row.addWidget(self.yaml_label, 1)
        form.addRow("--config YAML", yaml_row)
        layout.addLayout(form)
        self.problem = plaintext.plain_label(QLabel(""))
        self.problem.setObjectName("launchCommandProblem")
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(f"color: {colours.PROBLEM};")
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.apply_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.apply_button.setText("Apply to the plan")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.editor.textChanged.connect(self._reread)
        self.editor.refused.connect(self.problem.setText)
        self.resize(720, 520)
        self.editor.setPlainText(text)
        self._reread()

    def _choose_yaml(self) -> None:
        path = choose_yaml(self)
        if path:
            self.load_yaml(path)

    def load_yaml(self, path: str) -> None:
        """Keep a vLLM --config file's bytes (read once, capped) and read the text again with it."""
        try:
            self.config_bytes = read_regular_file(path, MAX_CONFIG_BYTES, "a vLLM config")
        except PlanFileError as error:
            self.problem.setText(error.reason)
            return
        self.config_name = os.path.basename(path)
        self.yaml_label.setText(f"{self.config_name}: read for the command's --config")
        self._reread()

    def _load_config(self, path: str) -> bytes:
        if not self.config_name:
            raise PlanFileError(path, "is not loaded: choose it with Load YAML…")
        return self.config_bytes

    def _text(self) -> str:
        text = self.editor.toPlainText()
        if not text.strip() and self.config_name:  # the YAML alone: vllm serve --config FILE
            return f"vllm serve --config {shlex.quote(self.config_name)}"
        return text

    def _reread(self) -> None:
        text = self._text()
        self.built = None
        if not text.strip():
            self.read = None
            self.found.setPlainText("")
            self.problem.setText("")
            self.apply_button.setEnabled(False)
            return
        try:
            self.read = read_command(
                text,
                load_config=self._load_config if self.config_name else None,
                vllm_version=self.base.inference.vllm_version,  # the plan's line, where the text names none
                sglang_version=self.base.inference.sglang_version,  # the plan's release, likewise
            )
        except PlanFileError as error:
            self.read = None
            self.found.setPlainText("")
            self.problem.setText(error.reason)
            self.apply_button.setEnabled(False)
            return
        self.found.setPlainText(summary(self.read))
        self.problem.setText(self.read.stops)  # the engine would not start as written: said, the plan still built
        self.apply_button.setEnabled(True)
        if self.read.model_ref != self._named:  # another model named: the command's own again
            self._named = self.read.model_ref
            self._fill_models(())

    def _fill_models(self, first: tuple[str, ...]) -> None:
        """The command's own model, then ``first`` (the closest to a name not found), then the catalogue."""
        box = self.model_box
        box.clear()
        box.addItem("As the command names it", AS_NAMED)
        models = {m.id: m.name for m in load_models()}
        for model_id in [*first, *(m for m in models if m not in first)]:
            box.addItem(models[model_id], model_id)
        box.setCurrentIndex(1 if first else 0)

    def selected_model(self) -> ModelChoice | None:
        data = self.model_box.currentData()
        return None if data in (None, AS_NAMED) else choice_from_catalogue(str(data))

    def result_plan(self) -> Plan:
        """The plan to apply; raises PlanFileError when the model is not found or a value does not fit."""
        if self.read is None:
            raise PlanFileError("the launch command", "is empty")
        self.built = plan_from_command(self.read, self.base, model=self.selected_model())
        return self.built.plan

    def _accept(self) -> None:
        if self.read is None:  # nothing read: the problem line already says why; it stays
            return
        try:
            self.result_plan()
        except ModelNotFound as error:  # the closest first in the list, chosen: Apply again takes it
            self._fill_models(error.candidates)
            self.problem.setText(f"{error.reason}. Choose the model it is under Model, then Apply.")
            return
        except (PlanError, PlanFileError) as error:
            self.problem.setText(error.reason if isinstance(error, PlanFileError) else str(error))
            return
        self.accept()


def choose_yaml(parent: QWidget) -> str | None:
    """The file dialog for a vLLM --config YAML; tests replace it."""
    patterns = " ".join(f"*{suffix}" for suffix in CONFIG_SUFFIXES)
    return dialogs.open_file(parent, "Load a vLLM --config file", f"vLLM config ({patterns})")


def run_dialog(dialog: PasteCommandDialog) -> bool:
    """Shown modally; tests replace this to answer without blocking."""
    return dialog.exec() == QDialog.DialogCode.Accepted


def show_summary(parent: QWidget, text: str) -> None:
    """The message after applying; tests replace it."""
    dialogs.info(parent, "Launch command read", text)


def paste_launch_command(context: ToolContext, text: str = "") -> bool:
    """File → Paste launch command…: read, show, apply as one undoable edit, switch to Inference."""
    parent, controller = context.parent, context.controller
    dialog = PasteCommandDialog(controller.plan, parent, text)
    try:
        if not run_dialog(dialog):
            return False
        plan = dialog.built.plan if dialog.built is not None else dialog.result_plan()
        read, built = dialog.read, dialog.built
    except (PlanFileError, PlanError) as error:
        dialogs.error(parent, "Cannot use the launch command", str(error))
        return False
    finally:
        dialog.deleteLater()
    assert read is not None and built is not None
    refused = controller.set_plan(plan, key="", text=f"Paste {read.engine_label} launch command")
    if refused is not None:
        dialogs.error(parent, "Cannot use the launch command", str(refused))
        return False
    context.display.set_mode(Mode.INFERENCE)
    said = "\n".join(built.notes) + "\n\n" + summary(read)
    show_summary(parent, said)
    return True

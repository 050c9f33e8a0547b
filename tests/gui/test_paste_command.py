"""File → Paste launch command…: the text box, what was read of it, applying as one undoable step in Inference mode,
and a refusal in the status bar named by the form's label."""

from __future__ import annotations

from typing import Any

import pytest

from core.dtypes import WeightFormat
from core.plan import Engine
from core.verdict import Mode
from gui.main_window import MainWindow
from gui.tools import paste_command
from gui.tools.paste_command import PasteCommandDialog

# kumaxxp-vllm0130-qwen25-14b-awq-a5000 in benchmarks/realgpu/engine_logs.json, with a flag no vLLM has added.
COMMAND = (
    "vllm serve Qwen/Qwen2.5-14B-Instruct-AWQ --host 127.0.0.1 --dtype half --max-model-len 8192 \\\n"
    "  --quantization awq --frobnicate 3 --enable-expert-parallel"
)


def test_menu_entry_reads_applies_and_undo_restores(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch, fake_dialogs: Any
) -> None:
    shown: list[PasteCommandDialog] = []
    said: list[str] = []

    def accept(dialog: PasteCommandDialog) -> bool:
        shown.append(dialog)
        dialog.editor.setPlainText(COMMAND)  # as if pasted
        dialog._accept()
        return dialog.result() == PasteCommandDialog.DialogCode.Accepted

    monkeypatch.setattr(paste_command, "run_dialog", accept)
    monkeypatch.setattr(paste_command, "show_summary", lambda parent, text: said.append(text))
    before = window.controller.plan
    window.plan_tools.paste_command_action.trigger()
    inf = window.controller.plan.inference
    assert window.controller.plan.model_id == "qwen2.5-14b"
    assert (inf.engine, inf.weight_dtype, inf.context) == (Engine.VLLM, WeightFormat.AWQ_INT4, 8192)
    assert window.display.mode is Mode.INFERENCE
    found = shown[0].found.toPlainText()
    assert "--max-model-len 8192  →  Context = 8,192 tokens" in found  # the Serving form's label and unit
    assert "Not understood (1)\n  --frobnicate 3" in found
    assert "Ignored, no effect on memory or speed (1)\n  --host 127.0.0.1" in found
    assert "--enable-expert-parallel — experts placed whole" in found
    assert "--frobnicate 3" in said[0] and "--host 127.0.0.1" in said[0]
    assert window.serving_form.isVisibleTo(window)  # the Serving form, filled in
    window.controller.undo_stack.undo()
    assert window.controller.plan == before


def test_dialog_says_why_it_cannot_apply(window: MainWindow, qtbot: Any) -> None:
    dialog = PasteCommandDialog(window.controller.plan, window)
    qtbot.addWidget(dialog)
    assert not dialog.apply_button.isEnabled()
    dialog.editor.setPlainText("vllm serve 'Qwen/Qwen3-8B")
    assert "No closing quotation" in dialog.problem.text() and not dialog.apply_button.isEnabled()
    dialog.editor.setPlainText("lm_eval --model vllm")
    assert "not a vLLM, SGLang, llama.cpp or Ollama server launch" in dialog.problem.text()
    dialog.editor.setPlainText("vllm serve someone/Qwen3-8B-Turbo-Instruct")
    assert dialog.apply_button.isEnabled()
    dialog._accept()  # the model is looked up on Apply: the closest names, and the dialog stays open
    assert "closest catalogue models: qwen3-8b" in dialog.problem.text()
    assert dialog.result() != PasteCommandDialog.DialogCode.Accepted
    assert dialog.model_box.currentData() == "qwen3-8b"  # the closest chosen: Apply again takes it
    dialog._accept()
    assert dialog.result() == PasteCommandDialog.DialogCode.Accepted
    assert dialog.built is not None and dialog.built.plan.model_id == "qwen3-8b"
    dialog.editor.setPlainText("vllm serve Qwen/Qwen2.5-3B")  # another model named: the command's own again
    assert dialog.model_box.currentData() == paste_command.AS_NAMED
    dialog.editor.setPlainText("vllm serve Qwen/Qwen3-8B \x1b[31m")
    assert "control characters" in dialog.problem.text()


def test_a_refusal_in_the_status_bar_names_the_forms_label(window: MainWindow) -> None:
    window.set_chart_mode("inference")
    plan = window.controller.plan
    window.controller.update("inference.context", lambda p: p.with_inference(context=0))
    assert window.controller.plan == plan
    text = window.problem.text()
    assert text.startswith("⚠ Context: 0 is not allowed") and "inference.context" not in text

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


# llamacpp23527-qwen36-35b-a3b-150k-ub4096-baseline in benchmarks/realgpu/engine_logs.json, with --port and a word
# llama-server has no flag for.
LLAMA = (
    "llama-server -m Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf -c 150000 -b 4096 -ub 4096 -fa on -ctk q8_0 -ctv q8_0 \\\n"
    "  --kv-unified --cpu-moe -np 1 --port 8080 --frobnicate"
)


def test_a_llama_server_command_read_and_applied(window: MainWindow, qtbot: Any) -> None:
    dialog = PasteCommandDialog(window.controller.plan, window, LLAMA)
    qtbot.addWidget(dialog)
    found = dialog.found.toPlainText()
    assert found.startswith("llama.cpp · model Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf")
    assert "-c 150000 -np 1  →  Context = 150,000 tokens" in found
    assert "-ctk q8_0 -ctv q8_0  →  KV cache type = q8_0" in found
    assert "Ignored, no effect on memory or speed (1)\n  --port 8080" in found
    assert "Not understood (1)\n  --frobnicate" in found
    dialog.resize(760, 620)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.grab().save("/tmp/h80cmd-paste-llama.png")  # looked at by hand (docs/LOCAL_MACHINE.md)
    dialog._accept()
    assert dialog.result() == PasteCommandDialog.DialogCode.Accepted
    plan = dialog.built.plan if dialog.built is not None else None
    assert plan is not None and plan.model_id == "qwen3.6-35b-a3b"
    inf = plan.inference
    assert (inf.engine, inf.context, inf.ubatch, inf.cpu_moe_layers) == (Engine.LLAMACPP, 150_000, 4096, 999)


def _dialog_with_yaml(window: MainWindow, qtbot: Any, monkeypatch: Any, config: Any, yaml: str, command: str) -> Any:
    """The paste dialog with ``command`` typed and ``config`` (holding ``yaml``) what Load YAML… would pick."""
    config.write_text(yaml)
    monkeypatch.setattr(paste_command, "choose_yaml", lambda parent: str(config))
    dialog = PasteCommandDialog(window.controller.plan, window)
    qtbot.addWidget(dialog)
    dialog.editor.setPlainText(command)
    return dialog


def test_load_yaml_reads_a_vllm_config(window: MainWindow, qtbot: Any, tmp_path: Any, monkeypatch: Any) -> None:
    config = tmp_path / "serve.yaml"
    yaml = "model: Qwen/Qwen3-8B\nmax_model_len: 16384\nport: 8001\n"
    dialog = _dialog_with_yaml(
        window, qtbot, monkeypatch, config, yaml, "vllm serve --config serve.yaml --gpu-memory-utilization 0.8"
    )
    assert "--config serve.yaml — options read from a YAML file not given here" in dialog.found.toPlainText()
    dialog.yaml_button.click()
    assert dialog.yaml_label.text() == "serve.yaml: read for the command's --config"
    found = dialog.found.toPlainText()
    assert "--max_model_len 16384  →  Context = 16,384 tokens" in found and "--port 8001" in found
    dialog.editor.setPlainText("")  # the YAML alone
    assert dialog.found.toPlainText().startswith("vLLM · model Qwen/Qwen3-8B") and dialog.apply_button.isEnabled()
    config.write_bytes(b"- not\n- a mapping\n")
    dialog.load_yaml(str(config))
    assert "is a list, not a mapping of settings" in dialog.problem.text()


def test_llama_arg_variables_and_an_sglang_config_in_the_window(
    window: MainWindow, qtbot: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    # The recorded llama-server line (llamacpp23527-*, benchmarks/realgpu/engine_logs.json) with its context and
    # micro-batch given as llama.cpp's variables (common/arg.cpp 145b6280: LLAMA_ARG_CTX_SIZE is -c, LLAMA_ARG_UBATCH
    # -ub) and a port variable the command's --port overrides.
    text = (
        "export LLAMA_ARG_CTX_SIZE=150000\nexport LLAMA_ARG_UBATCH=4096\nexport LLAMA_ARG_PORT=9000\n"
        "llama-server -m Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf -b 4096 -fa on -ctk q8_0 -ctv q8_0 --kv-unified --cpu-moe "
        "-np 1 --port 8080"
    )
    dialog = PasteCommandDialog(window.controller.plan, window, text)
    qtbot.addWidget(dialog)
    found = dialog.found.toPlainText()
    assert "LLAMA_ARG_CTX_SIZE=150000 -np 1  →  Context = 150,000 tokens" in found
    assert (
        "Ignored, no effect on memory or speed (2)\n  LLAMA_ARG_PORT=9000 — the command's --port wins over the "
        "variable (llama.cpp reads it after)\n  --port 8080\n" in found
    )
    dialog.resize(760, 620)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.grab().save("/tmp/h81cmd2-paste-llama-env.png")  # looked at by hand
    dialog._accept()
    plan = dialog.built.plan if dialog.built is not None else None
    assert plan is not None and (plan.inference.context, plan.inference.ubatch) == (150_000, 4096)
    # SGLang's --config through Load YAML… (sglang 0.5.23 ConfigArgumentMerger: the command's flags win).
    yaml = "model-path: Qwen/Qwen3-8B\ncontext-length: 16384\nmem-fraction-static: 0.8\n"
    sgl = _dialog_with_yaml(
        window, qtbot, monkeypatch, tmp_path / "sgl.yaml", yaml, "sglang serve --config sgl.yaml --context-length 8192"
    )
    sgl.yaml_button.click()
    found = sgl.found.toPlainText()
    assert found.startswith("SGLang · model Qwen/Qwen3-8B") and "--context-length 8192  →  Context = 8,192" in found
    assert "--mem-fraction-static 0.8" in found and sgl.apply_button.isEnabled()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("vllm serve Qwen/Qwen3-8B " + "x" * (10 * 1024 * 1024), "a launch command is at most 64,000"),  # 10 MB
        ("vllm serve Qwen/Qwen3-8B \x00\x07\x08 binary", "control characters"),
        ('llama-server -m "Qwen3-8B-Q4_K_M.gguf -c 4096', "No closing quotation"),
        ("frobnicate serve Qwen/Qwen3-8B", "not a vLLM, SGLang, llama.cpp or Ollama server launch"),
    ],
)
def test_hostile_text_keeps_the_users_text_and_changes_nothing(
    window: MainWindow, qtbot: Any, monkeypatch: pytest.MonkeyPatch, fake_dialogs: Any, text: str, said: str
) -> None:
    before = window.controller.plan
    seen: list[PasteCommandDialog] = []

    def paste_and_apply(dialog: PasteCommandDialog) -> bool:
        seen.append(dialog)
        dialog.editor.setPlainText(text)  # as if pasted
        dialog._accept()  # Apply is disabled; pressing Enter must not apply either
        return dialog.result() == PasteCommandDialog.DialogCode.Accepted

    monkeypatch.setattr(paste_command, "run_dialog", paste_and_apply)
    assert not window.plan_tools.paste_command_action.trigger() and window.controller.plan == before
    dialog = seen[0]
    assert said in dialog.problem.text() and "\n" not in dialog.problem.text()  # one line, in red
    assert not dialog.apply_button.isEnabled() and dialog.found.toPlainText() == ""
    assert dialog.editor.toPlainText() == text  # the user's text is left as pasted, to be mended
    assert window.controller.undo_stack.count() == 0


def test_a_launch_that_would_not_start_is_said_in_the_problem_line(window: MainWindow, qtbot: Any) -> None:
    # llama-cli has no --port (common/arg.cpp 145b6280: --port .set_examples({LLAMA_EXAMPLE_SERVER})): it stops.
    text = "llama-cli -m Qwen3-8B-Q4_K_M.gguf -c 8192 --port 8080"
    dialog = PasteCommandDialog(window.controller.plan, window, text)
    qtbot.addWidget(dialog)
    assert dialog.problem.text() == "llama-cli would not start ('error: invalid argument'): no option of it: --port"
    found = dialog.found.toPlainText()
    assert found.splitlines()[1] == dialog.problem.text()  # said at the top of the list too
    assert "Not understood (1)\n  --port 8080 (not an option of llama-cli" in found
    assert dialog.apply_button.isEnabled()  # the rest is still a plan: -c 8192 read
    dialog.resize(760, 620)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.grab().save("/tmp/h83cmd-paste-stops.png")  # looked at by hand
    dialog.editor.setPlainText("llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 --port 8080")
    assert dialog.problem.text() == ""  # llama-server's own flag: nothing said


def test_a_paste_longer_than_any_command_is_refused_whole(window: MainWindow, qtbot: Any) -> None:
    from PySide6.QtCore import QMimeData

    dialog = PasteCommandDialog(window.controller.plan, window, "vllm serve Qwen/Qwen3-8B")
    qtbot.addWidget(dialog)
    huge = QMimeData()
    huge.setText("x" * (10 * 1024 * 1024))  # 10 MB: laid out as one line it held the GUI thread 7.2 s
    dialog.editor.insertFromMimeData(huge)
    assert dialog.editor.toPlainText() == "vllm serve Qwen/Qwen3-8B"  # the user's text, as it was
    assert dialog.problem.text() == (
        "The pasted text is 10,485,760 characters: a launch command is at most 64,000; not pasted, the box keeps its "
        "text"
    )
    assert dialog.apply_button.isEnabled()  # what was there still reads
    small = QMimeData()
    small.setText(" --max-model-len 8192")
    dialog.editor.moveCursor(dialog.editor.textCursor().MoveOperation.End)
    dialog.editor.insertFromMimeData(small)  # an ordinary paste goes in and is read
    assert dialog.read is not None and dialog.read.fields["inference.context"] == 8192
    assert dialog.problem.text() == ""


def test_ignored_variables_say_why_in_the_dialog(window: MainWindow, qtbot: Any) -> None:
    # A variable of the shell is ignored with its own reason (serve_command.ENV_IGNORED), a flag with none beyond
    # the heading's.
    text = "HF_HOME=/data/hf PATH=/usr/bin vllm serve Qwen/Qwen3-8B --port 8000"
    dialog = PasteCommandDialog(window.controller.plan, window, text)
    qtbot.addWidget(dialog)
    found = dialog.found.toPlainText()
    assert (
        "Ignored, no effect on memory or speed (3)\n  HF_HOME=/data/hf — where models are downloaded and cached\n"
        "  PATH=/usr/bin — the shell's and Python's own\n  --port 8000\n" in found
    )
    assert "Not understood (0)" in found


def test_the_dialog_and_the_cli_give_one_answer_for_an_ignored_entry(window: MainWindow, qtbot: Any) -> None:
    # One paste, the same entries and reasons in the dialog and in `vramplan import-command`'s text (both from
    # FlagNote.ignored_line; the CLI indents them two more spaces under its own heading).
    from core.cli.import_command import render_command
    from core.files.launch.serve_command import plan_from_command, read_command

    text = "HF_HOME=/data/hf PATH=/usr/bin vllm serve Qwen/Qwen3-8B --port 8000"
    dialog = PasteCommandDialog(window.controller.plan, window, text)
    qtbot.addWidget(dialog)
    found = dialog.found.toPlainText().splitlines()
    at = found.index("Ignored, no effect on memory or speed (3)")
    in_dialog = [line.strip() for line in found[at + 1 : at + 4]]
    read = read_command(text)
    printed = render_command(read, plan_from_command(read, window.controller.plan)).splitlines()
    at = printed.index("  ignored, no effect on memory or speed (3):")
    assert [line.strip() for line in printed[at + 1 : at + 4]] == in_dialog
    assert in_dialog == [
        "HF_HOME=/data/hf — where models are downloaded and cached",
        "PATH=/usr/bin — the shell's and Python's own",
        "--port 8000",
    ]


def test_dialog_checks_sglang_flags_against_the_plan_s_release(window: MainWindow, qtbot: Any) -> None:
    # --pp-size: no wheel of SGLang 0.4.5 takes it (resources/engine_flags/sglang_server.txt: 0.4.6.post5 on)
    plan = window.controller.plan.with_inference(engine="sglang", sglang_version="0.4.5")
    dialog = PasteCommandDialog(plan, window)
    qtbot.addWidget(dialog)
    dialog.editor.setPlainText("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --pp-size 2")
    assert dialog.problem.text() == (
        "SGLang 0.4.5 would not start: 'launch_server.py: error: unrecognized arguments: --pp-size'"
    )
    later = PasteCommandDialog(plan.with_inference(sglang_version="0.4.7"), window)
    qtbot.addWidget(later)
    later.editor.setPlainText("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --pp-size 2")
    assert later.problem.text() == ""

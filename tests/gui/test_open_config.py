"""File → Open training config…: the dialog shows every field with its source, applying is undoable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.dtypes import Quant
from core.plan import Method
from gui.main_window import MainWindow
from gui.tools import open_config
from gui.tools.open_config import RunConfigDialog

DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def test_menu_entry_opens_a_config_and_undo_restores(
    window: MainWindow, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[RunConfigDialog] = []

    def accept(dialog: RunConfigDialog) -> bool:
        shown.append(dialog)
        return True

    monkeypatch.setattr(open_config, "run_dialog", accept)
    before = window.controller.plan
    fake_dialogs.paths.append(str(DATA / "trl_zephyr_sft_qlora.yaml"))
    window.plan_tools.open_config_action.trigger()
    plan = window.controller.plan
    # alignment-handbook's QLoRA recipe: Mistral 7B, load_in_4bit, lora_r 16, batch 4, max_seq_length 2048
    assert plan.model_id == "mistral-7b-v0.1" and plan.method is Method.QLORA and plan.quant is Quant.NF4
    assert (plan.lora.rank, plan.workload.micro_batch, plan.workload.seq_len) == (16, 4, 2048)
    table = shown[0].fields_table
    rows = {
        table.item(r, 0).text(): (table.item(r, 1).text(), table.item(r, 2).text()) for r in range(table.rowCount())
    }
    assert rows["LoRA rank"] == ("16", "lora_r")
    window.controller.undo_stack.undo()
    assert window.controller.plan == before


def test_unresolved_model_offers_the_closest_first(window: MainWindow, qtbot: Any, tmp_path: Path) -> None:
    from core.files.runconfig import load_run_config, resolve_model

    # axolotl's Llama 3 example on a size no Llama 3 has (its NousResearch/Meta-Llama-3-8B is the catalogue's
    # Llama 3 8B since h88fix added that entry): the nearest, Llama 3 8B, is offered first.
    text = (DATA / "axolotl_llama3_qlora.yml").read_text().replace("Meta-Llama-3-8B", "Meta-Llama-3-9B")
    path = tmp_path / "axolotl_llama3_9b.yml"
    path.write_text(text)
    run = load_run_config(path)
    dialog = RunConfigDialog(run, resolve_model(run), window.controller.plan)
    qtbot.addWidget(dialog)
    assert dialog.model_box.currentData() == "llama-3-8b"
    assert "not a local folder or a catalogue model" in dialog.model_note.text()
    plan = dialog.plan()
    assert plan.model_id == "llama-3-8b" and plan.workload.seq_len == 4096
    dialog.model_box.setCurrentIndex(dialog.model_box.findData(open_config.KEEP))
    assert dialog.plan().model == window.controller.plan.model


def test_outside_text_is_plain_and_unknown_keys_are_listed(window: MainWindow, qtbot: Any, tmp_path: Path) -> None:
    from core.files.runconfig import load_run_config, resolve_model

    path = tmp_path / "<b>bold.yaml"
    path.write_text("base_model: '<i>x</i>'\nmicro_batch_size: 2\nadapter: lora\nmystery_key: 1\n")
    run = load_run_config(path)
    dialog = RunConfigDialog(run, resolve_model(run), window.controller.plan)
    qtbot.addWidget(dialog)
    assert dialog.unknown_list.item(0).text() == "mystery_key"
    assert "<b>bold.yaml" in dialog.windowTitle()
    assert dialog.model_note.textFormat().name == "PlainText"


def test_a_pickle_is_refused_with_a_message(window: MainWindow, fake_dialogs: Any) -> None:
    before = window.controller.plan
    assert not open_config.open_training_config(
        window.plan_tools.context, str(DATA / "malformed" / "training_args.bin")
    )
    assert "pickle" in fake_dialogs.errors()[0] and window.controller.plan == before


def test_dialog_screenshot(window: MainWindow, qtbot: Any, tmp_path: Path) -> None:
    from core.files.runconfig import load_run_config, resolve_model

    run = load_run_config(DATA / "axolotl_llama3_lora_8b.yml")
    dialog = RunConfigDialog(run, resolve_model(run), window.controller.plan)
    qtbot.addWidget(dialog)
    dialog.resize(820, 700)
    image = dialog.grab()
    assert image.width() >= 800
    image.save(str(tmp_path / "open_config.png"))

"""The document life-cycle without a window: new, open, save, recent, import, session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.files import planfile
from core.presets import default_plan
from gui.controller import PlanController
from gui.document import UNTITLED, Document
from gui.settings import Settings


def _document(settings: Settings) -> tuple[Document, PlanController, list[str]]:
    controller = PlanController(default_plan())
    document = Document(controller, settings)
    messages: list[str] = []
    document.message.connect(messages.append)
    return document, controller, messages


def test_save_as_then_reopen_without_a_window(settings: Settings, tmp_path: Path, fake_dialogs: Any) -> None:
    document, controller, messages = _document(settings)
    assert document.name == UNTITLED and not document.modified
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=3))
    assert document.modified
    path = tmp_path / "run.vramplan.json"
    fake_dialogs.paths.append(str(path))
    changed: list[bool] = []
    document.pathChanged.connect(lambda: changed.append(True))
    assert document.save_as()
    assert changed and document.name == "run.vramplan.json" and not document.modified
    assert messages == [f"Saved {path}"]
    assert planfile.load(path).workload.micro_batch == 3
    assert settings.recent_files[0] == str(path.resolve())
    assert document.export_path("svg") == str(tmp_path / "run.svg")

    document.new()  # saved: no question asked
    assert controller.plan == default_plan() and document.path is None
    assert not [c for c in fake_dialogs.calls if c[0] == "ask_save_changes"]
    document.open_recent(str(path))
    assert controller.plan.workload.micro_batch == 3 and document.path == str(path)


def test_a_modified_titled_document_asks_and_cancel_keeps_it(
    settings: Settings, tmp_path: Path, fake_dialogs: Any
) -> None:
    path = tmp_path / "a.json"
    planfile.save(default_plan(), path)
    document, controller, _ = _document(settings)
    assert document.open_path(str(path))
    controller.update("workload.micro_batch", lambda p: p.with_workload(micro_batch=5))
    fake_dialogs.save_choice = "cancel"
    document.new()
    assert controller.plan.workload.micro_batch == 5 and document.path == str(path)
    fake_dialogs.save_choice = "save"
    document.new()
    assert planfile.load(path).workload.micro_batch == 5 and document.path is None


def test_session_round_trip(settings: Settings, tmp_path: Path) -> None:
    document, controller, _ = _document(settings)
    controller.update("workload.seq_len", lambda p: p.with_workload(seq_len=777))
    document.store()
    again, controller2, _ = _document(settings)
    again.restore()
    assert controller2.plan.workload.seq_len == 777 and again.path is None


def test_import_model_is_one_undoable_step(settings: Settings, tmp_path: Path, fake_dialogs: Any) -> None:
    config = tmp_path / "config.json"
    # Dimensions of TinyLlama-1.1B's config.json (Hugging Face hub, TinyLlama/TinyLlama-1.1B-Chat-v1.0).
    config.write_text(
        '{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,'
        ' "num_hidden_layers": 22, "num_key_value_heads": 4, "vocab_size": 32000}'
    )
    document, controller, _ = _document(settings)
    fake_dialogs.paths.append(str(config))
    document.import_model("file")
    assert controller.plan.model.num_layers == 22 and controller.plan.model_id == ""
    controller.undo_stack.undo()
    assert controller.plan == default_plan()


def test_importing_a_pre_quantised_config_keeps_its_skip_list(
    settings: Settings, tmp_path: Path, fake_dialogs: Any
) -> None:
    """A bitsandbytes checkpoint's quantization_config.llm_int8_skip_modules (transformers
    01ae98ae BitsAndBytesConfig) fills the plan's modules kept in 16 bits, and the status bar says so."""
    config = tmp_path / "config.json"
    # TinyLlama-1.1B's dimensions, as above, with a dynamic-4-bit-style skip list.
    config.write_text(
        '{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,'
        ' "num_hidden_layers": 22, "num_key_value_heads": 4, "vocab_size": 32000, "quantization_config":'
        ' {"quant_method": "bitsandbytes", "load_in_4bit": true,'
        ' "llm_int8_skip_modules": ["lm_head", "model.layers.0.mlp"]}}'
    )
    document, controller, messages = _document(settings)
    fake_dialogs.paths.append(str(config))
    document.import_model("file")
    assert controller.plan.bnb_skip_modules == "lm_head,model.layers.0.mlp"
    assert any("llm_int8_skip_modules keeps lm_head,model.layers.0.mlp" in m for m in messages)
    controller.undo_stack.undo()
    assert controller.plan == default_plan()


def test_a_plan_reopens_in_the_mode_it_was_saved_in(settings: Settings, tmp_path: Path, fake_dialogs: Any) -> None:
    # Branch h56mode: a plan saved in Inference mode reopened in Training (the training verdict of a
    # serving question). The mode is the display's, not an undo step.
    from core.verdict import Mode
    from gui.display_state import DisplayState

    display = DisplayState()
    controller = PlanController(default_plan())
    document = Document(controller, settings, display=display)
    display.set_mode(Mode.INFERENCE)
    path = tmp_path / "serve.vramplan.json"
    fake_dialogs.paths.append(str(path))
    assert document.save_as()
    assert planfile.load_saved(path).mode is Mode.INFERENCE
    document.new()
    display.set_mode(Mode.TRAINING)
    document.open_recent(str(path))
    assert display.mode is Mode.INFERENCE and controller.undo_stack.count() == 0
    old = tmp_path / "old.json"  # a file from before the mode was kept opens in Training, as it did
    old.write_text(planfile.dumps(default_plan()).replace('  "mode": "training",\n', ""))
    assert '"mode"' not in old.read_text()
    assert document.open_path(str(old)) and display.mode is Mode.TRAINING

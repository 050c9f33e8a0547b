"""Bindings both ways: plan → widgets, and widget edits → the controller's plan."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from core.plan import Method, Precision, Strategy
from core.presets import default_plan, plan_for_model
from gui.forms.fields import is_marked_invalid, parse_count
from gui.main_window import MainWindow


def type_into(qtbot: Any, widget: Any, text: str, *, commit: bool = True) -> None:
    """Select what is in the box, type over it and press Enter (values apply on commit)."""
    widget.setFocus()
    line = widget.lineEdit() if hasattr(widget, "lineEdit") and callable(widget.lineEdit) else widget
    line.selectAll()
    qtbot.keyClicks(line, text)
    if commit:
        qtbot.keyClick(line, Qt.Key.Key_Return)


def test_plan_to_widgets(window: MainWindow) -> None:
    plan = (
        plan_for_model("qwen2.5-7b", method=Method.QLORA, precision=Precision.BF16)
        .with_workload(micro_batch=3, seq_len=4096, grad_accum=5, tokens=123_000_000)
        .with_hardware(gpu="rtx-4090", headroom=0.15)
        .on_gpus(2, Strategy.ZERO2)
        .with_lora(rank=32, targets=("q_proj", "k_proj", "down_proj"))
    )
    window.controller.set_plan(plan)
    assert window.model_form.picker.currentText() == "Qwen2.5 7B"
    assert window.method_form.method.value() == "qlora"
    assert window.method_form.rank.value() == 32
    boxes = window.method_form.targets.boxes
    assert [n for n, b in boxes.items() if b.isChecked()] == ["q_proj", "k_proj", "down_proj"]
    assert window.method_form.preset.value() == "pure-bf16"  # the old "bf16"
    w = window.workload_form
    assert (w.micro_batch.value(), w.seq_len.value(), w.grad_accum.value()) == (3, 4096, 5)
    assert w.tokens.value() == 123_000_000
    h = window.hardware_form
    assert h.gpu.value() == "rtx-4090"
    assert h.headroom.value() == pytest.approx(15.0)
    par = window.parallel_form
    assert (par.nodes.value(), par.gpus_per_node.value()) == (1, 2)
    assert par.strategy.value() == "zero2"
    # Showing a plan is not an edit: nothing more to undo than the one set_plan.
    assert window.controller.undo_stack.count() == 1


def test_widgets_to_plan(qtbot: Any, window: MainWindow) -> None:
    c = window.controller
    type_into(qtbot, window.workload_form.micro_batch, "8")
    assert c.plan.workload.micro_batch == 8
    type_into(qtbot, window.workload_form.tokens, "2.5B")
    assert c.plan.workload.tokens == 2_500_000_000
    window.method_form.method.setCurrentIndex(window.method_form.method.findData("full"))
    assert c.plan.method is Method.FULL
    window.hardware_form.utilisation.setValue(55.0)
    assert c.plan.hardware.utilisation == pytest.approx(0.55)
    window.method_form.checkpointing.setChecked(False)
    assert c.plan.checkpointing is False


def test_model_picker_type_to_search(qtbot: Any, window: MainWindow) -> None:
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), "Mistral 7B v0.1")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    assert window.controller.plan.model_id == "mistral-7b-v0.1"
    completer = picker.completer()
    completer.setCompletionPrefix("qwen2.5")
    assert completer.completionCount() == 7  # contains-match, case-insensitive


def test_unknown_model_name_is_marked_and_ignored(qtbot: Any, window: MainWindow) -> None:
    before = window.controller.plan
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), "GPT-9000")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    assert window.controller.plan is before
    assert is_marked_invalid(picker)
    assert "GPT-9000" in window.problem.text()


def test_bad_text_keeps_the_last_valid_plan(qtbot: Any, window: MainWindow) -> None:
    before = window.controller.plan
    tokens = window.workload_form.tokens
    type_into(qtbot, tokens, "lots", commit=False)  # marked while typing
    assert window.controller.plan is before
    assert is_marked_invalid(tokens)
    assert "Token budget" in window.problem.text()
    type_into(qtbot, tokens, "30M")
    assert window.controller.plan.workload.tokens == 30_000_000
    assert not is_marked_invalid(tokens)
    assert window.problem.text() == ""


def test_out_of_range_number_is_marked(qtbot: Any, window: MainWindow) -> None:
    before = window.controller.plan
    spin = window.workload_form.micro_batch
    type_into(qtbot, spin, "0")
    assert window.controller.plan is before
    assert is_marked_invalid(spin)


def test_plan_level_rule_is_marked_on_the_field(qtbot: Any, window: MainWindow) -> None:
    c = window.controller
    boxes = window.method_form.targets.boxes
    for name in ("q_proj",):
        boxes[name].setChecked(False)
    assert c.plan.lora.targets == ("v_proj",)
    boxes["v_proj"].setChecked(False)  # no targets left: the core refuses it
    assert c.plan.lora.targets == ("v_proj",)
    assert boxes["v_proj"].isChecked()  # the box shows the plan again
    assert is_marked_invalid(boxes["v_proj"])


def test_frozen_method_picks_a_valid_layer_count(qtbot: Any, window: MainWindow) -> None:
    method = window.method_form.method
    method.setCurrentIndex(method.findData("frozen"))
    plan = window.controller.plan
    assert plan.method is Method.FROZEN and 0 < plan.frozen_layers <= plan.model.num_layers
    assert window.method_form.frozen.value() == plan.frozen_layers
    assert not window.method_form.frozen.isHidden()


def test_prefix_tuning_is_picked_from_a_checkpointed_plan(qtbot: Any, window: MainWindow) -> None:
    # The first plan checkpoints; PEFT refuses prefix tuning with gradient checkpointing (huggingface/peft
    # 51c2ff66 peft_model.py _setup_prompt_encoder), so the switch turns it off instead of being refused.
    form = window.method_form
    assert window.controller.plan.checkpointing
    form.method.setCurrentIndex(form.method.findData("prefix-tuning"))
    plan = window.controller.plan
    assert plan.method is Method.PREFIX_TUNING and not plan.checkpointing
    assert not form.checkpointing.isChecked() and not form.virtual_tokens.isHidden()


def test_lokr_is_picked_with_its_factor_and_the_rank(qtbot: Any, window: MainWindow) -> None:
    # PEFT's LoKr (branch h53lyco): rank, alpha and targets as LoRA's, and decompose_factor; LoHa has no factor.
    form = window.method_form
    form.method.setCurrentIndex(form.method.findData("lokr"))
    assert window.controller.plan.method is Method.LOKR
    assert not form.lokr_factor.isHidden() and not form.rank.isHidden() and form.virtual_tokens.isHidden()
    type_into(qtbot, form.lokr_factor, "4")
    assert window.controller.plan.lora.lokr_factor == 4
    form.method.setCurrentIndex(form.method.findData("loha"))
    assert window.controller.plan.method is Method.LOHA and form.lokr_factor.isHidden() and not form.rank.isHidden()


def test_oft_is_picked_with_its_block_size_and_the_rank_only_at_block_size_0(qtbot: Any, window: MainWindow) -> None:
    # PEFT's OFT (branch h54oft): OFTConfig's oft_block_size 32 by default, r (blocks per target) only when it is 0.
    form = window.method_form
    form.method.setCurrentIndex(form.method.findData("oft"))
    plan = window.controller.plan
    assert plan.method is Method.OFT and plan.lora.oft_block_size == 32  # OFTConfig's default
    assert not form.oft_block_size.isHidden() and form.rank.isHidden() and form.alpha.isHidden()
    type_into(qtbot, form.oft_block_size, "0")
    assert window.controller.plan.lora.oft_block_size == 0 and not form.rank.isHidden()
    form.method.setCurrentIndex(form.method.findData("lora"))
    assert form.oft_block_size.isHidden() and not form.rank.isHidden()


def test_fourierft_and_road_are_picked_with_their_rows(qtbot: Any, window: MainWindow) -> None:
    # PEFT's FourierFT (branch h76peft): n_frequency is the rank row, labelled as such, 1000 by default
    # (FourierFTConfig); RoAd: its variant row (road_1 by default, RoadConfig), no rank or alpha.
    form = window.method_form
    form.method.setCurrentIndex(form.method.findData("fourierft"))
    plan = window.controller.plan
    assert plan.method is Method.FOURIERFT and plan.lora.rank == 1000
    assert not form.rank.isHidden() and form.alpha.isHidden() and form.road_variant.isHidden()
    form.method.setCurrentIndex(form.method.findData("road"))
    assert window.controller.plan.method is Method.ROAD
    assert not form.road_variant.isHidden() and form.rank.isHidden() and form.alpha.isHidden()
    form.road_variant.setCurrentIndex(form.road_variant.findData("road_2"))
    assert window.controller.plan.lora.road_variant.value == "road_2"


def test_vblora_randlora_and_shira_are_picked_with_their_config_s_rank(qtbot: Any, window: MainWindow) -> None:
    # PEFT's VB-LoRA, RandLoRA and SHiRA (branch h78peft): the rank row (VBLoRAConfig r 4, RandLoraConfig and
    # ShiraConfig r 32 by default, huggingface/peft 51c2ff66 config.py files), no alpha row, no RoAd variant.
    form = window.method_form
    for value, rank in (("vblora", 4), ("randlora", 32), ("shira", 32)):
        form.method.setCurrentIndex(form.method.findData(value))
        plan = window.controller.plan
        assert plan.method.value == value and plan.lora.rank == rank
        assert not form.rank.isHidden() and form.alpha.isHidden() and form.road_variant.isHidden()


def test_boft_is_picked_with_its_block_size_row(qtbot: Any, window: MainWindow) -> None:
    # PEFT's BOFT (branch h80boft): BOFTConfig's boft_block_size 4 by default (huggingface/peft 51c2ff66
    # src/peft/tuners/boft/config.py), OFTConfig's oft_block_size 32, on the one block size row named for each.
    form = window.method_form
    label = form.form.labelForField(form.oft_block_size)
    for value, block, text in (("boft", 4, "BOFT block size:"), ("oft", 32, "OFT block size:"), ("boft", 4, "BOFT")):
        form.method.setCurrentIndex(form.method.findData(value))
        assert (window.controller.plan.method.value, window.controller.plan.lora.oft_block_size) == (value, block)
        assert label is not None and label.text().startswith(text) and not form.oft_block_size.isHidden()
        assert form.rank.isHidden() and form.alpha.isHidden()


def test_modules_to_save_and_trainable_tokens_rows_under_a_peft_method(qtbot: Any, window: MainWindow) -> None:
    # PEFT's modules_to_save / trainable_token_indices (branch h60mts): rows under a PEFT method, gone under full.
    form = window.method_form
    form.method.setCurrentIndex(form.method.findData("lora"))
    assert not form.modules_to_save.isHidden() and not form.trainable_tokens.isHidden()
    form.modules_to_save.setCurrentIndex(form.modules_to_save.findData("head"))
    assert window.controller.plan.lora.modules_to_save.value == "head"
    type_into(qtbot, form.trainable_tokens, "2")
    assert window.controller.plan.lora.trainable_tokens == 2
    form.method.setCurrentIndex(form.method.findData("full"))
    plan = window.controller.plan
    assert plan.method is Method.FULL and plan.lora.modules_to_save.value == "none"  # leaving PEFT drops them
    assert form.modules_to_save.isHidden() and form.trainable_tokens.isHidden()


def test_ia3_method_shows_its_feedforward_modules(qtbot: Any, window: MainWindow) -> None:
    form = window.method_form
    form.method.setCurrentIndex(form.method.findData("ia3"))
    plan = window.controller.plan
    # The default plan's LoRA targets (q_proj, v_proj, LoRA's default) become PEFT's IA3 default:
    # k_proj, v_proj, down_proj, down_proj's input scaled (huggingface/peft 5d602fdb
    # src/peft/utils/constants.py, TRANSFORMERS_MODELS_TO_IA3_*_MAPPING["llama"]).
    assert plan.method is Method.IA3 and plan.lora.targets == ("k_proj", "v_proj", "down_proj")
    assert plan.lora.ia3_feedforward == ("down_proj",)
    assert form.rank.isHidden() and not form.feedforward.isHidden()
    feedforward, targets = form.feedforward.boxes, form.targets.boxes
    assert feedforward["down_proj"].isChecked() and not feedforward["q_proj"].isEnabled()
    targets["down_proj"].setChecked(False)  # leaving the targets, it leaves the feedforward modules
    assert window.controller.plan.lora.ia3_feedforward == ()
    targets["down_proj"].setChecked(True)
    feedforward["down_proj"].setChecked(True)
    assert window.controller.plan.lora.ia3_feedforward == ("down_proj",)
    form.method.setCurrentIndex(form.method.findData("lora"))  # back to LoRA's own default
    assert form.feedforward.isHidden() and not form.rank.isHidden()
    assert window.controller.plan.lora.targets == ("q_proj", "v_proj")


def test_the_output_head_box_adds_lm_head_and_is_off_under_ia3(qtbot: Any, window: MainWindow) -> None:
    # LoRA on the output head (branch h41head): one more box, after down_proj; IA3 on the head is refused.
    form = window.method_form
    head = form.targets.boxes["lm_head"]
    assert list(form.targets.boxes)[-1] == "lm_head" and "lm_head" not in form.feedforward.boxes
    head.setChecked(True)
    assert window.controller.plan.lora.targets == ("q_proj", "v_proj", "lm_head")
    form.method.setCurrentIndex(form.method.findData("ia3"))
    assert window.controller.plan.lora.targets == ("q_proj", "v_proj")
    assert not head.isEnabled() and not head.isChecked()


def test_the_all_linear_box_keeps_all_linear_apart_from_the_seven_names(qtbot: Any, window: MainWindow) -> None:
    # all-linear (branch h84alllin): PEFT's every nn.Linear but the head, which on a mixture of experts reaches the
    # router the seven names leave out (core.model.ALL_LINEAR); a box of its own after down_proj.
    form = window.method_form
    boxes = form.targets.boxes
    seven = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert list(boxes).index("all-linear") == list(boxes).index("down_proj") + 1
    boxes["all-linear"].setChecked(True)  # it brings the seven names
    assert window.controller.plan.lora.targets == (*seven, "all-linear")
    assert all(boxes[name].isChecked() for name in seven)
    boxes["q_proj"].setChecked(False)  # one name off: no longer every linear
    assert window.controller.plan.lora.targets == seven[1:]
    assert not boxes["all-linear"].isChecked()
    boxes["all-linear"].setChecked(True)
    boxes["all-linear"].setChecked(False)  # off: the seven names alone stay
    assert window.controller.plan.lora.targets == seven


def test_dimension_edit_makes_a_custom_model(qtbot: Any, window: MainWindow) -> None:
    layers = window.model_form.fields["model.num_layers"]
    layers.setValue(16)
    plan = window.controller.plan
    assert plan.model.num_layers == 16 and plan.model_id == ""
    assert "(edited)" in plan.model.name
    assert window.model_form.picker.currentText() == plan.model.name


def test_undo_puts_the_widgets_back(qtbot: Any, window: MainWindow) -> None:
    window.workload_form.seq_len.setValue(8192)
    window.undo_action.trigger()
    assert window.workload_form.seq_len.value() == default_plan().workload.seq_len
    window.redo_action.trigger()
    assert window.workload_form.seq_len.value() == 8192


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("6.7e9", 6_700_000_000),
        ("6,700,000,000", 6_700_000_000),
        ("20M", 20_000_000),
        ("1.5 B", 1_500_000_000),
        ("4194304", 4_194_304),
        ("2k", 2000),
        ("", None),
        ("1.5", None),
        ("-3", None),
        ("e9", None),
        ("1e999", None),
    ],
)
def test_parse_count(text: str, value: int | None) -> None:
    assert parse_count(text) == value


def test_every_input_has_a_name_and_a_tooltip(window: MainWindow) -> None:
    for form in window.forms:
        for key, widget in form.fields.items():
            assert widget.accessibleName(), key
            assert widget.toolTip(), key


# ---- issue 26, item 14 ------------------------------------------------------------------
def _wheel(widget: Any, steps: int = 1) -> None:
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(QPoint(int(centre.x()), int(centre.y())))),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_a_wheel_over_a_field_the_user_is_not_in_leaves_the_plan(qtbot: Any, window: MainWindow) -> None:
    # Scrolling the Plan column over micro-batch, sequence, headroom, method or GPU changed them.
    window.show()
    qtbot.waitExposed(window)
    before = window.controller.plan
    for path in ("workload.micro_batch", "workload.seq_len", "hardware.headroom", "method"):
        field = window.findChild(object, path)
        assert field is not None and not field.hasFocus()
        _wheel(field, 3)
    assert window.controller.plan == before
    field = window.findChild(object, "workload.micro_batch")
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    shown = field.text()
    _wheel(field, 1)  # in the field, the wheel still steps it
    assert field.text() != shown


def test_undo_from_inside_a_picker_undoes_the_plan(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    first = window.controller.plan
    window.controller.set_plan(plan_for_model("qwen2.5-7b"))
    picker = window.findChild(object, "hardware.gpu") or window.hardware_form.gpu
    picker.setFocus()
    qtbot.waitUntil(picker.hasFocus)
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.controller.plan == first


def test_typing_4090_and_enter_picks_the_desktop_card(qtbot: Any, window: MainWindow) -> None:
    # "4090" matches the RTX 4090 and the RTX 4090 Laptop GPU; Enter picked the laptop part.
    picker = window.hardware_form.gpu
    assert set(picker.matches("4090")) >= {"rtx-4090", "rtx-4090-laptop"}
    picker._chosen_text("4090")
    assert window.controller.plan.hardware.gpu == "rtx-4090"


def test_a_spin_box_refuses_an_ambiguous_comma_as_count_fields_do(window: MainWindow) -> None:
    # Issue 26, item 7: "1,5" in a spin box became 15 (Qt's group separator) while a count field
    # refuses it; "1,500" (a thousands group) still reads 1,500.
    before = window.controller.plan
    messages: list[str] = []
    window.controller.editRejected.connect(lambda _key, message: messages.append(message))
    field = window.findChild(object, "workload.micro_batch")
    field.lineEdit().setText("1,5")
    field.lineEdit().textEdited.emit("1,5")
    assert messages and "ambiguous comma" in messages[-1]
    assert window.controller.plan == before
    field.lineEdit().setText("1,500")
    assert field._text_problem() is None or "ambiguous" not in field._text_problem()


def test_the_calibration_fields_show_in_the_hardware_form(qtbot: Any, window: MainWindow) -> None:
    # Issue 24 item 5 asks for the calibration in the window. Before: the measured step and the
    # calibration factor were 'advanced' inputs, and the Hardware form has no Advanced
    # disclosure, so neither row was ever shown (the GUI monkey never reached them).
    window.show()
    qtbot.waitExposed(window)
    form = window.hardware_form
    for key in ("hardware.measured_tokens_per_s", "hardware.measured_step_s", "hardware.calibration"):
        assert form.fields[key].isVisibleTo(window), key
    # A measured speed makes the step time moot: that row goes, the calibration stays.
    window.controller.reset(window.controller.plan.with_hardware(measured_tokens_per_s=1000.0))
    assert not form.fields["hardware.measured_step_s"].isVisibleTo(window)
    assert form.fields["hardware.calibration"].isVisibleTo(window)


def test_model_summary_names_an_image_text_checkpoints_vision_tower(window: MainWindow) -> None:
    # gemma-3-4b: the SigLIP tower + projector, 419,816,304 parameters (transformers 5.25.0 on the meta device,
    # tests/data/vision/meta_counts.json), beside the language model's 3,880,263,168.
    window.controller.set_plan(plan_for_model("gemma-3-4b"))
    text = window.model_form.summary.text()
    assert text.startswith(  # counts in core.format.scientific's one form (the Arithmetic's too)
        "<b>3.88 × 10⁹</b> parameters (from the architecture) + <b>4.20 × 10⁸</b> in its SigLIP vision tower"
    )
    window.controller.set_plan(plan_for_model("qwen2.5-7b"))
    assert "vision tower" not in window.model_form.summary.text()

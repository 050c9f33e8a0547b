"""The Method form's one "Loss" list (core.losses): it shows the plan's loss, a choice is one
undoable edit that turns the other loss switches off, it lists only the losses that make sense
for the plan, and a plan file that turned on two shows which one counts and loses neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from core.files import planfile
from core.inputs import MegatronCeFusion, Stack
from core.losses import LossChoice
from core.plan import Plan, Preset
from core.presets import plan_for_model
from core.verdict import Mode
from gui.main_window import MainWindow


def _entries(window: MainWindow) -> list[str]:
    loss = window.method_form.loss
    return [loss.itemData(index) for index in range(loss.count())]


def _choose(window: MainWindow, choice: LossChoice) -> None:
    """As the user picks an entry from the list: Qt emits currentIndexChanged (when it changed) and activated."""
    loss = window.method_form.loss
    index = loss.findData(choice.value)
    assert index >= 0, choice
    loss.setCurrentIndex(index)
    loss.activated.emit(index)


def _plan() -> Plan:
    return plan_for_model("gpt2")


def test_the_list_shows_the_plans_loss(window: MainWindow) -> None:
    loss = window.method_form.loss
    window.controller.set_plan(_plan())
    assert loss.currentData() == LossChoice.DEFAULT.value
    assert loss.currentText() == "Eager cross-entropy (float32)"
    window.controller.set_plan(_plan().with_changes(flash_loss=True))
    assert loss.currentData() == LossChoice.FLASH.value
    assert loss.toolTip().startswith("Which code computes the loss") and "flash-attn" in loss.toolTip()
    assert not window.method_form.loss_conflict.isVisibleTo(window.method_form)
    # Each entry says what its loss keeps.
    tip = loss.itemData(loss.findData(LossChoice.CHUNKED.value), Qt.ItemDataRole.ToolTipRole)
    assert "float32 logits" in tip


def test_a_choice_is_one_undoable_edit_that_turns_the_others_off(window: MainWindow) -> None:
    controller = window.controller
    controller.set_plan(_plan().with_changes(chunked_loss=True))
    steps = controller.undo_stack.count()
    _choose(window, LossChoice.COMPILED)
    plan = controller.plan
    assert plan.compiled_loss and not plan.chunked_loss
    assert controller.undo_stack.count() == steps + 1
    assert controller.undo_stack.undoText() == "Change loss"
    controller.undo_stack.undo()
    assert controller.plan.chunked_loss and not controller.plan.compiled_loss
    assert window.method_form.loss.currentData() == LossChoice.CHUNKED.value
    controller.undo_stack.redo()
    _choose(window, LossChoice.DEFAULT)
    assert not any((controller.plan.compiled_loss, controller.plan.chunked_loss, controller.plan.fused_loss))


def test_a_choice_by_keyboard_reaches_the_plan(qtbot: Any, window: MainWindow) -> None:
    window.controller.set_plan(_plan())
    loss = window.method_form.loss
    loss.setFocus()
    qtbot.keyClick(loss, Qt.Key.Key_End)  # the last entry: the fused linear cross-entropy
    assert window.controller.plan.fused_loss
    assert loss.currentData() == LossChoice.FUSED.value


def test_only_the_losses_that_apply_are_listed(window: MainWindow) -> None:
    controller = window.controller
    controller.set_plan(_plan())  # eager PyTorch under autocast
    entries = _entries(window)
    assert LossChoice.MEGATRON_NATIVE.value not in entries and LossChoice.MEGATRON_TE.value not in entries
    assert LossChoice.LOSS_16BIT.value not in entries  # autocast runs F.cross_entropy in float32
    controller.set_plan(_plan().with_changes(stack=Stack.MEGATRON))
    assert {LossChoice.MEGATRON_NATIVE.value, LossChoice.MEGATRON_TE.value} <= set(_entries(window))
    assert window.method_form.loss.itemText(0) == "Megatron unfused (float32)"
    _choose(window, LossChoice.MEGATRON_TE)
    assert controller.plan.megatron_ce_fusion is MegatronCeFusion.TE
    controller.set_plan(_plan().with_changes(preset=Preset.PURE_BF16))
    assert LossChoice.LOSS_16BIT.value in _entries(window)
    # Unsloth computes its own loss: the default entry names it; only the fused one replaces it.
    controller.set_plan(_plan().with_changes(unsloth=True))
    assert _entries(window) == [LossChoice.DEFAULT.value, LossChoice.FUSED.value]
    assert window.method_form.loss.itemText(0) == "Unsloth's own (fused, chunked)"


def test_a_file_with_two_losses_shows_the_counted_one_and_keeps_both(
    qtbot: Any, window: MainWindow, tmp_path: Path
) -> None:
    path = tmp_path / "two losses.vramplan"
    path.write_text(planfile.dumps(_plan().with_changes(fused_loss=True, chunked_loss=True)), encoding="utf-8")
    window.show()
    qtbot.waitExposed(window)
    assert window.open_path(str(path))
    form = window.method_form
    plan = window.controller.plan
    assert plan.fused_loss and plan.chunked_loss  # nothing dropped on opening
    assert form.loss.currentData() == LossChoice.FUSED.value  # what the estimate counts
    assert form.loss_conflict.isVisibleTo(form) and "Chunked cross-entropy" in form.loss_conflict.text()
    assert any("more than one loss" in text for text in window.controller.estimate.warnings_for(Mode.TRAINING))
    # The entry shown, chosen again, keeps it alone: one edit.
    steps = window.controller.undo_stack.count()
    _choose(window, LossChoice.FUSED)
    assert window.controller.plan.fused_loss and not window.controller.plan.chunked_loss
    assert window.controller.undo_stack.count() == steps + 1
    assert not form.loss_conflict.isVisibleTo(form)

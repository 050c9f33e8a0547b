"""The Method section's 16-bit cross-entropy (``loss_16bit``, the Loss list's "Eager cross-entropy
(16-bit)"): listed only where a loop's own F.cross_entropy would see 16-bit logits (a bf16 / fp16 model
without autocast, no framework's own loss), and choosing it is the plan's (rasbt/LLMs-from-scratch
908dd2f ch05/10_llm-training-speed, calc_loss_batch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.losses import LossChoice
from core.plan import Preset
from core.presets import plan_for_model
from gui.main_window import MainWindow

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set


def test_the_choice_shows_for_a_16bit_loop_and_lowers_the_backward(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    entry = LossChoice.LOSS_16BIT.value
    window.controller.set_plan(plan_for_model("gpt2").with_changes(preset=Preset.TRAINER_BF16))
    assert form.loss.findData(entry) < 0  # autocast: F.cross_entropy runs in float32 anyway
    window.controller.set_plan(window.controller.plan.with_changes(preset=Preset.PURE_BF16))
    assert form.loss.findData(entry) >= 0 and form.loss.currentData() == LossChoice.DEFAULT.value
    before = window.controller.estimate.peak_bytes
    form.loss.setCurrentIndex(form.loss.findData(entry))
    assert window.controller.plan.loss_16bit
    assert window.controller.estimate.peak_bytes < before  # three bf16 N·V tensors, not float32 ones
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "method_loss_16bit.png"))
    # A fused loss has no logits tensor for the loop to take: choosing it turns the 16-bit loss off.
    form.loss.setCurrentIndex(form.loss.findData(LossChoice.FUSED.value))
    assert window.controller.plan.fused_loss and not window.controller.plan.loss_16bit
    # Unsloth's loss is its own kernel: no 16-bit entry under it.
    window.controller.set_plan(window.controller.plan.with_changes(unsloth=True))
    assert form.loss.findData(entry) < 0

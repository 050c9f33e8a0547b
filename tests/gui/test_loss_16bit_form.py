"""The Method section's "Cross-entropy in 16 bits" (``loss_16bit``): shown only where a loop's own
F.cross_entropy would see 16-bit logits (a bf16 / fp16 model without autocast, no other loss code), and
a tick in it is the plan's (rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed, calc_loss_batch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.plan import Preset
from core.presets import plan_for_model
from gui.main_window import MainWindow

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set


def test_the_switch_shows_for_a_16bit_loop_and_lowers_the_backward(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    box = form.fields["loss_16bit"]
    window.controller.set_plan(plan_for_model("gpt2").with_changes(preset=Preset.TRAINER_BF16))
    assert not box.isVisibleTo(form)  # autocast: F.cross_entropy runs in float32 anyway
    window.controller.set_plan(window.controller.plan.with_changes(preset=Preset.PURE_BF16))
    assert box.isVisibleTo(form) and not form.loss_16bit.isChecked()
    before = window.controller.estimate.peak_bytes
    form.loss_16bit.setChecked(True)
    assert window.controller.plan.loss_16bit
    assert window.controller.estimate.peak_bytes < before  # three bf16 N·V tensors, not float32 ones
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "method_loss_16bit.png"))
    # A fused loss has no logits tensor for the loop to take: the switch goes.
    window.controller.set_plan(window.controller.plan.with_changes(fused_loss=True))
    assert not box.isVisibleTo(form)

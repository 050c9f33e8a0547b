"""The Method section's transformers release of a training run (``training_transformers``): shown
beside the Loss list where transformers' own loss runs, hidden under a loss of other code, and a choice
in it is the plan's (transformers 4.37.2 ``LlamaForCausalLM.forward``: ``logits = logits.float()`` and the
shifted ``.contiguous()`` copy; 4.49.0 ``ForCausalLMLoss``: labels padded, no copy)."""

from __future__ import annotations

from typing import Any

from core.losses import LossChoice
from core.plan import LoraSettings, Method, TransformersLoss
from core.presets import plan_for_model
from gui.main_window import MainWindow
from tests.gui.test_parallel import _choose


def test_the_release_shows_for_transformers_loss_and_changes_the_plan(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    key = "training_transformers"
    window.controller.set_plan(plan_for_model("llama-2-7b").with_changes(checkpointing=True))
    assert form.fields[key].isVisibleTo(form)
    assert form.training_transformers.value() == TransformersLoss.V5_ON.value
    before = window.controller.estimate
    _choose(form.training_transformers, TransformersLoss.V4_31_TO_4_45.value)
    assert window.controller.plan.training_transformers is TransformersLoss.V4_31_TO_4_45
    forward = [
        next(p for p in e.worst.phases if str(p.kind) == "forward") for e in (before, window.controller.estimate)
    ]
    assert forward[1].allocated_bytes > forward[0].allocated_bytes  # the shifted float32 copy
    # A fused linear cross-entropy makes no logits for transformers' loss to copy: the row goes.
    form.loss.setCurrentIndex(form.loss.findData(LossChoice.FUSED.value))
    assert not form.fields[key].isVisibleTo(form)


def test_the_choices_read_as_release_lines(window: MainWindow) -> None:
    combo = window.method_form.training_transformers
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert texts == [
        "4.31 – 4.45 (float32 logits, copied)",
        "4.46 – 4.48 (shifted float32 copy)",
        "4.49 – 4.57 (experts as nn.Linear)",
        "5.0 and later",
    ]


def test_the_release_shows_for_moe_adapters_under_other_loss_code_and_moves_the_adapters(
    qtbot: Any, window: MainWindow
) -> None:
    """On a mixture of experts with MLP targets the release decides what LoRA adapts (tests/data/moe_lora/): the
    row stays under a fused loss, and 4.49 - 4.57 adapts Qwen3-MoE's routed experts, which 5.x does not reach."""
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    key = "training_transformers"
    lora = LoraSettings(rank=16, alpha=32, targets=("q_proj", "gate_proj", "up_proj", "down_proj"))
    plan = plan_for_model("qwen3-30b-a3b").with_changes(method=Method.LORA, lora=lora, fused_loss=True)
    window.controller.set_plan(plan)
    assert form.fields[key].isVisibleTo(form)
    five = window.controller.estimate.params.adapter
    _choose(form.training_transformers, TransformersLoss.V4_49_TO_4_57.value)
    assert window.controller.plan.training_transformers is TransformersLoss.V4_49_TO_4_57
    # 48 layers × 128 experts × 3 × 16 × (2,048 + 768) (catalogue qwen3-30b-a3b: hidden 2,048, expert MLP 768)
    assert window.controller.estimate.params.adapter - five == 48 * 128 * 3 * 16 * (2_048 + 768)
    form.grab().save("/tmp/h80moe-form.png")

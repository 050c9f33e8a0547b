"""The Method section's Optimizer list with transformers' names modelled on branch h62optim (Adagrad, RMSprop,
bitsandbytes' RMSprop and AdEMAMix): each entry listed with its label and tooltip, choosing one is the plan's, and
RMSprop chosen under the fused default follows torch's foreach; fused typed with it is refused
(Plan._check_new_optimizers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from core.inputs import OPTIMIZER_LABELS, OPTIMIZER_TOOLTIPS
from core.plan import Optimizer, OptimizerImpl
from core.presets import plan_for_model
from gui.main_window import MainWindow
from tests.core.test_hf_optimizer_names import NEW

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set
# the optimizers h62optim planned: one list, the core tests' (tests/core/test_hf_optimizer_names.py)


def test_the_new_optimizers_are_listed_and_chosen(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    window.controller.set_plan(plan_for_model("gpt2").with_changes(optimizer_impl=OptimizerImpl.FOREACH))
    for optimizer in NEW:
        index = form.optimizer.findData(optimizer.value)
        assert index >= 0 and form.optimizer.itemText(index) == OPTIMIZER_LABELS[optimizer]
        assert form.optimizer.itemData(index, Qt.ItemDataRole.ToolTipRole) == OPTIMIZER_TOOLTIPS[optimizer]
        form.optimizer.setCurrentIndex(index)
        assert window.controller.plan.optimizer is optimizer
    before = window.controller.estimate.peak_bytes
    form.optimizer.setCurrentIndex(form.optimizer.findData(Optimizer.ADEMAMIX.value))
    assert window.controller.estimate.peak_bytes > before  # 12 B a parameter against 8-bit AdEMAMix's ~3
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "method_optimizer_ademamix.png"))


def test_choosing_rmsprop_under_the_fused_default_follows_torchs_foreach(qtbot: Any, window: MainWindow) -> None:
    """Merge review of h62optim: choosing RMSprop while the plan said fused (the default) kept the last plan with
    a refusal, so the list looked dead; torch builds RMSprop foreach when no implementation is asked for
    (transformers' rmsprop passes none): the switch follows it (Plan.follow_optimizer). Fused typed after it is
    still refused with the reason."""
    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    window.controller.set_plan(plan_for_model("gpt2").with_changes(optimizer_impl=OptimizerImpl.FUSED))
    form.optimizer.setCurrentIndex(form.optimizer.findData(Optimizer.RMSPROP.value))
    plan = window.controller.plan
    assert plan.optimizer is Optimizer.RMSPROP and plan.optimizer_impl is OptimizerImpl.FOREACH
    assert form.optimizer_impl.currentData() == OptimizerImpl.FOREACH.value
    form.optimizer_impl.setCurrentIndex(form.optimizer_impl.findData(OptimizerImpl.FUSED.value))
    assert window.controller.plan.optimizer_impl is OptimizerImpl.FOREACH  # the last valid plan stays


def test_the_row_offers_what_the_plans_stack_builds(qtbot: Any, window: MainWindow) -> None:
    """Branch h63stack: on the Megatron stack the list greys what Megatron-Core does not build (adam / sgd / lion,
    NVIDIA/Megatron-LM d98e8a64 megatron/core/optimizer/__init__.py), each greyed entry's tooltip saying the rule and
    what it builds; under ZeRO-Offload, DeepSpeed's CPU kernels (deepspeedai/DeepSpeed edaa7221 runtime/engine.py);
    back on eager every entry is offered (core.optimizer_stacks)."""
    from dataclasses import replace

    from PySide6.QtGui import QStandardItemModel

    from core.optimizer_stacks import BUILT, OptimizerStack
    from core.plan import Offload, Stack, Strategy

    window.show()
    qtbot.waitExposed(window)
    form = window.method_form
    entries = form.optimizer.model()
    assert isinstance(entries, QStandardItemModel)

    def offered() -> set[Optimizer]:
        return {
            Optimizer(str(form.optimizer.itemData(i)))
            for i in range(form.optimizer.count())
            if entries.item(i).isEnabled()
        }

    plan = plan_for_model("gpt2")
    window.controller.set_plan(plan.with_changes(stack=Stack.MEGATRON))
    assert offered() == BUILT[OptimizerStack.MEGATRON]
    tip = form.optimizer.itemData(form.optimizer.findData(Optimizer.ADAFACTOR.value), Qt.ItemDataRole.ToolTipRole)
    assert OPTIMIZER_TOOLTIPS[Optimizer.ADAFACTOR] in tip and "Megatron-Core builds" in tip and "It builds AdamW" in tip
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "method_optimizer_megatron.png"))
    offloaded = replace(plan.parallel, gpus_per_node=8, strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER)
    window.controller.set_plan(plan.with_changes(parallel=offloaded))
    assert offered() == BUILT[OptimizerStack.ZERO_OFFLOAD]
    window.controller.set_plan(plan)
    assert offered() == set(Optimizer)
    assert (
        form.optimizer.itemData(0, Qt.ItemDataRole.ToolTipRole)
        == OPTIMIZER_TOOLTIPS[Optimizer(form.optimizer.itemData(0))]
    )

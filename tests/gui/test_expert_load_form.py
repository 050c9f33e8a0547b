"""The Parallelism section's expert load rows (issue 24 item 4): the busiest EP rank's routed tokens ÷ the mean
beside Expert parallel (a mixture of experts under EP > 1), Megatron's capacity factor and padding (a mixture of
experts on the Megatron stack); a bad value is marked on its field and the plan stays."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.plan import Stack, Strategy
from core.presets import plan_for_model
from gui.forms.fields import is_marked_invalid
from gui.main_window import MainWindow
from tests.gui.test_forms import type_into

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set
ROWS = ("parallel.expert_imbalance", "parallel.capacity_factor", "parallel.pad_to_capacity")


def _shown(window: MainWindow) -> dict[str, bool]:
    form = window.parallel_form
    return {key: form.fields[key].isVisibleTo(form) for key in ROWS}


def test_the_rows_show_for_a_mixture_of_experts_under_ep_and_megatron(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    dense = plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.FSDP)
    window.controller.set_plan(dense)
    assert _shown(window) == dict.fromkeys(ROWS, False)
    moe = plan_for_model("qwen3-30b-a3b").on_gpus(8, Strategy.FSDP)
    window.controller.set_plan(moe)
    assert _shown(window) == dict.fromkeys(ROWS, False)  # EP 1, torchtitan / transformers: dropless
    window.controller.set_plan(moe.with_parallel(expert_parallel=8))
    assert _shown(window) == {ROWS[0]: True, ROWS[1]: False, ROWS[2]: False}
    window.controller.set_plan(moe.with_parallel(expert_parallel=8).with_changes(stack=Stack.MEGATRON))
    assert _shown(window) == {ROWS[0]: True, ROWS[1]: True, ROWS[2]: False}  # padding needs a factor


def test_typed_values_change_the_plan_and_bad_ones_are_marked(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.parallel_form
    plan = plan_for_model("qwen3-30b-a3b").on_gpus(8, Strategy.FSDP).with_parallel(expert_parallel=8)
    window.controller.set_plan(plan.with_changes(stack=Stack.MEGATRON))
    before = window.controller.estimate.compute.compute_seconds_per_step  # type: ignore[union-attr]
    type_into(qtbot, form.expert_imbalance, "1.3")
    assert window.controller.plan.parallel.expert_imbalance == 1.3
    assert window.controller.estimate.compute.compute_seconds_per_step > before  # type: ignore[union-attr]
    kept = window.controller.plan
    type_into(qtbot, form.expert_imbalance, "0.9")  # below balanced: refused, marked, the plan stays
    assert window.controller.plan is kept and is_marked_invalid(form.expert_imbalance)
    type_into(qtbot, form.expert_imbalance, "1.3")
    type_into(qtbot, form.capacity_factor, "1.1")
    assert window.controller.plan.parallel.capacity_factor == 1.1
    assert form.fields["parallel.pad_to_capacity"].isVisibleTo(form)
    form.pad_to_capacity.setChecked(True)
    assert window.controller.plan.parallel.pad_to_capacity
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "parallel_expert_load.png"))
    # Back to dropless: the padding goes with it (Megatron refuses padding without a factor).
    type_into(qtbot, form.capacity_factor, "0")
    assert window.controller.plan.parallel.capacity_factor == 0.0
    assert not window.controller.plan.parallel.pad_to_capacity
    assert not form.fields["parallel.pad_to_capacity"].isVisibleTo(form)

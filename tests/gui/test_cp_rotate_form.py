"""The Parallelism section's context-parallel K/V rotation (``parallel.cp_rotate_method``): shown
behind "Advanced" only where PyTorch's ring attention runs (CP > 1, not Megatron), and a choice in
it is the plan's (torchtitan's parallelism.context_parallel_rotate_method)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.plan import CpRotate, Stack, Strategy
from core.presets import plan_for_model
from gui.main_window import MainWindow
from tests.gui.test_parallel import _choose

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set


def test_the_rotation_shows_for_pytorchs_ring_and_changes_the_plan(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.parallel_form
    form.advanced.setChecked(True)
    key = "parallel.cp_rotate_method"
    plan = plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.FSDP)
    window.controller.set_plan(plan)
    assert not form.fields[key].isVisibleTo(form)  # CP 1: no ring
    window.controller.set_plan(plan.with_parallel(context_parallel=8))
    assert form.fields[key].isVisibleTo(form)
    assert form.cp_rotate.value() == CpRotate.ALLGATHER.value
    before = window.controller.estimate.peak_bytes
    _choose(form.cp_rotate, CpRotate.ALLTOALL.value)
    assert window.controller.plan.parallel.cp_rotate_method is CpRotate.ALLTOALL
    assert window.controller.estimate.peak_bytes <= before  # three chunks instead of every rank's
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "parallel_cp_rotate.png"))
    _choose(form.cp_rotate, CpRotate.ALLGATHER.value)
    assert window.controller.plan.parallel.cp_rotate_method is CpRotate.ALLGATHER
    # Megatron-LM's context parallelism is Transformer Engine's attention: the row goes.
    window.controller.set_plan(window.controller.plan.with_changes(stack=Stack.MEGATRON))
    assert not form.fields[key].isVisibleTo(form)


def test_the_choices_read_as_the_frameworks_words(window: MainWindow) -> None:
    form = window.parallel_form
    texts = [form.cp_rotate.itemText(i) for i in range(form.cp_rotate.count())]
    assert texts == ["allgather (every rank's K/V)", "alltoall (one chunk at a time)"]
    assert "alltoall sends one chunk to the next rank" in form.cp_rotate.toolTip()

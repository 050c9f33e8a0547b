"""The Parallelism section's FSDP2 unit layout (``parallel.fsdp_units``): shown only where FSDP2
shards the model (not DDP, ZeRO or FSDP1's wrap), and a choice in it is the plan's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.dtypes import MpDtype
from core.plan import FsdpUnits, Strategy
from core.presets import plan_for_model
from gui.main_window import MainWindow
from tests.gui.test_parallel import _choose

SHOTS = os.environ.get("VRAMPLAN_SHOTS")  # a folder to keep the section's picture in, when set
KEY = "parallel.fsdp_units"


def test_the_layout_shows_for_fsdp2_only_and_changes_the_plan(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    form = window.parallel_form
    plan = plan_for_model("llama-3.1-8b")
    window.controller.set_plan(plan)  # one GPU: no units
    assert not form.fields[KEY].isVisibleTo(form)
    window.controller.set_plan(plan.on_gpus(8, Strategy.DDP))
    assert not form.fields[KEY].isVisibleTo(form)
    window.controller.set_plan(plan.on_gpus(8, Strategy.ZERO3))
    assert not form.fields[KEY].isVisibleTo(form)
    fsdp = plan.on_gpus(8, Strategy.FSDP).with_parallel(fsdp_param_dtype=MpDtype.BF16)
    window.controller.set_plan(fsdp)
    assert form.fields[KEY].isVisibleTo(form)
    assert form.fsdp_units.value() == FsdpUnits.ROOT.value
    before = window.controller.estimate.peak_bytes
    _choose(form.fsdp_units, FsdpUnits.CARVED.value)
    assert window.controller.plan.parallel.fsdp_units is FsdpUnits.CARVED
    assert window.controller.estimate.peak_bytes < before  # the embedding no longer gathered all step
    if SHOTS:
        form.grab().save(str(Path(SHOTS) / "parallel_fsdp_units.png"))
    window.controller.set_plan(window.controller.plan.with_parallel(fsdp1_wrap=True))
    assert not form.fields[KEY].isVisibleTo(form)  # FSDP1 wraps its own way


def test_the_choices_name_the_releases(window: MainWindow) -> None:
    form = window.parallel_form
    texts = [form.fsdp_units.itemText(i) for i in range(form.fsdp_units.count())]
    assert texts == [
        "blocks + root (accelerate ≤ 1.13)",
        "ends carved (accelerate ≥ 1.14)",
    ]
    assert "accelerate ≥ 1.14" in form.fsdp_units.toolTip()

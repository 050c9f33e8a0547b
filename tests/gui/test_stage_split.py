"""Parallelism: the pipeline stage split (parallel.stage_split, core.pipeline), shown with PP > 1, bound
both ways; nanotron's split by compute refused under the interleaved schedule, as core.plan refuses it."""

from __future__ import annotations

from typing import Any

from core.parallel.layout import layout
from core.plan import PipelineSchedule, PipelineSplit, Strategy
from core.presets import plan_for_model
from gui.main_window import MainWindow


def _choose(widget: Any, value: str) -> None:
    widget.setCurrentIndex(widget.findData(value))


def test_the_stage_split_row_shows_with_a_pipeline_and_deals_the_blocks(qtbot: Any, window: MainWindow) -> None:
    form = window.parallel_form
    row = form.fields["parallel.stage_split"]
    window.controller.set_plan(plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.DDP))
    assert not row.isVisibleTo(form)  # PP 1: nothing to split
    window.controller.set_plan(window.controller.plan.with_parallel(pipeline_parallel=4).with_workload(grad_accum=8))
    assert row.isVisibleTo(form) and form.stage_split.currentData() == PipelineSplit.EVEN.value
    _choose(form.stage_split, PipelineSplit.COMPUTE.value)
    plan = window.controller.plan
    assert plan.parallel.stage_split is PipelineSplit.COMPUTE
    # Llama 3.1 8B on 4 stages by nanotron's costs: 9, 9, 8, then 6 with the head (tests/core/test_pipeline_split.py).
    assert [s.layers for s in layout(plan).stages] == [9, 9, 6]
    _choose(form.schedule, PipelineSchedule.INTERLEAVED.value)  # refused: nanotron's split has no chunks
    assert window.controller.plan.parallel.schedule is PipelineSchedule.ONE_F_ONE_B
    window.controller.set_plan(plan.with_parallel(stage_split=PipelineSplit.EVEN))
    assert form.stage_split.currentData() == PipelineSplit.EVEN.value

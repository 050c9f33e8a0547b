"""The chart's geometry (gui/chart/geometry.py) without a window: which bars and segments are
drawn, how they stack, which get a label, and where the y axis tops out."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from core.estimate import estimate
from core.plan import Method, Strategy
from core.presets import default_plan, plan_for_model
from core.units import GB, GiB
from gui.chart import geometry
from gui.chart.geometry import BarSpec


def test_the_geometry_imports_neither_qt_nor_pyqtgraph() -> None:
    code = "import sys, gui.chart.geometry; print(sorted(m for m in ('PySide6', 'pyqtgraph') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_training_bars_are_the_phases_then_the_peak_and_stack_to_their_totals() -> None:
    est = estimate(default_plan())
    bars = geometry.bars_for(est, "training", None, None)
    assert [bar.label for bar in bars] == [*(phase.name for phase in est.phases), "nvidia-smi"]
    stacked = geometry.stack(bars, geometry.series_for("training"), GB)
    assert list(stacked) == [*geometry.TRAINING_SERIES, "measured"]
    for index, bar in enumerate(bars):
        top = max(y0[index] + heights[index] for y0, heights in stacked.values())
        assert top == pytest.approx(bar.total_bytes / GB)
    # Each series starts where the one below it ends.
    keys = list(stacked)
    for below, above in itertools.pairwise(keys):
        y0, heights = stacked[below]
        assert stacked[above][0] == pytest.approx(tuple(b + h for b, h in zip(y0, heights, strict=True)))


def test_inference_draws_one_bar_of_the_serving_series() -> None:
    est = estimate(default_plan())
    bars = geometry.bars_for(est, "inference", None, None)
    assert len(bars) == 1
    stacked = geometry.stack(bars, geometry.series_for("inference"), GiB)
    assert set(stacked) == set(geometry.INFERENCE_SERIES)
    assert stacked["kv_cache"][1][0] == pytest.approx(est.inference.kv_cache_bytes / GiB)


def test_thin_segments_get_no_label_and_every_bar_gets_its_total() -> None:
    bars = [BarSpec("a", {"weights": 50e9, "gradients": 0.1e9}, 50.1e9)]
    stacked = geometry.stack(bars, geometry.series_for("training"), GB)
    top = geometry.y_top(geometry.tallest(bars, 80.0, GB), 0.0, 0.2)
    labels = geometry.segment_labels(bars, stacked, top, "GB")
    assert set(labels) == {("weights", 0)}  # 0.1 GB is thinner than a line of text
    text, middle = labels[("weights", 0)]
    assert text == "50.0 GB" and middle == pytest.approx(25.0)
    [(total, lift)] = geometry.total_labels(bars, top, "GB", GB)
    assert total == "50.1 GB" and lift > 50.1


def test_the_axis_top_stays_put_under_small_edits_and_clears_the_legend() -> None:
    first = geometry.y_top(80.0, 0.0, 0.2)
    assert first >= 80.0 / 0.8
    assert geometry.y_top(78.0, first, 0.2) == first  # a small change keeps the axis
    assert geometry.y_top(200.0, first, 0.2) > first  # a taller bar raises it
    assert geometry.nice_ceiling(103.0) == 105.0 and geometry.nice_ceiling(82.3) == pytest.approx(82.5)
    assert geometry.nice_ceiling(0.0) == 1.0


def test_names_hit_testing_and_the_measured_mark() -> None:
    bars = [BarSpec("forward", {"weights": 10e9}, 10e9), BarSpec("backward", {"weights": 10e9, "gradients": 5e9}, 15e9)]
    assert geometry.bar_names(bars, "backward") == ["forward", "backward (peak)"]
    assert geometry.two_lines("peak + overhead") == "peak +\noverhead"
    # The judged bar's name has no space: at 1024 x 700 it overran its 60 px slot by 2 px.
    assert geometry.two_lines("nvidia-smi") == "nvidia-\nsmi"
    assert geometry.two_lines("forward") == "forward" and geometry.two_lines("-x-") == "-x-"
    stacked = geometry.stack(bars, geometry.series_for("training"), GB)
    assert geometry.segment_at(stacked, 2, 1.0, 12.0) == "gradients"
    assert geometry.segment_at(stacked, 2, 1.0, 5.0) == "weights"
    assert geometry.segment_at(stacked, 2, 0.5, 5.0) == ""  # between the bars
    assert geometry.segment_at(stacked, 2, 0.0, 12.0) == ""  # above the first
    left, right, level = geometry.measured_mark(bars, "backward", 14e9, GB)
    assert left < 1.0 < right and level == pytest.approx(14.0)


def test_a_caption_names_the_plan_the_card_and_the_worst_rank() -> None:
    plan = plan_for_model("llama-3.1-70b", method=Method.FULL, checkpointing=True).with_hardware(gpu="h100-sxm")
    plan = plan.with_workload(seq_len=8192).on_gpus(16, Strategy.FSDP)
    est = estimate(plan.with_parallel(tensor_parallel=8, pipeline_parallel=2))  # two kinds of pipeline stage
    lines = geometry.caption_lines(est, "training", "GB")
    assert "16 × NVIDIA H100" in lines[0]
    assert len(est.ranks) > 1 and "the verdict is the worst rank's" in lines[-1]


def test_a_serving_caption_names_what_is_served_not_the_training_method() -> None:
    # Issue 26, item 11: the serving chart's caption said "LoRA", the training method.
    plan = plan_for_model("llama-3.1-8b", method=Method.LORA).with_inference(engine="vllm", tensor_parallel=2)
    lines = geometry.caption_lines(estimate(plan.with_hardware(gpu="h100-sxm")), "inference", "GB")
    assert "LoRA" not in " ".join(lines) and "served by vLLM" in lines[0] and "2 × NVIDIA H100" in lines[0]


def test_a_value_label_takes_the_form_that_fits_never_a_cut_one() -> None:
    # A stand-in font: 6 px per character (the figures are the chart's own, "16.1 GB").
    def width(text: str) -> float:
        return 6.0 * len(text)

    inset = 2 * geometry.LABEL_INSET
    assert geometry.fitted_text("16.1 GB", "GB", 42 + inset, width) == "16.1 GB"  # 7 characters, 42 px
    assert geometry.fitted_text("16.1 GB", "GB", 41 + inset, width) == "16.1"  # the axis names the unit
    assert geometry.fitted_text("16.1 GB", "GB", 23 + inset, width) == ""  # no room even for the number
    # A figure in another unit than the axis's keeps its unit or goes: "512" would read as GB.
    assert geometry.fitted_text("512 MB", "GB", 30 + inset, width) == ""
    assert geometry.fitted_text("16.1 GiB", "GiB", 24 + inset, width) == "16.1"
    # Four bars (three phases and the peak) in a 252 px view: slots of 60 px, bars of 37.2 px.
    bar, slot = geometry.bar_pixels(252.0, 4)
    assert slot == pytest.approx(60.0) and bar == pytest.approx(60.0 * geometry.BAR_WIDTH)

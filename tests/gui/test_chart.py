"""The chart draws the Estimate's numbers, and only those."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QColor, QImage

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.estimate import VERDICT_LABELS
from core.files.measurement import load_measurement
from core.plan import METHOD_LABELS, Engine, Hardware, Plan
from core.units import GB, GiB
from core.verdict import Mode
from gui.chart.geometry import SERIES_COLOURS
from gui.chart.widget import MemoryChart
from gui.format import memory
from gui.layout import settle_layouts
from gui.main_window import MainWindow


def heights(chart: MemoryChart, key: str) -> list[float]:
    return [float(h) for h in chart.series[key].opts["height"]]


def test_peak_bar_equals_the_estimate_buckets(window: MainWindow) -> None:
    estimate = window.controller.estimate
    chart = window.chart
    bars = chart.bars()
    assert bars[-1].label == "nvidia-smi"
    peak = len(bars) - 1
    for bucket in estimate.buckets:
        assert heights(chart, bucket.key.value)[peak] == pytest.approx(bucket.bytes / GB)
    assert bars[-1].total_bytes == estimate.total_bytes


def test_phase_bars_equal_the_phases(window: MainWindow) -> None:
    estimate = window.controller.estimate
    for index, phase in enumerate(estimate.phases):
        for bucket in phase.buckets:
            assert heights(window.chart, bucket.key.value)[index] == pytest.approx(bucket.bytes / GB)
        assert window.chart.bars()[index].label == phase.name


def test_items_are_updated_in_place(window: MainWindow) -> None:
    chart = window.chart
    items_before = list(chart.plot.getPlotItem().items)
    series_before = dict(chart.series)
    window.workload_form.micro_batch.setValue(1)
    window.hardware_form.gpu.show_value("h100-sxm")
    window.controller.update("hardware.gpu", lambda p: p.with_hardware(gpu="h100-sxm"))
    assert chart.series == series_before
    assert list(chart.plot.getPlotItem().items) == items_before
    activations = window.controller.estimate.bucket(window.controller.estimate.buckets[3].key)
    assert heights(chart, "activations")[-1] == pytest.approx(activations.bytes / GB)


def test_capacity_line_and_headroom_band(window: MainWindow) -> None:
    estimate = window.controller.estimate
    assert window.chart.capacity_line.value() == pytest.approx(estimate.capacity_bytes / GB)
    low, high = window.chart.band.getRegion()
    assert (low, high) == pytest.approx((estimate.usable_bytes / GB, estimate.capacity_bytes / GB))


def test_the_lines_are_the_verdict_s_in_each_mode_on_an_apple_gpu(window: MainWindow) -> None:
    """Seen in a render of an M5 Max serving with llama.cpp (stop 65): the chart drew "capacity 137 GB" — PyTorch's
    MPS limit, min(1.7 × Metal's working set, the 128 GiB of RAM: core.runtime.pytorch_limit_bytes) — while the
    verdict judged 3.37 GB against 92.8 GB usable, 90 % of Metal's 96 GiB working set (the catalogue's memory_bytes
    for apple-m4-max-128gb: 3/4 of 128 GB), which llama.cpp, vLLM and SGLang meet (Estimate.serving_capacity_bytes)."""
    window.show()
    window.inference_action.trigger()
    plan = Plan(
        model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="apple-m4-max-128gb")
    )
    window.controller.reset(plan.with_inference(engine=Engine.LLAMACPP))
    estimate = window.controller.estimate
    judged = estimate.judgement(Mode.INFERENCE)
    assert judged.capacity_bytes == 96 * GiB != estimate.capacity_bytes  # the working set, not the training limit
    assert window.chart.capacity_line.value() == pytest.approx(judged.capacity_bytes / GB)
    assert window.chart.band.getRegion() == pytest.approx((judged.usable_bytes / GB, judged.capacity_bytes / GB))
    assert window.chart.legend.capacity_text == f"capacity {memory(judged.capacity_bytes, 'GB')}"  # 103 GB, not 137
    window.training_action.trigger()  # training on MPS meets PyTorch's limit: the lines follow the verdict back
    assert window.chart.capacity_line.value() == pytest.approx(estimate.judgement(Mode.TRAINING).capacity_bytes / GB)


def test_gib_on_request(window: MainWindow) -> None:
    window.unit_actions["GiB"].trigger()
    estimate = window.controller.estimate
    assert heights(window.chart, "weights")[-1] == pytest.approx(estimate.buckets[0].bytes / GiB)
    assert "GiB" in window.verdict.headline.text()
    assert window.settings.unit == "GiB"


def test_inference_mode_shows_serving_memory(window: MainWindow) -> None:
    window.inference_action.trigger()
    inf = window.controller.estimate.inference
    chart = window.chart
    assert len(chart.bars()) == 1
    assert heights(chart, "weights")[0] == pytest.approx(inf.weights_bytes / GB)
    assert heights(chart, "kv_cache")[0] == pytest.approx(inf.kv_cache_bytes / GB)
    assert heights(chart, "activations")[0] == pytest.approx(inf.activation_bytes / GB)
    assert heights(chart, "overhead")[0] == pytest.approx(inf.overhead_bytes / GB)
    assert not chart.series["gradients"].isVisible()
    assert "Serving fits" in window.verdict.badge.text()
    assert window.arithmetic.selected == "serving.kv_cache"  # serving's own bucket, its arithmetic
    window.serving_form.concurrent.setValue(8)
    assert heights(chart, "kv_cache")[0] == pytest.approx(window.controller.estimate.inference.kv_cache_bytes / GB)


def test_clicking_a_segment_shows_its_arithmetic(qtbot: Any, window: MainWindow) -> None:
    chart = window.chart
    estimate = window.controller.estimate
    peak = len(chart.bars()) - 1
    weights_gb = estimate.buckets[0].bytes / GB
    assert chart.segment_at(peak, weights_gb / 2) == "weights"
    assert chart.segment_at(peak + 0.5, weights_gb / 2) == ""  # between bars
    with qtbot.waitSignal(chart.bucketClicked):
        chart.bucketClicked.emit(chart.segment_at(peak, weights_gb + 1.0))
    assert window.arithmetic.selected == "activations"
    html = window.arithmetic.terms.toPlainText()
    for term in estimate.bucket(estimate.buckets[3].key).terms:
        assert term.label in html
    assert window.tabs.currentWidget() is window.arithmetic


def test_measurement_is_drawn_beside_the_estimate(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "format": "vramplan-measurement",
                "version": 1,
                "case": {"id": "llama-lora", "model": "llama-3.1-8b", "method": "lora"},
                "peak_allocated_bytes": 70_000_000_000,
                "breakdown_at_peak": {"parameters": 32e9, "activations": 30e9},
            }
        )
    )
    fake_dialogs.paths.append(str(path))
    window.measure_action.trigger()
    assert window.measurement == load_measurement(path)
    bars = window.chart.bars()
    assert bars[-1].label == "measured"
    assert heights(window.chart, "measured")[len(bars) - 1] == pytest.approx(70.0)
    assert "Measured peak" in window.verdict.detail.text()
    window.clear_measure_action.trigger()
    assert window.chart.bars()[-1].label == "nvidia-smi"


@pytest.mark.parametrize("backend", ["fake-cuda", "cuda"])
def test_a_measurement_is_set_against_the_estimates_figure_of_its_backend(
    window: MainWindow, tmp_path: Path, fake_dialogs: Any, backend: str
) -> None:
    # A fake-tensor run holds no cuBLAS workspace, a run on a card does (tools/measure/runner.py
    # _peak_fields: torch.cuda.memory_allocated): the verdict names the figure it is compared with,
    # and the mark across the peak phase's bar (its tensors) leaves out the workspaces on a card.
    path = tmp_path / "m.json"
    measured = 70_000_000_000
    doc = {
        "format": "vramplan-measurement",
        "version": 1,
        "case": {"id": "llama-lora", "model": "llama-3.1-8b", "method": "lora"},
        "peak_allocated_bytes": measured,
        "backend": backend,
    }
    path.write_text(json.dumps(doc))
    fake_dialogs.paths.append(str(path))
    window.measure_action.trigger()
    est = window.controller.estimate
    assert est is not None
    workspaces = est.peak_bytes - est.tensor_peak_bytes
    assert workspaces > 0
    text = window.verdict.detail.text()
    if backend == "cuda":
        assert "the estimate's allocated peak" in text
        expected_level = measured - workspaces
    else:
        assert "the estimate's tensor peak" in text
        expected_level = measured
    ys = window.chart.measured_mark.getData()[1]
    assert ys is not None and len(ys) == 2
    scale = measured / heights(window.chart, "measured")[len(window.chart.bars()) - 1]
    assert ys[0] * scale == pytest.approx(expected_level, rel=1e-9)


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"format": "vramplan-plan"}', b'{"format": "vramplan-measurement", "case": {}}', b"\xff\xfe"],
)
def test_bad_measurement_is_refused_clearly(
    window: MainWindow, tmp_path: Path, fake_dialogs: Any, content: bytes
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    plan = window.controller.plan
    fake_dialogs.paths.append(str(path))
    window.measure_action.trigger()
    assert window.measurement is None
    assert window.controller.plan is plan
    assert fake_dialogs.errors() and str(path) in fake_dialogs.errors()[0]


# ---- exports (issue 13, item 5) --------------------------------------------------------
_MATRIX = re.compile(r"matrix\(([^)]*)\)")


def _transform(element: ET.Element) -> tuple[float, float]:
    """(scale, offset) of the y coordinate in an SVG group's ``matrix(a,b,c,d,e,f)``."""
    found = _MATRIX.search(element.get("transform", ""))
    if found is None:
        return 1.0, 0.0
    matrix = [float(v) for v in found.group(1).split(",")]
    return matrix[3], matrix[5]


def svg_geometry(path: Path, fill: str) -> tuple[list[tuple[float, float]], dict[float, float]]:
    """The bars filled with ``fill`` as (bottom, top) in SVG pixels, and the left axis' tick
    labels as {value: baseline y in pixels}, read from the file's own geometry."""
    root = ET.parse(path).getroot()
    bars: list[tuple[float, float]] = []
    ticks: dict[float, float] = {}
    for group in root.iter(f"{SVG}g"):
        scale, offset = _transform(group)
        for rect in group.findall(f"{SVG}rect"):
            if group.get("fill", "").lower() == fill.lower() and abs(scale) != 1.0:  # data coordinates
                y, height = float(rect.get("y", "0")), float(rect.get("height", "0"))
                ends = sorted((scale * y + offset, scale * (y + height) + offset))
                bars.append((ends[1], ends[0]))
        for text in group.findall(f"{SVG}text"):
            label = "".join(text.itertext()).strip()
            if re.fullmatch(r"[0-9]+", label) and float(text.get("x", "0")) * abs(_transform(group)[0]) < 80:
                ticks[float(label)] = scale * float(text.get("y", "0")) + offset
    return bars, ticks


SVG = "{http://www.w3.org/2000/svg}"


def test_exported_svg_bars_agree_with_their_axis(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    """Before the fix the axis was drawn at 72/96 = 0.75 of the bars' scale: the 16.1 GB
    weights bar ended near the axis' "5"."""
    window.show()
    svg = tmp_path / "chart.svg"
    fake_dialogs.paths.append(str(svg))
    assert window.export_chart("svg")
    weights = window.controller.estimate.bucket(BucketKey.WEIGHTS).bytes / 1e9
    bars, ticks = svg_geometry(svg, "#0072b2")
    assert len(ticks) >= 3 and bars
    values = sorted(ticks)
    # Pixels per GB from the tick labels (their baseline offset cancels in a difference).
    per_gb = (ticks[values[0]] - ticks[values[-1]]) / (values[-1] - values[0])
    bottom, top = bars[0]
    assert bottom - top == pytest.approx(weights * per_gb, rel=0.02)
    # The bar stands on the axis' zero: its bottom is level with the "0" tick label's middle.
    assert abs(bottom - ticks[0.0]) < 12


def test_exports_carry_a_caption(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    window.controller.set_plan(window.controller.plan.with_hardware(gpu="rtx-3060-12gb"))
    estimate = window.controller.estimate
    png, svg = tmp_path / "chart.png", tmp_path / "chart.svg"
    fake_dialogs.paths += [str(png), str(svg)]
    assert window.export_chart("png") and window.export_chart("svg")
    expected = [estimate.plan.model.name, estimate.gpu.name, METHOD_LABELS[estimate.plan.method]]
    expected.append(VERDICT_LABELS[estimate.verdict])
    expected.append(f"micro-batch {estimate.plan.workload.micro_batch}")
    svg_text = " ".join("".join(t.itertext()) for t in ET.parse(svg).getroot().iter(f"{SVG}text"))
    image = QImage(str(png))
    assert not image.isNull()
    for words in expected:
        assert words in svg_text, words
        assert words in image.text("Description"), words
    # The caption is drawn under the plot, in the image itself.
    assert image.height() > window.chart.plot.height() * image.width() / window.chart.plot.width()


def _blue_box_width(image: QImage, rows: int) -> int:
    """Width of the weights-blue pixels in the top ``rows`` of ``image`` (the legend's sample)."""
    blue = QColor(SERIES_COLOURS["weights"]).rgb()
    xs = [x for y in range(rows) for x in range(image.width()) if image.pixel(x, y) == blue]
    return max(xs) - min(xs) + 1 if xs else 0


def test_png_export_scales_the_legend_with_the_plot(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    """pyqtgraph's legend ignores transformations: a 2× export drew it at on-screen size."""
    window.show()
    png = tmp_path / "chart.png"
    fake_dialogs.paths.append(str(png))
    assert window.export_chart("png")
    exported = QImage(str(png)).convertToFormat(QImage.Format.Format_RGB32)
    screen = window.chart.plot.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    top = window.chart.legend.sceneBoundingRect().bottom()
    on_screen = _blue_box_width(screen, int(top))
    assert on_screen > 0
    assert _blue_box_width(exported, int(top * 2)) == pytest.approx(2 * on_screen, abs=3)


def test_changed_value_labels_ask_for_one_repaint_together(window: MainWindow, monkeypatch: Any) -> None:
    """Each changed label asked the scene for two repaints (where it was, where it is): forty
    requests at an edit that moves every bar. A batch asks once, for the area they cover."""
    window.show()
    # The window as the user sees it before the edit: shown, its layouts settled (the details
    # dock narrows from its size hint then, widening the chart, which relays its labels: the
    # overhead segment's shows once the card's reserve, issue 22, makes that segment tall enough).
    settle_layouts()
    layer = window.chart.labels
    asked: list[object] = []
    original = type(layer).update
    monkeypatch.setattr(type(layer), "update", lambda self, *rect: (asked.append(rect), original(self, *rect))[1])
    window.workload_form.micro_batch.setValue(window.controller.plan.workload.micro_batch + 3)
    moved = [label for label in layer.labels if label.visible]
    assert len(moved) >= 8  # the segments and totals of four bars changed...
    assert len(asked) == 1  # ...and asked for one repaint


def test_a_narrow_charts_export_wraps_its_caption(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    """Issue 26 (cosmetic): at 1024 × 700 an exported chart's caption lines ran past the
    plot's width and were cut at its edge; they now wrap, and the picture grows to hold them."""
    from PySide6.QtGui import QFontMetricsF

    from gui.chart.export import EXPORT_MARGIN, caption_heights

    window.resize(1024, 700)
    window.show()
    window.chart.settle()
    lines = window.chart.caption()
    width = window.chart.plot.getPlotItem().sceneBoundingRect().width()
    font = window.chart.font()
    metrics = QFontMetricsF(font)
    assert max(metrics.horizontalAdvance(line) for line in lines) > width - 2 * EXPORT_MARGIN  # would be cut
    heights = caption_heights(font, lines, width)
    assert sum(heights) > metrics.lineSpacing() * len(lines)  # wrapped onto more lines
    png = tmp_path / "narrow.png"
    fake_dialogs.paths.append(str(png))
    assert window.export_chart("png")
    image = QImage(str(png))
    scale = image.width() / width
    plot_height = window.chart.plot.getPlotItem().sceneBoundingRect().height()
    assert image.height() == pytest.approx((plot_height + 2 * EXPORT_MARGIN + sum(heights)) * scale, abs=2)
    background = image.pixel(image.width() - 1, image.height() - 1)
    unwrapped_bottom = (plot_height + EXPORT_MARGIN + metrics.lineSpacing() * len(lines)) * scale
    inked = [
        y for y in range(image.height()) if any(image.pixel(x, y) != background for x in range(0, image.width(), 2))
    ]
    assert max(inked) > unwrapped_bottom  # the wrapped last line is drawn, below where it used to stop


def test_a_hidden_chart_is_fitted_once_when_shown(qtbot: Any, monkeypatch: Any) -> None:
    """Sizes the chart takes before the window is first shown are never painted: it is not
    redrawn for them (start-up laid the hidden chart out at 603 then 581 px and drew it each
    time), and it is drawn at the width it shows at."""
    from gui.chart.widget import MemoryChart

    drawn: list[tuple[bool, float]] = []
    real = MemoryChart._redraw

    def counted(self: MemoryChart) -> None:
        if self._estimate is not None:
            drawn.append((self.isVisible(), self.view.width()))
        real(self)

    monkeypatch.setattr(MemoryChart, "_redraw", counted)
    window = MainWindow()
    qtbot.addWidget(window)
    hidden = [width for visible, width in drawn if not visible]
    assert len(hidden) == 1  # the first estimate; no redraw per hidden layout pass
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    assert drawn[-1] == (True, window.chart.view.width())


def test_a_mac_plan_is_judged_on_the_mps_driver_not_nvidia_smi(window: MainWindow) -> None:
    # PyTorch on an Apple GPU runs MPS: its allocator checks the Metal driver's figure against its high
    # watermark (pytorch/pytorch aten/src/ATen/mps/MPSAllocator.h at 01f98b3e); there is no nvidia-smi.
    # The chart's bar and the banner read "nvidia-smi" for Apple plans before.
    window.show()
    window.controller.reset(window.controller.plan.with_hardware(gpu="apple-m4-max-128gb"))
    assert window.chart.bars()[-1].label == "MPS driver"
    assert "MPS driver, judged" in window.verdict.detail.text()
    assert "Judged on MPS driver" in window.verdict.detail.toolTip()
    window.controller.reset(window.controller.plan.with_hardware(gpu="h100-sxm"))
    assert window.chart.bars()[-1].label == "nvidia-smi"

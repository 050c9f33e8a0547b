"""The window at laptop and small-screen sizes (1024 × 700, 1280 × 720), in both modes: every
value label, tick label and choice shows whole, and the Diagnosis and the forms speak of the
mode and card shown (project check of 2026-12-05, five defects)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, QPointF, QRectF
from PySide6.QtGui import QFontMetricsF, QImage, QPainter
from PySide6.QtWidgets import QComboBox, QLabel, QScrollArea, QStyle, QStyleOptionComboBox

from core.advice.diagnosis import diagnose
from core.advice.remedies import RemedyKind
from core.advice.request import Pin
from core.advice.symptoms import SYMPTOM_BY_FAILURE, Failure
from core.plan import Method, Plan
from core.presets import default_plan, plan_for_model
from core.units import GB
from gui.chart.widget import MemoryChart
from gui.format import memory
from gui.main_window import MainWindow


def shown_at(qtbot: Any, window: MainWindow, width: int, height: int) -> None:
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(20)


def training_on_a_4090() -> Plan:
    """The check's training case: the start-up plan (LoRA on Llama 3.1 8B) on an RTX 4090."""
    return default_plan().with_hardware(gpu="rtx-4090")


def vllm_on_an_l4() -> Plan:
    """The check's serving case: Llama 3.1 8B served by vLLM with its defaults on an L4."""
    return default_plan().with_hardware(gpu="l4").with_inference(engine="vllm")


def _bar_pixels(chart: MemoryChart, index: int, top: float) -> tuple[float, float]:
    """The left and right edges of bar ``index`` in scene pixels."""
    half = chart.series["weights"].opts["width"] / 2
    left = chart.view.mapViewToScene(QPointF(index - half, top / 2)).x()
    right = chart.view.mapViewToScene(QPointF(index + half, top / 2)).x()
    return left, right


def _value_labels_that_do_not_fit(chart: MemoryChart) -> list[str]:
    """Shown value labels wider than their bar (a segment's) or their slot (a total), or whose
    text is not the figure the bar draws (whole, or the number in the axis's unit)."""
    top = chart.view.viewRange()[1][1]
    bars = chart.bars()
    slot = chart.view.sceneBoundingRect().width() / (len(bars) + 0.2)
    found = []
    for (key, index), label in chart._segment_labels.items():
        if not label.visible:
            continue
        left, right = _bar_pixels(chart, index, top)
        width = QFontMetricsF(label.font).horizontalAdvance(label.text)
        if width > right - left:
            found.append(f"{key} of bar {index}: “{label.text}” is {width:.0f} px on a {right - left:.0f} px bar")
        whole = memory(bars[index].parts[key], chart.unit)
        if label.text not in (whole, whole.removesuffix(f" {chart.unit}")):
            found.append(f"{key} of bar {index}: “{label.text}” is not {whole}")
    for index, label in enumerate(chart._total_labels):
        if label.visible and QFontMetricsF(label.font).horizontalAdvance(label.text) > slot:
            found.append(f"total of bar {index}: “{label.text}” wider than its {slot:.0f} px slot")
    return found


def test_value_labels_fit_their_bars_at_1024_by_700(qtbot: Any, window: MainWindow) -> None:
    """Before: at 1024 × 700 the bars are 37 px wide and “16.1 GB” 44 px: its first digit lay
    outside the bar, white on the white plot (“6.1 G”), and on the headroom band (“47.2” read
    “7.2”). A label that does not fit its bar shows the number alone (the axis names the unit)."""
    window.controller.reset(training_on_a_4090())
    shown_at(qtbot, window, 1024, 700)
    chart = window.chart
    assert _value_labels_that_do_not_fit(chart) == []
    shown = {label.text for label in chart._segment_labels.values() if label.visible}
    # core's estimate of this plan: the weights, 16.1 GB (8.03B parameters × 2 bytes, bf16).
    assert "16.1" in shown
    # At a width where “16.1 GB” fits its bar, it is shown whole.
    shown_at(qtbot, window, 1920, 1080)
    assert _value_labels_that_do_not_fit(chart) == []
    assert "16.1 GB" in {label.text for label in chart._segment_labels.values() if label.visible}


def _tick_texts_outside(chart: MemoryChart) -> list[str]:
    """The y axis's tick texts that reach past the plot widget's visible area (cut off)."""
    axis = chart.plot.getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    assert specs is not None
    visible = QRectF(chart.plot.viewport().rect())
    found = []
    for rect, _flags, text in specs[2]:
        scene = axis.mapRectToScene(rect)
        shown = chart.plot.mapFromScene(scene).boundingRect()
        if not visible.contains(QRectF(shown)):
            found.append(f"“{text}” at {shown.getRect()} outside {visible.getRect()}")
    return found


def test_the_top_tick_label_shows_whole_in_inference_at_1280_by_720(qtbot: Any, window: MainWindow) -> None:
    """Before: vLLM's defaults on an L4 put the axis top at 30 GB, a tick: the plot had no margin
    above its view, and “30” was drawn half above the widget's top edge."""
    window.set_chart_mode("inference")
    window.controller.reset(vllm_on_an_l4())
    shown_at(qtbot, window, 1280, 720)
    chart = window.chart
    # The case this reproduces: a tick at the very top (the axis top a multiple of the spacing).
    assert chart.view.viewRange()[1][1] == 30.0
    assert chart.bars()[0].total_bytes / GB < 30.0
    assert _tick_texts_outside(chart) == []


def _combo_room(combo: QComboBox) -> int:
    """The width of the box's field that shows the chosen item's text."""
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = QStyle.SubControl.SC_ComboBoxEditField
    return combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option, field, combo).width()


def test_the_symptom_picker_shows_each_choice_whole_at_1024(qtbot: Any, window: MainWindow) -> None:
    """Before: the picker showed “What did you see? Pick a sym” at 1024 × 700, and the symptoms
    themselves (up to 156 characters) were cut to their first 30. The picker names each symptom
    in a few words; the sentence a run prints is shown whole under it once picked."""
    window.controller.reset(training_on_a_4090())
    window.tabs.setCurrentWidget(window.diagnosis)
    shown_at(qtbot, window, 1024, 700)
    picker = window.diagnosis.symptom_picker
    room = _combo_room(picker)
    metrics = picker.fontMetrics()
    cut = [picker.itemText(i) for i in range(picker.count()) if metrics.horizontalAdvance(picker.itemText(i)) > room]
    assert cut == []
    picker.setCurrentIndex(picker.findData(Failure.LONG_BATCHES.value))
    qtbot.waitUntil(lambda: not window.diagnosis.stale, timeout=10_000)
    qtbot.wait(20)
    cause = window.diagnosis.symptom_cause
    assert cause.isVisible() and SYMPTOM_BY_FAILURE[Failure.LONG_BATCHES].symptom in cause.text()
    assert cause.height() >= cause.heightForWidth(cause.width())  # wrapped, not cut


def _pins_shown(window: MainWindow) -> dict[Pin, str]:
    return {pin: box.text() for pin, box in window.diagnosis.pin_boxes.items() if box.isVisibleTo(window)}


def test_each_mode_shows_and_keeps_its_own_pins(qtbot: Any, window: MainWindow) -> None:
    """Before: Inference mode showed training's six pins (“Keep the sequence length”, “No CPU
    offload” on vLLM, which never offloads), and a pin ticked in Training kept constraining the
    serving advice, unseen, after a switch of mode."""
    window.controller.reset(training_on_a_4090())
    window.tabs.setCurrentWidget(window.diagnosis)
    shown_at(qtbot, window, 1280, 720)
    panel = window.diagnosis
    assert set(_pins_shown(window)) == set(Pin)
    panel.pin_boxes[Pin.SEQUENCE].setChecked(True)
    panel.pin_boxes[Pin.GPU].setChecked(True)
    assert window.diagnoser.latest.pins == {Pin.SEQUENCE, Pin.GPU}

    window.set_chart_mode("inference")
    window.controller.set_plan(vllm_on_an_l4().with_inference(context=131072))  # one request does not fit
    qtbot.waitUntil(lambda: not panel.stale, timeout=15_000)
    # vLLM's remedies change the context and the GPU count (core.advice.request.pins_for).
    assert _pins_shown(window) == {Pin.SEQUENCE: "Keep the context length", Pin.GPU_COUNT: "Keep the GPU count"}
    assert window.diagnoser.latest.pins == frozenset()  # training's pins do not reach serving
    assert not panel.pin_boxes[Pin.SEQUENCE].isChecked()
    assert panel.diagnosis is not None and any(r.kind.value == "shorter-context" for r in panel.diagnosis.remedies)
    panel.pin_boxes[Pin.SEQUENCE].setChecked(True)
    qtbot.waitUntil(lambda: not panel.stale, timeout=15_000)
    assert panel.diagnosis.pins == {Pin.SEQUENCE}
    assert not any(r.kind.value == "shorter-context" for r in panel.diagnosis.remedies)
    assert "context length" in panel.remedy_note.text()

    # llama.cpp puts layers on the CPU: its offload pin is shown there.
    window.controller.set_plan(window.controller.plan.with_inference(engine="llamacpp", gpu_layers=99))
    assert Pin.NO_OFFLOAD in _pins_shown(window)

    window.set_chart_mode("training")
    assert set(_pins_shown(window)) == set(Pin)
    assert panel.pin_boxes[Pin.SEQUENCE].isChecked() and panel.pin_boxes[Pin.GPU].isChecked()
    assert panel.pin_boxes[Pin.SEQUENCE].text() == "Keep the sequence length"
    assert window.diagnoser.latest.pins == {Pin.SEQUENCE, Pin.GPU}


def test_the_utilisation_row_speaks_of_the_chosen_card(qtbot: Any, window: MainWindow) -> None:
    """Before: in Inference mode the field read “40 % (serving; 78 % on Apple GPUs)” on an L4."""
    window.set_chart_mode("inference")
    window.controller.reset(vllm_on_an_l4())
    shown_at(qtbot, window, 1280, 720)
    field = window.hardware_form.utilisation
    assert field.value() == field.minimum()  # none typed: the special text shows
    # core.serving.speed: SERVING_UTILISATION 0.4 on NVIDIA and AMD cards, APPLE_MATMUL_UTILISATION
    # 0.78 on Apple GPUs (philipturner/metal-flash-attention README, MPS GEMM at 78 % of peak).
    assert field.specialValueText() == "40 % (serving)"
    assert "Apple" not in field.toolTip()
    apple = window.controller.plan.with_hardware(gpu="apple-m2-max-96gb").with_inference(engine="llamacpp")
    window.controller.set_plan(apple)
    assert field.specialValueText() == "78 % (serving on an Apple GPU)"
    assert "78 %" in field.toolTip()
    window.set_chart_mode("training")
    assert field.specialValueText() == "modelled"


def _cut_on_the_right(scroll: QScrollArea) -> list[str]:
    """Visible labels of a panel that scrolls only up and down whose text reaches past its right edge."""
    viewport = scroll.viewport()
    found = []
    for label in scroll.widget().findChildren(QLabel):
        if not label.isVisibleTo(scroll) or not label.text():
            continue
        right = label.mapTo(viewport, QPoint(label.width(), 0)).x()
        if right > viewport.width():
            found.append(f"{label.accessibleName() or label.text()[:30]}: ends at {right} px of {viewport.width()}")
    return found


def test_the_serving_speed_shows_whole_at_1024_by_700(qtbot: Any, window: MainWindow) -> None:
    """Before: at 1024 × 700 the Time tab in Inference mode was cut on the right (“Time per output
    token: 95.6 ms (decode”, “Card: 121 TFLOP/s · 300”, the assumptions): its one-line figures
    held the panel wider than the Details dock, which does not scroll sideways."""
    window.set_chart_mode("inference")
    window.controller.reset(vllm_on_an_l4().with_inference(context=8192, concurrent=51))
    window.tabs.setCurrentWidget(window.compute_panel)
    shown_at(qtbot, window, 1024, 700)
    scroll = window.compute_panel.serving.findChild(QScrollArea)
    assert scroll is not None
    assert _cut_on_the_right(scroll) == []
    # In a panel this narrow each figure stands under its name, across the panel: beside it the
    # assumptions took a 110 px column, 25 lines of two or three words.
    assumptions = window.compute_panel.serving.values["assumptions"]
    assert assumptions.width() >= scroll.viewport().width() - 40
    shown_at(qtbot, window, 1920, 1080)  # wide: the names beside their figures again
    names = window.compute_panel.serving.form.labelForField(assumptions)
    assert names is not None and names.y() == assumptions.y()


def test_the_serving_diagnosis_shows_whole_at_1024_by_700(qtbot: Any, window: MainWindow) -> None:
    """Before: at 1024 × 700 the badge “✖ Serving: Out of memory” (13 pt, on one line) was wider
    than the Details dock: the whole tab was laid out wider and cut on the right (the badge, the
    headline, the Apply buttons). The badge takes two lines where one does not fit."""
    window.set_chart_mode("inference")
    window.controller.reset(vllm_on_an_l4().with_inference(context=131072))  # one request does not fit
    window.tabs.setCurrentWidget(window.diagnosis)
    shown_at(qtbot, window, 1024, 700)
    panel = window.diagnosis
    qtbot.waitUntil(lambda: not panel.stale, timeout=15_000)
    qtbot.wait(20)
    assert "Serving:" in panel.badge.text() and "Out of memory" in panel.badge.text()
    assert panel.widget().minimumSizeHint().width() <= panel.viewport().width()
    assert _cut_on_the_right(panel) == []
    # Where it fits on one line (1920 wide), it stays on one.
    shown_at(qtbot, window, 1920, 1080)
    assert "\n" not in panel.badge.text()


def _symptoms_listed(window: MainWindow) -> list[object]:
    picker = window.diagnosis.symptom_picker
    return [picker.itemData(i) for i in range(1, picker.count())]


def test_each_mode_lists_its_own_symptoms(qtbot: Any, window: MainWindow) -> None:
    """Before: Inference mode offered training's symptoms (the first step, the forward or backward
    pass, evaluation), whose remedies are training's; a symptom picked in one mode stayed picked
    in the other. Serving fails loading the model or serving many users
    (core.advice.diagnosis._serving_failure); a training plan can fail at any of them."""
    window.controller.reset(training_on_a_4090())
    window.tabs.setCurrentWidget(window.diagnosis)
    shown_at(qtbot, window, 1280, 720)
    panel = window.diagnosis
    assert _symptoms_listed(window) == [s.value for s in Failure if s is not Failure.NONE]
    panel.select_symptom(Failure.LONG_BATCHES)
    assert window.diagnoser.latest.symptom is Failure.LONG_BATCHES

    window.set_chart_mode("inference")
    serving = [Failure.SERVING.value, Failure.SERVING_WEIGHTS.value, Failure.SERVING_START.value]  # h92verd: a refusal
    assert _symptoms_listed(window) == serving
    assert panel.symptom_picker.currentData() is None
    assert window.diagnoser.latest.symptom is None  # training's pick does not reach serving
    panel.select_symptom(Failure.SERVING)
    assert window.diagnoser.latest.symptom is Failure.SERVING

    window.set_chart_mode("training")
    assert panel.symptom_picker.currentData() == Failure.LONG_BATCHES.value
    assert window.diagnoser.latest.symptom is Failure.LONG_BATCHES


def test_the_training_diagnosis_wraps_inside_the_dock_at_1024_by_700(qtbot: Any, window: MainWindow) -> None:
    """h58left: at 1024 × 700 the remedy "Frozen base loaded in bf16 (from_pretrained(torch_dtype=torch.bfloat16))"
    (now "… (torch_dtype=torch.bfloat16)"; core.advice.remedies, branch h57opt) held one 319 px word in a 256 px
    dock: the tab was laid out 467 px wide and every sentence in it was cut on the right (the headline, the state
    line "33.0 GB = 32.2 GB …"). A long word breaks at its punctuation; the title reads the same."""
    # LoRA on Llama 3.1 8B as its preset loads it (float32 weights, bf16 autocast) on an RTX 4090.
    plan = plan_for_model("llama-3.1-8b").with_method(Method.LORA).with_hardware(gpu="rtx-4090")
    window.controller.reset(plan)
    window.tabs.setCurrentWidget(window.diagnosis)
    shown_at(qtbot, window, 1024, 700)
    panel = window.diagnosis
    qtbot.waitUntil(lambda: not panel.stale, timeout=15_000)
    qtbot.wait(20)
    titles = {r.kind: r.title for r in diagnose(plan).remedies}
    long_title = titles[RemedyKind.BASE_16BIT]
    row = next(r for r in panel.remedy_list.rows if r.entry is not None and r.entry.title == long_title)
    assert row.title.text().replace("\u200b", "") == long_title  # the same words, breakable
    assert long_title.endswith("(torch_dtype=torch.bfloat16)")  # the argument, not the call written out
    assert panel.widget().minimumSizeHint().width() <= panel.viewport().width()
    assert _cut_on_the_right(panel) == []
    state = panel.figures["state"]
    assert state.height() >= state.heightForWidth(state.width())  # wrapped, not cut


def test_bar_names_that_fit_their_slot_are_never_cut(qtbot: Any, window: MainWindow) -> None:
    # At 1024 × 700 "backward" is 58 px in a 59 px slot: whole, as before the ellipsis for a large OS font
    # (tests/gui/test_large_font.py); only a line wider than its whole slot is cut.
    shown_at(qtbot, window, 1024, 700)
    names = [name for _, name in window.chart.plot.getAxis("bottom")._tickLevels[0]]
    assert not any("…" in name for name in names), names
    assert window.chart.plot.getAxis("bottom").toolTip() == ""


def _first_start(qtbot: Any, settings: Any, width: int, height: int) -> MainWindow:
    main = MainWindow(settings=settings)
    qtbot.addWidget(main)
    main.resize(width, height)
    main.show()
    qtbot.waitExposed(main)
    qtbot.wait(50)  # the docks are sized once the window is shown
    return main


def test_at_800_by_600_the_details_stack_under_the_plan_and_the_chart_keeps_its_room(
    qtbot: Any, settings: Any
) -> None:
    """Branch h87qa: at 800 × 600 the Plan dock (its least width, ~420 px) and the Details (270 px) left the
    chart ~80 px, the bars a sliver. A first start that narrow stacks the Details as a tab beside the Plan;
    a click on the verdict or a bar still brings the Details up."""
    main = _first_start(qtbot, settings, 800, 600)
    assert main.details_dock in main.tabifiedDockWidgets(main.plan_dock)
    assert main.chart.width() >= 300
    main.show_diagnosis()
    qtbot.wait(20)
    assert not main.details_dock.visibleRegion().isEmpty() and main.tabs.currentWidget() is main.diagnosis


def test_at_1024_by_700_the_three_columns_stay(qtbot: Any, settings: Any) -> None:
    main = _first_start(qtbot, settings, 1024, 700)
    assert main.tabifiedDockWidgets(main.plan_dock) == []

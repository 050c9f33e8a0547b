"""Apply on the Diagnosis's higher gpu_memory_utilization sets the Serving form's field (h97rem).

The plan is tests/core/test_higher_share_remedy.py's: Llama 3.1 8B (14.96 GiB of bf16 weights,
https://huggingface.co/meta-llama/Llama-3.1-8B) by vLLM 0.19 on an RTX 4090 at gpu_memory_utilization 0.6, which
leaves no KV block ("No available memory for the cache blocks"); 0.70 starts it and fits (core's answer, checked
there). Failed before: no such row.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.presets import plan_for_model
from gui.main_window import MainWindow


def test_apply_sets_the_utilisation_field(qtbot: Any, window: MainWindow) -> None:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    plan = plan.with_inference(engine="vllm", context=4096, gpu_memory_utilization=0.6)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    window.inference_action.trigger()
    assert window.controller.set_plan(plan) is None
    panel = window.diagnosis
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: not panel.stale and bool(panel.remedy_list.rows), timeout=15000)
    row = next(r for r in panel.remedy_list.rows if r.entry is not None and r.entry.key == "higher-share")
    assert row.entry.title == "gpu_memory_utilization 0.70"
    window.grab().save("/tmp/h97rem-diagnosis.png")
    row.apply.click()
    assert window.controller.plan.inference.gpu_memory_utilization == pytest.approx(0.70)
    assert window.serving_form.utilisation.value() == pytest.approx(70.0)  # the field shows per cent

"""The Diagnosis tab says what core's Diagnosis.outcome says (h91diag): a training plan whose serving would not start
reads "Fails when the serving engine starts", never "Nothing fails: the training step, evaluation and serving all fit",
the sentence the tab wrote for it before. The plan is tests/core/test_one_answer_diagnosis_serving.py's: LoRA on Llama
2 7B (max_position_embeddings 4,096, https://huggingface.co/meta-llama/Llama-2-7b-hf config.json) served by vLLM at
8,192 tokens, which vLLM refuses without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm 0.19.0 vllm/config/model.py)."""

from __future__ import annotations

import re
from typing import Any

from core.advice.diagnosis import diagnose
from core.catalogue import find_model
from core.inputs import Method
from core.plan import Engine, default_plan_on
from gui.main_window import MainWindow


def test_the_tab_says_serving_would_not_start_beside_a_fitting_step(qtbot: Any, window: MainWindow) -> None:
    model = find_model("llama-2-7b")
    plan = default_plan_on(model.spec, model.id).with_input("method", Method.LORA)
    plan = plan.with_inference(engine=Engine.VLLM, context=8192)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    assert window.controller.set_plan(plan) is None
    panel = window.diagnosis
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.diagnosis is not None and panel.diagnosis.estimate.plan == plan, timeout=10000)
    shown = re.sub("<[^>]+>", "", panel.failure.text()).replace("&quot;", '"').replace("&#x27;", "'")
    assert "Nothing fails" not in shown and "serving all fit" not in shown
    assert shown == diagnose(plan).outcome.text
    assert shown.startswith("Fails when the serving engine starts: the training step and evaluation fit; vLLM would")
    assert "The training step fits, but it would fail when the serving engine starts." in panel.remedy_note.text()
    # the start-up refusal's own symptom row (h92verd), one click away, with the changes that start the engine
    assert panel.show_symptom_button.isVisibleTo(panel)
    panel.show_symptom_button.click()
    assert panel.symptom_picker.currentText() == "Refused at start-up"
    qtbot.waitUntil(lambda: "Refused at start-up" in panel.symptom_cause.text(), timeout=10000)
    qtbot.waitUntil(lambda: bool(panel.symptom_list.rows), timeout=10000)
    window.grab().save("/tmp/h91diag-tab.png")
    window.controller.undo_stack.setClean()

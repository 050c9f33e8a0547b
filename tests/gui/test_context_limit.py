"""The window's banner says what the engine does with a context past the model's limit (core.context_limit),
in the words the command line and the report give (tests/core/test_one_answer_context_limit.py), and the Serving form
offers the engine's variable only where it matters."""

from __future__ import annotations

from typing import Any

from core.catalogue import find_model
from core.context_limit import past_limit_words
from core.plan import Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.verdict import START_WORDS, Verdict
from gui.main_window import MainWindow


def _serve(qtbot: Any, window: MainWindow, plan: Plan) -> None:
    """The window at 1280 × 720 in Inference mode, showing ``plan``."""
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.inference_action.trigger()
    assert window.controller.set_plan(plan) is None
    qtbot.wait(50)


def test_the_banner_says_vllm_would_not_start_and_the_tick_starts_it(qtbot: Any, window: MainWindow) -> None:
    model = find_model("llama-2-7b")  # max_position_embeddings 4096 (huggingface.co/meta-llama/Llama-2-7b-hf)
    plan = default_plan_on(model.spec, model.id).with_inference(engine=Engine.VLLM, context=8192)
    _serve(qtbot, window, plan)
    words = past_limit_words(plan)
    assert words.startswith("vLLM would not start") and words in window.verdict.detail.text()
    # One answer (h90start): the badge says it too, never "Serving fits" beside the engine's refusal
    assert window.verdict.badge.text().endswith("Serving: would not start")
    assert "Serving fits" not in window.verdict.badge.text()
    window.grab().save("/tmp/h90start-banner-1280.png")
    panel = window.inference_panel  # the Serving tab, drawn with its tab in front
    window.tabs.setCurrentWidget(panel)
    qtbot.wait(20)
    assert panel.headline is not None
    assert "would not start" in panel.headline.text() and "✔" not in panel.headline.text()
    window.grab().save("/tmp/h90start-serving-1280.png")
    diagnosis = window.diagnosis  # the Diagnosis: the same answer, never "Nothing fails"
    window.tabs.setCurrentWidget(diagnosis)
    qtbot.waitUntil(lambda: "Fails at start-up" in diagnosis.failure.text(), timeout=5000)
    assert "Nothing fails" not in diagnosis.failure.text()
    tick = window.serving_form.long_context
    assert tick.isVisibleTo(window.serving_form)  # where the context is past the limit on vLLM
    assert window.controller.set_plan(plan.with_inference(long_context=True)) is None
    qtbot.wait(20)
    assert "vLLM starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in window.verdict.detail.text()
    assert window.verdict.badge.text().endswith("Serving fits")
    assert window.controller.set_plan(plan.with_inference(context=4096)) is None
    qtbot.wait(20)
    assert "would not start" not in window.verdict.detail.text()
    assert not tick.isVisibleTo(window.serving_form)
    window.controller.undo_stack.setClean()


def test_the_banner_and_the_diagnosis_say_a_refusal_true_in_both_senses(qtbot: Any, window: MainWindow) -> None:
    """h92verd: Llama 3.1 70B (max_position_embeddings 131,072, huggingface.co/meta-llama/Llama-3.1-70B config.json) at
    200,000 tokens on vLLM: the card does not hold it and vLLM refuses the context; the command line said "the card
    holds the total" of it. The banner says core's one clause (tests/core/test_one_answer_start_refusal.py), and
    "How far it goes" says the refusal, not a count of requests of a context that never starts."""
    plan = plan_for_model("llama-3.1-70b").with_inference(engine=Engine.VLLM, context=200_000)
    _serve(qtbot, window, plan)
    assert START_WORDS[Verdict.OOM] in window.verdict.headline.text()
    assert "to spare" not in window.verdict.headline.text()
    diagnosis = window.diagnosis
    window.tabs.setCurrentWidget(diagnosis)
    qtbot.waitUntil(lambda: "Fails at start-up" in diagnosis.failure.text(), timeout=10000)
    assert diagnosis.limits["concurrent"].text().startswith("none: vLLM refuses a context of 200,000 tokens")
    window.grab().save("/tmp/h92verd-diagnosis-70b.png")
    window.controller.undo_stack.setClean()

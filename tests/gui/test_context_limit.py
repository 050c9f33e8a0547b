"""The window's banner says what the engine does with a context past the model's limit (core.context_limit),
in the words the command line and the report give (tests/core/test_one_answer_context_limit.py), and the Serving form
offers the engine's variable only where it matters."""

from __future__ import annotations

from typing import Any

from core.advice.remedies import RemedyKind
from core.catalogue import find_model
from core.context_limit import past_limit_words
from core.plan import Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.units import GiB
from core.verdict import START_WORDS, Mode, Verdict
from gui.main_window import MainWindow
from gui.panels.verdict import margin_text


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


def _serving_headline(qtbot: Any, window: MainWindow, plan: Plan) -> str:
    _serve(qtbot, window, plan)
    panel = window.inference_panel
    window.tabs.setCurrentWidget(panel)
    qtbot.wait(20)
    assert panel.headline is not None
    return panel.headline.text()


def test_the_serving_tab_says_a_refusal_in_the_banners_words(qtbot: Any, window: MainWindow) -> None:
    """h93diag2: the Serving tab's headline had its own sentence ("8,192 tokens is past the model's limit.") beside a
    banner saying "the card holds the total, but the engine would not start": it names the check that refuses the plan
    (core's InferenceEstimate.start_causes, the Diagnosis's likely cause) and then the banner's margin words, the
    clause the command line and the report say (Judgement.after_margin). Llama 2 7B at 8,192 tokens on vLLM,
    past its 4,096 (huggingface.co/meta-llama/Llama-2-7b-hf config.json)."""
    model = find_model("llama-2-7b")
    plan = default_plan_on(model.spec, model.id).with_inference(engine=Engine.VLLM, context=8192)
    text = _serving_headline(qtbot, window, plan)
    judged = window.controller.estimate.judgement(Mode.INFERENCE)
    assert judged.after_margin == START_WORDS[Verdict.FITS] and judged.after_margin in text
    assert margin_text(judged, plan.hardware.headroom, "GB") in window.verdict.headline.text()
    assert margin_text(judged, plan.hardware.headroom, "GB") in text  # the banner's words, the same
    assert "passes the model&#x27;s limit of 4,096" in text and text.startswith("<b>✖ vLLM would not start</b>")
    window.grab().save("/tmp/h93diag2-serving-llama2-8192.png")
    window.controller.undo_stack.setClean()


def test_the_serving_tab_says_sglangs_empty_pool_as_the_banner_does(qtbot: Any, window: MainWindow) -> None:
    """SGLang on an RTX 4090 of which other processes hold 3 GiB (tests/core/test_held_by_others.py): the tab said
    "its pool holds 0 tokens, less than one request of 4,096." beside a banner's "to spare on the card, but no request
    fits"."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090", held_by_others=3 * GiB)
    text = _serving_headline(qtbot, window, plan.with_inference(engine=Engine.SGLANG, context=4096))
    judged = window.controller.estimate.judgement(Mode.INFERENCE)
    said = margin_text(judged, plan.hardware.headroom, "GB")  # "… to spare; the card holds the total, but no …"
    assert judged.short_of and judged.short_of in said and said in text and said in window.verdict.headline.text()
    assert "holds 0 tokens" not in text
    assert "leaves its token pool empty" in text
    window.controller.undo_stack.setClean()


def test_applying_the_long_context_remedy_ticks_the_box_and_the_engine_starts(qtbot: Any, window: MainWindow) -> None:
    """h94start: the Diagnosis's long-context remedy (core.advice.serving_remedies, K.LONG_CONTEXT) applied with its
    Apply button ticks the Serving form's long-context box, and the badges say a verdict of an engine that starts.
    Llama 2 7B at 8,192 tokens on vLLM, past its 4,096 (huggingface.co/meta-llama/Llama-2-7b-hf config.json)."""
    model = find_model("llama-2-7b")
    plan = default_plan_on(model.spec, model.id).with_inference(engine=Engine.VLLM, context=8192)
    _serve(qtbot, window, plan)
    diagnosis = window.diagnosis
    window.tabs.setCurrentWidget(diagnosis)
    qtbot.waitUntil(lambda: "Fails at start-up" in diagnosis.failure.text(), timeout=10000)
    tick = window.serving_form.long_context
    assert not tick.isChecked() and window.verdict.badge.text().endswith("Serving: would not start")
    assert "Would not start" in diagnosis.badge.text()
    rows = [r for r in diagnosis.remedy_list.rows if r.entry is not None and r.entry.key == RemedyKind.LONG_CONTEXT]
    assert len(rows) == 1 and rows[0].apply.isEnabled()
    window.grab().save("/tmp/h94start-diagnosis-before.png")
    rows[0].apply.click()
    assert window.controller.plan.inference.long_context
    qtbot.waitUntil(lambda: "Would not start" not in diagnosis.badge.text(), timeout=10000)
    assert tick.isChecked()
    badge = window.verdict.badge.text()
    assert "would not start" not in badge.lower() and badge.endswith("Serving fits")
    assert window.controller.estimate.inference.would_not_start == ""
    window.grab().save("/tmp/h94start-diagnosis-after.png")
    window.controller.undo_stack.setClean()

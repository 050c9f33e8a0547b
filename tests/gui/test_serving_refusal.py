"""The window's answer to "can this engine serve this model" is core.plan.serving_refusal's, word for word: an edit
of the engine is refused with the home's message, or taken (tests/core/test_one_answer_serving.py's table); an edit
of the setting the home refuses (text only, a hybrid's prefix caching) is refused on that field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.catalogue import find_model
from core.plan import Engine, PrefixCaching, VllmVersion, default_plan_on, serving_refusal
from gui.controller import PlanController
from gui.forms.fields import is_marked_invalid
from gui.main_window import MainWindow
from tests.core.test_one_answer_serving import CELLS, ENGINES, _cell


@pytest.mark.parametrize(("kind", "engine"), CELLS)
def test_an_engine_edit_is_refused_with_the_homes_words(qtbot: Any, kind: str, engine: str) -> None:
    model, inference, refusal = _cell(kind, engine)
    controller = PlanController(default_plan_on(model.spec, model.id))
    rejected: list[tuple[str, str]] = []
    controller.editRejected.connect(lambda key, message: rejected.append((key, message)))
    changes = ENGINES[engine][0]
    controller.update("inference.engine", lambda p: p.with_inference(**changes))
    if refusal is None:
        assert rejected == [] and controller.plan.inference == inference
    else:
        assert rejected == [("inference.engine", str(refusal))]
        assert controller.plan == default_plan_on(model.spec, model.id)  # the last valid plan stays


def test_a_text_only_tick_on_sglang_is_refused_on_its_box(window: MainWindow) -> None:
    # SGLang builds Gemma 3's SigLIP whatever the requests hold (core.plan._text_only_refusal): Plan validation refuses
    # the tick, so the box is marked with the home's words, the status bar says them and the plan stays.
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    gemma = find_model("gemma-3-4b")
    plan = default_plan_on(gemma.spec, gemma.id).with_inference(engine=Engine.SGLANG)
    window.controller.reset(plan)
    assert form.form.isRowVisible(form.text_only)
    form.text_only.click()
    home = serving_refusal(gemma.spec, replace(plan.inference, text_only=True))
    assert home is not None and home.field == "inference.text_only"
    assert window.controller.plan == plan and not form.text_only.isChecked()
    assert is_marked_invalid(form.text_only) and form.text_only.property("invalidMessage") == str(home)
    assert str(home) in window.problem.text()


def test_a_hybrids_prefix_caching_before_vllm_0_26_is_refused_on_its_list(window: MainWindow) -> None:
    # vLLM 0.24 does not support prefix caching for hybrid models (core.plan._hybrid_prefix_caching_refusal).
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    granite = find_model("granite-4.0-h-tiny")
    plan = default_plan_on(granite.spec, granite.id).with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_24)
    window.controller.reset(plan)
    assert form.form.isRowVisible(form.prefix_caching)
    form.prefix_caching.setCurrentIndex(form.prefix_caching.findData(PrefixCaching.ON))
    home = serving_refusal(granite.spec, replace(plan.inference, prefix_caching=PrefixCaching.ON))
    assert home is not None and home.field == "inference.prefix_caching"
    assert window.controller.plan == plan
    assert form.prefix_caching.currentData() == PrefixCaching.DEFAULT  # the plan's value shown again
    assert is_marked_invalid(form.prefix_caching) and form.prefix_caching.property("invalidMessage") == str(home)
    assert str(home) in window.problem.text()


def test_the_multimodal_box_shows_for_gemma_3_on_sglang_and_is_refused_before_0_4_6(window: MainWindow) -> None:
    # core.inputs "inference.sglang_enable_multimodal": shown for Gemma 3 on SGLang alone (mm_disabled_models). Ticked
    # on 0.5.23 it makes the launch multimodal (core.serving.sglang_versions.is_multimodal): the pool shrinks. On 0.4.5
    # (no such flag in server_args.py) the tick is refused on the box with the home's words.
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    gemma = find_model("gemma-3-4b")
    plan = default_plan_on(gemma.spec, gemma.id).with_hardware(gpu="h100-sxm").with_inference(engine=Engine.SGLANG)
    window.controller.reset(plan)
    assert form.form.isRowVisible(form.sglang_multimodal)
    pool = window.controller.estimate.inference.kv_cache_tokens
    form.sglang_multimodal.click()
    assert window.controller.plan.inference.sglang_enable_multimodal
    assert window.controller.estimate.inference.kv_cache_tokens < pool
    old = plan.with_inference(sglang_version="0.4.5")
    window.controller.reset(old)
    form.sglang_multimodal.click()
    home = serving_refusal(gemma.spec, replace(old.inference, sglang_enable_multimodal=True))
    assert home is not None and home.field == "inference.sglang_enable_multimodal"
    assert window.controller.plan == old and not form.sglang_multimodal.isChecked()
    assert is_marked_invalid(form.sglang_multimodal)
    assert form.sglang_multimodal.property("invalidMessage") == str(home)
    window.controller.reset(plan.with_inference(engine=Engine.VLLM))
    assert not form.form.isRowVisible(form.sglang_multimodal)  # vLLM has no such switch

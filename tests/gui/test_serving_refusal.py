"""The window's answer to "can this engine serve this model" is core.plan.serving_refusal's, word for word: an edit
of the engine is refused with the home's message, or taken (tests/core/test_one_answer_serving.py's table); an edit
of the setting the home refuses (text only, a hybrid's prefix caching) is refused on that field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.catalogue import find_model
from core.dtypes import WeightFormat
from core.errors import PlanError
from core.plan import Engine, Plan, PrefixCaching, VllmVersion, default_plan_on, serving_refusal
from gui.controller import PlanController, refusal_text
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
        # The home's words, the field named as the Serving form labels it (gui.controller.refusal_text).
        assert rejected == [("inference.engine", refusal_text(refusal, controller.plan))]
        assert rejected[0][1].endswith(str(refusal).split(": ", 1)[1])
        assert controller.plan == default_plan_on(model.spec, model.id)  # the last valid plan stays


# (engine, vLLM release, shown): Gemma 3's tower is skipped from vLLM 0.15 (core.inputs.TEXT_ONLY_FROM, PR #32605);
# SGLang and transformers build it whatever the requests hold; llama.cpp loads none from the GGUF.
TEXT_ONLY_OFFERED = [
    (Engine.VLLM, VllmVersion.V0_19, True),
    (Engine.VLLM, VllmVersion.V0_15, True),
    (Engine.VLLM, VllmVersion.V0_14, False),
    (Engine.SGLANG, VllmVersion.V0_19, False),
    (Engine.HF, VllmVersion.V0_19, False),
    (Engine.LLAMACPP, VllmVersion.V0_19, False),
]


@pytest.mark.parametrize(("engine", "version", "shown"), TEXT_ONLY_OFFERED)
def test_the_text_only_box_is_offered_only_where_the_engine_takes_it(
    window: MainWindow, engine: Engine, version: VllmVersion, shown: bool
) -> None:
    # Before branch h76sglui the box showed on SGLang, transformers and vLLM 0.14, where every tick was refused: the
    # form offered a setting the engine cannot take. The row follows core.inputs.text_only_offered, which agrees with
    # Plan validation: a tick is taken exactly where the box shows (llama.cpp aside, whose tick changes nothing).
    gemma = find_model("gemma-3-4b")
    plan = default_plan_on(gemma.spec, gemma.id).with_inference(engine=engine, vllm_version=version)
    form = serving_form_on(window, plan)
    assert form.form.isRowVisible(form.text_only) is shown
    refused = serving_refusal(gemma.spec, replace(plan.inference, text_only=True))
    assert (refused is None) is (shown or engine is Engine.LLAMACPP)


def test_an_engine_switch_that_refuses_the_ticked_box_is_refused_on_it(window: MainWindow) -> None:
    # Text only ticked on vLLM 0.19; SGLang builds Gemma 3's SigLIP whatever the requests hold
    # (core.plan._text_only_refusal): the switch is refused with the home's words on the engine list and in the status
    # bar, and the plan stays on vLLM with its box shown and ticked. A plan that carries the tick onto SGLang (a file,
    # the command line) gets the same refusal from Plan validation.
    gemma = find_model("gemma-3-4b")
    plan = default_plan_on(gemma.spec, gemma.id).with_inference(engine=Engine.VLLM, text_only=True)
    form = serving_form_on(window, plan)
    form.engine.setCurrentIndex(form.engine.findData("sglang"))
    home = serving_refusal(gemma.spec, replace(plan.inference, engine=Engine.SGLANG))
    assert home is not None and home.field == "inference.text_only"
    assert window.controller.plan == plan and form.form.isRowVisible(form.text_only) and form.text_only.isChecked()
    assert is_marked_invalid(form.engine) and form.engine.property("invalidMessage") == str(home)
    assert form.engine.currentData() == "vllm"  # the plan's engine shown again
    assert home is not None and refusal_text(home, window.controller.plan) in window.problem.text()
    with pytest.raises(PlanError) as carried:
        plan.with_inference(engine=Engine.SGLANG)
    assert str(carried.value) == str(home)


def test_a_hybrids_prefix_caching_before_vllm_0_26_is_refused_on_its_list(window: MainWindow) -> None:
    # vLLM 0.24 does not support prefix caching for hybrid models (core.plan._hybrid_prefix_caching_refusal).
    granite = find_model("granite-4.0-h-tiny")
    plan = default_plan_on(granite.spec, granite.id).with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_24)
    form = serving_form_on(window, plan)
    assert form.form.isRowVisible(form.prefix_caching)
    form.prefix_caching.setCurrentIndex(form.prefix_caching.findData(PrefixCaching.ON))
    home = serving_refusal(granite.spec, replace(plan.inference, prefix_caching=PrefixCaching.ON))
    assert home is not None and home.field == "inference.prefix_caching"
    assert window.controller.plan == plan
    assert form.prefix_caching.currentData() == PrefixCaching.DEFAULT  # the plan's value shown again
    assert is_marked_invalid(form.prefix_caching) and form.prefix_caching.property("invalidMessage") == str(home)
    assert home is not None and refusal_text(home, window.controller.plan) in window.problem.text()


def test_the_multimodal_box_shows_for_gemma_3_on_sglang_from_0_4_6(window: MainWindow) -> None:
    # core.inputs "inference.sglang_enable_multimodal": shown for Gemma 3 on SGLang from 0.4.6 (mm_disabled_models).
    # Ticked on 0.5.23 it makes the launch multimodal (core.serving.sglang_versions.is_multimodal): the pool shrinks.
    # 0.4.5's server_args.py has no such flag (and serves Gemma 3 with images without it): before branch h76sglui the
    # box showed there and every tick was refused; now it is not offered, and a plan that carries the flag onto 0.4.5
    # gets the home's refusal.
    gemma = find_model("gemma-3-4b")
    plan = default_plan_on(gemma.spec, gemma.id).with_hardware(gpu="h100-sxm").with_inference(engine=Engine.SGLANG)
    form = serving_form_on(window, plan)
    assert form.form.isRowVisible(form.sglang_multimodal)
    pool = window.controller.estimate.inference.kv_cache_tokens
    form.sglang_multimodal.click()
    assert window.controller.plan.inference.sglang_enable_multimodal
    assert window.controller.estimate.inference.kv_cache_tokens < pool
    window.controller.reset(plan.with_inference(sglang_version="0.4.6"))
    assert form.form.isRowVisible(form.sglang_multimodal)
    old = plan.with_inference(sglang_version="0.4.5")
    window.controller.reset(old)
    assert not form.form.isRowVisible(form.sglang_multimodal)
    home = serving_refusal(gemma.spec, replace(old.inference, sglang_enable_multimodal=True))
    assert home is not None and home.field == "inference.sglang_enable_multimodal"
    with pytest.raises(PlanError) as carried:
        old.with_inference(sglang_enable_multimodal=True)
    assert str(carried.value) == str(home)
    window.controller.reset(plan.with_inference(engine=Engine.VLLM))
    assert not form.form.isRowVisible(form.sglang_multimodal)  # vLLM has no such switch


def test_a_vllm_line_that_does_not_load_the_weights_is_refused_on_its_list(window: MainWindow) -> None:
    # gpt-oss's MXFP4 weights on vLLM 0.19; 0.9's --quantization names have no mxfp4 (resources/engine_flags/
    # vllm_serve.txt, read from the 0.9.2 wheel: tests/core/test_engine_flag_values.py): the switch is refused with
    # the home's words (core.plan._weight_format_refusal) and the plan stays on 0.19.
    oss = find_model("gpt-oss-20b")
    plan = default_plan_on(oss.spec, oss.id).with_inference(engine=Engine.VLLM, weight_dtype=WeightFormat.MXFP4)
    form = serving_form_on(window, plan)
    form.vllm_version.setCurrentIndex(form.vllm_version.findData("0.9"))
    home = serving_refusal(oss.spec, replace(plan.inference, vllm_version=VllmVersion.V0_9))
    assert home is not None and home.field == "inference.weight_dtype" and "from vLLM 0.10" in home.reason
    assert window.controller.plan == plan and form.vllm_version.currentData() == "0.19"
    assert is_marked_invalid(form.vllm_version) and form.vllm_version.property("invalidMessage") == str(home)
    assert refusal_text(home, window.controller.plan) in window.problem.text()


def serving_form_on(window: MainWindow, plan: Plan) -> Any:
    """The window shown in Inference mode on ``plan``: its Serving form."""
    window.show()
    window.inference_action.trigger()
    window.controller.reset(plan)
    return window.serving_form

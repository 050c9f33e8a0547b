"""One answer between the Diagnosis and serving, over generated plans (h91diag): the Diagnosis's sentence of what fails
(Diagnosis.outcome) says "Nothing fails" only where serving's own estimate fits too, gives the engine's refusal in its
words where serving would not start, and serving's verdict where it does not fit; the report (so ``vramplan report``)
gives the same sentence. Property-tested over tests/core/strategies.plans, whose serving contexts (1 to 1,000,000
tokens) pass many a model's limit. No figure is written here: the surfaces are compared with the estimate."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from core.advice.diagnosis import diagnose
from core.advice.symptoms import Failure
from core.errors import PlanError
from core.files.report import build_report, to_markdown
from core.inputs import Method
from core.plan import Engine, Plan, training_refusal
from core.presets import plan_for_model
from core.verdict import Mode
from tests.core.strategies import plans

FEW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALL_FIT = "Nothing fails: the training step, evaluation and serving all fit."
STEP_AND_EVAL_FIT = (Failure.NONE, Failure.SERVING, Failure.SERVING_WEIGHTS)
# Catalogue models whose adapter training fits the cards below (resources/models.json), with their limits:
# Llama 2 7B 4,096 (meta-llama/Llama-2-7b-hf config.json), Llama 3.2 3B, Llama 3.1 8B and Qwen2.5 7B 131,072
# (their config.json), so that the training step fits and serving is what varies.
MODELS = ("llama-2-7b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-7b")
GPUS = ("a100-80gb-sxm", "h100-sxm", "l40s")


@st.composite
def step_fits_plans(draw: st.DrawFn) -> Plan:
    """Adapter training that mostly fits, served by any engine at a context about the model's limit (half to twice
    it), some with the engine's long-context variable: a generated plans() plan seldom has a training step that fits.
    """
    plan = plan_for_model(draw(st.sampled_from(MODELS))).with_input(
        "method", draw(st.sampled_from([Method.LORA, Method.QLORA]))
    )
    plan = plan.with_input("hardware.gpu", draw(st.sampled_from(GPUS))).with_input("checkpointing", True)
    limit = plan.model.max_position_embeddings
    try:
        return plan.with_inference(
            engine=draw(st.sampled_from(list(Engine))),
            context=draw(st.integers(limit // 2, 2 * limit)),
            concurrent=draw(st.integers(1, 64)),
            long_context=draw(st.booleans()),
        )
    except PlanError:  # a setting the plan refuses with its reason (tests/core/test_one_answer_serving.py)
        assume(False)
        raise


@FEW
@given(plan=st.one_of(plans(), step_fits_plans(), step_fits_plans()))
def test_the_training_diagnosis_says_servings_own_verdict(plan: Plan) -> None:
    assume(training_refusal(plan) is None)  # no training diagnosis to word (core.plan.training_refusal)
    report = build_report([("a", plan)], generated="2026-12-07T00:00:00Z")
    d = report.plans[0].diagnosis
    said = d.outcome.text
    refusal = d.estimate.inference.would_not_start
    serving = d.estimate.judgement(Mode.INFERENCE)
    assert (said == ALL_FIT) == (d.failure is Failure.NONE and serving.fits and not refusal), said
    event(f"{d.failure.value}, serving {serving.verdict.value}{', refused' if refusal else ''}")
    if d.failure in STEP_AND_EVAL_FIT and refusal:
        assert said.startswith("Fails when the serving engine starts: the training step and evaluation fit; ")
        assert refusal in said
    elif d.failure in STEP_AND_EVAL_FIT and not serving.fits:
        assert f"serving's verdict is {serving.label}." in said
    if d.serving_after_step:  # the report's diagnosis says the same sentence
        assert d.outcome.sentence in re.sub(r"\\(.)", r"\1", to_markdown(report))


@FEW
@given(plan=st.one_of(plans(), step_fits_plans(), step_fits_plans()))
def test_the_serving_diagnosis_says_nothing_fails_only_where_serving_fits(plan: Plan) -> None:
    d = diagnose(plan, Mode.INFERENCE)
    serving = d.estimate.judgement(Mode.INFERENCE)
    said = d.outcome.text
    assert (said == "Nothing fails: serving fits.") == serving.fits, said
    assert said.startswith("Fails at start-up") == bool(d.estimate.inference.would_not_start), said

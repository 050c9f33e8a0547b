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
from core.cli.render import verdict_line
from core.context_limit import would_not_start
from core.errors import PlanError
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.format import counted
from core.inputs import Method
from core.plan import ENGINE_LABELS, Engine, Plan, training_refusal
from core.presets import plan_for_model
from core.verdict import START_WORDS, Mode, Verdict
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


# ---- a refusal at start-up, its own outcome everywhere (h92verd) -------------------------------------------------
# 24 GB cards (resources/gpus.json): vLLM's pool holds a few tens of thousands of tokens of an 8B model beside its bf16
# weights, so a context up to the model's 131,072 is often more than one request's worth: its KV-pool refusal
# (vllm-project/vllm@001cabc1 vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory).
SMALL_GPUS = ("rtx-4090", "rtx-3090", "l4", "a10")


@st.composite
def pool_short_plans(draw: st.DrawFn) -> Plan:
    """QLoRA (a step that fits a 24 GB card) served by vLLM or SGLang at a long context, a quarter of the model's
    limit to past it, on a 24 GB card: a KV pool short of one request, a context the engine refuses, or both."""
    plan = plan_for_model(draw(st.sampled_from(MODELS))).with_input("method", Method.QLORA)
    plan = plan.with_input("hardware.gpu", draw(st.sampled_from(SMALL_GPUS))).with_input("checkpointing", True)
    limit = plan.model.max_position_embeddings
    try:
        return plan.with_inference(
            engine=draw(st.sampled_from([Engine.VLLM, Engine.SGLANG])),
            context=draw(st.integers(limit // 4, 2 * limit)),
            concurrent=draw(st.integers(1, 64)),
            long_context=draw(st.booleans()),
        )
    except PlanError:
        assume(False)
        raise


REFUSALS = st.one_of(step_fits_plans(), pool_short_plans())


@FEW
@given(plan=REFUSALS, mode=st.sampled_from(list(Mode)))
def test_a_refusal_at_start_up_is_its_own_failure_and_symptom(plan: Plan, mode: Mode) -> None:
    assume(training_refusal(plan) is None)
    d = diagnose(plan, mode)
    refused = bool(d.estimate.inference.would_not_start)
    serving_decides = mode is Mode.INFERENCE or d.failure in (*STEP_AND_EVAL_FIT, Failure.SERVING_START)
    event(f"{mode.value}: {d.failure.value}{', refused' if refused else ''}")
    assert (d.failure is Failure.SERVING_START) == (refused and serving_decides), d.failure
    if d.failure is Failure.SERVING_START:
        assert d.symptom is not None and d.symptom.symptom.startswith("Refused at start-up")
        assert "serving many users" not in d.outcome.text
    if mode is Mode.INFERENCE:
        assert d.explanation.endswith(".")  # the engine's words closed as a sentence


@FEW
@given(plan=REFUSALS)
def test_how_far_serving_goes_reads_the_engines_refusal(plan: Plan) -> None:
    d = diagnose(plan, Mode.INFERENCE)
    most, context = d.serving_limits
    limit = plan.model.max_position_embeddings
    if would_not_start(plan):  # the engine refuses the context: no request of it runs, whatever the memory
        event("context refused")
        assert most.figure == "" and most.words.startswith(f"none: {ENGINE_LABELS[plan.inference.engine]} refuses")
        if context.figure:  # the longest context it starts with, within the model's limit
            assert int(context.figure.replace(",", "")) <= limit and "starts with" in context.words
        else:  # not even a context within the limit fits the memory
            assert context.words == f"none at {counted(plan.inference.concurrent, 'request')}"
    else:
        event("starts" if d.limits.max_concurrent else "no request")
        count = d.limits.max_concurrent
        assert most.figure == (f"{count:,}" if count else "")


@FEW
@given(plan=REFUSALS)
def test_the_verdict_line_says_the_refusal_true_in_both_senses(plan: Plan) -> None:
    est = estimate(plan)
    judged = est.judgement(Mode.INFERENCE)
    line = verdict_line(judged, plan.hardware.headroom, gib=False)
    event(f"{judged.verdict.value}, memory {judged.gpu_verdict.value}")
    if "the card holds the total" in line:
        assert judged.margin_bytes >= 0, line
    if judged.verdict is Verdict.WONT_START:
        assert line.endswith(f"; {START_WORDS[judged.gpu_verdict]}") and judged.after_margin in line
        report = re.sub(r"\\(.)", r"\1", to_markdown(build_report([("a", plan)], mode=Mode.INFERENCE)))
        assert f"; {judged.after_margin}; " in report  # the report's verdict line says the same clause

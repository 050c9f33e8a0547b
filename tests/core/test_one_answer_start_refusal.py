"""A refusal at start-up is its own outcome everywhere (h92verd), beside Verdict.WONT_START (h90start) and
Diagnosis.outcome (h91diag). Each test failed before:

1. the verdict line said "margin -130 GB; the card holds the total, but the engine would not start" where the card
   did not hold it: now one clause true in both senses (core.verdict.Judgement.after_margin), the same in the command
   line's text, its --json, the report and the window's banner (tests/gui/test_context_limit.py);
2. a training plan whose vLLM KV pool holds less than one request had the symptom "Out of memory when serving many
   users": a start-up refusal has its own row, "Refused at start-up", whose remedies are the changes that start it;
3. "How far it goes" said "14 requests of 8,192 tokens" of a plan vLLM refuses: it says the refusal and the longest
   context the engine starts with (core.context_limit.starting_context);
4. the inference-mode explanation quoting vLLM's refusal had no closing full stop.

Llama 2 7B's limit is 4,096 and Llama 3.1 8B's / 70B's 131,072: max_position_embeddings in
https://huggingface.co/meta-llama/Llama-2-7b-hf, https://huggingface.co/meta-llama/Llama-3.1-8B and
https://huggingface.co/meta-llama/Llama-3.1-70B config.json (resources/models.json). vLLM refuses a longer
max_model_len without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm 0.19.0 wheel, vllm/config/model.py
_get_and_verify_max_len), SGLang without SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (sglang 0.5.23 wheel,
sglang/srt/configs/model_config.py); vLLM's KV-pool check is vllm-project/vllm@001cabc1
vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory (tests/core/test_vllm_kv_refusal.py's case: Llama 3.1 8B
at 131,072 tokens on one RTX 4090). The memory figures are the estimate's own, compared, never written here.
"""

from __future__ import annotations

import html
import json

import pytest

from core.advice.diagnosis import diagnose, remedies_for_symptom
from core.advice.request import symptoms_for
from core.advice.symptoms import SYMPTOM_BY_FAILURE, Failure
from core.catalogue import find_model
from core.cli.app import main
from core.context_limit import past_limit_words
from core.estimate import estimate
from core.files.report import build_report, to_html, to_markdown
from core.inputs import Method
from core.plan import Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.verdict import START_WORDS, Mode, Verdict

LLAMA2_LIMIT = 4096  # Llama 2 7B's max_position_embeddings (config.json above)
PAST = 200_000  # past Llama 3.1's 131,072 (config.json above): the task's case
LONG = 131_072  # Llama 3.1 8B's limit: one request of it is more than vLLM's pool on a 24 GB card holds
SEVENTY_B = ["estimate", "--mode", "inference", "--model", "llama-3.1-70b", "--engine", "vllm", "--context", str(PAST)]


def _llama2_past(**more: object) -> Plan:
    """LoRA on Llama 2 7B on an A100 80GB (the step fits) served by vLLM at twice the model's limit."""
    model = find_model("llama-2-7b")
    assert model.spec.max_position_embeddings == LLAMA2_LIMIT
    plan = default_plan_on(model.spec, model.id).with_input("method", Method.LORA)
    return plan.with_inference(engine=Engine.VLLM, context=2 * LLAMA2_LIMIT, **more)


def _pool_short() -> Plan:
    """QLoRA on Llama 3.1 8B on an RTX 4090 (the step fits); vLLM's pool holds a third of one 131,072-token request."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090").with_input("method", Method.QLORA)
    return plan.with_inference(engine="vllm", concurrent=32, context=LONG)


def _verdict_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("  Would not start: "))


# ---- 1. the verdict line, true in both senses --------------------------------------------------
def test_a_refused_plan_the_card_does_not_hold_is_not_said_to_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SEVENTY_B) == 0
    line = _verdict_line(capsys.readouterr().out)
    judged = estimate(plan_for_model("llama-3.1-70b").with_inference(engine="vllm", context=PAST)).judgement(
        Mode.INFERENCE
    )
    assert judged.verdict is Verdict.WONT_START and judged.margin_bytes < 0 and judged.gpu_verdict is Verdict.OOM
    assert "the card holds the total" not in line  # before: "margin -130 GB; the card holds the total, but ..."
    assert line.endswith(f"; {START_WORDS[Verdict.OOM]}")
    assert main([*SEVENTY_B, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inference"]["after_margin"] == data["judgement"]["after_margin"] == START_WORDS[Verdict.OOM]


@pytest.mark.parametrize(
    ("args", "memory"),
    [
        ([], Verdict.FITS),  # Llama 3.1 8B at 200,000 tokens, 1 request: the card holds it
        (["--concurrent", "4", "--headroom", "0.2"], Verdict.OVER_HEADROOM),  # 2 run at once: into a 20 % headroom
    ],
)
def test_each_memory_verdict_of_a_refused_plan_reads_its_own_clause(
    args: list[str], memory: Verdict, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["estimate", "--mode", "inference", "--model", "llama-3.1-8b", "--engine", "vllm", "--context", str(PAST)]
    assert main([*argv, *args]) == 0
    line = _verdict_line(capsys.readouterr().out)
    assert line.endswith(f"; {START_WORDS[memory]}")
    assert main([*argv, *args, "--json"]) == 0
    serving = json.loads(capsys.readouterr().out)["inference"]
    assert serving["verdict"] == "would-not-start" and serving["after_margin"] == START_WORDS[memory]
    assert (serving["margin_bytes"] >= 0) == (memory is Verdict.FITS)


def test_the_report_says_the_same_clause() -> None:
    plan = plan_for_model("llama-3.1-70b").with_inference(engine="vllm", context=PAST)
    report = build_report([("plan", plan)], mode=Mode.INFERENCE, generated="2026-12-07T00:00:00Z")
    said = f"; {START_WORDS[Verdict.OOM]}; "
    assert said in to_markdown(report).replace("\\", "") and html.escape(said) in to_html(report)
    assert "the card holds the total" not in to_markdown(report)


# ---- 2. its own symptom -----------------------------------------------------------------------------
def test_a_pool_short_of_one_request_is_refused_at_start_up_not_out_of_memory_serving_many() -> None:
    plan = _pool_short()
    assert estimate(plan).inference.refusal  # vLLM's own KV-pool check
    for mode in Mode:
        d = diagnose(plan, mode)
        assert d.failure is Failure.SERVING_START and d.symptom is SYMPTOM_BY_FAILURE[Failure.SERVING_START]
        assert d.symptom.symptom.startswith("Refused at start-up")
        assert Failure.SERVING_START in symptoms_for(mode)  # the picker offers it in both modes
    html_report = to_html(build_report([("plan", plan)], generated="2026-12-07T00:00:00Z"))
    assert "Symptom: Refused at start-up" in html_report and "serving many users" not in html_report


@pytest.mark.parametrize("plan", [_pool_short(), _llama2_past()], ids=["pool-short", "past-limit"])
def test_the_start_up_symptoms_remedies_each_start_the_engine(plan: Plan) -> None:
    symptom, found = remedies_for_symptom(plan, Failure.SERVING_START)
    assert symptom.failure is Failure.SERVING_START and found
    assert all(not r.estimate.inference.would_not_start for r in found)
    assert any(r.fits for r in found)  # a shorter context, or tensor parallel over more GPUs
    # the remedies the symptom names: what the engines' errors say starts them
    for words in ("--max-model-len", "--gpu-memory-utilization", "fp8 KV cache", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"):
        assert words in symptom.remedies


# ---- 3. how far it goes ------------------------------------------------------------------------------
def test_the_limits_of_a_refused_context_say_the_refusal_and_the_longest_context_that_starts() -> None:
    plan = _llama2_past()
    d = diagnose(plan, Mode.INFERENCE)
    assert d.limits.max_concurrent > 0  # what the memory alone would hold: 14 before, said as if it ran
    most, context = d.serving_limits
    assert most.figure == ""
    assert most.words == "none: vLLM refuses a context of 8,192 tokens at start-up, past the model's 4,096"
    assert context.text == "4,096 tokens at 1 request (the model's limit, the longest vLLM starts with; now 8,192)"
    allowed = diagnose(_llama2_past(long_context=True), Mode.INFERENCE)
    assert allowed.serving_limits[0].figure == f"{allowed.limits.max_concurrent:,}"  # with the variable, it starts


def test_sglang_says_its_own_refusal_in_the_limits() -> None:
    plan = _llama2_past().with_inference(engine=Engine.SGLANG)
    most, context = diagnose(plan, Mode.INFERENCE).serving_limits
    assert most.words == "none: SGLang refuses a context of 8,192 tokens at start-up, past the model's 4,096"
    assert int(context.figure.replace(",", "")) <= LLAMA2_LIMIT


# ---- 4. a sentence ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG])
def test_the_explanation_quoting_the_engine_ends_with_a_full_stop(engine: Engine) -> None:
    plan = _llama2_past().with_inference(engine=engine)
    explanation = diagnose(plan, Mode.INFERENCE).explanation
    assert explanation == f"{past_limit_words(plan)}." and not past_limit_words(plan).endswith(".")
    assert diagnose(_pool_short(), Mode.INFERENCE).explanation.endswith(".")

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

h93diag2 finished it; each test below failed before:

5. the "Refused at start-up" row's likely cause listed all three checks (KV pool, free memory, context limit) for every
   plan: it names the checks that refuse this one (InferenceEstimate.start_causes), in the Diagnosis and its picker;
6. the engine's long-context variable was only words in the row's remedies: it is a listed remedy where the context
   passes the model's limit, its cost the engine's own caution (vllm-project/vllm@18ec6629 vllm/config/model.py
   _get_and_verify_max_len: "positions exceeding derived_max_model_len lead to nan"; SGLang's warning "This may lead
   to incorrect model outputs or CUDA errors", sglang 0.5.23 sglang/srt/configs/model_config.py), ranked after the
   shorter context that keeps the model in its range. The Serving tab's headline, in the banner's words, is
   tests/gui/test_context_limit.py's.

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
from core.advice.remedies import RemedyKind
from core.advice.request import symptoms_for
from core.advice.serving_remedies import SGLANG_LONG_CAUTION, VLLM_LONG_CAUTION
from core.advice.symptoms import SYMPTOM_BY_FAILURE, Failure
from core.catalogue import find_model
from core.cli.app import main
from core.context_limit import VLLM_CAUTION, past_limit_words
from core.estimate import estimate
from core.files.report import build_report, to_html, to_markdown
from core.inputs import Method
from core.plan import ENGINE_LABELS, Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.units import GiB
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
        assert d.failure is Failure.SERVING_START and d.symptom is not None
        assert d.symptom.symptom == SYMPTOM_BY_FAILURE[Failure.SERVING_START].symptom
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


# ---- 5. the likely cause, this plan's ---------------------------------------------------------------
HELD = 3 * GiB  # tests/core/test_held_by_others.py's case: 3 GiB other processes hold on an RTX 4090


def _held(engine: Engine) -> Plan:
    """Llama 3.1 8B at 4,096 tokens on an RTX 4090 of which other processes hold 3 GiB: vLLM's free-memory check
    refuses it, SGLang's pool holds no token (tests/core/test_held_by_others.py)."""
    return (
        plan_for_model("llama-3.1-8b")
        .with_hardware(gpu="rtx-4090", held_by_others=HELD)
        .with_inference(engine=engine, context=4096)
    )


CONTEXT_CHECK = "passes the model's limit"
POOL_CHECK = "KV cache pool"
FREE_CHECK = "free memory at start-up"
SGLANG_EMPTY = "leaves its token pool empty"


@pytest.mark.parametrize(
    ("plan", "named", "not_named"),
    [
        (_llama2_past(), "the context, 8,192 tokens, passes the model's limit of 4,096", (POOL_CHECK, FREE_CHECK)),
        (_pool_short(), POOL_CHECK, (CONTEXT_CHECK, FREE_CHECK)),
        (_held(Engine.VLLM), FREE_CHECK, (CONTEXT_CHECK, POOL_CHECK)),
        (_held(Engine.SGLANG), SGLANG_EMPTY, (CONTEXT_CHECK, POOL_CHECK, FREE_CHECK)),
    ],
    ids=["past-limit", "pool-short", "vllm-free-memory", "sglang-empty-pool"],
)
def test_the_likely_cause_names_the_check_that_refuses_this_plan(
    plan: Plan, named: str, not_named: tuple[str, ...]
) -> None:
    """Before: "its KV cache pool holds less than one request of the context, the free memory is less than it asks
    for, or the context passes the model's limit" for each of them."""
    symptom, _ = remedies_for_symptom(plan, Failure.SERVING_START)
    assert named in symptom.cause and not any(words in symptom.cause for words in not_named), symptom.cause
    assert symptom.cause.startswith(f"{ENGINE_LABELS[plan.inference.engine]}'s own start-up check refuses this plan")
    assert diagnose(plan, Mode.INFERENCE).symptom == symptom  # the Diagnosis's own row says the same
    if not plan.hardware.held_by_others:  # LoRA / QLoRA steps that fit (_llama2_past, _pool_short): serving fails
        assert diagnose(plan, Mode.TRAINING).symptom == symptom  # and a training plan's Diagnosis says the same


def test_a_pool_short_cause_gives_the_pool_the_engine_sized() -> None:
    plan = _pool_short()
    served = estimate(plan).inference
    symptom, _ = remedies_for_symptom(plan, Failure.SERVING_START)
    assert f"its KV cache pool, {served.kv_cache_tokens:,} tokens, holds less than one request of {LONG:,}" in (
        symptom.cause
    )


def test_both_checks_are_named_where_both_refuse_the_context_first() -> None:
    """Llama 3.1 8B at 200,000 tokens on one RTX 4090: past the model's 131,072 and vLLM's pool short of one request.
    vLLM checks the context while it builds its ModelConfig, before any weight loads, so it is named first."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090").with_inference(engine="vllm", context=PAST)
    cause = remedies_for_symptom(plan, Failure.SERVING_START)[0].cause
    assert 0 <= cause.index(CONTEXT_CHECK) < cause.index(POOL_CHECK)


def test_a_symptom_picked_for_a_plan_that_starts_keeps_the_rows_three_causes() -> None:
    plan = plan_for_model("llama-3.1-8b").with_inference(engine="vllm", context=4096)
    assert not estimate(plan).inference.would_not_start
    symptom, _ = remedies_for_symptom(plan, Failure.SERVING_START)
    assert symptom == SYMPTOM_BY_FAILURE[Failure.SERVING_START]


# ---- 6. the long-context variable, a remedy with its cost ---------------------------------------------------
@pytest.mark.parametrize(
    ("engine", "variable", "caution"),
    [
        (Engine.VLLM, "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", VLLM_LONG_CAUTION),
        (Engine.SGLANG, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", SGLANG_LONG_CAUTION),
    ],
)
def test_the_long_context_variable_is_a_remedy_ranked_after_the_context_within_the_limit(
    engine: Engine, variable: str, caution: str
) -> None:
    plan = _llama2_past().with_inference(engine=engine)
    listed = diagnose(plan, Mode.INFERENCE).remedies
    kinds = [r.kind for r in listed]
    assert RemedyKind.LONG_CONTEXT in kinds  # before: only words in the symptom row
    assert kinds.index(RemedyKind.SHORTER_CONTEXT) < kinds.index(RemedyKind.LONG_CONTEXT)
    long = listed[kinds.index(RemedyKind.LONG_CONTEXT)]
    shorter = listed[kinds.index(RemedyKind.SHORTER_CONTEXT)]
    assert shorter.plan.inference.context <= LLAMA2_LIMIT  # the one that keeps the model within its range
    assert long.fits and long.plan.inference.long_context and long.plan.inference.context == 2 * LLAMA2_LIMIT
    assert long.title.startswith(variable) and f'"{caution}"' in long.cost
    assert "outside the model's trained range" in long.cost
    symptom_kinds = [r.kind for r in remedies_for_symptom(plan, Failure.SERVING_START)[1]]
    assert symptom_kinds.index(RemedyKind.SHORTER_CONTEXT) < symptom_kinds.index(RemedyKind.LONG_CONTEXT)


def test_the_quoted_caution_is_the_one_vllm_raises() -> None:
    """The remedy's quote is in the warning core.context_limit quotes from the vllm 0.19.0 wheel."""
    assert VLLM_LONG_CAUTION in VLLM_CAUTION


@pytest.mark.parametrize(
    "plan",
    [_pool_short(), _llama2_past(long_context=True), _llama2_past().with_inference(engine=Engine.LLAMACPP)],
    ids=["within-the-limit", "variable-set", "llama.cpp-warns"],
)
def test_the_variable_is_offered_only_where_the_engine_refuses_the_context(plan: Plan) -> None:
    offered = [r.kind for r in diagnose(plan, Mode.INFERENCE).remedies]
    assert RemedyKind.LONG_CONTEXT not in offered


def test_a_shorter_context_that_saves_nothing_but_starts_the_engine_is_offered() -> None:
    """Phi-3 mini 4k (max_position_embeddings 4,096, sliding_window 2,047: huggingface.co/microsoft/
    Phi-3-mini-4k-instruct config.json) at 32,768 tokens on vLLM: each layer holds at most its window, so a context of
    4,096 needs the memory 32,768 did and was never listed (core.advice.remedies.worth_offering wanted a saving; the
    golden plan gen/plan-120 offered only the variable). It starts the engine in the model's range: listed first."""
    plan = plan_for_model("phi-3-mini-4k-instruct").with_inference(engine="vllm", context=8 * 4096)
    listed = diagnose(plan, Mode.INFERENCE).remedies
    kinds = [r.kind for r in listed]
    shorter = listed[kinds.index(RemedyKind.SHORTER_CONTEXT)]
    assert shorter.fits and shorter.total_bytes == estimate(plan).judgement(Mode.INFERENCE).total_bytes
    assert kinds[:2] == [RemedyKind.SHORTER_CONTEXT, RemedyKind.LONG_CONTEXT]

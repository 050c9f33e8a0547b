"""One answer between the Diagnosis and serving (h91diag): a training plan's diagnosis says what serving's own verdict
is (Diagnosis.outcome), never "the training step, evaluation and serving all fit" beside a serving estimate that would
not start or does not fit; the report (and ``vramplan report``) says the same sentence.

Before h91diag the Diagnosis tab wrote "Nothing fails: the training step, evaluation and serving all fit." for LoRA on
Llama 2 7B with vLLM at 8,192 tokens, whose serving verdict is "Would not start", and "Fails when serving many users"
where vLLM's KV pool holds less than one request and vLLM refuses at start-up.

Llama 2 7B's limit is 4,096: max_position_embeddings in https://huggingface.co/meta-llama/Llama-2-7b-hf config.json
(resources/models.json); vLLM refuses a longer max_model_len without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm 0.19.0 wheel,
vllm/config/model.py _get_and_verify_max_len). The KV-pool refusal is tests/core/test_vllm_kv_refusal.py's case: Llama
3.1 8B (max_position_embeddings 131,072, meta-llama/Llama-3.1-8B config.json) at 131,072 tokens on one RTX 4090, vLLM
0.19 (vllm-project/vllm@001cabc1 vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory).
"""

from __future__ import annotations

import csv
import html
import io
import re
from pathlib import Path

from core.advice.diagnosis import SERVING_START, diagnose
from core.advice.request import AdviceKind
from core.advice.symptoms import Failure
from core.catalogue import find_model
from core.cli.app import main
from core.estimate import estimate
from core.files.planfile import save
from core.files.report import build_report, to_csv, to_html, to_markdown
from core.inputs import Method
from core.plan import Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.verdict import Mode, Verdict

PAST = 8192  # twice Llama 2 7B's 4,096 (config.json above)
LONG = 131_072  # Llama 3.1 8B's limit: one request of it is more than vLLM's pool on a 24 GB card holds
ALL_FIT = "the training step, evaluation and serving all fit"


def _past_limit(**more: object) -> Plan:
    """LoRA on Llama 2 7B (the training step fits an A100 80GB with room) served by vLLM past the model's limit."""
    model = find_model("llama-2-7b")
    plan = default_plan_on(model.spec, model.id).with_input("method", Method.LORA)
    return plan.with_inference(engine=Engine.VLLM, context=PAST, **more)


def _pool_short() -> Plan:
    """QLoRA on Llama 3.1 8B on an RTX 4090 (the step fits); vLLM's pool holds a third of one 131,072-token request."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090").with_input("method", Method.QLORA)
    return plan.with_inference(engine="vllm", concurrent=32, context=LONG)


def _unmarked(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)  # md_cell's escapes undone


def test_a_training_plan_whose_serving_would_not_start_says_so() -> None:
    plan = _past_limit()
    est = estimate(plan)
    assert est.judgement().verdict is Verdict.FITS and est.inference.verdict is Verdict.WONT_START  # the case
    d = diagnose(plan)
    said = d.outcome.text
    assert ALL_FIT not in said and "Nothing fails" not in said
    assert said == f"Fails {SERVING_START}: the training step and evaluation fit; {est.inference.would_not_start}."
    assert est.inference.would_not_start.startswith("vLLM would not start")
    # the remedies' note agrees: the step fits, not the plan; the symptom row is the start-up refusal's own (h92verd)
    assert d.advice.kind is AdviceKind.STEP_FITS_BUT and d.when == SERVING_START and d.offers_symptom
    assert d.failure is Failure.SERVING_START and d.symptom is not None and d.symptom.when == SERVING_START


def test_a_training_plan_whose_vllm_pool_holds_no_request_says_vllm_would_not_start() -> None:
    plan = _pool_short()
    est = estimate(plan)
    assert est.judgement().verdict is Verdict.FITS and est.inference.verdict is Verdict.OOM and est.inference.refusal
    d = diagnose(plan)
    assert d.outcome.text.startswith(f"Fails {SERVING_START}: the training step and evaluation fit; vLLM 0.19 would")
    assert est.inference.refusal in d.outcome.text and "serving many users" not in d.outcome.sentence
    # the start-up refusal's symptom, not "Out of memory when serving many users" (h92verd): what starts it is one
    # click away (a shorter context, tensor parallel over more GPUs)
    assert d.offers_symptom and d.failure is Failure.SERVING_START


def test_where_serving_starts_and_fits_nothing_fails_and_serving_itself_says_why_it_would_not_start() -> None:
    allowed = _past_limit(long_context=True)  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM starts (and warns)
    assert estimate(allowed).inference.verdict is Verdict.FITS
    assert diagnose(allowed).outcome.text == f"Nothing fails: {ALL_FIT}."
    assert diagnose(allowed).advice.kind is AdviceKind.FITS
    assert diagnose(_past_limit(), Mode.INFERENCE).outcome.text == (
        "Fails at start-up: the engine refuses this context, whatever the memory."
    )
    # the memory's refusal is not the context's: vLLM's own check, said as such (its words are the explanation)
    assert diagnose(_pool_short(), Mode.INFERENCE).outcome.head == "Fails at start-up"


def test_a_training_plan_whose_serving_is_out_of_memory_names_servings_verdict() -> None:
    # Llama 3.1 8B served by vLLM on an RTX 4090 at 64 × 8,192 tokens: 5 at once, it fits queued
    # (tests/core/test_cli.py); transformers' generate holds all 64 at once and does not fit.
    plan = _pool_short().with_inference(engine=Engine.HF, concurrent=64, context=8192)
    serving = estimate(plan).judgement(Mode.INFERENCE)
    assert serving.verdict is Verdict.OOM and not estimate(plan).inference.would_not_start
    d = diagnose(plan)
    assert d.outcome.sentence == (
        "Fails when serving many users: the training step and evaluation fit; serving's verdict is Out of memory."
    )
    assert d.outcome.seen == "Out of memory when serving many users"


def _diagnosis_line(markdown: str) -> str:
    return next(line for line in _unmarked(markdown).splitlines() if line.startswith("Diagnosis: "))


def test_the_report_says_the_diagnosis_sentence() -> None:
    """Markdown, HTML and CSV before h91diag: "Fits with room to spare; the largest part is weights." and nothing of
    serving for the plan whose serving would not start."""
    for plan in (_past_limit(), _pool_short()):
        refusal = estimate(plan).inference.would_not_start
        said = f"Fails when the serving engine starts: the training step and evaluation fit; {refusal}"
        report = build_report([("plan", plan)], generated="2026-12-07T00:00:00Z")
        assert said in _diagnosis_line(to_markdown(report))
        assert html.escape(said) in to_html(report)
        rows = list(csv.reader(io.StringIO(to_csv(report))))
        assert any(row[1:3] == ["diagnosis", "explanation"] and said in row[3] for row in rows)
    fitting = build_report([("plan", _past_limit(long_context=True))], generated="2026-12-07T00:00:00Z")
    assert "Fails" not in _diagnosis_line(to_markdown(fitting))  # nothing fails: the step's fit alone


def test_vramplan_report_writes_the_same_sentence(tmp_path: Path) -> None:
    plan = _past_limit()
    path = tmp_path / "plan.json"
    save(plan, str(path))
    out = tmp_path / "report.md"
    assert main(["report", str(path), "--md", str(out)]) in (0, None)
    line = _diagnosis_line(out.read_text())
    assert "Fails when the serving engine starts" in line and estimate(plan).inference.would_not_start in line


def test_a_training_step_that_is_not_estimated_is_not_said_to_fail_at_load() -> None:
    """Llama 4 Scout's training is not estimated (core.plan.training_refusal: transformers' Llama4TextMoe runs every
    expert on every token); the tab said "Fails at load: the stored weights ... (436 GB) exceed ..." beside
    "Training is not estimated"."""
    plan = plan_for_model("llama-4-scout-17b-16e").with_hardware(gpu="h100-sxm")
    d = diagnose(plan)
    assert d.explanation.startswith("Training is not estimated")
    assert d.outcome.text == "Not estimated: where this training step would fail is not said."

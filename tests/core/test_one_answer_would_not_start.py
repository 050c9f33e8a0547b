""""Would not start" is its own serving verdict, never "fits" (branch h90start): one rule (InferenceEstimate.verdict,
WONT_START where core.context_limit.would_not_start says the engine refuses the context) that the command
line's verdict line and --json, and the Markdown/HTML report read. Before it, Llama 2 7B on vLLM at 8,192 tokens read
"Fits" beside "vLLM would not start".

Llama 2 7B's limit is 4,096: max_position_embeddings in https://huggingface.co/meta-llama/Llama-2-7b-hf config.json
(resources/models.json). vLLM's refusal: vllm 0.19.0 wheel, vllm/config/model.py _get_and_verify_max_len (ValueError
without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1), as tests/core/test_one_answer_context_limit.py reads it.
"""

from __future__ import annotations

import json

import pytest

from core.advice.diagnosis import diagnose
from core.catalogue import find_model
from core.cli.app import main
from core.context_limit import past_limit_words
from core.estimate import estimate
from core.files.report import build_report, to_html, to_markdown
from core.plan import Engine, Plan, default_plan_on
from core.verdict import VERDICT_LABELS, Mode, Verdict

LIMIT = 4096  # Llama 2 7B's max_position_embeddings (config.json above)
PAST = 8192  # twice it: the task's case
ARGS = ["estimate", "--mode", "inference", "--model", "llama-2-7b", "--engine", "vllm", "--context", str(PAST)]


def _plan(**more: object) -> Plan:
    model = find_model("llama-2-7b")
    assert model.spec.max_position_embeddings == LIMIT
    return default_plan_on(model.spec, model.id).with_inference(engine=Engine.VLLM, context=PAST, **more)


def test_the_estimate_says_would_not_start_and_why() -> None:
    plan = _plan()
    inf = estimate(plan).inference
    assert inf.verdict is Verdict.WONT_START and not inf.fits
    assert estimate(plan).judgement(Mode.INFERENCE).verdict is Verdict.WONT_START
    assert inf.would_not_start == past_limit_words(plan) and inf.would_not_start.startswith("vLLM would not start")
    assert inf.refusal == ""  # the memory's refusal is apart: the pool holds requests of 8,192 tokens
    allowed = estimate(_plan(long_context=True)).inference
    assert allowed.verdict is Verdict.FITS and allowed.would_not_start == ""


def test_the_diagnosis_gives_the_engines_words() -> None:
    plan = _plan()
    # the engine's words, closed as a sentence (h92verd: they ended "gives NaN" with no full stop)
    assert diagnose(plan, Mode.INFERENCE).explanation == f"{past_limit_words(plan)}."


def test_the_command_line_says_would_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert f"  {VERDICT_LABELS[Verdict.WONT_START]}: " in out and "the engine would not start" in out
    assert "  Fits: " not in out
    assert main([*ARGS, "--long-context"]) == 0
    allowed = capsys.readouterr().out
    assert "  Fits: " in allowed and "Would not start" not in allowed


def test_the_json_says_would_not_start_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--json"]) == 0
    serving = json.loads(capsys.readouterr().out)["inference"]
    assert serving["verdict"] == "would-not-start"
    assert serving["would_not_start"] == past_limit_words(_plan())
    assert main([*ARGS, "--long-context", "--json"]) == 0
    allowed = json.loads(capsys.readouterr().out)["inference"]
    assert allowed["verdict"] == "fits" and allowed["would_not_start"] == ""


def test_the_report_says_would_not_start() -> None:
    refused = build_report([("plan", _plan())], mode=Mode.INFERENCE)
    assert "Would not start" in to_markdown(refused) and "Would not start" in to_html(refused)
    allowed = build_report([("plan", _plan(long_context=True))], mode=Mode.INFERENCE)
    assert "Would not start" not in to_markdown(allowed)

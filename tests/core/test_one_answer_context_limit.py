"""A serving context past the model's limit: one answer (core.context_limit.past_limit_words) in the banner's
sentence (InferenceEstimate.limits_sentence), the command line and the report, per engine.

Llama 2 7B's limit is 4,096: max_position_embeddings in https://huggingface.co/meta-llama/Llama-2-7b-hf config.json
(resources/models.json). Before branch h89ctx a vLLM plan at 8,192 tokens read "at most 14 requests of 8,192 tokens at
once, or 4,096 tokens each (the model's limit) at 1 request", where vLLM refuses to start.
"""

from __future__ import annotations

import html

import pytest

from core.catalogue import find_model
from core.cli.app import main
from core.context_limit import past_limit_words, would_not_start
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.sglang import read_sglang
from core.files.launch.vllm import read_vllm
from core.files.report import build_report, md_cell, to_html, to_markdown
from core.plan import Engine, OllamaVersion, Plan, default_plan_on
from core.verdict import Mode

LIMIT = 4096  # Llama 2 7B's max_position_embeddings (config.json above)
PAST = 8192  # twice it: the task's case


def _plan(engine: Engine, context: int = PAST, **more: object) -> Plan:
    model = find_model("llama-2-7b")
    assert model.spec.max_position_embeddings == LIMIT
    return default_plan_on(model.spec, model.id).with_inference(engine=engine, context=context, **more)


def test_vllm_would_not_start_in_its_words_and_names_the_variable() -> None:
    """vllm 0.19.0 wheel, vllm/config/model.py _get_and_verify_max_len raises this ValueError without
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (model_max_length: absent from Llama 2's config.json, printed None)."""
    plan = _plan(Engine.VLLM)
    sentence = estimate(plan).inference.limits_sentence(plan)
    assert would_not_start(plan)
    assert sentence.startswith(
        'vLLM would not start: "User-specified max_model_len (8192) is greater than the derived max_model_len '
        "(max_position_embeddings=4096 or model_max_length=None in model's config.json).\" "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 starts it"
    )
    assert "(the model's limit) at 1 request" not in sentence  # 4,096 at 1 request said nothing of 8,192
    allowed = plan.with_inference(long_context=True)
    words = estimate(allowed).inference.limits_sentence(allowed)
    assert not would_not_start(allowed)
    assert 'vLLM starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and warns: "User-specified max_model_len (8192)' in words
    assert "would not start" not in words


def test_sglang_would_not_start_and_llamacpp_warns() -> None:
    """sglang 0.5.23 wheel, sglang/srt/configs/model_config.py ModelConfig._derive_context_length raises without
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN; llama.cpp src/llama-context.cpp logs its warning and runs."""
    sglang = _plan(Engine.SGLANG)
    assert estimate(sglang).inference.limits_sentence(sglang).startswith(
        'SGLang would not start: "Warning: User-specified context_length (8192) is greater than the derived '
        'context_length (4096).'
    )
    llama = _plan(Engine.LLAMACPP)
    assert not would_not_start(llama)
    assert estimate(llama).inference.limits_sentence(llama).endswith(
        'llama.cpp starts and warns: "n_ctx_seq (8192) > n_ctx_train (4096) -- possible training context overflow"'
    )
    # transformers' generate and Ollama say nothing of their own; a context within the limit, no engine does
    assert past_limit_words(_plan(Engine.HF)) == ""
    assert past_limit_words(_plan(Engine.LLAMACPP, ollama_version=OllamaVersion.V0_12_11)) == ""
    assert all(past_limit_words(_plan(e, LIMIT)) == "" for e in (Engine.VLLM, Engine.SGLANG, Engine.LLAMACPP))


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG, Engine.LLAMACPP])
def test_the_command_line_and_the_report_say_the_engines_words(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan(engine)
    words = past_limit_words(plan)
    assert words
    code = main(["estimate", "--mode", "inference", "--model", "llama-2-7b", "--engine", engine.value,
                 "--context", str(PAST)])
    assert code == 0
    assert words in capsys.readouterr().out
    report = build_report([("plan", plan)], mode=Mode.INFERENCE)
    assert md_cell(words) in to_markdown(report)
    assert html.escape(words) in to_html(report)


def test_a_pasted_variable_sets_the_allowance() -> None:
    """vllm 0.19.0 vllm/envs.py reads VLLM_ALLOW_LONG_MAX_MODEL_LEN as "1" or "true"; sglang 0.5.23
    srt/environ.py EnvBool takes "1", "true", "yes", "y"."""
    vllm_line = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve meta-llama/Llama-2-7b-hf --max-model-len 8192"
    assert read_vllm(vllm_line)[1]["inference.long_context"] is True
    off = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=0 vllm serve meta-llama/Llama-2-7b-hf --max-model-len 8192"
    assert read_vllm(off)[1]["inference.long_context"] is False
    sglang_line = (
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=yes python -m sglang.launch_server --model-path "
        "meta-llama/Llama-2-7b-hf --context-length 8192"
    )
    assert read_sglang(sglang_line)[1]["inference.long_context"] is True


def test_the_vllm_export_writes_the_variable_the_plan_allows() -> None:
    """The exported line starts where the plan says it does: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in front where the plan
    allows a context past the limit, and reads back as that allowance; a plan that does not allow it is written as
    planned (the verdict says vLLM would not start)."""
    allowed = _plan(Engine.VLLM, long_context=True)
    text = export(allowed, Target.VLLM).text
    line = next(w for w in text.splitlines() if "vllm serve" in w and not w.startswith("#"))
    assert line.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ")
    assert read_vllm(text)[1]["inference.long_context"] is True
    unallowed = export(_plan(Engine.VLLM), Target.VLLM).text
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in unallowed
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in export(_plan(Engine.VLLM, LIMIT, long_context=True), Target.VLLM).text


def test_training_past_the_limit_is_a_note_that_says_what_runs() -> None:
    """Training: a note, never a refusal. RoPE computes any position (Llama 2 7B at 8,192 runs; how well is the
    user's call); a learned position table (GPT-2's wpe, n_positions 1024 in https://huggingface.co/gpt2
    config.json; transformers models/gpt2/modeling_gpt2.py: nn.Embedding(max_position_embeddings, ...)) has no row
    past it, so torch's embedding lookup raises ("index out of range in self") at the first step. Before h89ctx
    both read "the run would need a longer-context model or position scaling"."""
    from core.checks import plan_warnings

    def note(model_id: str, seq: int) -> str:
        model = find_model(model_id)
        plan = default_plan_on(model.spec, model.id)
        plan = plan.with_workload(seq_len=seq)
        return next(w.text for w in plan_warnings(plan) if w.mode is Mode.TRAINING and "Sequence" in w.text)

    rope = note("llama-2-7b", PAST)
    assert "positions are computed (RoPE or ALiBi), not looked up: the run goes ahead" in rope
    assert "would need" not in rope
    learned = note("gpt2", 2048)
    assert "learned position table has 1,024 rows" in learned and "index out of range in self" in learned


@pytest.mark.parametrize(
    ("engine", "more", "runs"),
    [
        (Engine.VLLM, {}, ""),  # refused: the verdict and limits_sentence say it, once
        (Engine.SGLANG, {}, ""),
        (Engine.VLLM, {"long_context": True}, "vLLM starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and warns"),
        (Engine.SGLANG, {"long_context": True}, "SGLang starts with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 and"),
        (Engine.LLAMACPP, {}, "llama.cpp starts and warns n_ctx_seq > n_ctx_train"),  # src/llama-context.cpp
        (Engine.HF, {}, "transformers' generate starts without a warning"),
    ],
)
def test_the_serving_context_warning_is_said_only_where_the_engine_starts(
    engine: Engine, more: dict[str, object], runs: str
) -> None:
    """h91diag: core.checks added "The serving context of 8,192 tokens is past Llama 2 7B's context window" beside the
    "Would not start" verdict and the engine's refusal in the banner's sentence. It is said where the engine starts
    anyway, with what happens there (RoPE computes positions the model was not trained on)."""
    plan = _plan(engine, **more)
    est = estimate(plan)
    said = [w for w in est.warnings_for(Mode.INFERENCE) if w.startswith("The serving context of 8,192 tokens")]
    if not runs:
        assert would_not_start(plan) and not said
        assert past_limit_words(plan) in est.inference.limits_sentence(plan)  # the one place it is said
        return
    assert len(said) == 1
    past = "The serving context of 8,192 tokens is past Llama 2 7B's context window of 4,096 tokens"  # LIMIT, PAST
    assert said[0].startswith(f"{past}: {runs}")
    assert said[0].endswith("how well it does there is yours to judge.")


def test_a_learned_position_table_says_a_request_stops_past_it() -> None:
    """GPT-2's wpe has n_positions 1,024 rows (https://huggingface.co/gpt2 config.json; transformers
    models/gpt2/modeling_gpt2.py nn.Embedding(max_position_embeddings, ...)): no row past them."""
    model = find_model("gpt2")
    plan = default_plan_on(model.spec, model.id).with_inference(engine=Engine.HF, context=2048)
    said = [w for w in estimate(plan).warnings_for(Mode.INFERENCE) if "serving context of 2,048" in w]
    assert len(said) == 1 and "learned position table has 1,024 rows, so a request stops" in said[0]

"""One start-up refusal, classified once, in the engines' order (h94start). Each test failed before:

1. InferenceEstimate.start_causes re-derived which check refused (a KV pool short of one request, no pool, SGLang's
   empty pool, a context past the model's limit) from the pool's token count and the engine: each check now returns
   its kind (core.start_refusal.StartRefusal) where it is decided, carried on the estimate, read by the causes,
   would_not_start, the verdict, the Diagnosis and the command line's --json;
2. would_not_start said the memory's refusal before the context's, though vLLM raises on the context at config time,
   before its KV pool is sized (ModelConfig.__post_init__: ``self.max_model_len = self.get_and_verify_max_len(...)``,
   vllm-project/vllm@0052a5b8 vllm/config/model.py, raising in ``_get_and_verify_max_len``; the KV check,
   vllm/v1/core/kv_cache_utils.py ``check_enough_kv_cache_memory``, runs once the model is loaded and profiled). The
   first the engine prints is said; the second is listed after it;
3. a serving remedy after which the engine still would not start ("4-bit weights", "Would not start") was listed
   among the others by its cost, before a change with which it starts: it is listed after every one of them, and its
   cost says why.

Llama 2 7B's and 13B's limit is 4,096, Llama 3.1 8B's 131,072: max_position_embeddings in
https://huggingface.co/meta-llama/Llama-2-7b-hf, https://huggingface.co/meta-llama/Llama-2-13b-hf and
https://huggingface.co/meta-llama/Llama-3.1-8B config.json (resources/models.json). The plans are those of
tests/core/test_vllm_kv_refusal.py (vLLM's pool short of one request of 131,072 tokens on an RTX 4090),
tests/core/test_held_by_others.py (3 GiB held by other processes on an RTX 4090: vLLM's free-memory check, SGLang's
empty pool) and tests/core/test_one_answer_would_not_start.py (Llama 2 7B at 8,192 tokens). The memory figures are
the estimate's own, compared, never written here.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.advice.diagnosis import diagnose
from core.catalogue import find_model
from core.cli.app import main
from core.context_limit import past_limit_words
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.plan import Engine, Plan, default_plan_on
from core.presets import plan_for_model
from core.start_refusal import RefusalKind
from core.units import GiB
from core.verdict import Mode, Verdict

LONG = 131_072  # Llama 3.1 8B's limit (config.json above): one request of it is more than vLLM's pool on a 4090 holds
PAST = 200_000  # past Llama 3.1 8B's 131,072 (config.json above)


def _on_4090(engine: str, context: int, concurrent: int = 1, held: float = 0.0) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090", held_by_others=held)
    return plan.with_inference(engine=engine, context=context, concurrent=concurrent)


def _llama2(context: int = 8192) -> Plan:
    model = find_model("llama-2-7b")
    return default_plan_on(model.spec, model.id).with_inference(engine=Engine.VLLM, context=context)


CASES = {
    RefusalKind.KV_POOL_SHORT: _on_4090("vllm", LONG, concurrent=32),
    RefusalKind.FREE_MEMORY: _on_4090("vllm", 4096, held=3 * GiB),
    RefusalKind.EMPTY_POOL: _on_4090("sglang", 4096, held=3 * GiB),
    RefusalKind.CONTEXT: _llama2(),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_each_refusal_is_classified_where_it_is_decided(kind: RefusalKind) -> None:
    inf = estimate(CASES[kind]).inference
    assert [r.kind for r in inf.refusals] == [kind]
    refusal = inf.refusals[0]
    assert inf.start_refusal == refusal and inf.would_not_start == refusal.words
    assert inf.start_causes == (refusal.cause,) and inf.start_cause_words == refusal.cause
    assert (inf.verdict is Verdict.WONT_START) == (kind is RefusalKind.CONTEXT)  # a memory refusal stays OOM
    assert inf.verdict is Verdict.WONT_START or inf.verdict is Verdict.OOM
    assert (inf.refusal == refusal.words) == refusal.memory and (inf.context_refusal == refusal.words) != refusal.memory


def test_the_causes_are_read_from_the_refusal_not_re_derived_from_the_pool() -> None:
    """The old start_causes read the pool's token count and the engine: an estimate whose pool says 0 tokens named
    the free-memory check for vLLM's KV-pool refusal, and SGLang's empty pool for any SGLang plan."""
    inf = estimate(CASES[RefusalKind.KV_POOL_SHORT]).inference
    said = inf.start_causes
    assert said[0].startswith(f"its KV cache pool, {inf.kv_cache_tokens:,} tokens, holds less than one request")
    assert replace(inf, kv_cache_tokens=0).start_causes == said
    assert replace(inf, engine=Engine.SGLANG).start_causes == said


def test_no_refusal_where_the_engine_starts() -> None:
    inf = estimate(_llama2(4096)).inference  # within Llama 2's 4,096 (config.json above)
    assert inf.refusals == () and inf.start_refusal is None and inf.would_not_start == "" and inf.start_causes == ()


def test_the_context_refusal_is_said_first_and_the_memory_one_listed_after(capsys: pytest.CaptureFixture[str]) -> None:
    plan = _on_4090("vllm", PAST)
    inf = estimate(plan).inference
    assert [r.kind for r in inf.refusals] == [RefusalKind.CONTEXT, RefusalKind.KV_POOL_SHORT]  # the case
    assert inf.verdict is Verdict.WONT_START
    context, memory = (r.words for r in inf.refusals)
    assert inf.would_not_start == context == past_limit_words(plan) and context.startswith("vLLM would not start")
    assert inf.refused_next == memory == inf.refusal and "To serve at least one request" in memory
    first, then = inf.start_causes
    assert inf.start_cause_words == f"{first}; once that check passes, {then}"  # h95ui: it read "{first}; and {then}"
    assert "passes the model's limit" in first and "KV cache pool" in then
    said = diagnose(plan, Mode.INFERENCE).explanation  # the first the engine prints, then the one after it
    assert said.startswith(context) and said.index(context) < said.index(memory)
    report = to_markdown(build_report([("plan", plan)], mode=Mode.INFERENCE))
    assert report.index('vLLM would not start: "User-specified') < report.index("To serve at least one request")
    args = ["estimate", "--mode", "inference", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "vllm"]
    assert main([*args, "--context", str(PAST), "--json"]) == 0
    served = json.loads(capsys.readouterr().out)["inference"]
    assert served["would_not_start"] == context and served["refusal"] == memory
    assert [r["kind"] for r in served["start_refusals"]] == ["context-past-limit", "kv-pool-short"]
    assert [r["words"] for r in served["start_refusals"]] == [context, memory]


def test_remedies_the_engine_would_not_start_with_are_listed_after_those_it_starts_with() -> None:
    """Llama 2 13B at 131,072 tokens (past its 4,096, config.json above) on an A100 80GB, 4 GiB held by others, an
    fp8 KV cache: "4-bit weights" (Would not start, cost rank 2) was listed before "Context of ... tokens" (over the
    headroom, cost rank 3), after which vLLM starts."""
    model = find_model("llama-2-13b")
    plan = default_plan_on(model.spec, model.id).with_hardware(gpu="a100-80gb-sxm", held_by_others=4 * GiB)
    plan = plan.with_inference(engine=Engine.VLLM, context=LONG, concurrent=32, kv_dtype="fp8")
    remedies = diagnose(plan, Mode.INFERENCE).remedies
    refused = [r.refused for r in remedies]
    assert True in refused and False in refused  # the case: some start, some do not
    assert refused == sorted(refused)  # every one that starts before every one that does not
    starting = [r for r in remedies if not r.refused]
    assert not any(r.fits for r in starting)  # none fits: the order is not fit_rank's
    for r in remedies:
        assert r.refused == bool(r.estimate.inference.would_not_start)
        first = r.estimate.inference.start_refusal
        why = f"listed last: the engine would still not start: {first.cause}" if first else ""
        assert (why in r.cost) if r.refused else ("listed last" not in r.cost)
    assert any(r.label == "Would not start" for r in remedies if r.refused)

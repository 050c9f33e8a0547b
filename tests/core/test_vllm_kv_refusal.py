"""vLLM does not start where its KV cache holds less than one request of max_model_len (h88fix: a user read
"about 0 of the 32 requests fit" where vLLM raises at start-up).

vLLM's own words: V1, vllm-project/vllm@001cabc1 vllm/v1/core/kv_cache_utils.py ``_check_enough_kv_cache_memory``
("To serve at least one request with the models's max seq len (...), (... GiB KV cache is needed, which is larger than
the available KV cache memory (... GiB). Based on the available memory, the estimated maximum model length is ...");
V0 (0.6 - 0.7), vllm/worker/worker.py ``raise_if_cache_size_invalid`` ("The model's max seq len (...) is larger than
the maximum number of tokens that can be stored in KV cache (...)"). SGLang has no such check: its scheduler caps a
request at the pool (tp_worker.py ``max_req_len = min(context_len - 1, max_total_num_tokens - 1)``) and starts.
"""

from __future__ import annotations

import re

from core.advice.diagnosis import diagnose
from core.cli.render import render_serving
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.plan import Plan
from core.presets import plan_for_model
from core.serving.vllm_versions import VllmVersion
from core.verdict import Mode, Verdict

# Llama 3.1 8B's max_position_embeddings, 131,072 (meta-llama/Llama-3.1-8B config.json), on one 24 GB RTX 4090:
# its bf16 weights (14.96 GiB) leave vLLM 0.19 a pool of about 44,608 tokens (2,788 blocks of 16), a third of one
# request; 32 requests is the user's plan.
LONG = 131_072


def _served(context: int, version: VllmVersion = VllmVersion.V0_19) -> Plan:
    return plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090").with_inference(
        engine="vllm", vllm_version=version, concurrent=32, context=context
    )


def test_a_pool_short_of_one_request_says_vllm_would_not_start_in_its_words() -> None:
    plan = _served(LONG)
    inf = estimate(plan).inference
    assert 0 < inf.max_concurrency < 1 and inf.verdict is Verdict.OOM  # the case: blocks, but not one request's
    assert inf.refusal.startswith('vLLM 0.19 would not start: "To serve at least one request with the models')
    assert f"max seq len ({LONG})" in inf.refusal and "larger than the available KV cache memory" in inf.refusal
    # vLLM's estimate_max_model_len: the longest request the pool holds, here the whole pool (one full group)
    assert f"the estimated maximum model length is {inf.kv_cache_tokens}." in inf.refusal
    assert f"--max-model-len {inf.kv_cache_tokens:,} or less" in inf.refusal and "--kv-cache-dtype fp8" in inf.refusal
    assert inf.refusal in inf.limits_sentence(plan)


def test_vllm_v0_says_its_own_words() -> None:
    inf = estimate(_served(LONG, VllmVersion.V0_6)).inference
    assert f"The model's max seq len ({LONG}) is larger than the maximum number of tokens that can be stored" in (
        inf.refusal
    )


def test_the_window_the_command_line_the_report_and_the_diagnosis_say_the_same() -> None:
    plan = _served(LONG)
    est = estimate(plan)
    refusal = est.inference.refusal
    assert refusal in render_serving(est)
    markdown = to_markdown(build_report([("a", plan)], generated="2026-12-07T00:00:00Z", mode=Mode.INFERENCE))
    assert refusal in re.sub(r"\\(.)", r"\1", markdown)  # md_cell's escapes undone
    assert diagnose(plan, Mode.INFERENCE).explanation == refusal


def test_a_plan_that_starts_has_no_refusal() -> None:
    inf = estimate(_served(8192)).inference  # 8,192 tokens: 5 requests of them fit the same pool
    assert inf.max_concurrent >= 1 and inf.refusal == ""


def test_a_cold_start_short_of_one_request_says_vllm_would_not_start_not_about_0_requests() -> None:
    # 42,000 tokens: 1.06 requests warm; the cold-compile term (core.serving.fit COLD_COMPILE_PEAK, 0.55 GiB: 4,506
    # tokens of Llama 3.1 8B's 128 KiB) leaves 0.95 (h94cold; 40,000 tokens against the 0.98 GiB figure before it)
    est = estimate(_served(42_000))
    assert est.inference.max_concurrent == 1 and est.inference.refusal == ""
    cold = [w for w in est.warnings_for(Mode.INFERENCE) if "cold compile cache" in w]
    assert cold and "vLLM would not start" in cold[0] and "about 0 of" not in cold[0]


def test_a_cold_start_that_still_holds_one_request_says_so() -> None:
    # 40,000 tokens: 1.12 requests warm, 1.00 cold (44,608 - 4,506 tokens): one request fits, not "about 0" (the
    # warning counted whole requests of the warm pool's integer limit, 1, scaled below one, before h94cold).
    est = estimate(_served(40_000))
    cold = [w for w in est.warnings_for(Mode.INFERENCE) if "cold compile cache" in w]
    assert cold and "then about 1 of the 32 requests fit at once" in cold[0]

"""A higher gpu_memory_utilization / mem_fraction_static as the remedy for a KV pool that refuses to start (h97rem).

vLLM's own words for both pool refusals say "Try increasing `gpu_memory_utilization`" (vllm 0.19.0 wheel,
vllm/v1/core/kv_cache_utils.py ``_check_enough_kv_cache_memory``, quoted by core.serving.engines), SGLang's "Please
try to increase --mem-fraction-static" (sglang 0.5.23 wheel, sglang/srt/model_executor/pool_configurator.py); the
Diagnosis offered 4-bit weights and tensor parallel but never the share itself. Each test below failed before
(RemedyKind had no HIGHER_SHARE; the headline's "a higher --gpu-memory-utilization" had no figure and no cap).

The cases are tests/core/test_no_cache_blocks.py's: Llama 3.1 8B's bf16 weights are 14.96 GiB (8.03 B parameters,
https://huggingface.co/meta-llama/Llama-3.1-8B) on an RTX 4090 (23.57 GiB as vLLM reads it, core/data/gpus.json), so
0.6 of the card leaves no block; a KV cache is 131,072 B a token (32 layers × 2 × 8 KV heads × 128 × 2 B,
the model card's config.json), so 49,152 tokens need 6.00 GiB where 0.9 leaves 5.45 GiB.
"""

from __future__ import annotations

import pytest

from core.advice.diagnosis import diagnose
from core.advice.remedies import RemedyKind
from core.estimate import estimate, gpu_for
from core.files.report import build_report, to_markdown
from core.plan import Plan
from core.presets import plan_for_model
from core.serving.engines import HIGHEST_SHARE, vllm_highest_utilization
from core.start_refusal import RefusalKind
from core.units import GiB
from core.verdict import Mode


def _on_4090(**inference: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    return plan.with_inference(**{"engine": "vllm", "context": 4096, **inference})


def _share_remedy(plan: Plan):  # type: ignore[no-untyped-def]
    return next((r for r in diagnose(plan, Mode.INFERENCE).remedies if r.kind is RemedyKind.HIGHER_SHARE), None)


def test_no_cache_blocks_is_offered_the_smallest_utilization_that_starts_and_fits() -> None:
    plan = _on_4090(gpu_memory_utilization=0.6)  # weights alone are 0.635 of the card (above)
    assert estimate(plan).inference.start_refusal.kind is RefusalKind.NO_CACHE_BLOCKS
    remedies = diagnose(plan, Mode.INFERENCE).remedies
    first = remedies[0]  # rank 1, fits: before 4-bit weights (rank 2) and tensor parallel (rank 3)
    assert first.kind is RemedyKind.HIGHER_SHARE and first.fits
    assert first.title == "gpu_memory_utilization 0.70" and first.plan.inference.gpu_memory_utilization == 0.70
    assert not first.estimate.inference.would_not_start
    below = estimate(plan.with_inference(gpu_memory_utilization=0.69))  # the smallest: 0.01 less does not do
    assert below.inference.would_not_start or not below.judgement(Mode.INFERENCE).fits
    assert "(0.70 or more holds a request; up to 0.95)" in estimate(plan).inference.would_not_start  # one answer


def test_a_pool_short_of_one_request_gets_the_share_the_headline_names() -> None:
    plan = _on_4090(context=49152)  # 0.19's default 0.9: 5.45 GiB of pool for a 6.00 GiB request (above)
    assert estimate(plan).inference.start_refusal.kind is RefusalKind.KV_POOL_SHORT
    remedy = _share_remedy(plan)
    assert remedy is not None and remedy.title == "gpu_memory_utilization 0.93"
    assert not remedy.estimate.inference.would_not_start  # it starts, one request of 6 GiB over the 10 % headroom:
    assert not remedy.fits  # listed after the changes that fit (fp8 KV cache, shorter context)
    assert "--gpu-memory-utilization 0.93 or more (up to 0.95)" in estimate(plan).inference.would_not_start


def test_a_request_no_share_up_to_the_cap_holds_is_offered_none_and_said_none() -> None:
    plan = _on_4090(context=131072)  # 16 GiB of KV cache: past 0.95 × 23.57 − 14.96 GiB of weights
    assert estimate(plan).inference.start_refusal.kind is RefusalKind.KV_POOL_SHORT
    assert _share_remedy(plan) is None
    assert "gpu-memory-utilization" not in estimate(plan).inference.would_not_start.split("What starts it")[1]
    shorter = next(r for r in diagnose(plan, Mode.INFERENCE).remedies if r.kind is RemedyKind.SHORTER_CONTEXT)
    assert shorter.title == "Context of 44,608 tokens"  # one answer: the headline's --max-model-len
    assert "--max-model-len 44,608 or less" in estimate(plan).inference.would_not_start


def test_the_cap_is_095_or_what_the_card_leaves_after_the_context_and_other_processes() -> None:
    plan = _on_4090(gpu_memory_utilization=0.6)
    assert vllm_highest_utilization(plan, gpu_for(plan)) == HIGHEST_SHARE == 0.95  # vLLM's guide's raised value
    held = plan.with_hardware(held_by_others=3 * GiB)  # (23.57 − 0.5 CUDA context − 3) / 23.57 = 0.851 → 0.85
    assert vllm_highest_utilization(held, gpu_for(held)) == 0.85
    assert "(0.70 or more holds a request; up to 0.85)" in estimate(held).inference.would_not_start
    remedy = _share_remedy(held)
    assert remedy is not None and remedy.plan.inference.gpu_memory_utilization <= 0.85


def test_sglangs_empty_pool_is_offered_a_higher_mem_fraction_static() -> None:
    plan = _on_4090(engine="sglang", mem_fraction_static=0.6)
    assert estimate(plan).inference.start_refusal.kind is RefusalKind.EMPTY_POOL
    remedy = _share_remedy(plan)
    assert remedy is not None and remedy.fits and remedy.title == "mem_fraction_static 0.68"
    assert remedy.plan.inference.mem_fraction_static == 0.68


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_plan_that_starts_is_offered_no_higher_share(engine: str) -> None:
    assert _share_remedy(_on_4090(engine=engine)) is None


def test_the_report_lists_it() -> None:
    report = to_markdown(build_report([("plan", _on_4090(gpu_memory_utilization=0.6))], mode=Mode.INFERENCE))
    assert "gpu\\_memory\\_utilization 0.70" in report or "gpu_memory_utilization 0.70" in report

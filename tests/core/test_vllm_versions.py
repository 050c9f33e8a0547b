"""vLLM by release (issue 23, item 1): the rules of each release line, as core.serving.vllm_versions gives them."""

from __future__ import annotations

import pytest

from core.errors import PlanError
from core.estimate import estimate
from core.plan import Hardware, Plan, VllmVersion
from core.presets import plan_for_model
from core.serving.vllm_rules import VLLM_BLOCK_SIZE, VLLM_CUDA_GRAPH_BYTES
from core.serving.vllm_versions import Accounting, era_of, utilization


def vllm_plan(**changes: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="h100-sxm")
    return plan.with_inference(engine="vllm", context=8192, **changes)


def test_eras_follow_the_releases() -> None:
    # 0.8-0.9: non_torch_allocations = (total - free) - torch_allocated, the CUDA context in it
    # (vllm-project/vllm 0012cf69, vllm/v1/worker/gpu_worker.py determine_available_memory).
    assert era_of(VllmVersion.V0_8).accounting is Accounting.CONTEXT
    assert not era_of(VllmVersion.V0_9).kv_groups  # one full-length KV group, no hybrid allocator
    assert era_of(VllmVersion.V0_19).accounting is Accounting.INCREASE and era_of(VllmVersion.V0_19).kv_groups
    assert not era_of(VllmVersion.V0_20).graphs_before_kv
    assert era_of(VllmVersion.V0_21).graphs_before_kv  # "CUDA graph memory profiling ... default since v0.21.0"
    assert not era_of(VllmVersion.V0_7).v1


def test_default_memory_share_follows_the_release() -> None:
    # 0.9 up to 0.20; 0.92 from 0.21 (docs.vllm.ai cli/serve); a given share is kept.
    assert utilization(vllm_plan(vllm_version="0.19").inference) == 0.9
    assert utilization(vllm_plan(vllm_version="0.21").inference) == 0.92
    assert utilization(vllm_plan(vllm_version="0.21", gpu_memory_utilization=0.8).inference) == 0.8


def test_graphs_set_aside_before_the_pool_from_0_21() -> None:
    # Same share, same everything: 0.21 sizes the pool after the CUDA-graph estimate, 0.20 does not.
    old = estimate(vllm_plan(vllm_version="0.20", gpu_memory_utilization=0.9)).inference
    new = estimate(vllm_plan(vllm_version="0.21", gpu_memory_utilization=0.9)).inference
    per_block = 131_072 * VLLM_BLOCK_SIZE  # Llama 3.1 8B: 128 KiB per token, 16 tokens per block
    assert (old.kv_cache_tokens - new.kv_cache_tokens) / VLLM_BLOCK_SIZE == pytest.approx(
        VLLM_CUDA_GRAPH_BYTES / per_block, abs=1
    )
    assert "CUDA graphs" in new.formula and "0.21" in new.formula


def test_the_0_8_line_counts_the_cuda_context_outside_torch() -> None:
    v08 = estimate(vllm_plan(vllm_version="0.8")).inference
    v019 = estimate(vllm_plan(vllm_version="0.19")).inference
    assert v08.non_torch_bytes > v019.non_torch_bytes
    assert v08.kv_cache_tokens < v019.kv_cache_tokens


def test_a_release_not_covered_is_refused_with_the_ones_that_are() -> None:
    with pytest.raises(PlanError) as caught:
        Plan(model=vllm_plan().model, hardware=Hardware(gpu="h100-sxm")).with_inference(vllm_version="0.5")
    text = str(caught.value)
    assert "0.5" in text and "0.6" in text and "0.28" in text


def test_the_0_10_line_counts_almost_nothing_outside_torch() -> None:
    # dennislee22/vLLM-benchmarking (engine_logs.json "dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM"):
    # vLLM 0.10.1.1, Qwen2.5-7B-Instruct on one A100 80GB at gpu_memory_utilization 0.25 logged
    # "GPU KV cache size: 93,872 tokens". One V1 constant (0.29 GiB, set by the 0.19.0 logs) gave
    # 88,976 (-5.2 %): the 0.10 logs imply -0.04 to 0.08 GiB outside torch, the 0.19.0 ones 0.24-0.67.
    plan = plan_for_model("qwen2.5-7b").with_hardware(gpu="a100-80gb-sxm")
    plan = plan.with_inference(
        engine="vllm", vllm_version="0.10", context=2048, gpu_memory_utilization=0.25, max_num_seqs=256
    )
    assert estimate(plan).inference.kv_cache_tokens == pytest.approx(93_872, rel=0.02)
    assert estimate(plan).inference.non_torch_bytes < 0.1 * 2**30


def test_a_release_line_without_logs_takes_its_eras_value() -> None:
    # No start-up log of the 0.15 line is in the corpus: it takes the V1 era's median, which
    # the 0.19 line's own value rounds to (core.serving.fit.DEFAULT_NON_TORCH).
    from core.serving.fit import DEFAULT_NON_TORCH

    v015 = estimate(vllm_plan(vllm_version="0.15")).inference
    assert v015.non_torch_bytes == pytest.approx(DEFAULT_NON_TORCH["v1"])
    assert "v1@0.15" not in DEFAULT_NON_TORCH and "v1@0.10" in DEFAULT_NON_TORCH

"""vLLM by release (issue 23, item 1): the rules of each release line, as core.serving.vllm_versions gives them."""

from __future__ import annotations

import pytest

from core.errors import PlanError
from core.estimate import estimate
from core.plan import Hardware, Plan, VllmVersion
from core.presets import plan_for_model
from core.serving.vllm_rules import VLLM_BLOCK_SIZE, vllm_graph_estimate
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
    assert not era_of(VllmVersion.V0_19).graphs_before_kv  # 0.19.0 (2a69949bd): vllm/envs.py default "0"
    assert era_of(VllmVersion.V0_21).graphs_before_kv  # "CUDA graph memory profiling ... default since v0.21.0"
    assert not era_of(VllmVersion.V0_7).v1


def test_default_memory_share_follows_the_release() -> None:
    # 0.9 up to 0.19; 0.92 from 0.21 (docs.vllm.ai cli/serve); a given share is kept.
    assert utilization(vllm_plan(vllm_version="0.19").inference) == 0.9
    assert utilization(vllm_plan(vllm_version="0.21").inference) == 0.92
    assert utilization(vllm_plan(vllm_version="0.21", gpu_memory_utilization=0.8).inference) == 0.8


def test_the_0_20_release_already_sets_graphs_aside_at_0_92() -> None:
    # The vllm-0.20.0 wheel (commit b8160878f in its vllm/_version.py): vllm/envs.py reads
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS with default "1" and vllm/config/cache.py has
    # gpu_memory_utilization Field(default=0.92); 0.19.0 (2a69949bd) has "0" and 0.9. The start-up
    # message's "default since v0.21.0" is not when the release shipped it.
    assert era_of(VllmVersion.V0_20).graphs_before_kv
    assert utilization(vllm_plan(vllm_version="0.20").inference) == 0.92


def test_graphs_set_aside_before_the_pool_from_0_20() -> None:
    # Same share, same everything: 0.20 sizes the pool after the CUDA-graph estimate, 0.19 does not.
    old = estimate(vllm_plan(vllm_version="0.19", gpu_memory_utilization=0.9)).inference
    new = estimate(vllm_plan(vllm_version="0.20", gpu_memory_utilization=0.9)).inference
    per_block = 131_072 * VLLM_BLOCK_SIZE  # Llama 3.1 8B: 128 KiB per token, 16 tokens per block
    # The rule's estimate (core.serving.vllm_rules.vllm_graph_reserve, from 0.20 since h94cold: the 0.20.2 wheel's
    # capture sizes and profile_cudagraph_memory are 0.21.0's): 32 layers at an H100's 1,024 sequences, 8,192 tokens.
    graphs = vllm_graph_estimate(32, 1024, 8192, "h100-sxm", VllmVersion.V0_20)
    assert (old.kv_cache_tokens - new.kv_cache_tokens) / VLLM_BLOCK_SIZE == pytest.approx(graphs / per_block, abs=1)
    assert "CUDA graphs" in new.formula and "0.20" in new.formula


def test_the_0_8_line_counts_the_cuda_context_outside_torch() -> None:
    v08 = estimate(vllm_plan(vllm_version="0.8")).inference
    v019 = estimate(vllm_plan(vllm_version="0.19")).inference
    assert v08.non_torch_bytes > v019.non_torch_bytes
    assert v08.kv_cache_tokens < v019.kv_cache_tokens


def test_a_release_not_covered_is_refused_with_the_ones_that_are() -> None:
    with pytest.raises(PlanError) as caught:
        Plan(model=vllm_plan().model, hardware=Hardware(gpu="h100-sxm")).with_inference(vllm_version="0.5")
    text = str(caught.value)
    assert "0.5" in text and "0.6" in text and "0.28" in text and "0.34" in text


def test_the_0_10_line_counts_almost_nothing_outside_torch() -> None:
    # dennislee22/vLLM-benchmarking (engine_logs.json "dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM"):
    # vLLM 0.10.1.1, Qwen2.5-7B-Instruct on one A100 80GB at gpu_memory_utilization 0.25 logged
    # "GPU KV cache size: 93,872 tokens". One V1 constant (0.29 GiB, set by the 0.19.0 logs) gave
    # 88,976 (-5.2 %): the 0.10 logs imply -0.04 to 0.08 GiB outside torch, the 0.19.0 ones 0.24-0.67.
    plan = plan_for_model("qwen2.5-7b").with_hardware(gpu="a100-80gb-sxm")
    # The log's worker prints "Using FlashInfer for top-p & top-k sampling" (its line 26).
    settings = {"engine": "vllm", "vllm_version": "0.10", "context": 2048, "max_num_seqs": 256}
    plan = plan.with_inference(**settings, gpu_memory_utilization=0.25, vllm_sampler="flashinfer")
    assert estimate(plan).inference.kv_cache_tokens == pytest.approx(93_872, rel=0.02)
    # 0.10 GiB since the 0.10 logs' FlashInfer sampler has no Triton rows (0.02 before: the rows'
    # 0.075 GiB had been read as memory outside torch).
    assert estimate(plan).inference.non_torch_bytes < 0.15 * 2**30


def test_a_release_line_without_logs_takes_its_eras_value() -> None:
    # No start-up log of the 0.18 line is in the corpus: it takes the V1 era's median, which
    # the 0.19 line's own value rounds to (core.serving.fit.DEFAULT_NON_TORCH).
    from core.serving.fit import DEFAULT_NON_TORCH

    v018 = estimate(vllm_plan(vllm_version="0.18")).inference
    assert v018.non_torch_bytes == pytest.approx(DEFAULT_NON_TORCH["v1"])
    assert "v1@0.18" not in DEFAULT_NON_TORCH and "v1@0.10" in DEFAULT_NON_TORCH


def test_releases_that_profile_as_0_10_does_read_the_0_10_lines_non_torch_memory() -> None:
    # memory_profiling and determine_available_memory are 0.10.2's code (26b999c71) up to 0.17.1
    # (95c0f928c); 0.18.1 (a26e8dc7f) runs profile_cudagraph_memory inside the profile, whose
    # leftovers 0.19.0's logs print as non-torch (0.24-0.27 GiB at TP 1 on H100). So 0.11-0.17 take
    # the 0.10 line's 0.10 GiB (its logs: -0.04 to 0.08), not the era's 0.29 (core.serving.fit).
    from core.serving.fit import DEFAULT_NON_TORCH

    for version in ("0.11", "0.13", "0.15", "0.17"):
        line = estimate(vllm_plan(vllm_version=version)).inference
        assert line.non_torch_bytes == pytest.approx(DEFAULT_NON_TORCH["v1@0.10"]), version
    for version in ("0.18", "0.19"):
        line = estimate(vllm_plan(vllm_version=version)).inference
        assert line.non_torch_bytes > DEFAULT_NON_TORCH["v1@0.10"] + 0.15 * 2**30, version


def test_releases_up_to_0_33_keep_the_estimate_before_the_pool() -> None:
    # determine_available_memory in the 0.28.0 (2cf0a6915) and 0.33.0 (4ba787ec9) wheels still
    # takes requested_memory - non_kv_cache_memory - cudagraph_memory_estimate at 0.92.
    v021 = estimate(vllm_plan(vllm_version="0.21")).inference
    v033 = estimate(vllm_plan(vllm_version="0.33")).inference
    assert v033.kv_cache_tokens == v021.kv_cache_tokens
    assert era_of(VllmVersion.V0_33).block_size == 16 and not era_of(VllmVersion.V0_33).measured


def test_huge_cards_get_16k_batched_tokens_from_0_28() -> None:
    # get_batch_defaults (vllm/engine/arg_utils.py): "device_memory >= 160 * GiB_bytes" gives
    # OPENAI_API_SERVER 16384 tokens and 1024 sequences in 0.28.0 (2cf0a6915), not in 0.27.0
    # (4bdc8a788), where a B200 takes the 70 GiB tier's 8192.
    from core.catalogue import find_gpu
    from core.serving.vllm_rules import vllm_defaults

    b200 = find_gpu("b200")
    assert vllm_defaults(b200, VllmVersion.V0_27) == (8192, 1024)
    assert vllm_defaults(b200, VllmVersion.V0_28) == (16384, 1024)
    assert vllm_defaults(find_gpu("h100-sxm"), VllmVersion.V0_34) == (8192, 1024)


def test_0_34_sizes_the_pool_from_the_memory_free_after_warm_up() -> None:
    # vllm-0.34.0 (62d4bc3c7), vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes:
    # available = min(requested - non_kv_used, free + committed - margin) - reserve, with
    # non_kv_used = weights + non-torch + the captured graphs, reserve = peak_activation_memory
    # (the profile's transient plus the graph estimate, gpu_worker.py), margin = max(1 GiB,
    # 0.75 x reserve); gpu_memory_utilization unset resolves to 1.0, blocks of 64 tokens.
    from core.catalogue import find_gpu
    from core.runtime import CUDA_CONTEXT_BYTES
    from core.serving.vllm_rules import vllm_total_memory

    inf = estimate(vllm_plan(vllm_version="0.34")).inference
    v033 = estimate(vllm_plan(vllm_version="0.33")).inference
    gpu_total = vllm_total_memory(find_gpu("h100-sxm"))
    # The graph estimate from 0.21 (core.serving.vllm_rules.vllm_graph_reserve): Llama 3.1 8B's 32 layers at an
    # H100's 1,024 sequences and 8,192 batched tokens (vllm_defaults).
    graphs = vllm_graph_estimate(32, 1024, 8192, "h100-sxm", VllmVersion.V0_34)
    assert inf.cuda_graph_bytes == pytest.approx(graphs)
    reserve = v033.activation_bytes + graphs
    margin = max(2**30, 0.75 * reserve)
    budget = gpu_total - CUDA_CONTEXT_BYTES - margin - v033.weights_bytes - v033.non_torch_bytes
    budget -= graphs + reserve
    per_block = 131_072 * 64  # Llama 3.1 8B: 128 KiB per token, 64 tokens per block
    assert inf.kv_cache_tokens == int(budget // per_block) * 64
    assert inf.kv_cache_tokens % 64 == 0
    # The whole card less what it measures: more than 0.33's 92 % share, the context included.
    assert inf.kv_cache_tokens > v033.kv_cache_tokens
    assert "0.34" in inf.formula and "× 64" in inf.formula


def test_0_34_with_a_share_given_keeps_it_as_a_cap() -> None:
    # With gpu_memory_utilization 0.5 the requested bound binds: requested - held - reserve,
    # the graphs in both (measure_kv_cache_bytes as above), so 0.34 holds one estimate fewer than 0.33.
    v033 = estimate(vllm_plan(vllm_version="0.33", gpu_memory_utilization=0.5)).inference
    v034 = estimate(vllm_plan(vllm_version="0.34", gpu_memory_utilization=0.5)).inference
    per_token = 131_072
    assert v033.kv_cache_tokens * per_token - v034.kv_cache_tokens * per_token == pytest.approx(
        v034.cuda_graph_bytes, abs=64 * per_token
    )


def test_kv_size_is_concurrency_times_length_from_0_21() -> None:
    # vllm-0.21.0 (ad7125a43) kv_cache_utils._report_kv_cache_config: "GPU KV cache size" =
    # int(max_concurrency * max_model_len) (0.22.0, 0.23.0 the same; get_kv_cache_capacity from 0.24.0);
    # 0.20.0 (b8160878f) printed num_blocks // len(groups) * block_size. Gemma 3 12B (five sliding-window
    # layers of 1,024 tokens to each global one, in padded KV groups): a request of 32,768 tokens takes far
    # fewer window blocks than full ones, so the capacity is above the blocks-per-group count.
    # CUDA graphs off: 0.20's fixed graph estimate and 0.21's rule (core.serving.vllm_rules.vllm_graph_reserve) would
    # size the two pools differently.
    plan = plan_for_model("gemma-3-12b").with_hardware(gpu="h100-sxm").with_inference(cuda_graphs=False)
    v020 = estimate(plan.with_inference(engine="vllm", context=32768, vllm_version="0.20")).inference
    v021 = estimate(plan.with_inference(engine="vllm", context=32768, vllm_version="0.21")).inference
    v023 = estimate(plan.with_inference(engine="vllm", context=32768, vllm_version="0.23")).inference
    assert v021.max_concurrency == pytest.approx(v020.max_concurrency)
    assert v021.kv_cache_tokens == int(v021.max_concurrency * 32768)
    assert v021.kv_cache_tokens > v020.kv_cache_tokens
    assert v023.kv_cache_tokens == int(v023.max_concurrency * 32768)
    # Full attention at a multiple of 16: the two counts agree (CUDA graphs off, as above).
    full = [
        estimate(vllm_plan(vllm_version=v, cuda_graphs=False)).inference.kv_cache_tokens for v in ("0.20", "0.21")
    ]
    assert full[0] == full[1]


def test_model_runner_v2_set_no_graph_estimate_aside_until_0_29() -> None:
    # vllm/v1/worker/gpu/model_runner.py profile_cudagraph_memory returns 0 in the 0.22.0-0.28.0
    # wheels and estimates from 0.29.0 (98dff2a81); VllmConfig._is_default_v2_model_runner_model
    # sends Llama (unquantised) to it from 0.23.0 (0fc695fc6) and every dense model from 0.25.0
    # (dd10e03f9); Qwen2 (Qwen2ForCausalLM) not before 0.25, Mixtral (MoE) not up to 0.28.
    from core.model import ModelSpec
    from core.serving.vllm_versions import graphs_before_kv

    def uses(model: str, version: str, **changes: object) -> bool:
        plan = plan_for_model(model).with_inference(engine="vllm", vllm_version=version, **changes)
        spec: ModelSpec = plan.model
        return graphs_before_kv(plan.inference, spec)

    assert uses("llama-3.1-8b", "0.22") and not uses("llama-3.1-8b", "0.23")
    assert uses("llama-3.1-8b", "0.23", weight_dtype="fp8") and not uses("llama-3.1-8b", "0.24", weight_dtype="fp8")
    assert uses("qwen2.5-7b", "0.24") and not uses("qwen2.5-7b", "0.25")
    assert uses("mixtral-8x7b-v0.1", "0.28")
    assert uses("llama-3.1-8b", "0.29") and not uses("llama-3.1-8b", "0.19")
    v023 = estimate(vllm_plan(vllm_version="0.23", gpu_memory_utilization=0.9)).inference
    v019 = estimate(vllm_plan(vllm_version="0.19", gpu_memory_utilization=0.9)).inference
    assert v023.kv_cache_tokens == v019.kv_cache_tokens  # the 0.19 arithmetic: graphs after the pool

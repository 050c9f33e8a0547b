"""vLLM V1's top-k/top-p sampler in the profile run (issue 23): which path an install takes, by
release and by the plan's ``inference.vllm_sampler``, and what each holds at its peak.

Read in the released wheels (vllm/_version.py commits): 0.10.2 (26b999c71), 0.11.0 (f71952c1c),
0.12.0 (4fd9d6a85), 0.13.0 (72506c983), 0.16.0 (89a77b108), 0.17.0 (b31e9326a);
vllm/v1/sample/ops/topk_topp_sampler.py, vllm/v1/sample/sampler.py and
vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run (top_k = vocabulary - 1, top_p = 0.9 on
every one of max_num_seqs rows)."""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu, find_model
from core.estimate import estimate
from core.plan import Plan, VllmSampler
from core.presets import plan_for_model
from core.serving.engines import rank_layout, vllm_pool
from core.serving.fit import DEFAULT_FIT
from core.serving.vllm_rules import SamplerPath, sampler_path, vllm_sampler_bytes
from core.units import GiB


def vllm_plan(model: str = "llama-3.1-8b", gpu: str = "h100-sxm", **changes: object) -> Plan:
    plan = plan_for_model(model).with_hardware(gpu=gpu)
    return plan.with_inference(**{"engine": "vllm", "context": 8192, **changes})


def test_a_pip_install_sorts_before_0_17_and_runs_triton_from_it() -> None:
    # 0.9.2-0.11.0: FlashInfer's sampler when flashinfer imports, and the wheels list it as an
    # extra only ("Provides-Extra: flashinfer"); 0.12.0-0.16.0: a requirement, but the sampler
    # only with VLLM_USE_FLASHINFER_SAMPLER=1; so forward_native, whose apply_top_k_top_p sorts
    # up to 0.16.0 and calls apply_top_k_top_p_triton from 0.17.0 when logits.shape[0] >= 8.
    for version in ("0.8", "0.10", "0.11", "0.13", "0.16"):
        inf = vllm_plan(vllm_version=version).inference
        assert inf.vllm_sampler is VllmSampler.AUTO
        assert sampler_path(inf, 256) is SamplerPath.SORT, version
    for version in ("0.17", "0.19", "0.27"):
        inf = vllm_plan(vllm_version=version).inference
        assert sampler_path(inf, 256) is SamplerPath.TRITON, version
        assert sampler_path(inf, 7) is SamplerPath.SORT, version  # "Use pytorch sort ... small batch"
    for version in ("0.10", "0.19"):
        inf = vllm_plan(vllm_version=version, vllm_sampler="flashinfer").inference
        assert sampler_path(inf, 256) is SamplerPath.FLASHINFER
    assert sampler_path(vllm_plan(vllm_version="0.10", vllm_sampler="native").inference, 256) is SamplerPath.SORT


def test_the_sort_holds_38_bytes_a_bf16_logit_and_flashinfer_14() -> None:
    # At logits.sort: the model-dtype logits (2), Sampler.forward's float32 copy (4), the sorted
    # values and int64 indices (12) and PyTorch's stable-sort scratch (SortStable.cu
    # segmented_sort_pairs: int64 reverse indices 8, cub's alternate keys 4 and values 8) = 38;
    # 2-127 rows take segmented_sort_pairs_by_full_sort: 8 + 8 + 4 + 12 = 32 of scratch, 50 in all.
    # FlashInfer (flashinfer 0.2.11 sampling.py top_k_top_p_sampling_from_logits): the float32
    # logits, top_k_mask_logits' output and the softmax, 2 + 4 + 4 + 4 = 14, no Triton rows.
    model = find_model("llama-3.1-8b").spec
    vocab, hidden = model.vocab_size, model.hidden_size

    def per_logit(rows: int, path: SamplerPath, element: float = 2.0) -> float:
        total = vllm_sampler_bytes(model, 2048, rows, element, True, path)
        return (total - (2048 + rows) * hidden * element) / (rows * vocab)

    assert per_logit(256, SamplerPath.SORT) == pytest.approx(38)
    assert per_logit(1, SamplerPath.SORT) == pytest.approx(38)
    assert per_logit(64, SamplerPath.SORT) == pytest.approx(50)
    assert per_logit(256, SamplerPath.SORT, element=4.0) == pytest.approx(36)  # .to(float32) copies nothing
    assert per_logit(256, SamplerPath.FLASHINFER) == pytest.approx(14)
    assert per_logit(256, SamplerPath.TRITON) == pytest.approx(14 + 132 * 4 / 256)  # one row per program


def test_kolyangg_s_printed_peak_is_the_sort_path_s() -> None:
    # kolyangg/mlops-assignment@daaf8cb logs/vllm.log (vLLM 0.10.2, Qwen3-30B-A3B-Instruct-2507 on
    # one H100, 8,192 batched tokens and 1,024 sequences, "FlashInfer is not available"):
    # "5.58 GiB for peak activation". The sort's sampler step is 5.54 GiB of it; the 14 B a logit
    # of FlashInfer's or Triton's would be 2.1 GiB.
    model = find_model("qwen3-30b-a3b").spec
    sort = vllm_sampler_bytes(model, 8192, 1024, 2.0, True, SamplerPath.SORT) / GiB
    flashinfer = vllm_sampler_bytes(model, 8192, 1024, 2.0, True, SamplerPath.FLASHINFER) / GiB
    assert sort == pytest.approx(5.58, abs=0.1)
    assert flashinfer < 2.2


def test_the_setting_moves_the_pool_by_the_sort_s_bytes() -> None:
    # Llama 3.1 8B on an L4 at vLLM 0.11 with 128 sequences (abinavChandar/demo_env_l4's settings):
    # FlashInfer's sampler leaves 128 rows x 128,256 x 24 B = 0.37 GiB more to the pool than the
    # pip install's sort (the forward's 0.23 GiB is below both).
    sort = vllm_plan(gpu="l4", vllm_version="0.11", context=32000, gpu_memory_utilization=0.92, max_num_seqs=128)
    flashinfer = sort.with_inference(vllm_sampler="flashinfer")
    gpu = find_gpu("l4")
    pools = [vllm_pool(p, gpu, rank_layout(p), DEFAULT_FIT) for p in (sort, flashinfer)]
    assert (pools[0].activation - pools[1].activation) / GiB == pytest.approx(128 * 128_256 * 24 / GiB, rel=0.01)
    assert estimate(flashinfer).inference.kv_cache_tokens > estimate(sort).inference.kv_cache_tokens


def test_v0_keeps_its_own_sampler_term() -> None:
    # The 0.6-0.7 line's V0 sampler (one float32 copy) is not the V1 TopKTopPSampler: the setting
    # changes nothing there.
    plan = vllm_plan(vllm_version="0.7")
    assert (
        estimate(plan).inference.kv_cache_tokens
        == estimate(plan.with_inference(vllm_sampler="flashinfer")).inference.kv_cache_tokens
    )


def test_before_0_13_the_moe_scratch_is_gone_when_the_sampler_runs() -> None:
    # 0.10.2 (26b999c71) fused_moe/modular_kernel.py allocates workspace13 / workspace2 with
    # torch.empty in each call; from 0.13.0 (72506c983) current_workspace_manager() keeps them.
    # So the 0.10 peak is the larger of the forward (scratch + hidden) and the sampler's sort:
    # kolyangg/mlops-assignment@daaf8cb logs/vllm.log, gpu_worker.py:391, "5.58 GiB for peak
    # activation" (0.10.2, Qwen3-30B-A3B, one H100, the API server's 8,192 tokens and 1,024 rows).
    plan = vllm_plan("qwen3-30b-a3b", vllm_version="0.10", context=6144)
    gpu = find_gpu("h100-sxm")
    peak = vllm_pool(plan, gpu, rank_layout(plan), DEFAULT_FIT).activation / GiB
    assert peak == pytest.approx(5.58, abs=0.05)
    kept = vllm_pool(plan.with_inference(vllm_version="0.13"), gpu, rank_layout(plan), DEFAULT_FIT)
    assert kept.activation / GiB == pytest.approx(peak + 0.5, abs=0.05)  # the scratch under the sort


def test_the_sampler_row_shows_only_where_v1_samples() -> None:
    # V0's profile (0.6-0.7) keeps one float32 copy of the sampled rows' logits whatever the
    # install (vllm_sampler_bytes with v1=False), so the setting changes nothing there and the
    # window hides its row; every V1 line (0.8 on: ERAS) shows it.
    from core.inputs import input_at, vllm_v1
    from core.serving.vllm_versions import ERAS, era_of

    row = input_at("inference.vllm_sampler")
    for version in ("0.6", "0.7"):
        plan = vllm_plan(vllm_version=version)
        assert not row.matters(plan)
        native = estimate(plan.with_inference(vllm_sampler="native")).inference
        flashinfer = estimate(plan.with_inference(vllm_sampler="flashinfer")).inference
        assert native.kv_cache_tokens == flashinfer.kv_cache_tokens
    for version in ("0.8", "0.10", "0.19", "0.34"):
        assert row.matters(vllm_plan(vllm_version=version))
    # The value layer's V1 line and the era table agree on every release line.
    for era in ERAS:
        plan = vllm_plan(vllm_version=era.first.value)
        assert vllm_v1(plan) is era_of(plan.inference.vllm_version).v1 is era.v1
        assert vllm_v1(vllm_plan(vllm_version=era.last.value)) is era.v1


def test_model_runner_v2_profiles_the_sampler_on_the_logits_alone_from_0_28_to_0_32() -> None:
    # vllm/v1/worker/gpu/model_runner.py _dummy_sampler_run (0.30.0 wheel, ced6857af): the dummy
    # batch's rows were never added to the sampler, so Sampler.apply_sampling_params returns the
    # model-dtype logits untouched (no float32 copy) and SamplingStates.get_top_k_top_p gives no
    # top-k / top-p; the early return is in 0.28.0 (2cf0a6915) to 0.32.0 (5df63a720), 0.27.0
    # (4bdc8a788) copies to float32 on every call and 0.33.0 (4ba787ec9) adds a warm-up pass with
    # top-k / top-p. Model Runner V2 runs every model from 0.29.0, and dense models in 0.28.0.
    dense = vllm_plan(vllm_version="0.30").inference
    assert sampler_path(dense, 256, v2_runner=True) is SamplerPath.LOGITS_ONLY
    assert sampler_path(dense, 256) is SamplerPath.TRITON  # the V1 runner's
    for version in ("0.27", "0.33"):
        assert sampler_path(vllm_plan(vllm_version=version).inference, 256, v2_runner=True) is SamplerPath.TRITON
    model = find_model("llama-3.1-8b").spec
    logits_only = vllm_sampler_bytes(model, 2048, 256, 2.0, True, SamplerPath.LOGITS_ONLY)
    assert logits_only == (256 * model.vocab_size + (2048 + 256) * model.hidden_size) * 2.0


def test_the_t4_log_of_vllm_0_30_sizes_its_pool_without_the_sampler_rows() -> None:
    # eslam-ahmed43/llm-lab@0f01b47 logs/vllm_server.log: vLLM 0.30.0, "Using V2 Model Runner",
    # Qwen2.5-1.5B-Instruct fp16 on a T4 (14.56 GiB), utilisation 0.85, 4,096 tokens; "Actual
    # usage is ... 0.46 GiB for peak activation" = the profile's transient peak 0.12 GiB + the
    # applied CUDA-graph estimate 0.34 GiB (gpu_worker.py determine_available_memory). The
    # estimate's activation was 0.60 GiB with the V1 runner's Triton sampler rows.
    plan = vllm_plan("qwen2.5-1.5b", "t4", vllm_version="0.30", context=4096)
    plan = plan.with_inference(gpu_memory_utilization=0.85, weight_dtype="fp16", kv_dtype="fp16")
    result = estimate(plan).inference
    assert result is not None
    assert result.activation_bytes / GiB == pytest.approx(0.14, abs=0.02)

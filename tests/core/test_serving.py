"""Serving as the engines run it: formats, the KV formula, vLLM's pool, HF generate, speed."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.dtypes import (
    KV_BYTES,
    KvDtype,
    Quant,
    WeightFormat,
    int4_group_bytes_per_weight,
    nf4_bytes_per_weight,
    weight_bytes,
)
from core.estimate import estimate
from core.files import planfile
from core.params import param_counts
from core.plan import Engine, Hardware, Method, Plan
from core.runtime import CUDA_CONTEXT_BYTES
from core.serving.engines import rank_layout, vllm_profile_peak
from core.serving.kv import kv_bytes_per_token, kv_cache_bytes, lesson_kv_cache_bytes
from core.serving.speed import decode_token_flops
from core.serving.vllm_rules import (
    VLLM_BLOCK_SIZE,
    KvGroups,
    vllm_blocks_per_request,
    vllm_defaults,
    vllm_kv_groups,
    vllm_total_memory,
)
from core.training.detailed import weight_terms
from core.units import GiB
from core.verdict import Mode, Verdict

LLAMA_8B = find_model("llama-3.1-8b").spec


def vllm_plan(**changes: object) -> Plan:
    plan = Plan(model=LLAMA_8B, model_id="llama-3.1-8b", hardware=Hardware(gpu="h100-sxm"))
    return plan.with_inference(engine="vllm", **changes)


# --- the KV formula: one home ------------------------------------------------------------
def test_kv_per_token_grouped_query_and_tensor_parallel() -> None:
    # Llama-3.1-8B config.json: 32 layers, 8 KV heads of 128: 2 · 32 · 8 · 128 · 2 B.
    assert kv_bytes_per_token(LLAMA_8B, 2) == 131_072
    # Tensor parallel 2 splits the 8 KV heads 4 and 4 per rank.
    assert kv_bytes_per_token(LLAMA_8B, 2, tensor_parallel=2) == 65_536
    # Past 8 ranks every rank keeps one KV head (vLLM replicates them): 2 · 32 · 1 · 128 · 2.
    assert kv_bytes_per_token(LLAMA_8B, 2, tensor_parallel=16) == 16_384


def test_lesson_form_is_the_general_form_without_grouped_heads() -> None:
    gpt2 = find_model("gpt2").spec  # 12 heads, 12 KV heads of 64: kv width = d = 768
    assert gpt2.num_kv_heads * gpt2.head_dim == gpt2.hidden_size
    assert kv_cache_bytes(gpt2, 1024, 3, 2) == lesson_kv_cache_bytes(12, 768, 1024, 3, 2)


# --- storage formats: one home ----------------------------------------------------------
def test_int4_group_storage() -> None:
    # AWQ/GPTQ g128: 4 bits + one fp16 scale + one 4-bit zero per 128 weights.
    assert int4_group_bytes_per_weight() == pytest.approx(0.5 + 2.5 / 128)


def test_qlora_training_and_serving_share_the_nf4_and_int8_storage() -> None:
    plan = Plan(model=LLAMA_8B, method=Method.QLORA)
    counts = param_counts(plan)
    for quant, fmt in ((Quant.NF4, WeightFormat.NF4), (Quant.INT8, WeightFormat.INT8)):
        qlora = plan.with_changes(quant=quant)
        from core.training.detailed import dtypes_for

        base_terms = weight_terms(qlora, counts, dtypes_for(qlora))
        training_base = sum(t.bytes for t in base_terms if "LoRA" not in t.label)
        assert training_base == pytest.approx(weight_bytes(LLAMA_8B, counts.total, fmt))
    # 4.127 bits per NF4 weight with double quantisation (QLoRA paper, section 3).
    assert nf4_bytes_per_weight() * 8 == pytest.approx(4.127, abs=1e-3)


def test_weight_formats_order() -> None:
    total = LLAMA_8B.total_params()
    sizes = {f: weight_bytes(LLAMA_8B, total, f) for f in WeightFormat}
    assert sizes[WeightFormat.FP32] > sizes[WeightFormat.BF16] > sizes[WeightFormat.FP8]
    assert sizes[WeightFormat.FP8] > sizes[WeightFormat.AWQ_INT4] > sizes[WeightFormat.NF4]
    assert sizes[WeightFormat.AWQ_INT4] == sizes[WeightFormat.GPTQ_INT4]


# --- vLLM ------------------------------------------------------------------------------------
def test_vllm_batch_defaults_follow_the_card() -> None:
    # vllm/engine/arg_utils.py get_batch_defaults (OPENAI_API_SERVER): ≥ 70 GiB and not A100.
    assert vllm_defaults(find_gpu("h100-sxm")) == (8192, 1024)
    assert vllm_defaults(find_gpu("a100-80gb-sxm")) == (2048, 256)
    assert vllm_defaults(find_gpu("l40s")) == (2048, 256)


def test_vllm_pool_is_whole_blocks_and_its_concurrency() -> None:
    inf = estimate(vllm_plan(context=8192)).inference
    # 8,192 is a multiple of 16: the pool's tokens are whole blocks and concurrency is pool ÷ context.
    assert inf.kv_cache_tokens % VLLM_BLOCK_SIZE == 0
    assert inf.max_concurrency == pytest.approx(inf.kv_cache_tokens / 8192)
    assert inf.kv_cache_bytes == inf.kv_cache_tokens * 131_072
    # The pool is what gpu_memory_utilization leaves: less memory allowed, fewer tokens.
    smaller = estimate(vllm_plan(context=8192, gpu_memory_utilization=0.5)).inference
    expected_drop = vllm_total_memory(find_gpu("h100-sxm")) * 0.4 / 131_072
    assert inf.kv_cache_tokens - smaller.kv_cache_tokens == pytest.approx(expected_drop, abs=32)


def test_vllm_weights_split_by_tensor_parallel() -> None:
    # vLLM logged 14.96 GiB of weights for Llama-3-8B on one H100 and 7.48 at TP 2
    # (vllm-project/vllm PR #10511).
    one = rank_layout(vllm_plan())
    two = rank_layout(vllm_plan(tensor_parallel=2))
    assert one.weights_bytes / GiB == pytest.approx(14.96, abs=0.01)
    assert two.weights_bytes / GiB == pytest.approx(7.48, abs=0.01)


# The torch peaks below are vLLM 0.19.0's own "torch peak memory increase" on an H100 80GB
# with `vllm serve` defaults (8192 batched tokens, 1024 sequences), from the start-up logs in
# llm-d-incubation/llm-d-planner accuracy/results/v0.19.0/logs (commit d3121e05), less the
# 32 MiB cuBLAS workspace the estimate adds on top.
@pytest.mark.parametrize(
    ("model_id", "logged_gib", "source"),
    [
        # sampler: 1024 rows × 128,256 logits decide the peak
        ("llama-3.1-8b", 1.89, "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"),
        # sampler on a 256,000 vocabulary
        ("gemma-2-9b", 3.65, "google-gemma-2-9b-it--h100-80gb--tp1pp1dp1--8192.log"),
        # fused-MoE workspace kept under the sampler
        ("qwen3-30b-a3b", 2.70, "qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log"),
        # the dense forward decides (32k vocabulary): CodeLlama-7B has Llama 2 7B's dimensions
        ("llama-2-7b", 0.77, "codellama-codellama-7b-h--h100-80gb--tp1pp1dp1--8192.log"),
    ],
)
def test_vllm_profile_peak_matches_the_logged_torch_peak(model_id: str, logged_gib: float, source: str) -> None:
    spec = find_model(model_id).spec
    plan = Plan(model=spec, model_id=model_id, hardware=Hardware(gpu="h100-sxm")).with_inference(engine="vllm")
    peak = vllm_profile_peak(spec, rank_layout(plan), plan.inference, 8192, 1024, "h100-sxm")
    assert peak / GiB == pytest.approx(logged_gib, rel=0.03), source


# PyTorch's cuBLAS workspace per handle (pytorch/pytorch 26a39059,
# aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize): 4096 KiB × 8 = 32 MiB on
# sm90 alone, 4096 KiB × 2 + 16 KiB × 8 = 8.125 MiB on every other card. Serving runs one handle
# (the worker's or the generating thread's), sized like training's (core.runtime.cublas_workspace).
SM90_WORKSPACE = 4096 * 1024 * 8
OTHER_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
# An AMD Instinct card's matmuls run on hipBLASLt (aten/src/ATen/Context.cpp blasPreferredBackend,
# "AMD Instinct targets prefer hipblaslt"), 76 MiB a handle (CublasHandlePool.cpp,
# parseCUDABlasLtWorkspaceSize).
HIPBLASLT_WORKSPACE = 76 * 1024 * 1024


def test_vllm_profile_peak_takes_the_cublas_workspace_of_the_card() -> None:
    spec = find_model("llama-3.1-8b").spec
    plan = Plan(model=spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="h100-sxm")).with_inference(engine="vllm")
    layout, inf = rank_layout(plan), plan.inference
    hopper = vllm_profile_peak(spec, layout, inf, 8192, 1024, "h100-sxm")
    ampere = vllm_profile_peak(spec, layout, inf, 8192, 1024, "a100-80gb-sxm")
    ada = vllm_profile_peak(spec, layout, inf, 8192, 1024, "rtx-4090")
    assert hopper - ampere == SM90_WORKSPACE - OTHER_WORKSPACE
    assert ada == ampere
    instinct = vllm_profile_peak(spec, layout, inf, 8192, 1024, "mi300x")
    assert instinct - ampere == HIPBLASLT_WORKSPACE - OTHER_WORKSPACE


@pytest.mark.parametrize(
    ("gpu", "workspace", "library"),
    [
        ("h100-sxm", SM90_WORKSPACE, "cuBLAS"),
        ("rtx-4090", OTHER_WORKSPACE, "cuBLAS"),
        ("mi300x", HIPBLASLT_WORKSPACE, "hipBLASLt"),
    ],
)
def test_generate_counts_one_cublas_workspace_beside_the_cuda_context(gpu: str, workspace: int, library: str) -> None:
    plan = Plan(model=find_model("llama-3.2-1b").spec, model_id="llama-3.2-1b", hardware=Hardware(gpu=gpu))
    inf = estimate(plan.with_inference(engine="hf", context=2048)).inference
    assert inf.total_bytes - inf.peak_bytes == pytest.approx(CUDA_CONTEXT_BYTES + workspace)
    overhead = next(b for b in inf.buckets if b.key is BucketKey.OVERHEAD)
    assert any(t.label.startswith(f"{library} workspace") and t.bytes == workspace for t in overhead.terms)


def test_vllm_kv_groups_pad_sliding_window_layers() -> None:
    # vllm/v1/core/kv_cache_utils.py (0.19.0) _get_kv_cache_groups_uniform_page_size: groups
    # of as many layers as the rarer attention type has. Gemma 3 27B: 10 full-attention and
    # 52 windowed layers -> 1 + 6 groups of 10 (8 padding slots); Gemma 2 9B: 21 + 21.
    gemma3 = find_model("gemma-3-27b").spec
    assert vllm_kv_groups(gemma3, gemma3.num_layers) == KvGroups(size=10, full=1, windowed=6, window=1024)
    gemma2 = find_model("gemma-2-9b").spec
    assert vllm_kv_groups(gemma2, gemma2.num_layers) == KvGroups(size=21, full=1, windowed=1, window=4096)
    assert vllm_kv_groups(LLAMA_8B, 32) == KvGroups(size=32, full=1, windowed=0, window=0)


def test_vllm_concurrency_counts_window_blocks_as_vllm_does() -> None:
    # Gemma 3 12B on vLLM 0.19.0 logged "GPU KV cache size: 130,304 tokens" and "Maximum
    # concurrency for 8,192 tokens per request: 15.88x" (llm-d-planner log
    # google-gemma-3-12b-it--h100-80gb--tp1pp1dp1--8192.log): 130,304 / 16 × 6 groups =
    # 48,864 blocks; a request takes 512 blocks in the full group and 513 in each of the five
    # windowed ones (window 1024 - 1 + 8192 batched tokens, capped at 8192, plus one).
    spec = find_model("gemma-3-12b").spec
    groups = vllm_kv_groups(spec, spec.num_layers)
    assert groups.count == 6
    per_request = vllm_blocks_per_request(groups, 8192, 8192)
    assert per_request == 512 + 5 * 513
    assert 130_304 // 16 * groups.count / per_request == pytest.approx(15.88, abs=0.005)


def test_vllm_refuses_a_context_the_pool_cannot_hold() -> None:
    plan = Plan(model=LLAMA_8B, hardware=Hardware(gpu="rtx-4090")).with_inference(engine="vllm", context=131_072)
    inf = estimate(plan).inference
    assert inf.verdict is Verdict.OOM and inf.max_concurrency < 1
    assert 0 < inf.max_context < 131_072
    assert estimate(plan.with_inference(context=inf.max_context)).inference.max_concurrency >= 1


def test_fp8_kv_doubles_the_pool_tokens() -> None:
    bf16 = estimate(vllm_plan(context=8192)).inference.kv_cache_tokens
    fp8 = estimate(vllm_plan(context=8192, kv_dtype="fp8")).inference.kv_cache_tokens
    assert KV_BYTES[KvDtype.FP8] * 2 == KV_BYTES[KvDtype.BF16]
    assert fp8 == pytest.approx(2 * bf16, abs=VLLM_BLOCK_SIZE)


def test_tensor_parallel_70b_fits_four_h100s() -> None:
    # Issue 12: Llama 3.1 70B on 4 × H100 read "out of memory"; per rank it is about 35 GB.
    plan = Plan(model=find_model("llama-3.1-70b").spec, hardware=Hardware(gpu="h100-sxm"))
    inf = estimate(plan.with_inference(engine="vllm", tensor_parallel=4, context=8192)).inference
    assert inf.verdict is not Verdict.OOM and inf.kv_cache_tokens > 100_000
    single = estimate(plan.with_inference(engine="vllm", context=8192)).inference
    assert single.verdict is Verdict.OOM


# --- HF generate --------------------------------------------------------------------------
def test_hf_largest_batch_is_the_boundary() -> None:
    plan = Plan(model=LLAMA_8B, hardware=Hardware(gpu="l40s")).with_inference(context=32_768, concurrent=128)
    inf = estimate(plan).inference
    n = inf.max_concurrent
    assert n >= 1
    assert estimate(plan.with_inference(concurrent=n)).inference.fits
    assert not estimate(plan.with_inference(concurrent=n + 1)).inference.fits


def test_hf_peak_is_weights_kv_and_working_memory() -> None:
    plan = Plan(model=LLAMA_8B, hardware=Hardware(gpu="h100-sxm")).with_inference(concurrent=4, context=4096)
    inf = estimate(plan).inference
    assert inf.peak_bytes == pytest.approx(inf.weights_bytes + inf.kv_cache_bytes + inf.activation_bytes)
    assert inf.kv_cache_bytes == kv_cache_bytes(LLAMA_8B, 4096, 4, 2)


# --- speed -------------------------------------------------------------------------------------
def test_decode_at_one_request_is_bandwidth_bound() -> None:
    inf = estimate(vllm_plan(context=8192)).inference
    first = inf.speed.curve[0]
    assert first.concurrent == 1 and first.memory_bound
    # One step reads 16 GB of weights plus one request's cache at 3,350 GB/s × the HBM
    # efficiency (a CUDA-graph engine adds no per-layer launch time).
    from core.serving.fit import DEFAULT_BANDWIDTH

    read = inf.weights_bytes + 131_072 * (8192 - 256 + 128)
    assert first.step_s == pytest.approx(read / (3350e9 * DEFAULT_BANDWIDTH["cuda-graphs/hbm"]))


def test_throughput_curve_rises_while_each_request_slows() -> None:
    curve = estimate(vllm_plan(context=8192, concurrent=64)).inference.speed.curve
    totals = [p.total_tokens_per_s for p in curve]
    each = [p.per_request_tokens_per_s for p in curve]
    assert totals == sorted(totals) and each == sorted(each, reverse=True)


def test_the_step_formula_names_a_per_layer_time_only_where_the_engine_has_one() -> None:
    # vLLM replays its decode step as CUDA graphs: its fit has no fixed per-layer time, so the
    # formula shows none (it read "+ layers × 0 µs" before).
    vllm = estimate(vllm_plan(context=4096, concurrent=8)).inference.speed
    assert "layers ×" not in vllm.formula
    # llama.cpp's CUDA backend launches each kernel on its own once more than one sequence runs
    # (core.serving.speed.cuda_graphs_replayed): a per-layer time that the formula names.
    own = vllm_plan(context=4096, concurrent=8).with_inference(engine=Engine.LLAMACPP, gguf_quant="Q4_K_M")
    llama = estimate(own).inference.speed
    assert re.search(r"\+ layers × [1-9][0-9]* µs", llama.formula)


def test_ttft_scales_with_the_prompt() -> None:
    short = estimate(vllm_plan(context=2048 + 256)).inference.speed
    long = estimate(vllm_plan(context=4096 + 256)).inference.speed
    # The prefill (TTFT alone: the step that completes the prompt samples the first token) is
    # linear in S plus the quadratic attention term.
    assert 2.0 < long.ttft_alone_s / short.ttft_alone_s < 2.2


def test_a_lone_requests_first_token_comes_with_its_prefill() -> None:
    # XiongjieDai/GPU-Benchmarks-on-LLM-Inference (aa72e0ec, RTX 4090 notebook, llama.cpp build
    # 2824; benchmarks/realgpu/serving_speed.json "xd-4090-x1-8b-f16-pp512"): llama-bench pp512 of
    # Llama 3 8B F16, 9,312 tokens/s, 0.055 s. The first token is sampled from the logits the
    # prompt's forward gives its last position; adding a decode step (16 GB read, 19 ms here)
    # put the estimate at 0.085 s (x1.56).
    plan = Plan(model=LLAMA_8B, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090")).with_inference(
        engine="llamacpp", gguf_quant="F16", context=512, new_tokens=0, cache_type="f16", flash_attention=False
    )
    speed = estimate(plan).inference.speed
    assert 0.055 / 1.5 < speed.ttft_alone_s < 0.055 * 1.5
    assert speed.ttft_alone_s < 0.055 + speed.step_s


def test_a_prompt_looks_its_embedding_up_and_runs_the_head_for_its_last_token_only() -> None:
    # llama.cpp: the token embedding is a row lookup (llm_build_inp_embd, ggml_get_rows of tok_embd)
    # and the last layer keeps only the rows whose output is wanted (inp_out_ids) before its FFN and
    # the head, one for llama-bench's prompt (ggerganov/llama.cpp 0028010d llama.cpp: build_llama,
    # "skip computing output for unused tokens"; llama_decode_internal, n_outputs = 1). vLLM V0
    # computes logits for sampling_metadata.selected_token_indices only (vllm-project/vllm 307e0861
    # logits_processor.py, _prune_hidden_states), V1 for logits_indices; transformers' generate keeps
    # one row from 4.45 (num_logits_to_keep, huggingface/transformers PR #31292).
    # Llama 3.1 8B (config.json: vocab 128,256, hidden 4,096, 32 layers, untied head): 8,030,261,248
    # parameters, 2 x 525,336,576 of them in the embedding and the head. pp512: the blocks for 512
    # tokens, the head once, causal attention 2 x 32 x 512^2 x 4,096: 7.22 TFLOP, not 8.29.
    plan = Plan(model=LLAMA_8B, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090")).with_inference(
        engine="llamacpp", gguf_quant="F16", context=512, new_tokens=0, cache_type="f16", flash_attention=False
    )
    blocks = 8_030_261_248 - 2 * 525_336_576
    attention = 2 * 32 * 512**2 * 4096
    speed = estimate(plan).inference.speed
    assert speed.prefill_flops == pytest.approx(2 * blocks * 512 + 2 * 525_336_576 + attention, rel=1e-9)
    assert speed.prefill_flops == pytest.approx(7.2169e12, rel=1e-4)
    # Llama 3.2 3B ties its head to the embedding (config.json tie_word_embeddings: 3,212,749,824
    # parameters, the 128,256 x 3,072 matrix counted once): the product with it still runs, once.
    small = find_model("llama-3.2-3b").spec
    tied = Plan(model=small, model_id="llama-3.2-3b", hardware=Hardware(gpu="rtx-4090")).with_inference(
        engine="llamacpp", gguf_quant="F16", context=512, new_tokens=0, cache_type="f16", flash_attention=False
    )
    head = 128_256 * 3072
    expected = 2 * (3_212_749_824 - head) * 512 + 2 * head + 2 * 28 * 512**2 * 3072
    assert estimate(tied).inference.speed.prefill_flops == pytest.approx(expected, rel=1e-9)
    # A decode step samples every row: each token runs the head, and looks its embedding up.
    assert decode_token_flops(plan, param_counts(plan)) == pytest.approx(2 * (8_030_261_248 - 525_336_576))


# --- plan files -----------------------------------------------------------------------------
def test_old_inference_section_reads_as_hf_on_one_gpu() -> None:
    document = json.loads(planfile.dumps(Plan(model=LLAMA_8B)))
    section = document["plan"]["inference"]
    for key in ("engine", "tensor_parallel", "max_num_seqs", "gpu_memory_utilization"):
        del section[key]
    plan = planfile.plan_from_dict(document)
    assert plan.inference.engine == "hf" and plan.inference.tensor_parallel == 1


def test_new_serving_fields_round_trip() -> None:
    plan = vllm_plan(tensor_parallel=2, weight_dtype="awq-int4", kv_dtype="fp8", max_num_seqs=64)
    assert planfile.loads(planfile.dumps(plan)) == plan


def test_bad_serving_values_name_the_field() -> None:
    from core.errors import PlanError

    with pytest.raises(PlanError, match="inference.weight_dtype"):
        vllm_plan(weight_dtype="int3")
    with pytest.raises(PlanError, match="inference.tensor_parallel"):
        vllm_plan(tensor_parallel=0)
    # vLLM refuses a TP that does not divide the attention heads (vllm/config/model.py
    # ModelConfig.verify_with_parallel_config); the plan says so in one line.
    with pytest.raises(PlanError, match=r"inference\.tensor_parallel: 1024 .*attention heads"):
        vllm_plan(tensor_parallel=1024)
    assert math.isfinite(estimate(vllm_plan(tensor_parallel=8)).inference.ttft_s)


# --- SGLang ------------------------------------------------------------------------------------
def test_sglang_pool_is_the_static_fraction_less_the_weights() -> None:
    from core.plan import SglangVersion
    from core.serving.engines import SERVING_OVERHEAD_BYTES, sglang_fraction

    plan = vllm_plan(context=8192).with_inference(engine="sglang")
    inf = estimate(plan).inference
    total = vllm_total_memory(find_gpu("h100-sxm"))
    # SGLang 0.5.23's default on one H100 (core.serving.sglang_versions; tests/core/test_sglang_versions.py):
    # 0.83; the 0.4 line's ServerArgs default: 0.88 on one GPU, 0.85 from four.
    gpu = find_gpu("h100-sxm")
    assert sglang_fraction(plan.inference, gpu) == 0.83
    old = plan.inference.__class__(sglang_version=SglangVersion.V0_4_0, tensor_parallel=4)
    assert sglang_fraction(old, gpu) == 0.85
    # profile_max_num_token (python/sglang/srt/model_executor/model_runner.py): the total is the
    # free memory after start-up (CUDA context taken; one GPU: no NCCL buffers), × the fraction.
    # Less the rotary cos/sin table the model load took (float32: 131,072 positions × 128 × 4 B).
    expected = ((total - SERVING_OVERHEAD_BYTES) * 0.83 - inf.weights_bytes - 131_072 * 128 * 4) // 131_072
    assert inf.kv_cache_tokens == expected
    half = estimate(plan.with_inference(mem_fraction_static=0.5)).inference
    assert half.kv_cache_tokens < inf.kv_cache_tokens


# --- serving remedies (core.advice.serving_remedies, listed by core.advice.diagnosis) ------------------------
def test_vllm_plan_that_cannot_start_gets_tensor_parallel_and_smaller_steps() -> None:
    from core.advice.diagnosis import diagnose
    from core.advice.remedies import RemedyKind
    from core.verdict import Mode

    # Llama 3.1 70B in bf16 over two H100s: 65.7 GiB of weights per GPU leave about 1.6 GiB of
    # 0.9 × 79.19 after vLLM's profile (1.9 GiB sampler peak, 2.1 GiB outside torch with TP),
    # and one 16k request needs 16,384 × 160 KiB = 2.5 GiB of KV, so vLLM would not start.
    plan = Plan(model=find_model("llama-3.1-70b").spec, hardware=Hardware(gpu="h100-sxm"))
    plan = plan.with_inference(engine="vllm", context=16_384, concurrent=16, tensor_parallel=2)
    serving = diagnose(plan, Mode.INFERENCE)
    assert serving.judgement.verdict is Verdict.OOM
    by_kind = {r.kind: r for r in serving.remedies}
    more_tp = by_kind[RemedyKind.MORE_TENSOR_PARALLEL]
    assert more_tp.plan.inference.tensor_parallel == 4 and more_tp.fits
    assert more_tp.total_bytes == estimate(more_tp.plan).inference.total_bytes
    # The H100 defaults (8,192 tokens, 1,024 sequences) drop to the small-card ones; the
    # profiling peak shrinks and the pool grows by as much.
    small = by_kind[RemedyKind.SMALLER_BATCHED_TOKENS]
    assert (small.plan.inference.max_num_batched_tokens, small.plan.inference.max_num_seqs) == (2048, 256)
    before, after = estimate(plan).inference, small.estimate.inference
    assert after.activation_bytes < before.activation_bytes
    assert after.kv_cache_bytes > before.kv_cache_bytes


def test_pipeline_parallel_splits_layers_and_the_largest_stage_decides() -> None:
    # Llama 3.1 70B: 80 layers over 3 stages → 27 layers on the largest; untied embeddings
    # and head (128,256 × 8,192 each) sit on the first and last stage, the larger counted.
    spec = find_model("llama-3.1-70b").spec
    plan = Plan(model=spec, hardware=Hardware(gpu="h100-sxm")).with_inference(pipeline_parallel=3)
    layout = rank_layout(plan)
    assert layout.layers == 27
    expected_params = 27 * spec.layer_params() + max(spec.embedding_params(), spec.head_params())
    assert layout.weights_bytes == pytest.approx(expected_params * 2)
    # Its KV cache holds 27 of the 80 layers.
    assert estimate(plan).inference.kv_bytes_per_token == 27 * 2 * 8 * 128 * 2


def test_speed_text_says_one_request_in_the_singular() -> None:
    # The formula read "step = ... at 1 requests" for a lone request (core/serving/speed.py
    # before issue 23); counts take their noun's number (core.format.counted).
    speed = estimate(vllm_plan(context=8192)).inference.speed
    assert speed.running == 1
    for text in (speed.formula, speed.assumptions):
        assert "1 requests" not in text
    assert "1 request " in speed.formula


@pytest.mark.parametrize("engine", [Engine.HF, Engine.LLAMACPP])
def test_no_request_served_names_the_kv_cache_when_the_weights_fit(engine: Engine) -> None:
    # Llama 3.1 8B (about 16 GB in bf16, 4.6 GB as Q4_K_M) with 4 requests of 131,072 tokens on an RTX 4090
    # (24,564 MiB): 128 KiB of KV per token (32 layers × 2 × 8 KV heads × 128 × 2 B) puts 4 × 131,072 tokens
    # at 68.7 GB. The Serving tab said "none: the weights alone do not fit".
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    served = estimate(plan.with_inference(engine=engine, context=131072, concurrent=4)).inference
    assert served.max_concurrent == 0 and served.weights_bytes < served.budget_bytes
    assert "KV cache" in served.none_served and "weights alone" not in served.none_served
    # Llama 3.1 70B in bf16 (141 GB) on the same card: the weights alone.
    big = Plan(model=find_model("llama-3.1-70b").spec, model_id="llama-3.1-70b", hardware=Hardware(gpu="rtx-4090"))
    assert estimate(big.with_inference(engine=Engine.HF)).inference.none_served == "the weights alone do not fit"


def test_the_limits_sentence_says_no_request_fits_rather_than_at_most_0() -> None:
    # The banner, the CLI and the report read "at most 0 requests of this context, or 0 tokens each"
    # where nothing fits (Llama 3.1 70B in bf16, 141 GB, on one 24 GB RTX 4090).
    plan = Plan(model=find_model("llama-3.1-70b").spec, model_id="llama-3.1-70b", hardware=Hardware(gpu="rtx-4090"))
    served = estimate(plan.with_inference(engine=Engine.HF)).inference
    assert served.limits_sentence(plan) == "no request fits: the weights alone do not fit"
    # Llama 3.1 8B, 4 × 131,072 tokens: none of that context, a shorter one for each of the 4.
    small = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    long_plan = small.with_inference(engine=Engine.HF, context=131072, concurrent=4)
    long = estimate(long_plan).inference
    assert long.limits_sentence(long_plan).startswith(
        f"no request of 131,072 tokens fits; {long.max_context:,} tokens each"
    )
    assert "at most 0" not in long.limits_sentence(long_plan)


def test_the_limits_sentence_names_the_models_limit_instead_of_repeating_the_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Llama 2 7B reads 4,096 positions (max_position_embeddings 4096, its config.json:
    # https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json); served one request of 4,096 tokens
    # on the default A100 80GB, the memory allows longer but the model does not: the banner read "at most 26
    # requests of 4,096 tokens at once, or 4,096 tokens each at 1 request", which says nothing.
    plan = Plan(model=find_model("llama-2-7b").spec, model_id="llama-2-7b").with_inference(engine=Engine.HF)
    served = estimate(plan).inference
    assert served.at_model_limit(plan) and served.max_context == 4096 == plan.inference.context
    sentence = served.limits_sentence(plan)
    assert sentence == f"at most {served.max_concurrent} requests of 4,096 tokens (the model's limit) at once"
    # Llama 3.1 8B reads 131,072 (its config.json: https://huggingface.co/meta-llama/Llama-3.1-8B): one request
    # of that many fits beside the weights, so the clause stays and says why it stops there.
    longer_plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b").with_inference()
    longer = estimate(longer_plan).inference.limits_sentence(longer_plan)
    assert longer.endswith(", or 131,072 tokens each (the model's limit) at 1 request")
    # Four requests of 8,192 tokens on a 24 GB RTX 4090: the memory, not the model, sets the longest context.
    small = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    tight_plan = small.with_inference(engine=Engine.HF, context=8192, concurrent=4)
    tight = estimate(tight_plan).inference
    assert not tight.at_model_limit(tight_plan) and "model's limit" not in tight.limits_sentence(tight_plan)
    assert f", or {tight.max_context:,} tokens each at 4 requests" in tight.limits_sentence(tight_plan)
    # The command line and the report say the same words (the window's banner: tests/gui/test_serving.py).
    path = tmp_path / "llama2.json"
    path.write_text(planfile.dumps(plan, Mode.INFERENCE))
    assert main(["estimate", "--plan", str(path)]) == 0
    assert sentence in capsys.readouterr().out
    report = tmp_path / "llama2.md"
    assert main(["report", str(path), "--md", str(report)]) == 0
    assert sentence in report.read_text()

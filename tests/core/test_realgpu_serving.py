"""Serving speed against published measurements (benchmarks/realgpu/serving.py), whole, and the
rules issue 23's fourth to sixth rounds added: an eager kernel's fixed cost in GPU cycles at the
card's boost clock, tensor parallelism without GPU peer-to-peer through host memory, llama.cpp
builds before b3216 dequantising a prompt's quantised weights to F16 for cuBLAS, Apple GPUs'
matmuls on their ALUs at MPS's share of the peak, and llama.cpp replaying a lone sequence's
decode step as one CUDA graph on one GPU (a layer split launching every kernel on its own), and
(eighth round) llama.cpp's Vulkan backend dispatching its own fused kernels from command buffers.

The benchmark runs in about a second, so CI runs all of it. Issue 23's decode and TTFT targets
are not all met (docs/SERVING.md says which and why); what is held: the targets that are met stay
met, the decode median stays within its target, the rows past 35 % are only the listed ones (a
ratchet: shorten the list when the estimate improves), and core.serving.fit holds the benchmark's
own fit.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest

from core.catalogue import find_gpu, find_link, find_model
from core.dtypes import GgmlType, GgufQuant, LlamaCppBackend
from core.estimate import estimate
from core.format import duration
from core.params import param_counts
from core.plan import Attention, Hardware, Plan, TransformersVersion
from core.serving import engines as serving_engines
from core.serving.engines import rank_layout, vllm_pool
from core.serving.fit import DEFAULT_FIT, HF_HOST_LAYER, METAL_KERNELS, EngineFamily
from core.serving.hf_generate import decode_kv_passes, fp8_linears_per_layer, fp8_synchronised, host_layer_ratio
from core.serving.llamacpp import (
    CUBLAS_PROMPT_BEFORE_BUILD,
    CUDA_GRAPHS_FROM_BUILD,
    F16_VECTOR_LOADS_FROM_BUILD,
    cuda_graphs_replayed,
    f16_matvec_scalar_loads,
    gguf_layout,
    matvec_weights_by_type,
    prompt_dequant_bytes,
    use_more_bits,
    vulkan_uses_mmvq,
)
from core.serving.speed import (
    APPLE_MATMUL_UTILISATION,
    APPLE_MATVEC_CYCLES,
    CUDA_LOW_BIT_MATVEC_BEFORE_BUILD,
    CUDA_LOW_BIT_MATVEC_CYCLES,
    INBAND_ECC_CARDS,
    INBAND_ECC_DATA_SHARE,
    KERNELS_PER_LAYER,
    METAL_MM_TILE_TOKENS,
    METAL_TILE_DEQUANT_CYCLES,
    NCCL_CARRIED_LINKS,
    SCALAR_F16_MATVEC_SLOWDOWN,
    SERVING_UTILISATION,
    V0_OUTPUT_FIXED_S,
    V0_OUTPUT_PER_SEQUENCE_S,
    V0_STEP_HOST_S,
    VULKAN_FLASH_KERNELS_PER_LAYER,
    VULKAN_KERNELS_PER_LAYER,
    WEIGHT_MATMULS_PER_LAYER,
    allreduce_seconds,
    ecc_data_share,
    embedding_allreduce_seconds,
    graph_batch,
    kernel_seconds,
    kernels_per_layer,
    kquant_matvec_seconds,
    logits_gather_seconds,
    marlin_moe_kernels_per_layer,
    metal_tile_dequant_seconds,
    serving_utilisation,
    step_model,
    weight_read_factor,
)
from core.serving.vllm_rules import VLLM_CUDA_GRAPH_BYTES, vllm_total_memory
from core.serving.vllm_versions import COLD_COMPILE_SEEN_GIB
from core.units import GiB, MiB
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]

# The decode rows past 35 % (leave one source out), measured with the estimate of this commit.
# XiongjieDai's table is the only source of llama.cpp on A100s and of K-quants on Apple silicon
# (llama.cpp discussion #4167 has F16, Q8_0 and Q4_0); see docs/SERVING.md ("Still missed"). The
# M1 Max's 8B Q4_K_M row left the list with the K-quant mat-vecs' ALU cost (+49.8 -> +23.6 %); the
# four-A100-SXM4 8B F16 row with the scalar-load F16 mat-vec of builds before b3916 (+43.3 -> +13.2 %).
# dennislee22's two-GPU ten-request run (vLLM, no GPU P2P) joined it then (+34.1 -> +53.2 %): held
# out, vLLM on HBM borrows llama.cpp's HBM efficiency, no longer pulled down by the slow F16 kernel
# (0.54 -> 0.65; dennislee22's own rows set 0.60, and its one-GPU rows are now within 7 %); what is
# left is the all-reduce through host memory, charged NCCL's model of PCIe (docs/SERVING.md). With
# the step's logits gathered across the ranks (vLLM V1's all-gather) it is +48.5 %, with its
# all-reduces carrying the 16 rows of the CUDA graph its ten requests run +42.0 % (+42.6 % with the
# queue's prefill share, +41.9 % with the all-reduce after the vocabulary-split embedding lookup,
# +42.1 % since the GDDR cards with in-band ECC refit llama.cpp's HBM efficiency it borrows).
# Since the llama.cpp maintainers' tables joined (h62lcpp: PRs #4766, #4812, #12183, #15035, #19378,
# #21024) llama.cpp's HBM efficiency the TP 2 runs borrow refits (0.656 on every source): ten requests +42.1 -> +43.4 %,
# one request +33.5 -> +35.2 % (the same all-reduce through host memory). PR #4766's RTX 3090
# Q2_K and Q3_K_S rows (January 2024 master: 92.69 and 87.26 t/s, below Q4_0's 121.82 though they
# read fewer bytes) left it with the early mul_mat_vec_q's ALU cost per 2- and 3-bit weight
# (core.serving.speed.CUDA_LOW_BIT_MATVEC_CYCLES, set from PR #5351): +57.4 / +56.5 -> +11.8 / +12.8 %.
KNOWN_DECODE_MISSES = {
    "dennislee22-test2-n10-1024-1024-itl_ms",
    "dennislee22-test2-n1-1024-1024-itl_ms",
    "xd-m1max-64gb-x1-70b-q4_kmedium-tg512",
}

# The cold-prefill rows past x 1.5 (leave one source out), measured with the estimate of this
# commit; docs/SERVING.md ("Still missed") gives each one's arithmetic. A ratchet, like the above.
# Since a prompt's FLOPs leave out the embedding lookup and take the head for its last token only
# (core.serving.speed.prefill_flops; llama.cpp's inp_out_ids, vLLM's logits indices) with the
# utilisations their sources give unchanged (the lesson's 40 %, MPS's 78 %), the RTX 4080 F16 pair
# is within (x 1.53 / x 1.51 -> x 1.34 / x 1.32) and four rows whose estimate was already fast are
# past x 1.5 the other way: Geerling's RTX 2080 Ti Vulkan 3B (x 0.68 -> x 0.60), XiongjieDai's M1
# 8 GB 8B Q4_K_M (x 0.76 -> x 0.66), four-A100-SXM4 70B Q4_K_M (x 0.67 -> x 0.66), M1 Max 70B
# (x 0.61 -> x 0.59).
# PR #19378's four-RTX-4090 70B Q4_K_M pp512 (February 2026 master, layer split): 0.357 s published,
# 0.540 s estimated (x 1.51); the prompt's quantised products of that build run in MMQ, not counted
# apart from the FP16 tensor rate the plan takes (no source read for it here). Not the layer split:
# a 512-token prompt at n_ubatch 512 is one micro-batch, which llama.cpp's pipeline parallelism
# (core.serving.llamacpp.prompt_pipeline_interval) has nothing to overlap with (docs/SERVING.md, h65lcpp).
KNOWN_TTFT_MISSES = {
    "geerling46-3b-pp512",
    "xd-a100-sxm-x4-70b-q4_kmedium-pp512",
    "llamacpp19378-4x4090-70b-q4_k_m-pp512",
}

# The KV logs past issue 23's 10 %: none since the sampler's path became a plan input
# (core.serving.vllm_rules.sampler_path). kolyangg's vLLM 0.10.2 H100 log (+34.9 % before) prints a
# 5.58 GiB profile peak where the planner had 2.67 GiB: without FlashInfer (the log says so) the
# sampler's 1,024 dummy rows take apply_top_k_top_p's sort (vllm 0.10.2 wheel, 26b999c71,
# vllm/v1/sample/ops/topk_topp_sampler.py), 38 B a logit with PyTorch's scratch, now +0.6 %.
# The fourth round's RTX 3090 log (vLLM 0.10.0, AWQ Qwen3-30B-A3B, a 1.92 GiB pool) was -10.2 % until its
# own nvidia-smi line for the second card showed an older driver's reserve (h91kv: the record's old_driver field), which
# leaves the RTX 3090 23.70 GiB, not 23.58: -5.2 %.
# The fifth round's RTX 5060 Ti log (vLLM 0.29.0 under WSL2, a 1.45 GiB pool) was +43.0 %: its KV figure is
# not scored since h78kv (FIGURES_NOT_COMPARABLE: a cold compile inside the profile and WSL2's whole-card total,
# both printed by the log; test_the_cold_wsl_start_is_not_scored_on_its_kv_figure_for_what_its_log_prints).
# The sixth round's RTX 4050 Laptop start at mem_fraction_static 0.60 (SGLang 0.5.20 under WSL2) was
# +14.3 % until the memory other processes hold became a plan input (h54held): the vLLM start on the same
# machine prints 4.95 GiB free where the planner's headless card leaves 5.08, and with those 0.13 GiB held
# it reads +6.4 %; the rest is SGLang's weights as allocator segments (1.98 against 1.92 GiB of tensors).
# GIO443/statecraft-serving@992a95b's compiled vLLM 0.30.0 start on an RTX 4070 Laptop under WSL2 (-0.5 % while
# every plan was native Linux) reads +16.9 % since its platform is stated (h92wsl: the whole 8,188 MiB card as
# vLLM's total, 0.8 x 0.42 GiB more pool): its --enforce-eager twin on the same machine moved -8.1 -> +3.0 % and
# sridhar's warm RTX 3090 start -4.4 -> -1.6 %, so the rule holds where nothing else differs; what the compiled
# twin lacks is the run's own 1.08 GiB that eager frees (its README) against the planner's 0.84 GiB CUDA-graph
# estimate (VLLM_CUDA_GRAPH_BYTES) and a cold compile its container keeps no cache of (docs/SERVING.md h92wsl).
# Since h94cold it is planned cold with the graph rule (0.32 GiB) and the cold-compile term fitted without its source
# (0.50 GiB, where its own eager twin implies 0.76): +17.7 %.
GIO443_COMPILED = "gio443-vllm0300-qwen25-1.5b-4070laptop-wsl"
KNOWN_KV_MISSES: set[str] = {GIO443_COMPILED}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "serving.py", "realgpu_serving_test")


@pytest.fixture(scope="module")
def scored(bench: ModuleType) -> tuple[list, object]:
    rows, _, everything = bench.score(bench.all_cases())
    return rows, everything


def _llamacpp(gpu: str, quant: str, fa: bool = False) -> Plan:
    model = find_model("llama-3.1-8b").spec
    return Plan(model=model, model_id="llama-3.1-8b", hardware=Hardware(gpu=gpu)).with_inference(
        engine="llamacpp", gguf_quant=quant, context=640, new_tokens=128, cache_type="f16", flash_attention=fa
    )


def test_llamacpp_launches_a_q8_1_quantise_before_each_quantised_weight_matmul_on_cuda() -> None:
    # ggml-cuda's ggml_cuda_op_mul_mat quantises the activations to q8_1 for mmvq; F16 weights
    # and Metal's mul_mv kernels read float activations.
    # (Flash attention on: the attention products' batched cuBLAS kernels are not counted.)
    assert kernels_per_layer(_llamacpp("rtx-4090", "Q4_K_M", fa=True), find_gpu("rtx-4090")) == 30
    assert kernels_per_layer(_llamacpp("rtx-4090", "F16", fa=True), find_gpu("rtx-4090")) == KERNELS_PER_LAYER == 23
    mac = find_gpu("apple-m1-max-64gb")
    assert kernels_per_layer(_llamacpp("apple-m1-max-64gb", "Q4_K_M"), mac) == 23
    assert WEIGHT_MATMULS_PER_LAYER == 7


def test_a_kernels_fixed_cost_is_counted_at_the_cards_clock() -> None:
    # A100 boost 1.41 GHz (NVIDIA A100 datasheet), RTX 4090 2.52 GHz (NVIDIA product page): the
    # same kernel costs the A100 2.52 / 1.41 times as long; CUDA graphs replay with none.
    a100, rtx = find_gpu("a100-80gb-sxm"), find_gpu("rtx-4090")
    assert a100.boost_clock_ghz == 1.41 and rtx.boost_clock_ghz == 2.52
    ratio = kernel_seconds(a100, DEFAULT_FIT, EngineFamily.EAGER) / kernel_seconds(rtx, DEFAULT_FIT, EngineFamily.EAGER)
    assert ratio == pytest.approx(2.52 / 1.41)
    assert kernel_seconds(a100, DEFAULT_FIT, EngineFamily.GRAPHS) == 0.0


def test_an_apple_gpus_kernels_are_counted_at_its_own_clock() -> None:
    # philipturner/metal-benchmarks dc2adc6 README, GPU table: M1 Max 1.296 GHz, M2 Max (two of
    # them make the M2 Ultra) 1.398 GHz; each reproduces Apple's TFLOPS as cores x 128 x 2 x clock
    # (32 x 256 x 1.296 = 10.6, Apple 10.4; 76 x 256 x 1.398 = 27.2, Apple 27.2). Before, Apple
    # entries had no clock and took the 1.5 GHz fallback, so an M1 Max kernel cost 2.8 us, not 3.3.
    m1max, m2ultra = find_gpu("apple-m1-max-64gb"), find_gpu("apple-m2-ultra-192gb")
    assert m1max.boost_clock_ghz == 1.296 and m2ultra.boost_clock_ghz == 1.398
    assert m1max.peak_tflops("fp32") == pytest.approx(32 * 256 * 1.296e-3, rel=0.03)
    assert m2ultra.peak_tflops("fp32") == pytest.approx(76 * 256 * 1.398e-3, rel=0.01)
    cycles = DEFAULT_FIT.kernel_cycles[METAL_KERNELS]
    assert kernel_seconds(m1max, DEFAULT_FIT, EngineFamily.EAGER) == pytest.approx(cycles / 1.296e9)
    assert kernel_seconds(m2ultra, DEFAULT_FIT, EngineFamily.EAGER) == pytest.approx(cycles / 1.398e9)


def test_a_metal_dispatch_costs_its_own_cycles_not_a_cuda_kernels() -> None:
    # llama.cpp discussion #4167 (build 1550, 8e672ef), Llama 2 7B tg128 in F16 (12.55 GiB) and Q4_0
    # (3.56 GiB) on one chip: t = fixed + bytes / rate, solved on the two rows. The fixed time per token
    # is about the same number of GPU cycles on every chip, whatever its clock (seconds spread 30 %):
    # M1 Max (1.296 GHz) 23.03 / 61.19 t/s, M2 (1.398) 6.72 / 21.91, M2 Ultra (1.398) 41.02 / 94.27,
    # M4 Max (1.678) 31.64 / 83.06.
    rows = {"m1max": (23.03, 61.19, 1.296), "m2": (6.72, 21.91, 1.398), "m2ultra": (41.02, 94.27, 1.398)}
    rows["m4max"] = (31.64, 83.06, 1.678)
    f16, q4 = 12.55, 3.56
    seconds = {k: (f16 / q - q4 / f) / (f16 - q4) for k, (f, q, _) in rows.items()}  # the fixed time per token
    cycles = {k: seconds[k] * rows[k][2] * 1e9 for k in rows}
    assert max(seconds.values()) / min(seconds.values()) > 1.25
    assert max(cycles.values()) / min(cycles.values()) < 1.1
    # 32 layers x 23 Metal kernels (KERNELS_PER_LAYER; Metal quantises no activations): ~9,800 cycles
    # a dispatch, more than twice a CUDA kernel's; the benchmark's least squares over every Apple row
    # (F16, Q8_0, Q4_0 of #4167 and XiongjieDai's 8B and 70B) sets core.serving.fit's value.
    per_dispatch = statistics.median(cycles.values()) / (32 * KERNELS_PER_LAYER)
    assert per_dispatch == pytest.approx(DEFAULT_FIT.kernel_cycles[METAL_KERNELS], rel=0.1)
    assert DEFAULT_FIT.kernel_cycles[METAL_KERNELS] > 2 * DEFAULT_FIT.kernel_cycles[EngineFamily.EAGER]
    plan = _llamacpp("apple-m1-max-64gb", "Q4_0")
    assert kernels_per_layer(plan, find_gpu("apple-m1-max-64gb")) == 23
    speed = estimate(plan).inference.speed
    assert "Metal: 23 dispatches a layer, encoded again each token" in speed.assumptions


def _record(bench: ModuleType, record_id: str) -> dict:
    return next(r for r in bench.speed_corpus()["measurements"] if r["id"] == record_id)


def test_tinyllama_on_a_4090_is_not_charged_a_slow_cards_launches(bench: ModuleType) -> None:
    # geerlingguy/ai-benchmarks#43 (geerling43-1b-tg128): TinyLlama Q4_K_M, 762 tokens/s on an
    # RTX 4090. 54 µs per layer on every card (the old rule, set on slower clocks) gave 387 (-49 %).
    # The run is llama.cpp's Vulkan backend (build 7340): scored, not fitted on (speed_role). Counted
    # with ggml-cuda's 36 kernels a layer it read 488 (-36 %); with ggml-vulkan's dispatches, within 10 %.
    record = _record(bench, "geerling43-1b-tg128")
    assert "Vulkan" in record["engine_version"] and bench.speed_role(record) == ""
    plan = bench.bench_plan(record)
    assert plan.inference.llamacpp_backend is LlamaCppBackend.VULKAN
    predicted = estimate(plan).inference.speed.per_request_tokens_per_s
    assert abs(predicted / record["value"] - 1) < 0.1


def test_vulkan_dispatches_fewer_kernels_than_cuda_launches(bench: ModuleType) -> None:
    # ggml-vulkan at ggml-org/ggml 400b9294: a Llama layer's 22 computing nodes less five fusions
    # (RMS_NORM_MUL twice, ROPE_VIEW_SET_ROWS, MUL_MAT_ADD twice) = 17; F16 weights take no q8_1 copy.
    rtx = find_gpu("rtx-4090")
    vk = _llamacpp("rtx-4090", "F16").with_inference(llamacpp_backend="vulkan")
    assert kernels_per_layer(vk, rtx) == VULKAN_KERNELS_PER_LAYER == 17
    assert kernels_per_layer(vk.with_inference(flash_attention=True), rtx) == VULKAN_FLASH_KERNELS_PER_LAYER == 15
    # Q4_K_M Llama 3.1 8B on NVIDIA: rows of 4,096 take the float path ("Quantization overhead is
    # not worth it for small k"); only ffn_down (rows of 14,336) takes MMVQ, where it is Q4_K: its
    # Q6_K layers (use_more_bits: 16 of 32) never do ("2-byte alignment"). One q8_1 copy on 16 layers.
    q4 = vk.with_inference(gguf_quant="Q4_K_M")
    assert kernels_per_layer(q4, rtx) == pytest.approx(17 + 16 / 32)
    assert vulkan_uses_mmvq("nvidia", 14336, GgmlType.Q4_K) and not vulkan_uses_mmvq("nvidia", 4096, GgmlType.Q4_K)
    assert not vulkan_uses_mmvq("nvidia", 14336, GgmlType.Q6_K) and vulkan_uses_mmvq("amd", 4096, GgmlType.Q4_K)
    # Its dispatches go into command buffers: no launch overhead, and no CUDA graph either.
    speed = estimate(q4).inference.speed
    assert not cuda_graphs_replayed(q4, rtx, 1) and "Vulkan" in speed.assumptions
    cuda = estimate(_llamacpp("rtx-4090", "Q4_K_M")).inference.speed
    assert speed.per_request_tokens_per_s > cuda.per_request_tokens_per_s


def test_tensor_parallel_without_p2p_goes_through_host_memory(bench: ModuleType) -> None:
    # dennislee22/vLLM-benchmarking (b474d1e, README): Qwen2-7B at TP 2 on one node whose log
    # says it lacks GPU P2P, 100 requests at once, mean ITL 29.0 ms (34.5 tokens/s per user).
    # Over PCIe 4.0 at NCCL's P2P bus rate the all-reduces of the chunked prefills were cheap
    # and the estimate read 53.8 (+56 %).
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n100-1024-1024-itl_ms")
    assert case.plan is not None and case.plan.inference.link == "pcie4-host"
    assert abs(case.predict(DEFAULT_FIT) / case.logged - 1) < 0.35


def test_met_targets_stay_met_and_the_decode_misses_do_not_grow(bench: ModuleType, scored: tuple) -> None:
    rows, _ = scored
    summaries = {s.name: s for s in bench.summaries(rows)}
    assert summaries["buffers"].met
    # The KV target holds over the logs the constants are fitted on; the held-out logs past
    # 10 % are the listed ones (a ratchet: the third round's made the whole-corpus line missed).
    fitted = [r for r in rows if r.case.table == "kv" and not r.case.held_out]
    assert bench.kv_summary(fitted).met
    kv_misses = {r.case.id for r in rows if r.case.table == "kv" and abs(r.error_pct) > bench.KV_WORST}
    assert kv_misses <= KNOWN_KV_MISSES
    decode = [r for r in rows if r.case.table == "decode"]
    errors = sorted(abs(r.error_pct) for r in decode)
    assert errors[len(errors) // 2] <= bench.DECODE_MEDIAN
    assert {r.case.id for r in decode if abs(r.error_pct) > bench.DECODE_WORST} <= KNOWN_DECODE_MISSES


def test_core_holds_the_benchmarks_fit(bench: ModuleType, scored: tuple) -> None:
    _, everything = scored
    assert bench.fit_agrees(everything)


def _cold_prefill(bench: ModuleType, record: dict, **changes: object) -> tuple[float, float]:
    """(the record's seconds for its prompt, the estimate's, with ``changes`` to its plan)."""
    plan = bench.bench_plan(record)
    if changes:
        plan = plan.with_inference(**changes)
    return int(record["input_len"]) / record["value"], estimate(plan).inference.speed.ttft_alone_s


def test_builds_before_b3216_dequantise_a_prompts_quantised_weights_to_f16(bench: ModuleType) -> None:
    # XiongjieDai's llama-bench (aa72e0e, RTX_6000_Ada notebook, build 2833): Llama 3 70B Q4_K_M
    # pp512 at 565.76 t/s, 0.905 s. ggml-cuda.cu (ggerganov/llama.cpp 005de593, the rule of
    # PR #3776 until PR #8075 = b3216) sends a product of more than 32 tokens to cuBLAS after
    # to_fp16_cuda: the Q4_K weights are read and written in F16 once per micro-batch. Counted
    # as tensor-core FLOPs alone the prompt took 0.50 s (x 0.55).
    record = _record(bench, "xd-6000-ada-x1-70b-q4_kmedium-pp512")
    assert bench.llamacpp_build(record["engine_version"]) == 2833 < CUBLAS_PROMPT_BEFORE_BUILD == 3216
    logged, predicted = _cold_prefill(bench, record)
    _, current = _cold_prefill(bench, record, llamacpp_build=0)
    assert logged / predicted < 1.5 < logged / current
    plan = bench.bench_plan(record)
    gpu = find_gpu(plan.hardware.gpu)
    layout = gguf_layout(plan)
    moved = prompt_dequant_bytes(plan, gpu, layout)
    weights = 80 * (8192 * (8192 + 2 * 1024 + 8192) + 3 * 8192 * 28672)  # Llama 3 70B's layer matrices
    quantised = sum(layout.layer_bytes) - 80 * (2 * 8192) * 4  # less each layer's two float32 norms
    assert moved == pytest.approx(quantised + 2 * weights)
    # cuBLAS in both eras for F16 weights; MMQ from b3216; Metal has no cuBLAS.
    assert prompt_dequant_bytes(plan.with_inference(gguf_quant="F16"), gpu, layout) == 0.0
    assert prompt_dequant_bytes(plan.with_inference(llamacpp_build=3216), gpu, layout) == 0.0
    assert prompt_dequant_bytes(plan, find_gpu("apple-m2-ultra-192gb"), layout) == 0.0
    # A micro-batch of 32 tokens or fewer still runs MMQ in those builds.
    _, small = _cold_prefill(bench, record, ubatch=32)
    _, small_now = _cold_prefill(bench, record, ubatch=32, llamacpp_build=0)
    assert small == pytest.approx(small_now)


def test_apple_gpus_multiply_on_their_alus_at_mps_share_of_the_peak(bench: ModuleType) -> None:
    # XiongjieDai's M2 Ultra (build 2796): Llama 3 70B F16 pp512 at 147.6 t/s, 3.469 s. At
    # serving's 40 % of the 27.2 TFLOP/s ALU peak the estimate read 6.68 s (x 1.92); MPS's F32
    # GEMM reaches 78 % of the Apple 7 GPU's peak (metal-flash-attention 01e41e6 README).
    record = _record(bench, "xd-m2ultra-192gb-x1-70b-f16-pp512")
    logged, predicted = _cold_prefill(bench, record)
    assert predicted / logged < 1.5
    plan = bench.bench_plan(record)
    assert serving_utilisation(plan, find_gpu(plan.hardware.gpu)) == APPLE_MATMUL_UTILISATION == 0.78
    assert serving_utilisation(plan, find_gpu("rtx-4090")) == SERVING_UTILISATION
    typed = plan.with_hardware(utilisation=0.5)
    assert serving_utilisation(typed, find_gpu(plan.hardware.gpu)) == 0.5


def test_metals_mat_mat_kernel_dequantises_k_quant_weights_once_per_32_prompt_tokens() -> None:
    # ggml-org/ggml e84c498b: src/ggml-metal.m dispatches kernel_mul_mm as ((ne11 + 31)/32, (ne01 + 63)/64)
    # threadgroups; src/ggml-metal.metal kernel_mul_mm_impl dequantises its 64 rows' weights at every
    # 32-wide step of its 64 x 32 output tile. Checked on ggml-org/llama.cpp PR #3084 (ggerganov's M2 Ultra
    # table, 2023-09-09, the PR's column), LLaMA 7B pp512: F16 1265.30 t/s, Q4_K_M 1028.20, Q6_K 977.56;
    # that build ran the head for every prompt token, so its weights are the mat-vec's, head included.
    ultra = find_gpu("apple-m2-ultra-192gb")
    plan = Plan(
        model=find_model("llama-2-7b").spec, model_id="llama-2-7b", hardware=Hardware(gpu="apple-m2-ultra-192gb")
    ).with_inference(engine="llamacpp", gguf_quant="Q4_K_M", context=640, new_tokens=128, cache_type="f16")
    assert METAL_MM_TILE_TOKENS == 32
    for quant, tokens_per_s in (("Q4_K_M", 1028.20), ("Q6_K", 977.56)):
        files = plan.with_inference(gguf_quant=quant)
        assert 16 * kquant_matvec_seconds(files, ultra) == pytest.approx(512 / tokens_per_s - 512 / 1265.30, rel=0.1)
    # Q4_0 and Q8_0 (1164.00 and 1142.84 t/s in the same table) set their own cycles, no mat-vec figure
    # giving them: 4.3 and 5.6 a weight a tile.
    for quant, tokens_per_s in (("Q4_0", 1164.00), ("Q8_0", 1142.84)):
        files = plan.with_inference(gguf_quant=quant)
        tiles = 16 * kquant_matvec_seconds(files, ultra, cycles_of=METAL_TILE_DEQUANT_CYCLES)
        assert tiles == pytest.approx(512 / tokens_per_s - 512 / 1265.30, rel=0.02)
    # Now the blocks' weights only: the head runs for the prompt's last token (a Q6_K mat-vec, left out).
    lanes = ultra.peak_tflops("fp32") * 1e12 / 2
    head = 32000 * 4096 * APPLE_MATVEC_CYCLES[GgmlType.Q6_K] / lanes
    tile = metal_tile_dequant_seconds(plan, ultra)
    assert tile == pytest.approx(kquant_matvec_seconds(plan, ultra) - head, rel=1e-3)
    # A micro-batch of 512 tokens pays 16 tiles, one of 33 pays 2, a lone token none (the mat-vec).
    model = step_model(plan, param_counts(plan), ultra, rank_layout(plan), DEFAULT_FIT, (0.0, 1.0))
    assert model.tile_dequant_alu_s == tile
    bare = replace(model, tile_dequant_alu_s=0.0)
    assert 512 * (model.prefill_per_token(512) - bare.prefill_per_token(512)) == pytest.approx(16 * tile)
    assert 33 * (model.prefill_per_token(33) - bare.prefill_per_token(33)) == pytest.approx(2 * tile)
    assert model.prefill_per_token(1) == bare.prefill_per_token(1)
    # F16 files and CUDA cards pay none; a type with no figure (Q4_1) none either.
    assert metal_tile_dequant_seconds(plan.with_inference(gguf_quant="F16"), ultra) == 0.0
    assert metal_tile_dequant_seconds(plan.with_inference(gguf_quant="Q4_1"), ultra) == 0.0
    assert metal_tile_dequant_seconds(plan, find_gpu("rtx-4090")) == 0.0


def test_the_apple_quantised_prompts_are_within_the_ratio_held_out(scored: tuple) -> None:
    # XiongjieDai (aa72e0e, builds 2795-2797) Q4_K_M pp512 on the M1 8 GB (5.419 s), M1 Max (8B 1.254 s,
    # 70B 14.645 s), M2 Ultra (0.515, 4.310 s) and M3 Max (0.738, 7.294 s): estimated x 1.52 and x 1.68 too
    # fast on the M1 8 GB 8B and the M1 Max 70B before the mat-mat kernel's dequantisation was costed.
    # llama.cpp discussion #4167's 24 Q4_0 and Q8_0 prompts (M1 to M4) were -24.2 ... -6.9 % (x 1.32 at most).
    rows, _ = scored
    apple = [r for r in rows if r.case.table == "ttft" and r.case.id.startswith("xd-m") and "q4_k" in r.case.id]
    assert len(apple) == 7
    assert all(max(r.ratio, 1 / r.ratio) < 1.35 for r in apple)
    quantised = [r for r in rows if r.case.table == "ttft" and r.case.id.startswith("gg4167") and "_0-" in r.case.id]
    assert len(quantised) == 24
    assert all(max(r.ratio, 1 / r.ratio) < 1.2 for r in quantised)


def test_the_cold_prefill_misses_do_not_grow(bench: ModuleType, scored: tuple) -> None:
    rows, _ = scored
    ttft = [r for r in rows if r.case.table == "ttft"]
    missed = {r.case.id for r in ttft if max(r.ratio, 1 / r.ratio) > bench.TTFT_RATIO}
    assert missed <= KNOWN_TTFT_MISSES


def test_attention_products_without_flash_attention_launch_batched_cublas_kernels_on_cuda() -> None:
    # ggml-cuda.cu (ggerganov/llama.cpp 005de593) ggml_cuda_mul_mat_batched_cublas, taken by KQ and
    # KQV on cards with fast FP16: to_fp16 of the float operand, k_compute_batched_ptrs (grouped-query
    # heads are broadcast: Llama 3.1 8B has 32 query heads on 8 KV heads), cublasGemmBatchedEx, and
    # to_fp32 of the F16 result: 4 kernels each where llama.cpp's graph has one node.
    rtx = find_gpu("rtx-4090")
    assert kernels_per_layer(_llamacpp("rtx-4090", "Q4_K_M"), rtx) == 30 + 2 * 3 == 36
    assert kernels_per_layer(_llamacpp("rtx-4090", "F16"), rtx) == 23 + 6 == 29
    # Metal's kernel_mul_mv_f16_f32 reads the F16 cache and float activations in one kernel.
    mac = find_gpu("apple-m1-max-64gb")
    assert kernels_per_layer(_llamacpp("apple-m1-max-64gb", "F16"), mac) == 23
    # Without grouped-query attention the strided cuBLAS call needs no pointer kernel: 3 each.
    mha = find_model("llama-2-7b").spec
    plan = Plan(model=mha, model_id="llama-2-7b", hardware=Hardware(gpu="rtx-4090")).with_inference(
        engine="llamacpp", gguf_quant="F16", context=640, new_tokens=128, cache_type="f16", flash_attention=False
    )
    assert mha.num_heads == mha.num_kv_heads
    assert kernels_per_layer(plan, rtx) == 23 + 2 * 2


def test_llamacpp_replays_a_lone_sequences_decode_step_as_one_cuda_graph() -> None:
    # ggml-org/llama.cpp PR #6766 (bc4bba36, 2024-05-08): ggml_backend_cuda_graph_compute captures a
    # step's kernels and replays them (agray3/llama.cpp a5fd1931) on compute capability 8.0 or more,
    # for a batch of one token; XiongjieDai's CUDA notebooks compile b2824-b2843 with
    # -DGGML_CUDA_USE_GRAPHS.
    one = _llamacpp("rtx-4090", "Q4_K_M").with_inference(llamacpp_build=CUDA_GRAPHS_FROM_BUILD)
    rtx = find_gpu("rtx-4090")
    assert CUDA_GRAPHS_FROM_BUILD == 2824
    assert cuda_graphs_replayed(one, rtx, 1)
    assert cuda_graphs_replayed(one.with_inference(llamacpp_build=0), rtx, 1)  # a current build
    assert not cuda_graphs_replayed(one.with_inference(llamacpp_build=2823), rtx, 1)
    assert not cuda_graphs_replayed(one, rtx, 2)  # "batch size > 1"
    assert not cuda_graphs_replayed(one, find_gpu("rtx-2080-ti"), 1)  # Turing, cc 7.5 < CC_AMPERE
    assert not cuda_graphs_replayed(one, find_gpu("apple-m1-max-64gb"), 1)  # Metal
    # Two GPUs with every layer offloaded: pipeline parallelism, 4 copies of the inputs, whose
    # rotation (ggml-backend.c, cur_copy) needs a graph update every token: disabled after 4.
    split = one.with_inference(pipeline_parallel=2)
    assert not cuda_graphs_replayed(split, rtx, 1)
    # vLLM captures its own graphs (held at no launch cost), not llama.cpp's rule.
    assert not cuda_graphs_replayed(one.with_inference(engine="vllm"), rtx, 1)


def test_a_layer_split_launches_every_kernel_on_its_own(bench: ModuleType) -> None:
    # XiongjieDai (aa72e0e), build 2824, Llama 3 8B Q4_K_M tg512 on RTX 4090s: 130.58 tokens/s on one
    # GPU, 120.32 on four (layer split): 0.65 ms a token more. One GPU replays the step as a CUDA
    # graph; four launch 32 layers x 36 kernels one by one at 0.74 us (the graph on / off pairs of
    # llama.cpp #6763 and #6766): 0.85 ms. Before, the two were estimated alike.
    one, four = (_record(bench, f"xd-4090-x{n}-8b-q4_kmedium-tg512") for n in (1, 4))
    t1, t4 = (1 / estimate(bench.bench_plan(r)).inference.speed.per_request_tokens_per_s for r in (one, four))
    launches = 32 * 36 * DEFAULT_FIT.launch_seconds["eager"]
    assert t4 - t1 == pytest.approx(launches, rel=0.02)
    assert 0.5e-3 < 1 / four["value"] - 1 / one["value"] < launches


def test_the_launch_overhead_is_what_the_published_graph_pairs_save(bench: ModuleType) -> None:
    # ggml-org/llama.cpp #6763 (agray3, H100 PCIe, Llama 2 7B Q4_K_M): 143.35 -> 163.83 tokens/s;
    # PR #6766 (JohannesGaessler, LLaMA 2 7B q4_0): RTX 3090 116.31 -> 128.27, RTX 4090 138.31 ->
    # 146.81. Each pair is one machine and build with and without CUDA graphs; 1,088 kernels a token
    # (32 layers x 34: no grouped-query attention) are launched in the first and not the second.
    pairs = bench.graph_pairs(bench.all_cases())
    implied = sorted(bench.implied_launch(*pair) for pair in pairs)
    expected = sorted(
        (1 / master - 1 / graphs) / 1088 for master, graphs in ((143.35, 163.83), (116.31, 128.27), (138.31, 146.81))
    )
    assert implied == pytest.approx(expected)
    assert DEFAULT_FIT.launch_seconds["eager"] == pytest.approx(expected[1], rel=0.01)
    assert DEFAULT_FIT.launch_seconds["cuda-graphs"] == 0.0


def test_llamacpp_on_one_a100_is_within_35_percent_held_out(scored: tuple) -> None:
    # XiongjieDai's A100 SXM4 (build 2837), one GPU: Llama 3 8B Q4_K_M 135.04 tokens/s, F16 53.49.
    # Taken as launching every kernel on its own (its build replays one CUDA graph), they were
    # estimated at +38 % and +36 % with that source held out.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    for record_id in ("xd-a100-sxm-x1-8b-q4_kmedium-tg512", "xd-a100-sxm-x1-8b-f16-tg512"):
        assert abs(errors[record_id]) < 35


def test_a_layer_split_f16_prompt_at_a_third_of_its_one_gpu_rate_is_listed_not_scored(bench: ModuleType) -> None:
    # XiongjieDai (aa72e0e, build 2824), RTX 5000 Ada, Llama 3 8B pp512: F16 6,160.57 t/s on one GPU and
    # 2,427.96 on four, Q4_K_M 4,761.12 and 4,671.34. A layer split runs the same FLOPs one GPU after
    # another: the F16 four-GPU run is 8.29 TFLOP in 0.211 s, 39 TFLOP/s, under the card's 65 TFLOP/s
    # CUDA-core peak, as the A100 SXM4 and L40S F16 rows already listed. It was scored at x 0.38.
    rates = {n: _record(bench, f"xd-5000-ada-x{n}-8b-f16-pp512")["value"] for n in (1, 4)}
    assert rates[1] / rates[4] > 2.5
    listed = {u.id for u in bench.unexpressed()}
    assert "xd-5000-ada-x4-8b-f16-pp512" in listed
    assert "xd-5000-ada-x4-8b-f16-pp512" not in {c.id for c in bench.llama_bench_cases()}
    assert "xd-5000-ada-x1-8b-f16-pp512" in {c.id for c in bench.llama_bench_cases()}


def test_a_prompt_run_that_speeds_up_with_its_length_is_listed_not_scored(bench: ModuleType) -> None:
    # XiongjieDai aa72e0e, "LLaMA 3/Professional GPUs/A40_v3.ipynb" cell 15 (build 2833), one A40, Llama 3
    # 70B Q4_K_M: pp512 / pp1024 = 209.38 +- 9.14 / 239.92 +- 9.96 t/s; on one RTX A6000 (A6000_v3.ipynb
    # cell 15, the same GA102) 482.19 +- 0.25 / 466.82 +- 0.29. One GPU runs a prompt's 512-token
    # micro-batches one after another, so a longer prompt cannot be faster per token: t = a + N b on the
    # two rows gives a fixed 0.62 s a run on the A40 and none on the A6000.
    def fixed(pp512: float, pp1024: float) -> float:
        t512, t1024 = 512 / pp512, 1024 / pp1024
        return t512 - (t1024 - t512)

    assert fixed(209.38, 239.92) == pytest.approx(0.62, abs=0.01)
    assert fixed(482.19, 466.82) < 0
    assert _record(bench, "xd-a40-x1-70b-q4_kmedium-pp512")["value"] == 209.38
    assert "xd-a40-x1-70b-q4_kmedium-pp512" in {u.id for u in bench.unexpressed()}
    scored_ids = {c.id for c in bench.llama_bench_cases()}
    assert "xd-a40-x1-70b-q4_kmedium-pp512" not in scored_ids
    assert {"xd-a40-x4-70b-q4_kmedium-pp512", "xd-a6000-x1-70b-q4_kmedium-pp512"} <= scored_ids


def test_a_second_source_sets_the_unified_memory_constants(bench: ModuleType, scored: tuple) -> None:
    # Before llama.cpp discussion #4167's Apple table was added, XiongjieDai's Macs were scored with
    # bandwidth:eager/unified at its prior (no other source of llama.cpp on unified memory).
    _, priors, _ = bench.score(bench.all_cases())
    for source in ("xiongjiedai-gpu-benchmarks", "llamacpp-discussion-4167"):
        assert not any(p.startswith(("bandwidth:eager/unified", "overhead:metal")) for p in priors[source])
    record = _record(bench, "gg4167-m2ultra-76c-7b-q8_0-tg128")
    plan = bench.bench_plan(record)
    assert plan.inference.gguf_quant.value == "Q8_0" and plan.hardware.gpu == "apple-m2-ultra-192gb"
    assert bench.llamacpp_build(record["engine_version"]) == 1550


def test_m2_ultra_and_m3_max_k_quant_decode_within_35_percent_held_out(scored: tuple) -> None:
    # XiongjieDai (aa72e0e), Llama 3 8B Q4_K_M tg512: M2 Ultra 78.81 tokens/s, M3 Max 49.0. With Metal's
    # kernels at CUDA's 4,250 cycles and unified memory at its prior they were estimated at +35.6 % and
    # +20.8 % held out; with #4167 setting Metal's dispatch cost and the efficiency, within 15 %.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    for record_id in ("xd-m2ultra-192gb-x1-8b-q4_kmedium-tg512", "xd-m3max-64gb-x1-8b-q4_kmedium-tg512"):
        assert abs(errors[record_id]) < 15
    discussion = [e for k, e in errors.items() if k.startswith("gg4167-") and k.endswith("-tg128")]
    assert len(discussion) == 28 and max(abs(e) for e in discussion) < 20


def test_apple_prompts_of_the_second_source_are_within_x_1_35(bench: ModuleType, scored: tuple) -> None:
    # llama.cpp discussion #4167 (build 1550), Llama 2 7B pp512 on twelve chips in F16, Q8_0 and Q4_0
    # (e.g. M1 Max 599.53 / 537.37 / 530.06 t/s, M1 8-core Q8_0 117.25): cold prompts on the ALUs at
    # APPLE_MATMUL_UTILISATION (78 %, from MPS's GEMM in philipturner/metal-flash-attention, not fitted
    # on any row). Scored only: estimated -24.2 % (M1 8-core) to -2.5 % (M1 Max F16) since the prompt's
    # FLOPs leave out the embedding lookup and take the head for the last token only (-21.2 to +1.4 %
    # with both counted for every prompt token; Llama 2 7B's two 32,000-row matrices are 3.9 % of it).
    rows, _ = scored
    prompts = [r for r in rows if r.case.id.startswith("gg4167-") and r.case.id.endswith("-pp512")]
    assert len(prompts) == 28
    assert all(1 / 1.35 < r.ratio < 1.3 for r in prompts)


def test_a_tensor_parallel_decode_step_gathers_its_logits_across_the_ranks(bench: ModuleType, scored: tuple) -> None:
    # vLLM V1 all-gathers the vocabulary-split logits every step so that each rank samples
    # (vllm-project/vllm PR #9856; Platform.use_all_gather at 005e8184); SGLang all-gathers too
    # (sgl-project/sglang 009db01a, LogitsProcessor._get_logits). Qwen2.5-7B (Qwen2-7B's shapes): a
    # 152,064-row vocabulary in 16 bits; two ranks: one ring step, half the rows through the link.
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n10-1024-1024-itl_ms")
    plan = case.plan
    assert plan is not None
    link, bus = find_link("pcie4-host"), 31.5e9 * 0.19  # resources/links.json (NCCL issues #384 / #406)
    ten = 10 * 152_064 * 2 / 2  # 1.52 MB: Simple (NVIDIA/nccl b6475625 tuning.cc), 268 us
    assert logits_gather_seconds(plan, link, 10) == pytest.approx(8.4e-6 + 5.7e-6 + ten / bus)
    one = 152_064 * 2 / 2  # 152 KB: Simple, 39.5 us (LL, at a third of the bus for an all-gather: 83.8)
    assert logits_gather_seconds(plan, link, 1) == pytest.approx(8.4e-6 + 5.7e-6 + one / bus)
    nvlink = find_link("nvlink3")
    assert logits_gather_seconds(plan, nvlink, 10) == pytest.approx(
        nvlink.latency_us * 1e-6 + ten / nvlink.bus_bytes_per_second
    )
    alone = plan.with_inference(tensor_parallel=1, link="auto")
    assert logits_gather_seconds(alone, link, 10) == 0.0
    # Held out, dennislee22's two-GPU runs (vLLM 0.10.1.1, no GPU P2P) at a hundred and five hundred
    # requests sent together, whose steps gather 100 and 256 rows of logits: +24.1 and +21.9 % before.
    rows, _ = scored
    mine = {r.case.id: r.error_pct for r in rows}
    assert abs(mine["dennislee22-test2-n100-1024-1024-itl_ms"]) <= 15.0
    assert abs(mine["dennislee22-test3-n500-1024-1024-itl_ms"]) <= 15.0


def test_a_tensor_parallel_step_all_reduces_its_vocabulary_split_embedding_lookup(bench: ModuleType) -> None:
    # vLLM and SGLang split the token embedding by vocabulary like the LM head; each rank looks up the
    # tokens it holds, zeroes the rest, and the ranks all-reduce the rows before the first layer
    # (VocabParallelEmbedding.forward: vllm-project/vllm 00db0119, sgl-project/sglang 04d5e392). One
    # more all-reduce a decode step: dennislee22 test 2 (Qwen2.5-7B's shapes, TP 2, no GPU P2P), ten
    # requests in the CUDA graph of 16 rows: 16 x 3,584 x 2 bytes by NCCL's Simple protocol (NVIDIA/nccl
    # b6475625 tuning.cc: 8.4 + 2 x 5.7 us) at pcie4-host's 31.5 GB/s x 0.19 (resources/links.json).
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n10-1024-1024-itl_ms")
    plan = case.plan
    assert plan is not None
    link, bus = find_link("pcie4-host"), 31.5e9 * 0.19
    one = 8.4e-6 + 2 * 5.7e-6 + 16 * 3_584 * 2 / bus  # 39.1 us
    assert embedding_allreduce_seconds(plan, link, 16) == pytest.approx(one)
    assert allreduce_seconds(plan, link, 16) == pytest.approx(2 * 28 * one)  # the layers' own, unchanged
    layout = rank_layout(plan)
    model = step_model(plan, param_counts(plan), find_gpu(plan.hardware.gpu), layout, DEFAULT_FIT, (0.0, 0.0))
    # the step charges the layers' 56 all-reduces, the embedding's one and the logits' gather
    device = max(model.memory_seconds(10), model.compute_seconds(10)) + layout.layers * model.layer_seconds(10)
    comms = allreduce_seconds(plan, link, 16) + logits_gather_seconds(plan, link, 10)
    assert model.step(10) - device - comms == pytest.approx(one, rel=1e-6)
    assert embedding_allreduce_seconds(plan.with_inference(tensor_parallel=1, link="auto"), link, 16) == 0.0
    assert embedding_allreduce_seconds(_llamacpp("rtx-4090", "Q4_K_M"), link, 16) == 0.0


def test_a_vllm_decode_step_runs_the_cuda_graph_of_the_next_captured_size(bench: ModuleType, scored: tuple) -> None:
    # dennislee22's vLLM 0.10.1.1 start-up log (b474d1e0, log/vllm-7B-2gpuA10080GB-0.25GRAM-same-node.log):
    # "cudagraph_capture_sizes":[512,504,...,16,8,4,2,1]; V0's _BATCH_SIZES_TO_CAPTURE is the same
    # rule ([1, 2, 4] + multiples of 8). Ten requests run the graph of 16 rows, whose all-reduces
    # carry 16 tokens' hidden states; above 512 the step runs eagerly.
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n10-1024-1024-itl_ms")
    plan = case.plan
    assert plan is not None
    padded = {1: 1, 2: 2, 3: 4, 5: 8, 10: 16, 16: 16, 100: 104, 256: 256, 500: 504, 513: 513}
    assert {n: graph_batch(plan, n) for n in padded} == padded
    assert graph_batch(_llamacpp("rtx-4090", "Q4_K_M"), 10) == 10  # no padding outside vLLM
    # Held out, dennislee22 test 6 (Qwen2.5-32B, TP 2, no GPU P2P) at ten requests: 128 all-reduces of
    # 16 rows rather than 10; +17.3 % before.
    rows, _ = scored
    mine = {r.case.id: r.error_pct for r in rows}
    assert abs(mine["dennislee22-test6-n10-1024-1024-itl_ms"]) <= 15.0


def test_an_all_reduce_without_p2p_is_nccls_fastest_protocol_by_its_own_model(bench: ModuleType, scored: tuple) -> None:
    # NVIDIA/nccl b6475625 src/graph/tuning.cc, ring all-reduce on a PCI path, 2 ranks (2 steps):
    # LL 6.6 + 2 x 1.0 us at a quarter of the bus bandwidth, Simple 8.4 + 2 x 5.7 us at all of it.
    # pcie4-host's bus: 31.5 GB/s x 0.19 (resources/links.json, NCCL issues #384 / #406).
    case = next(c for c in bench.dennislee_speed_cases() if c.id == "dennislee22-test2-n10-1024-1024-itl_ms")
    plan = case.plan
    assert plan is not None and plan.inference.link in NCCL_CARRIED_LINKS
    link, bus = find_link("pcie4-host"), 31.5e9 * 0.19
    layers, width = plan.model.num_layers, plan.model.hidden_size  # Qwen2.5-7B: 28, 3,584
    lone = 6.6e-6 + 2e-6 + width * 2 / (bus / 4)  # 7 KiB: LL, 13.4 us
    ten = 8.4e-6 + 2 * 5.7e-6 + 10 * width * 2 / bus  # 70 KiB: Simple, 31.8 us (LL would take 56.5)
    assert allreduce_seconds(plan, link, 1) == pytest.approx(2 * layers * lone)
    assert allreduce_seconds(plan, link, 10) == pytest.approx(2 * layers * ten)
    # Before, every hop paid the link's 5.7 us and no base latency: 12.6 and 23.4 us. dennislee22's
    # ten requests at once (mean ITL 12.99 ms) were estimated at +41.0 % held out, then +34.1 %; since
    # vLLM on HBM borrows llama.cpp's HBM efficiency without the scalar-load F16 kernel's drag (0.54 ->
    # 0.65), +53.2 %; with its logits all-gathered each step, +48.5 %; with 16 rows all-reduced
    # (its CUDA graph's size), +42.0 %: a listed miss (KNOWN_DECODE_MISSES), through host memory.
    rows, _ = scored
    assert case.id in KNOWN_DECODE_MISSES
    assert abs(next(r for r in rows if r.case.id == case.id).error_pct) < 55


def test_what_the_two_gpu_rows_leave_is_per_step_not_per_all_reduce(scored: tuple) -> None:
    # dennislee22/vLLM-benchmarking b474d1e0 README, one request, TP 2 on a node without GPU P2P
    # (NCCL through host memory): mean ITL Qwen2-7B (test 2) 8.82 ms, Qwen2.5-32B (test 6) 29.21 ms,
    # Qwen2-72B (test 8) 58.00 ms; 28, 64 and 80 layers, two all-reduces each. Held out, the 7B and
    # the 32B leave the same time beyond the estimate (2.21 and 2.16 ms), though the 32B runs 2.3
    # times the all-reduces: a latency added to each all-reduce that closed the 7B's row (39 us) would
    # overshoot the 32B's by 2.9 ms and the 72B's by 6.9 ms. What is left is per step (docs/SERVING.md,
    # sixteenth round): a per-all-reduce charge fitted to the 7B is the wrong fix.
    rows, _ = scored
    by_id = {r.case.id: r for r in rows}
    left = {}
    for test, layers in (("test2", 28), ("test6", 64), ("test8", 80)):
        row = by_id[f"dennislee22-{test}-n1-1024-1024-itl_ms"]
        left[test] = (1000 / row.case.logged - 1000 / row.predicted, 2 * layers)
    (small, small_reduces), (mid, mid_reduces), (large, large_reduces) = left["test2"], left["test6"], left["test8"]
    assert small == pytest.approx(2.21, abs=0.1) and abs(small - mid) < 0.3
    per_reduce = small / small_reduces
    assert mid_reduces * per_reduce - mid > 2.0
    assert large_reduces * per_reduce - large > 2.0


# LLaMA (Touvron et al. 2023, table 2) 7B / 13B / 33B / 65B: layers, and the weights its mat-vecs
# read (llama.cpp's printed 6.74 / 13.02 / 32.53 / 65.29 billion parameters less the 32,000-row token
# embedding of width 4,096 / 5,120 / 6,656 / 8,192, a row lookup).
LLAMA1_LAYERS = (32, 40, 60, 80)
LLAMA1_MATVEC_WEIGHTS = tuple(
    p - 32000 * d for p, d in zip((6.74e9, 13.02e9, 32.53e9, 65.29e9), (4096, 5120, 6656, 8192), strict=True)
)
M2_MAX_30_LANES = 30 * 128 * 1.398e9  # lane-cycles a second: cores x 128 x the M2 family's clock


def _slope(times_ms: tuple[float, ...], per_layer: float | None = None) -> tuple[float, float]:
    """(a, b) of t = layers x a + weights x b by least squares over the sizes given (a fixed if given)."""
    layers, weights = LLAMA1_LAYERS[: len(times_ms)], LLAMA1_MATVEC_WEIGHTS[: len(times_ms)]
    times = [t * 1e-3 for t in times_ms]
    if per_layer is not None:
        rest = [t - x * per_layer for t, x in zip(times, layers, strict=True)]
        return per_layer, sum(r * w for r, w in zip(rest, weights, strict=True)) / sum(w * w for w in weights)
    sll, sww = sum(x * x for x in layers), sum(w * w for w in weights)
    slw = sum(x * w for x, w in zip(layers, weights, strict=True))
    slt = sum(x * t for x, t in zip(layers, times, strict=True))
    swt = sum(w * t for w, t in zip(weights, times, strict=True))
    det = sll * sww - slw * slw
    return (slt * sww - swt * slw) / det, (sll * swt - slw * slt) / det


def test_the_k_quant_mat_vec_cycles_are_the_slopes_of_their_authors_published_times() -> None:
    # ggml-org/llama.cpp PR #2290 ("Faster Q4_K on Metal", ikawrakow, 2023-07-20): token generation
    # on a 30-core M2 Max with the PR, LLaMA 7B / 13B / 33B / 65B Q4_K at 19.5 / 31.9 / 73.6 / 141.0 ms.
    per_layer, per_weight = _slope((19.5, 31.9, 73.6, 141.0))
    assert per_weight * M2_MAX_30_LANES == pytest.approx(APPLE_MATVEC_CYCLES[GgmlType.Q4_K], abs=0.05)
    # Its per-layer time is near the 23 Metal dispatches core.serving.fit charges (0.188 against 0.171 ms).
    dispatches = KERNELS_PER_LAYER * DEFAULT_FIT.kernel_cycles[METAL_KERNELS] / 1.398e9
    assert per_layer == pytest.approx(dispatches, rel=0.15)
    # PR #2294 ("Faster Q5_K and Q6_K on Metal", the same author and Mac): Q5_K_S 22.8 / 39.3 / 97.0 /
    # 181.1 ms, Q6_K 24.6 / 44.3 / 111.0 (no 65B in 64 GB), with the Q4_K fit's time a layer.
    _, q5 = _slope((22.8, 39.3, 97.0, 181.1), per_layer)
    _, q6 = _slope((24.6, 44.3, 111.0), per_layer)
    assert q5 * M2_MAX_30_LANES == pytest.approx(APPLE_MATVEC_CYCLES[GgmlType.Q5_K], abs=0.05)
    assert q6 * M2_MAX_30_LANES == pytest.approx(APPLE_MATVEC_CYCLES[GgmlType.Q6_K], abs=0.05)
    # Not a byte rate: a Q4_K_S weight (4.5 bits in its super-blocks) at b moves 73 % of 400 GB/s,
    # where XiongjieDai's M2 Ultra and M3 Max Q4_K_M rows move 85 % and 83 % of theirs.
    assert 4.5 / 8 / per_weight / 400e9 == pytest.approx(0.73, abs=0.01)


def test_a_q4_k_m_file_reads_its_q6_k_tensors_where_llama_quantize_puts_them() -> None:
    # llama_tensor_get_type for Q4_K_M: attn_v and ffn_down in Q6_K on the use_more_bits layers (16 of
    # Llama 3.1 8B's 32), the output layer in Q6_K, every other block matrix in Q4_K.
    model = find_model("llama-3.1-8b").spec
    weights = dict(matvec_weights_by_type(model, GgufQuant.Q4_K_M))
    more = sum(1 for i in range(32) if use_more_bits(i, 32))
    assert more == 16
    q6 = 128256 * 4096 + more * (14336 * 4096 + 4096 * 1024)
    assert weights[GgmlType.Q6_K] == pytest.approx(q6 * model.params_scale)
    counts = param_counts(_llamacpp("apple-m1-max-64gb", "Q4_K_M"))
    assert sum(weights.values()) == pytest.approx(counts.active - 128256 * 4096, rel=1e-3)


def test_an_apple_gpus_k_quant_mat_vec_is_bound_by_its_alus() -> None:
    # Llama 3.1 70B Q4_K_M on an M1 Max (10.4 TFLOP/s: 5.2e12 lane-cycles a second): its mat-vecs'
    # Q4_K, Q5_K (the 70B's attn_v off the use_more_bits layers) and Q6_K weights at 10.4, 13.8 and
    # 16.4 lane-cycles each, about 150 ms a token, beyond the 119 ms its 42.5 GB take at 89 % of 400 GB/s.
    model = find_model("llama-3.1-70b").spec
    plan = Plan(model=model, model_id="llama-3.1-70b", hardware=Hardware(gpu="apple-m1-max-64gb")).with_inference(
        engine="llamacpp", gguf_quant="Q4_K_M", context=512, new_tokens=512, cache_type="f16", flash_attention=False
    )
    mac = find_gpu("apple-m1-max-64gb")
    weights = dict(matvec_weights_by_type(model, GgufQuant.Q4_K_M))
    alu = kquant_matvec_seconds(plan, mac)
    assert set(weights) == {GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K}
    expected = (10.4 * weights[GgmlType.Q4_K] + 13.8 * weights[GgmlType.Q5_K] + 16.4 * weights[GgmlType.Q6_K]) / 5.2e12
    assert alu == pytest.approx(expected, rel=1e-6)
    assert 0.14 < alu < 0.16
    assert not estimate(plan).inference.speed.curve[0].memory_bound
    # The mat-vec runs for one token a step only (ne11_mm_min = 1): two take the mat-mat kernel,
    # costed by their FLOPs alone (2 x 2 x 70.6e9 at 78 % of 10.4 TFLOP/s: 35 ms).
    counts = param_counts(plan)
    model_step = step_model(plan, counts, mac, rank_layout(plan), DEFAULT_FIT, (0.0, 1.0))
    assert model_step.compute_seconds(1) == pytest.approx(alu)
    assert model_step.compute_seconds(2) == pytest.approx(2 * 2 * counts.active / (0.78 * 10.4e12), rel=0.02)
    # F16 pays none; Q4_0 only for its Q6_K output layer (1.05e9 weights: 3 ms, below its reads);
    # a K-quant on a CUDA card none.
    assert kquant_matvec_seconds(plan.with_inference(gguf_quant="F16"), mac) == 0.0
    q4_0 = plan.with_inference(gguf_quant="Q4_0")
    assert kquant_matvec_seconds(q4_0, mac) == pytest.approx(16.4 * 128256 * 8192 / 5.2e12, rel=0.01)
    assert estimate(q4_0).inference.speed.curve[0].memory_bound
    assert kquant_matvec_seconds(plan, find_gpu("rtx-4090")) == 0.0
    # The M2 Ultra (76 cores for 800 GB/s) reads the same file in about the time its ALUs need.
    ultra = plan.with_hardware(gpu="apple-m2-ultra-192gb")
    assert kquant_matvec_seconds(ultra, find_gpu("apple-m2-ultra-192gb")) < 0.065


def test_early_2024_cuda_low_bit_k_quant_mat_vecs_are_bound_by_their_alus(bench: ModuleType, scored: tuple) -> None:
    # Llama 2 7B Q2_K on an RTX 3090 (35.6 TFLOP/s: 17.8e12 lane-cycles a second) with a January 2024
    # build (b1786, PR #4812's log): its Q2_K and Q3_K weights at CUDA_LOW_BIT_MATVEC_CYCLES' 14.9 and
    # 17.2 lane-cycles each (set from PR #5351's RTX 3090 batch-1 master rows), its Q6_K head none.
    plan = _llamacpp("rtx-3090", "Q2_K").with_inference(llamacpp_build=1786, new_tokens=128, context=128)
    card = find_gpu("rtx-3090")
    weights = dict(matvec_weights_by_type(plan.model, GgufQuant.Q2_K))
    lanes = card.peak_tflops("fp32") * 1e12 / 2
    expected = (14.9 * weights[GgmlType.Q2_K] + 17.2 * weights[GgmlType.Q3_K]) / lanes
    assert kquant_matvec_seconds(plan, card) == pytest.approx(expected, rel=1e-6)
    # The cycles are what PR #5351's batch-1 master rows (Q3_K_S 98.36, Q2_K 103.75 t/s) imply.
    derived = bench.kquant_cuda_cycles()
    assert derived == pytest.approx(dict(CUDA_LOW_BIT_MATVEC_CYCLES), abs=0.05)
    assert not estimate(plan).inference.speed.curve[0].memory_bound
    # Not for Q4_0 (bandwidth-bound), a current build (0), a build from PR #5434's retuning on, Vulkan.
    assert kquant_matvec_seconds(plan.with_inference(gguf_quant="Q4_0"), card) == 0.0
    assert kquant_matvec_seconds(plan.with_inference(llamacpp_build=0), card) == 0.0
    assert kquant_matvec_seconds(plan.with_inference(llamacpp_build=CUDA_LOW_BIT_MATVEC_BEFORE_BUILD), card) == 0.0
    assert kquant_matvec_seconds(plan.with_inference(llamacpp_backend="vulkan"), card) == 0.0
    # The cycles come from another source, so PR #4766's own rows (92.69 and 87.26 t/s,
    # +57.4 / +56.5 % while bound by the reads) are scored with them, held out, within 15 %.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    assert abs(errors["llamacpp4766-3090-7b-q2_k-tg128"]) < 15
    assert abs(errors["llamacpp4766-3090-7b-q3_k_s-tg128"]) < 15


def test_the_m1_max_k_quant_decode_is_nearer_held_out(bench: ModuleType, scored: tuple) -> None:
    # XiongjieDai (aa72e0e, M1max_64GB.ipynb, build 2797): Llama 3 8B Q4_K_M tg512 35.66 t/s, 70B
    # 4.34 t/s, estimated +49.8 % and +76.6 % held out while the step was bound by the reads alone.
    # The ALU costs come from another source (PRs #2290, #2294), so they are not fitted on these rows; the two
    # rows no longer set the unified-memory efficiency or Metal's dispatch cycles (speed_role).
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    assert abs(errors["xd-m1max-64gb-x1-8b-q4_kmedium-tg512"]) < 25
    assert abs(errors["xd-m1max-64gb-x1-70b-q4_kmedium-tg512"]) < 40
    for record_id in ("xd-m1max-64gb-x1-8b-q4_kmedium-tg512", "xd-m1max-64gb-x1-70b-q4_kmedium-tg512"):
        record = _record(bench, record_id)
        assert bench.speed_role(record, bench.bench_plan(record)) == ""
    f16 = _record(bench, "xd-m1max-64gb-x1-8b-f16-tg512")
    assert bench.speed_role(f16, bench.bench_plan(f16)) == "speed"


def test_builds_before_b3916_read_a_lone_tokens_f16_weights_with_scalar_loads() -> None:
    # ggml_cuda_mul_mat (ggml-org/ggml e84c498b, May 2024) sends an F16 product of one column to
    # dequantize_mul_mat_vec, whose convert_f16 loads two halves one by one; PR #9816 (b3916) loads them
    # as one half2. agray3 measured the kernel alone 1.33X faster after it on an H100 SXM (issue #9817;
    # 1.01X on GDDR cards).
    plan = _llamacpp("a100-80gb-sxm", "F16").with_inference(llamacpp_build=2837)
    a100, rtx = find_gpu("a100-80gb-sxm"), find_gpu("rtx-4090")
    assert F16_VECTOR_LOADS_FROM_BUILD == 3916
    assert SCALAR_F16_MATVEC_SLOWDOWN == 1.33
    assert f16_matvec_scalar_loads(plan, a100)
    assert not f16_matvec_scalar_loads(plan.with_inference(llamacpp_build=3916), a100)
    assert not f16_matvec_scalar_loads(plan.with_inference(llamacpp_build=0), a100)  # a current build
    assert not f16_matvec_scalar_loads(plan.with_inference(gguf_quant="Q4_K_M"), a100)  # mmvq
    assert not f16_matvec_scalar_loads(plan.with_inference(llamacpp_backend="vulkan"), a100)
    assert not f16_matvec_scalar_loads(plan.with_inference(engine="vllm"), a100)
    assert weight_read_factor(plan, a100) == SCALAR_F16_MATVEC_SLOWDOWN  # HBM
    assert weight_read_factor(plan.with_hardware(gpu="rtx-4090"), rtx) == 1.0  # GDDR: 1.01X, taken as none
    # The factor is on a lone token's weight reads: two tokens (cuBLAS) and a prompt chunk read at the
    # bandwidth, and the KV cache's reads are the attention's, untouched.
    counts = param_counts(plan)
    weights = 16e9
    slow = step_model(plan, counts, a100, rank_layout(plan), DEFAULT_FIT, (0.0, weights))
    fast = step_model(
        plan.with_inference(llamacpp_build=0), counts, a100, rank_layout(plan), DEFAULT_FIT, (0.0, weights)
    )
    kv = slow.kv_per_request
    assert slow.memory_seconds(1) == pytest.approx((1.33 * weights + kv) / slow.bandwidth)
    assert fast.memory_seconds(1) == pytest.approx((weights + kv) / fast.bandwidth)
    assert slow.memory_seconds(2) == pytest.approx(fast.memory_seconds(2))
    assert slow.memory_seconds(1, matvec=False) == pytest.approx(fast.memory_seconds(1))
    assert "scalar loads" in estimate(plan).inference.speed.assumptions


def test_datacentre_gddr_cards_read_at_the_share_of_the_bus_their_in_band_ecc_leaves_to_data() -> None:
    # In-band ECC keeps its check bits in 1/16 of the DRAM (NVIDIA V100 whitepaper: "inline ECC where a
    # portion of main memory is carved out for ECC bits"; HBM's sideband ECC has no such carve-out). The
    # catalogue's memory of each listed card is that carve-out: nvidia-smi's 46068 of 49152 MiB on the A40
    # and L40S (XiongjieDai aa72e0e, A40_v3.ipynb and L40S_v3.ipynb cell 0, "Volatile Uncorr. ECC" 0), where
    # the RTX A6000 and RTX 6000 Ada (the same chips, ECC "Off") show 49140 MiB.
    assert INBAND_ECC_DATA_SHARE == 15 / 16
    for card in INBAND_ECC_CARDS:
        gpu = find_gpu(card)
        assert gpu.memory_bytes / (gpu.memory_marketing_gb * GiB) == pytest.approx(15 / 16, abs=1e-3), card
        assert ecc_data_share(gpu) == 15 / 16
    for card in ("a30", "v100-sxm2-16gb", "a100-80gb-sxm", "rtx-a6000", "rtx-6000-ada", "rtx-4090"):
        gpu = find_gpu(card)  # HBM (sideband ECC, the whole memory), workstation and GeForce cards (ECC off)
        assert gpu.memory_bytes / (gpu.memory_marketing_gb * GiB) > 0.99, card
        assert ecc_data_share(gpu) == 1.0, card
    a40, a6000 = _llamacpp("a40", "Q4_K_M"), _llamacpp("rtx-a6000", "Q4_K_M")
    for plan, share in ((a40, 15 / 16), (a6000, 1.0)):
        gpu = find_gpu(plan.hardware.gpu)
        model = step_model(plan, param_counts(plan), gpu, rank_layout(plan), DEFAULT_FIT, (0.0, 4.9e9))
        efficiency = DEFAULT_FIT.bandwidth_efficiency["eager/gddr"]
        assert model.bandwidth == pytest.approx(gpu.memory_bandwidth_gb_s * 1e9 * share * efficiency)
    assert "in-band ECC" in estimate(a40).inference.speed.assumptions
    assert "in-band ECC" not in estimate(a6000).inference.speed.assumptions


def test_the_a40_and_l40s_decode_rows_are_within_15_percent_held_out(scored: tuple) -> None:
    # XiongjieDai's A40 and L40S machines (ECC on: 46068 MiB) decoded 7-16 points slower than estimated than
    # the RTX A6000 and RTX 6000 Ada machines of the same table (ECC off) on every model: the A40's one-GPU
    # 70B Q4_K_M +20.9 % (A6000 +4.7 %), the L40S's one-GPU 8B Q4_K_M +16.6 % (6000 Ada +9.4 %) while the
    # check bits were read as data. Held out of XiongjieDai's table, the GDDR constants are set since
    # h62lcpp by the llama.cpp maintainers' own RTX 3090 / 3090 Ti / RTX 4090 / 4x RTX 4090 rows too
    # (PRs #4766, #4812, #15035, #19378: kernel cycles 4,578 -> 4,815): the A40's one-GPU 70B Q4_K_M
    # +13.9 -> +13.3 %, its 8B Q4_K_M +9.3 -> +0.9 %, the L40S's 8B Q4_K_M +10.8 -> +3.5 %.
    rows, _ = scored
    ecc = [r for r in rows if r.case.table == "decode" and r.case.id.startswith(("xd-a40-", "xd-l40s-"))]
    assert len(ecc) == 14
    assert max(abs(r.error_pct) for r in ecc) < 15, max(ecc, key=lambda r: abs(r.error_pct)).case.id


def test_the_a100_f16_decode_rows_are_within_15_percent_held_out(scored: tuple) -> None:
    # XiongjieDai's A100 rows (builds 2797-2837), Llama 3 8B F16 tg512: PCIe 54.8 (one GPU) and 51.6 (four),
    # SXM4 53.5 (one) and 45.5 (four). Estimated +19.1, +21.1, +27.7 and +43.3 % held out while the F16
    # mat-vec was read at the efficiency of the Q4_K_M rows' mmvq kernels.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    for record_id in ("xd-a100-pcie-x1-8b-f16-tg512", "xd-a100-pcie-x4-8b-f16-tg512", "xd-a100-sxm-x1-8b-f16-tg512"):
        assert abs(errors[record_id]) < 15, record_id
    # The four-A100-SXM4 machine is slower than the one-GPU machine by 3.3 ms a token on every model:
    # still the largest of them.
    assert abs(errors["xd-a100-sxm-x4-8b-f16-tg512"]) < 15


def test_a_second_m1_max_runs_the_70b_q4_k_m_file_at_the_estimates_speed(bench: ModuleType, scored: tuple) -> None:
    # dmatora/LLM-inference-speed-benchmarks #7 (tucher, 2024-05-02, LM Studio): Llama 3 Instruct 70B
    # Q4_K_M on an M1 Max, "6 tokens/sec" in the list's data.js (051bc3ed), a whole number (5.5 to 6.5).
    # XiongjieDai's 32-core M1 Max 64 GB runs the same 39.6 GiB file at 4.34 t/s (build 2797): the
    # second machine does not show the first one's slowdown near Metal's working set.
    record = _record(bench, "dmatora7-llama3-70b-q4km-m1max-tg")
    plan = bench.bench_plan(record)
    assert plan.hardware.gpu == "apple-m1-max-64gb" and plan.inference.gguf_quant is GgufQuant.Q4_K_M
    assert bench.speed_role(record, plan) == ""  # bound by the K-quant mat-vecs' ALUs: scored, not fitted on
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    assert abs(errors[record["id"]]) < 100 * 0.5 / 6.0  # within the list's rounding
    assert _record(bench, "xd-m1max-64gb-x1-70b-q4_kmedium-tg512")["value"] < 5.5


# ---- the Qwen team's Qwen2.5 speed table (QwenLM/Qwen3@a912d239 docs/source/benchmark/speed_benchmark.rst) ----
def test_every_qwen25_speed_row_is_scored_or_listed_with_its_reason(bench: ModuleType) -> None:
    # The table's 259 speed figures: 112 transformers rows (A100 80GB, 4.46) and 147 vLLM rows (0.6.3 / 0.6.2).
    records = bench.qwen_records()
    assert len(records) == 259
    scored = {c.id for c in bench.qwen_speed_cases() if c.source == bench.QWEN_SOURCE}
    listed = {u.id: u.reason for u in bench.unexpressed() if u.source == bench.QWEN_SOURCE}
    assert scored.isdisjoint(listed) and scored | set(listed) == {r["id"] for r in records}
    assert all(reason for reason in listed.values())
    for record in records:
        assert f"{record['value']:.2f}" in record["quote"], record["id"]  # the figure is the quoted row's
    # device_map='auto' splits are listed, not scored; GPTQ-Int8 rows are scored since the plan has the format
    # (core.serving.gptq), save the 72B ones split by device_map='auto'; enforce_eager=True runs are scored with
    # inference.cuda_graphs off (h68eager).
    assert "qwen25-vllm-7b-gptq-int8-in1-g1" in scored and "qwen25-hf-7b-gptq-int8-in1-g1" in scored
    assert "device_map='auto'" in listed["qwen25-hf-72b-gptq-int8-in1-g2"]
    assert "device_map='auto'" in listed["qwen25-hf-72b-bf16-in1-g2"]
    assert "qwen25-vllm-72b-bf16-in1-g2" in scored  # Setting 1 (0.98, 4096, eager)
    eager = next(r for r in records if r["id"] == "qwen25-vllm-72b-bf16-in1-g2")
    assert eager["settings"]["enforce_eager"] and not bench.qwen_plan(eager).inference.cuda_graphs


def test_the_qwen_rows_set_only_transformers_host_time(bench: ModuleType) -> None:
    # Scored held out; the one constant they set (for the other Qwen table, leave one source out) is
    # transformers' host time per layer, from the dense BF16 rows at a 1-token prompt on one GPU.
    cases = bench.qwen_speed_cases()
    assert cases and all(c.table == "generate" and c.identifies in ("", "host") for c in cases)
    host = sorted(c.id for c in cases if c.identifies == "host")
    assert len(host) == 12  # Qwen2.5 0.5B-32B (72B BF16 needs two GPUs), Qwen3 0.6B-32B (30B-A3B is MoE)
    assert all("-hf-" in i and "-bf16-in1-g1" in i for i in host)


def test_a_generate_call_is_its_prefill_and_2048_decode_steps(bench: ModuleType) -> None:
    # speed_benchmark_vllm.py (QwenLM/Qwen3@8205ba2a): tokens/s = 2048 / the wall time of one llm.generate of
    # batch 1, the prompt's prefill included; the prompt's tokens are not counted.
    case = next(c for c in bench.qwen_speed_cases() if c.id == "qwen25-vllm-7b-bf16-in30720-g1")
    speed = estimate(case.plan).inference.speed
    assert case.predict(DEFAULT_FIT) == pytest.approx(
        2048 / (speed.ttft_alone_s + 2048 / speed.per_request_tokens_per_s)
    )
    assert case.predict(DEFAULT_FIT) < speed.per_request_tokens_per_s  # a 30,720-token prefill is in the time


def test_vllm_bf16_on_a100s_from_7b_up_is_within_35_percent_held_out(scored: tuple) -> None:
    # Qwen2.5 table, vLLM 0.6.3, BF16, batch 1, 2,048 new tokens: e.g. 7B on one A100 84.28 tok/s (prompt 1),
    # 72B on four 31.37. Step bound by the weights' reads at the bandwidth the other sources set, plus V0's 4 ms
    # of host work a step (vllm-project/vllm issue #6854), which over-charges them: the bandwidth efficiency was
    # set on V1 sources whose own host time it absorbs.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows if r.case.table == "generate"}
    big = [
        e
        for i, e in errors.items()
        if i.startswith("qwen25-vllm-")
        and "-bf16-" in i
        and "-0.5b-" not in i
        and "-1.5b-" not in i
        and "-3b-" not in i
    ]
    # 25 rows: median |error| 23.1 %, worst -30.0 %, all under, with the estimate of this commit (21 rows, 24.1 %
    # and -30.1 % before the four enforce_eager rows were scored with CUDA graphs off, h68eager; 23.3 % and
    # -30.4 % before a prompt's FLOPs stopped counting the embedding and the head per token; 11.8 % and -24.9 %
    # before V0's host time).
    assert len(big) == 25 and statistics.median(abs(e) for e in big) <= 24.5 and max(abs(e) for e in big) <= 31
    assert max(big) < 0


# Ratchet (measured with the estimate of this commit): the Qwen tables' generate rows miss issue 23's decode
# target (together 361, median 32.6 %; 33.9 % before transformers' decode step was charged its cache copies,
# DynamicCache's torch.cat and 4.46 Qwen2's repeat_kv; earlier 36.6 %, 36.3 % before a prompt's FLOPs stopped
# counting its embedding and its head for every token; 50.9 % before vLLM V0's host time, transformers' MoE
# expert loop and FP8 synchronisation, 141.6 % before transformers' host time per layer): SGLang on the H20
# reads at a third of the card's bandwidth, transformers' FP8 linears cost more than their launches, and each
# Qwen table's host CPU differs from the other's (docs/SERVING.md).
GENERATE_MEDIAN_NOW = 32.7


def test_the_generate_misses_do_not_grow(bench: ModuleType, scored: tuple) -> None:
    rows, _ = scored
    errors = sorted(abs(r.error_pct) for r in rows if r.case.table == "generate")
    assert statistics.median(errors) <= GENERATE_MEDIAN_NOW


def test_the_qwen3_rows_count_the_prompt_as_their_page_says(bench: ModuleType) -> None:
    # QwenLM/Qwen3@7a2f61ff docs/source/getting_started/speed_benchmark.md: "Speed = (tokens_prompt +
    # tokens_generation) / time", and its numbers are that: Qwen3-0.6B (Transformers) BF16 58.57 tok/s at a
    # 1-token prompt, 175.93 at 30,720 (2,048 / 175.93 s would be shorter than 2,049 / 58.57 s).
    records = bench.qwen_records(bench.QWEN3_SOURCE)
    assert len(records) == 212  # 216 rows less four with no figure ("MoE Kernel Unsupported")
    long = next(r for r in records if r["id"] == "qwen3-hf-0.6b-bf16-in30720-g1")
    assert long["value"] == 175.93 and bench.qwen_counted_tokens(long) == 30720 + 2048
    case = next(c for c in bench.qwen_speed_cases() if c.id == long["id"])
    seconds = bench.qwen_generate_seconds(case.plan, DEFAULT_FIT)
    assert case.predict(DEFAULT_FIT) == pytest.approx((30720 + 2048) / seconds)
    listed = {u.id: u.reason for u in bench.unexpressed() if u.source == bench.QWEN3_SOURCE}
    assert not any("not in the model catalogue" in why for why in listed.values())
    # Qwen3-235B-A22B (resources/models.json since 2026-12-05): its 18 SGLang rows (BF16 on 8 H20, FP8 and
    # GPTQ-Int4 on 4) are scored with the catalogue entry, not listed.
    scored = {c.id for c in bench.qwen_speed_cases()}
    big = {r["id"] for r in records if r["model"] == "Qwen3-235B-A22B"}
    assert len(big) == 18 and big <= scored
    assert all(c.identifies in ("", "host") for c in bench.qwen_speed_cases())


def test_hf_generate_at_batch_1_takes_the_hosts_time_per_layer_when_it_is_longer() -> None:
    # The Qwen team's transformers rows at a 1-token prompt: 0.84-0.90 ms a layer per new token on their
    # A100 host (Qwen2.5-0.5B 47.40 tok/s over 24 layers, QwenLM/Qwen3@a912d239 speed_benchmark.rst), 0.60-0.62
    # on their H20 host (Qwen3-0.6B 58.57 over 28 layers, @7a2f61ff speed_benchmark.md), whatever the layer's
    # size; the GPU's reads of a 0.5B model take a tenth of that. The step is the longer of the two.
    host = DEFAULT_FIT.launch_seconds[HF_HOST_LAYER]
    assert host == pytest.approx(0.7285e-3)  # the median of both tables' 12 dense BF16 rows
    small = find_model("qwen2.5-0.5b")
    plan = Plan(model=small.spec, model_id=small.id, hardware=Hardware(gpu="a100-80gb-sxm")).with_inference(
        engine="hf", context=2049, new_tokens=2048, concurrent=1
    )
    speed = estimate(plan).inference.speed
    assert 1.0 / speed.per_request_tokens_per_s == pytest.approx(24 * host, rel=0.01)
    # the default release names itself, its time in core.format.duration's form ("layers × 728 µs of …")
    assert f"layers × {duration(host)} of transformers 5.25 host time" in speed.formula
    # A 72B model's reads take longer than its 80 layers' host time: the reads decide.
    big = find_model("qwen2.5-72b")
    plan72 = Plan(model=big.spec, model_id=big.id, hardware=Hardware(gpu="a100-80gb-sxm")).with_inference(
        engine="hf", context=2049, new_tokens=2048, concurrent=1
    )
    assert 1.0 / estimate(plan72).inference.speed.per_request_tokens_per_s > 1.5 * 80 * host  # 145 GB of reads


def _hf_plan(model_id: str, weights: str = "bf16", version: str = "4.51") -> Plan:
    # The Qwen3 table's transformers, 4.51.3 (QwenLM/Qwen3@7a2f61ff speed_benchmark.md).
    model = find_model(model_id)
    return Plan(model=model.spec, model_id=model.id, hardware=Hardware(gpu="h20")).with_inference(
        engine="hf", context=2049, new_tokens=2048, concurrent=1, weight_dtype=weights, transformers_version=version
    )


def test_hf_generate_runs_an_moe_blocks_loop_over_every_expert_on_the_host() -> None:
    # transformers v4.51.3 Qwen3MoeSparseMoeBlock.forward loops over all 128 experts of each of Qwen3-30B-A3B's
    # 48 layers, 13 torch calls each, where a dense layer issues 77 (core.serving.hf_generate's counts).
    host = DEFAULT_FIT.launch_seconds[HF_HOST_LAYER]
    moe = find_model("qwen3-30b-a3b").spec
    assert moe.num_experts == 128 and moe.num_layers == 48
    ratio = (77 - 5 + 11 + 128 * 13) / 77
    assert host_layer_ratio(moe, TransformersVersion.V4_51) == pytest.approx(ratio)
    assert host_layer_ratio(find_model("qwen3-8b").spec, TransformersVersion.V4_51) == 1.0
    speed = estimate(_hf_plan("qwen3-30b-a3b")).inference.speed
    assert 1.0 / speed.per_request_tokens_per_s == pytest.approx(48 * host * ratio, rel=0.01)
    # The Qwen3 table (QwenLM/Qwen3@7a2f61ff speed_benchmark.md, H20, transformers 4.51.3) reads 1.89 tok/s
    # for Qwen3-30B-A3B BF16 at a 1-token prompt, (1 + 2048) / 1.89 s / 2048 = 529 ms a token; the estimate
    # read 23.48 tok/s (42.6 ms, 48 dense layers of host time) before the loop was counted.
    assert 1.0 / speed.per_request_tokens_per_s > 0.5 * 0.529


def test_the_qwen3_moe_rows_under_transformers_held_out(scored: tuple) -> None:
    # Qwen3-30B-A3B under transformers 4.51.3 on the H20 (QwenLM/Qwen3@7a2f61ff speed_benchmark.md), scored with
    # the Qwen2.5 table's host time (0.8875 ms a dense layer): BF16 read +1,142 % and FP8 +5,236 % at a 1-token
    # prompt before the expert loop and the FP8 synchronisation were counted.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    moe = [errors[f"qwen3-hf-30b-a3b-{w}-in{p}-g1"] for w in ("bf16", "fp8") for p in (1, 6144, 14336, 30720)]
    assert max(abs(e) for e in moe) < 50
    assert errors["qwen3-hf-30b-a3b-bf16-in1-g1"] < 0 < errors["qwen3-hf-30b-a3b-fp8-in1-g1"]


def test_hf_fine_grained_fp8_synchronises_after_every_linear() -> None:
    # transformers v4.51.3 FP8Linear.forward: act_quant_kernel and _w8a8_block_fp8_matmul (Triton), then
    # torch.cuda.synchronize(): the device's reads add to the host's time and each linear pays two Triton
    # launches of 18 us (triton-lang/triton PR #3648, "from 49us to 18us").
    host = DEFAULT_FIT.launch_seconds[HF_HOST_LAYER]
    assert fp8_linears_per_layer(find_model("qwen3-8b").spec, TransformersVersion.V4_51) == 7
    assert fp8_linears_per_layer(find_model("qwen3-30b-a3b").spec, TransformersVersion.V4_51) == 4 + 3 * 128
    bf16 = estimate(_hf_plan("qwen3-8b")).inference.speed
    fp8 = estimate(_hf_plan("qwen3-8b", "fp8")).inference.speed
    assert 1.0 / bf16.per_request_tokens_per_s == pytest.approx(36 * host, rel=0.01)  # host-bound, reads hidden
    fp8_step = 1.0 / fp8.per_request_tokens_per_s
    assert fp8_step > 36 * (host + 7 * 2 * 18e-6)  # plus the reads, no longer hidden
    assert "synchronised" in fp8.formula
    # vLLM's FP8 path has no such synchronisation.
    assert not fp8_synchronised(_hf_plan("qwen3-8b", "fp8").with_inference(engine="vllm"))


def test_vllm_v0_adds_its_host_work_to_every_decode_step() -> None:
    # vLLM 0.6.3.post1 LLMEngine.step: schedule, prepare the inputs, replay the graph, sample eagerly and copy
    # the tokens to the host, the device waiting: "about 4ms of GPU bubble" on every decode (vllm-project/vllm
    # issue #6854). V1 (0.8 on) is not charged.
    small = find_model("qwen2.5-0.5b")
    plan = Plan(model=small.spec, model_id=small.id, hardware=Hardware(gpu="a100-80gb-sxm")).with_inference(
        engine="vllm", vllm_version="0.6", context=2049, new_tokens=2048, concurrent=1
    )
    assert V0_STEP_HOST_S == 4e-3
    v0 = estimate(plan).inference.speed
    v1 = estimate(plan.with_inference(vllm_version="0.10")).inference.speed
    assert v0.step_s == pytest.approx(v1.step_s + 4e-3, rel=1e-6)
    assert "V0's host work" in v0.formula and "V0's host work" not in v1.formula
    # The Qwen2.5 table reads 311.55 tok/s for this plan (QwenLM/Qwen3@a912d239 speed_benchmark.rst, vLLM
    # 0.6.3, A100): 3.21 ms a token, where the device's reads alone were estimated at 0.83 ms (+295 %).
    assert 3.21e-3 < v0.step_s < 1.6 * 3.21e-3


def test_vllm_v0_output_processing_overlaps_the_step_and_bounds_it_at_large_batches() -> None:
    # V0 ModelRunner.execute_model (vllm-project/vllm@002a0ba9 worker/model_runner.py) launches the forward and logits,
    # then calls model_input.async_callback, LLMEngine._process_model_outputs of the step before, while the device
    # runs: hidden while shorter than the device's step, the step's length when longer. Its time: 0.2 ms a step at
    # batch 1, 3.4 ms at batch 32 (vllm-project/vllm issue #6913, Llama 3 70B FP8 on four H100s).
    fixed, per_sequence = V0_OUTPUT_FIXED_S, V0_OUTPUT_PER_SEQUENCE_S
    assert per_sequence == pytest.approx((3.4e-3 - 0.2e-3) / 31)
    assert fixed == pytest.approx(0.2e-3 - (3.4e-3 - 0.2e-3) / 31)
    # Cross-check, vllm-project/vllm issue #6801 (mpjlu): V0's host work between steps "can be 20ms" at batch 200.
    assert fixed + 200 * per_sequence == pytest.approx(20e-3, rel=0.05)

    def plan(model_id: str, requests: int) -> Plan:
        model = find_model(model_id)
        return Plan(model=model.spec, model_id=model.id, hardware=Hardware(gpu="a100-80gb-sxm")).with_inference(
            engine="vllm", vllm_version="0.6", context=2049, new_tokens=2048, concurrent=requests
        )

    # Qwen2.5-0.5B at 200 requests: the device's step (V1's, ~2.9 ms) is shorter than the output processing.
    small = plan("qwen2.5-0.5b", 200)
    v0 = estimate(small).inference.speed
    v1 = estimate(small.with_inference(vllm_version="0.10")).inference.speed
    output = fixed + 200 * per_sequence
    assert v1.step_s < output
    assert v0.step_s == pytest.approx(output + V0_STEP_HOST_S, rel=1e-6)
    assert "output processing of the step before" in v0.formula
    # Qwen2.5-7B at 32 requests: the device's step is the longer, the output processing hidden behind it.
    big = plan("qwen2.5-7b", 32)
    v0 = estimate(big).inference.speed
    v1 = estimate(big.with_inference(vllm_version="0.10")).inference.speed
    assert v1.step_s > fixed + 32 * per_sequence
    assert v0.step_s == pytest.approx(v1.step_s + V0_STEP_HOST_S, rel=1e-6)
    assert "output processing of the step before" not in v0.formula


def _sglang_plan(model_id: str, weights: str, version: str = "0.4.6", gpu: str = "h20") -> Plan:
    model = find_model(model_id)
    return Plan(model=model.spec, model_id=model.id, hardware=Hardware(gpu=gpu)).with_inference(
        engine="sglang", sglang_version=version, context=2049, new_tokens=2048, concurrent=1, weight_dtype=weights
    )


def test_sglang_046_gptq_moe_launches_the_marlin_kernel_once_per_expert() -> None:
    # sglang 0.4.6.post1 gptq.py GPTQMarlinConfig.get_quant_method: vLLM's GPTQMarlinMoEMethod for every MoE
    # layer; vLLM 0.7.2 fused_marlin_moe: two marlin_gemm_moe products, and csrc/moe/marlin_moe_ops.cu
    # marlin_mm_moe launches one MarlinMoE kernel per expert (for expert_idx < num_experts), routed to or not.
    assert marlin_moe_kernels_per_layer(_sglang_plan("qwen3-30b-a3b", "gptq-int4")) == 2 * 128
    assert marlin_moe_kernels_per_layer(_sglang_plan("qwen3-30b-a3b", "gptq-int4", "0.4.10")) == 0  # not read
    assert marlin_moe_kernels_per_layer(_sglang_plan("qwen3-30b-a3b", "awq-int4")) == 0
    assert marlin_moe_kernels_per_layer(_sglang_plan("qwen3-32b", "gptq-int4")) == 0  # dense
    # On an Ampere card both lines run Marlin on the attention (same bytes kept, core.serving.gptq); on the
    # H20 0.4.6's Machete keeps the attention's qzeros that 0.4.10's own Marlin frees.
    gpu = find_gpu("a100-80gb-sxm")
    per_kernel = kernel_seconds(gpu, DEFAULT_FIT, EngineFamily.EAGER)  # the fitted cycles of a short kernel
    looped = estimate(_sglang_plan("qwen3-30b-a3b", "gptq-int4", gpu=gpu.id)).inference.speed
    newer = estimate(_sglang_plan("qwen3-30b-a3b", "gptq-int4", "0.4.10", gpu=gpu.id)).inference.speed
    assert looped.step_s == pytest.approx(newer.step_s + 48 * 256 * per_kernel, rel=1e-6)
    assert "once per expert" in looped.assumptions and "once per expert" not in newer.assumptions
    # The Qwen3 table reads 31.29 tok/s for Qwen3-30B-A3B GPTQ-Int4 under SGLang 0.4.6.post1 at a 1-token prompt
    # (QwenLM/Qwen3@7a2f61ff speed_benchmark.md, H20): (1 + 2048) / 31.29 / 2048 = 32.0 ms a token, where the
    # estimate read 0.8 ms (+3,867 %) before the per-expert launches were counted.
    assert 0.5 * 32.0e-3 < looped.step_s < 1.5 * 32.0e-3


def test_the_sglang_gptq_moe_rows_held_out(scored: tuple) -> None:
    # SGLang 0.4.6.post1's Qwen3-30B-A3B GPTQ-Int4 rows (QwenLM/Qwen3@7a2f61ff speed_benchmark.md, H20): +808 %
    # median, +3,867 % worst before vLLM 0.7.2's per-expert Marlin MoE launches were counted.
    rows, _ = scored
    gptq = [r.error_pct for r in rows if r.case.id.startswith("qwen3-sglang-30b-a3b-gptq-int4-")]
    assert len(gptq) == 6
    assert max(abs(e) for e in gptq) < 35


def test_the_hf_host_time_is_set_by_the_other_qwen_table_held_out(bench: ModuleType, scored: tuple) -> None:
    # Each Qwen table is scored with the constant the other sets: the Qwen2.5 rows (0.88 ms a layer on
    # their host) are predicted with the Qwen3 table's 0.61 ms and the reverse.
    cases = [c for c in bench.qwen_speed_cases() if c.identifies == "host"]
    by_source = {s: [bench.implied_host_layer(c) for c in cases if c.source == s] for s in {c.source for c in cases}}
    assert statistics.median(by_source[bench.QWEN_SOURCE]) == pytest.approx(0.8875e-3, rel=0.01)
    assert statistics.median(by_source[bench.QWEN3_SOURCE]) == pytest.approx(0.61e-3, rel=0.01)
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    # Qwen2.5-0.5B BF16 at a 1-token prompt, 47.40 tok/s: +616 % before, held out at 24 x 0.61 ms now.
    assert errors["qwen25-hf-0.5b-bf16-in1-g1"] == pytest.approx(
        100 * (2048 / (2048 * 24 * 0.61e-3 + 0.003) / 47.40 - 1), abs=3
    )


def test_the_qwen25_transformers_rows_read_their_cache_17_times_a_step_held_out(
    bench: ModuleType, scored: tuple
) -> None:
    # QwenLM/Qwen3@a912d239 speed_benchmark.rst (A100 80GB, transformers 4.46.0): its tool loads every model with
    # attn_implementation='flash_attention_2' (examples/speed-benchmark/speed_benchmark_transformers.py at 8205ba2a,
    # USE_FLASH_ATTN = True), and 4.46.0's Qwen2FlashAttention2 repeats K and V to the query heads before
    # flash_attn_func; DynamicCache's torch.cat copies the cache each step. Qwen2.5-7B: 2 + 1 + 2 x 28 / 4 = 17
    # passes over its cache a step.
    record = next(r for r in bench.qwen_records(bench.QWEN_SOURCE) if r["id"] == "qwen25-hf-7b-bf16-in30720-g1")
    assert record["settings"]["attn_implementation"] == "flash_attention_2"
    plan = bench.qwen_plan(record)
    assert plan.attention is Attention.FLASH and decode_kv_passes(plan) == 17
    # Held out (nothing set on the Qwen rows): the rows at 14,336 and 30,720 tokens read +127 ... +260 %
    # (14B GPTQ-Int4 at 30,720: 8.14 tok/s read, 29.28 estimated) with one read of the cache a step.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows}
    long = [e for i, e in errors.items() if i.startswith("qwen25-hf-") and ("-in30720-" in i or "-in14336-" in i)]
    # 38 rows, and 12 GPTQ-Int8 ones (6 sizes on one GPU) since the plan has the format (core.serving.gptq)
    assert len(long) == 38 + 12 and max(long) < 90
    # BF16 7B-32B at 30,720 tokens (device-bound there): within 35 %, still fast (+174.9 ... +233.8 % before).
    bf16 = [errors[f"qwen25-hf-{size}-bf16-in30720-g1"] for size in ("7b", "14b", "32b")]
    assert all(0 < e < 35 for e in bf16)


def _kv_case(bench: ModuleType, log_id: str, held_out: bool) -> object:
    """The KV case of OTHER_LOGS' entry ``log_id``, held out or not."""
    entry = next(e for e in bench.OTHER_LOGS if e.log_id == log_id)
    original = bench.OTHER_LOGS
    try:
        bench.OTHER_LOGS = (replace(entry, held_out=held_out),)
        return next(c for c in bench.other_vllm_cases() if c.table == "kv")
    finally:
        bench.OTHER_LOGS = original


def test_a_held_out_log_sets_no_constant(bench: ModuleType) -> None:
    # PR #24577's vLLM ~0.10 log on one A100 (engine_logs.json) sets the v1 era's non-torch bytes
    # when fitted; held out, it identifies nothing and the fit is the one without it.
    fitted = _kv_case(bench, "vllm24577-qwen3-0.6b-a100-bf16kv", held_out=False)
    held = _kv_case(bench, "vllm24577-qwen3-0.6b-a100-bf16kv", held_out=True)
    assert fitted.identifies == "non_torch:v1" and held.identifies == "" and held.held_out
    others = [c for c in bench.all_cases() if c.id != fitted.id]
    drivers = bench.driver_observations()
    without, _ = bench.fit_constants(others, drivers)
    with_held, _ = bench.fit_constants([*others, held], drivers)
    with_fitted, _ = bench.fit_constants([*others, fitted], drivers)
    assert with_held == without
    assert with_fitted != without


def test_held_out_logs_have_their_own_summary_line_and_count_in_the_kv_target(bench: ModuleType) -> None:
    held = _kv_case(bench, "vllm24577-qwen3-0.6b-a100-bf16kv", held_out=True)
    fitted = _kv_case(bench, "vllm24577-qwen3-0.6b-a100-bf16kv", held_out=False)
    # Predictions 3 % and 12 % off the logged figure: one within 5 %, the worst past 10 %.
    rows = [
        bench.Row(held, held.logged * 1.03, ()),
        bench.Row(replace(held, id="other-held"), held.logged * 1.12, ()),
        bench.Row(fitted, fitted.logged, ()),
    ]
    line = bench.held_out_summary(rows)
    assert "1 of 2 within 5 %" in line.line and "worst 12.0 %" in line.line and not line.met
    assert "2 of 3 logs" in bench.kv_summary(rows).line
    assert bench.held_out_summary(rows[2:]).line.endswith("none")


def every_held_out_log() -> set[str]:
    """The ids of every held-out log of every round."""
    rounds = (HELD_OUT_TOKENS, THIRD_ROUND_TOKENS, FOURTH_ROUND_TOKENS, FIFTH_ROUND_TOKENS, SIXTH_ROUND_TOKENS)
    return {"vllm17327-qwen3-30b-a3b-w4a16-3090-v0", MLA_LOG, *(log for tokens in rounds for log in tokens)}


# llm-d-planner's DeepSeek-V2-Lite-Chat log (vLLM 0.19.0, one H100, d3121e05 accuracy/results/v0.19.0/logs):
# excluded until the model spec described multi-head latent attention (branch h55mla), so held out.
MLA_LOG = "deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192"


def test_the_latent_attention_log_is_held_out_and_close(scored: tuple) -> None:
    rows, _ = scored
    row = next(r for r in rows if r.case.id == MLA_LOG and r.case.table == "kv")
    # The log: "GPU KV cache size: 1,505,552 tokens" (43.61 GiB, 31,104 B a token: 27 layers x 576 x 2 B).
    assert row.case.held_out and row.case.identifies == "" and row.case.logged == 1_505_552
    assert abs(row.error_pct) < 1.0  # +0.2 % when it was added


def test_the_held_out_logs_fit_nothing_and_stay_within_10_percent(bench: ModuleType, scored: tuple) -> None:
    # vLLM issue #17327 (bedovyy, RTX 3090, W4A16 Qwen3-30B-A3B, V0): 5.34 GiB of KV printed, whole
    # blocks of it 58,320 tokens; found after the constants were set, so it checks them only.
    rows, _ = scored
    held = {r.case.id: r for r in rows if r.case.held_out}
    assert set(held) == every_held_out_log()
    assert all(r.case.identifies == "" and r.case.table == "kv" for r in held.values())
    assert held["vllm17327-qwen3-30b-a3b-w4a16-3090-v0"].case.logged == 58_320
    later = {*THIRD_ROUND_TOKENS, *FOURTH_ROUND_TOKENS, *FIFTH_ROUND_TOKENS, *SIXTH_ROUND_TOKENS}
    assert all(abs(r.error_pct) <= bench.KV_WORST for i, r in held.items() if i not in later)


# Issue 23's held-out logs of December 2026 (engine_logs.json, each with "held_out": true): the
# KV tokens each printed. SGLang on four L4s (TP 4) and on an RTX 3090; vLLM 0.9.2 and 0.19.1 on
# an A100 40GB; vLLM 0.10.2 with expert parallelism on L40S machines (TP 8 and TP 2, FP8); vLLM
# 0.27.1 on four RTX PRO 6000 Blackwell (TP 4, TP 4 with EP, PP 4; FP8).
HELD_OUT_TOKENS = {
    "durand-sglang0434-qwq32b-4xl4-tp4": 46_611,
    "jerryzsj-sglang042-r1-distill-qwen7b-3090": 105_531,
    "tokenkaki-vllm092-qwen3-8b-a100-40gb": 136_080,
    "tokenkaki-vllm0191-qwen3-8b-a100-40gb": 140_960,
    "roethig-vllm0102-qwen3-235b-fp8-8xl40s-tp8-ep": 238_208,
    "roethig-vllm0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep": 566_016,
    "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-tp4": 621_392,
    "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-tp4-ep": 623_696,
    "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-pp4": 555_680,
}


def test_the_held_out_logs_are_loaded_scored_and_marked_alike_in_the_corpus(bench: ModuleType, scored: tuple) -> None:
    # Every log the corpus marks held out is mapped with held_out=True (and no other), each one's
    # KV case is scored on the tokens it printed, and its source sets no constant of the fit.
    marked = {log["id"] for log in bench.engine_logs()["logs"] if log.get("held_out")}
    mapped = {entry.log_id for entry in bench.OTHER_LOGS if entry.held_out}
    # The old corpus's held-out log (DeepSeek-V2-Lite, llm-d-planner's) is marked in serving.py, not engine_logs.json.
    assert {MLA_LOG} == bench.OLD_CORPUS_HELD_OUT
    # The 0.29.0 WSL2 start is held out and mapped, but only its weights are scored (its KV figure is not comparable).
    assert marked == mapped == (every_held_out_log() - {MLA_LOG}) | {FRESHAIR}
    rows, _ = scored
    kv = {r.case.id: r for r in rows if r.case.table == "kv"}
    assert {i: kv[i].case.logged for i in HELD_OUT_TOKENS} == HELD_OUT_TOKENS
    sources = {kv[i].case.source for i in HELD_OUT_TOKENS}
    assert not any(c.identifies for c in bench.all_cases() if c.source in sources)
    assert all(abs(kv[i].error_pct) <= bench.KV_WORST for i in HELD_OUT_TOKENS)


def test_the_held_out_summary_line_reports_every_held_out_log(bench: ModuleType, scored: tuple) -> None:
    rows, _ = scored
    line = bench.held_out_summary(rows)
    logs = (
        *HELD_OUT_TOKENS,
        *THIRD_ROUND_TOKENS,
        *FOURTH_ROUND_TOKENS,
        *FIFTH_ROUND_TOKENS,
        *SIXTH_ROUND_TOKENS,
        MLA_LOG,
    )
    assert f"of {len(logs) + 1} within 5 %" in line.line  # + vllm17327's RTX 3090 log
    assert all(log_id in line.line for log_id in logs)
    # Missed in the third round (kolyangg's +34.9 %), met again since the profile's sampler
    # follows the install (vllm_sampler), missed again by the fourth round's RTX 3090 log (-10.2 %);
    # the fifth round's cold-compile RTX 5060 Ti log under WSL2 (+43.0 %) is no longer scored on its
    # KV figure (h78kv), so it is not in the line; the RTX 3090 log reads -5.2 % on its own driver's total
    # (h91kv), so the worst was the eager RTX 4070 Laptop start under WSL2 (-8.1 %): met again (none past 10 %).
    # Since the WSL2 logs state their platform (h92wsl) that eager start reads +3.0 % and its compiled twin
    # +16.9 % (KNOWN_KV_MISSES says why): missed again, on a CUDA-graph and cold-compile figure, not the platform;
    # +17.7 % since the graph rule and the cold-compile term replace the fixed 0.84 GiB (h94cold).
    assert not line.met and "worst 17.7 %" in line.line
    assert FRESHAIR not in line.line


# Issue 23's third held-out round (2026-12-04; engine_logs.json, "held_out": true): each log's
# "GPU KV cache size" as printed (the TP 8 logs: the smallest worker's, which the engine unifies
# the workers to), and the error the estimate of this commit makes on it. vLLM 0.11.0 on an L4
# (abinavChandar/demo_env_l4@097d5ab), 0.13.0 AWQ on an RTX A5000 (kumaxxp/duo-talk@17ead6a),
# 0.19.1 on an RTX 3090 under WSL (sridhar1804/local-ai@d4412cc), 0.10.2 on an H100
# (kolyangg/mlops-assignment@daaf8cb), 0.22.1 online FP8 on an H100
# (NnamdiOdozi/mlops-assignment@0d2e919), 0.10.2 on an RTX 4090
# (ShanghaoLi0913/memory-aware_RLHF@111900d), 0.10.0 at TP 8 with FP8 KV on eight H100s
# (DaisukeTakai/eval_dataset@0577085, two logs), a 0.26.1 source build on an A100 80GB
# (LukeJYK/AutoScientists@e313354).
# The errors since the profile's sampler follows the install (h37samp; the third round's in
# brackets): the sort of a pip install's 0.10-0.13 sampler moves abinav (+0.2), kumaxxp (+6.0),
# kolyangg (+34.9) and DaisukeTakai's (+7.0, +8.3); shanghaoli's one row barely (-0.2: the 0.10
# line's non-torch constant, refitted) and LukeJYK's FlashInfer sampler (-4.9) by 0.1 point; the
# MoE logs also lose the fused-MoE scratch under the sampler before 0.13 (engines.vllm_profile_peak).
# Since 0.11-0.17 read the 0.10 line's non-torch memory (h91kv: vllm_rules.NON_TORCH_LIKE_0_10, their
# profile is 0.10's code), abinav -6.2 -> -2.3 and kumaxxp -1.6 -> +0.2.
THIRD_ROUND_TOKENS = {
    "abinav-vllm0110-llama31-8b-l4": (38_944, -2.3),
    "kumaxxp-vllm0130-qwen25-14b-awq-a5000": (56_736, 0.2),
    "sridhar-vllm0191-phi3-mini-3090-wsl": (35_648, -1.6),  # -4.4 % as native Linux, before h92wsl
    "kolyangg-vllm0102-qwen3-30b-a3b-h100": (94_784, 0.6),
    # -1.3 % until h94cold: a cold start (its log compiles), so the graph rule and the cold-compile term
    "nnamdiodozi-vllm0221-qwen3-30b-a3b-fp8-h100": (464_656, -1.4),
    "shanghaoli-vllm0102-qwen25-3b-4090": (445_968, -0.7),
    "daisuketakai-vllm0100-qwen3-32b-8xh100-tp8-fp8kv": (3_644_816, 0.8),
    "daisuketakai-vllm0100-qwen3-235b-fp8-8xh100-tp8-ep-fp8kv": (1_590_736, 1.3),
    # -4.8 % with the fixed 0.84 GiB of graphs; a warm start ("Directly load AOT compilation"): the rule (h94cold)
    "lukejyk-vllm0261dev-qwen3-coder-30b-a3b-a100": (151_216, 0.8),
}


def test_the_third_round_logs_are_scored_on_their_printed_tokens_as_held_out(bench: ModuleType, scored: tuple) -> None:
    # Each is a held-out KV case on the tokens it printed, fits nothing, and misses by the error
    # above (to 0.1 point): eight within 5 %, one between 5 and 10 % and none past.
    assert_round_scored(bench, scored, THIRD_ROUND_TOKENS, sources=8)


def assert_round_scored(bench: ModuleType, scored: tuple, tokens: dict[str, tuple[int, float]], sources: int) -> None:
    """Each log of a held-out round is a held-out KV case on the tokens it printed, fits nothing,
    misses by its listed error (to 0.1 point), and the round has ``sources`` sources."""
    rows, _ = scored
    kv = {r.case.id: r for r in rows if r.case.table == "kv"}
    for log_id, (printed, error) in tokens.items():
        row = kv[log_id]
        assert row.case.held_out and row.case.identifies == "" and row.case.logged == printed, log_id
        assert abs(row.error_pct - error) < 0.1, (log_id, row.error_pct)
    names = {kv[i].case.source for i in tokens}
    assert len(names) == sources
    assert not any(c.identifies for c in bench.all_cases() if c.source in names)


# Issue 23's fourth held-out round (2026-12-05; engine_logs.json, "held_out": true): each log's
# "GPU KV cache size" as printed and the error of this commit's estimate. vLLM 0.12.0 on an RTX
# PRO 6000 Blackwell Server Edition (2215860382/VedioSifter@f0edafc), 0.10.0 AWQ on an RTX 3090
# (ljg6861/anton_new@f3b2210), 0.30.0 on a T4 (eslam-ahmed43/llm-lab@0f01b47; -10.1 % before
# Model Runner V2's dummy sampler, vllm_rules.SamplerPath.LOGITS_ONLY), 0.11.2 on an H200
# (faradawn/bench3@446e08c), 0.19.0 AWQ at TP 2 on A100 40GBs (kuuroooo/MindSafe@0083e2d).
# The 0.12 and 0.11 lines read the 0.10 line's non-torch memory since h91kv (vediosifter +0.2 -> +1.2,
# faradawn -0.2 -> -0.0).
FOURTH_ROUND_TOKENS = {
    "vediosifter-vllm0120-qwen3-30b-a3b-rtxpro6000": (198_288, 1.2),
    "anton-vllm0100-qwen3-30b-a3b-awq-3090": (20_960, -5.2),  # -10.2 % before its record's old_driver (h91kv)
    # -4.8 % with the fixed 0.84 GiB of graphs; a warm start ("Directly load AOT compilation"): the rule (h94cold)
    "eslam-vllm0300-qwen25-1.5b-t4": (324_704, 1.3),
    "faradawn-vllm0112-llama3-8b-h200": (868_080, -0.0),
    "kuuroooo-vllm0190-llama31-70b-awq-2xa100-40gb-tp2": (104_608, 0.4),
    # SGLang of March 2026 (before 0.5.10) on an 80 GB Ampere card with its default fraction
    # (0.836 printed; the 0.5.3-0.5.9 rule gives it): cli991/qwctest@5d3eef6 sglang.txt.
    # +0.4 % before its printed "Load weight begin. avail mem=78.64 GB" set 0.14 GiB held by others (h54held).
    "cli991-sglang059-qwen25-3b-a100-80gb": (1_743_556, 0.2),
}


def test_the_fourth_round_logs_are_scored_on_their_printed_tokens_as_held_out(bench: ModuleType, scored: tuple) -> None:
    # Six held-out KV cases from six repositories, on the tokens each printed; none sets a constant.
    assert_round_scored(bench, scored, FOURTH_ROUND_TOKENS, sources=6)


# Issue 23's fifth held-out round (2026-12-05, h40srv; engine_logs.json, "held_out": true): the
# first logs of vLLM 0.29 and 0.31. 0.29.0 on an RTX 5060 Ti 16GB under WSL2 with a cold compile
# cache (Freshair129/Private-Runtime-Platform@f52b9b9, docs/evidence/wp24/WP24-2026-09-20-run1/B/
# EV02/vllm-startup-success.log): +43.0 %, diagnosed, not fitted. 0.30.0 on an RTX 4070 Laptop
# GPU under WSL2 (GIO443/statecraft-serving@992a95b, results/phase1-1.5b/20261003T001956Z/default/
# env.json): -0.5 %; its --enforce-eager twin (eager/env.json, scored once CUDA graphs became a plan input,
# h68eager): -8.1 %, the pool grown by the 0.84 GiB graph estimate where the run shows 1.08 GiB (its README: "frees
# 1.08 GiB"; the rest not read: no compile in an eager profile). 0.31.0 with every default on an A100 80GB (course
# notes, code-index file 70682754770; no permalink could be resolved): +0.7 %.
FIFTH_ROUND_TOKENS = {
    # -0.5 % and -8.1 % as native Linux; under WSL2 (h92wsl), the whole card as vLLM's total
    # +16.9 % with the fixed 0.84 GiB; +17.7 % with the graph rule and the cold term fitted without its source (h94cold)
    GIO443_COMPILED: (72_400, 17.7),
    "gio443-vllm0300-qwen25-1.5b-4070laptop-wsl-eager": (112_704, 3.0),
    "a100notes-vllm0310-llama31-8b-a100-80gb": (460_496, 0.7),
}


def test_the_fifth_round_logs_are_scored_on_their_printed_tokens_as_held_out(bench: ModuleType, scored: tuple) -> None:
    # Three held-out KV cases of 0.30 (with and without CUDA graphs) and 0.31 from two sources; the 0.29.0
    # start's KV figure is listed as not comparable (the next test).
    assert_round_scored(bench, scored, FIFTH_ROUND_TOKENS, sources=2)


FRESHAIR = "freshair-vllm0290-qwen3-4b-5060ti-wsl"
# The lines of Freshair129/Private-Runtime-Platform@f52b9b9's 0.29.0 start (docs/evidence/wp24/
# WP24-2026-09-20-run1/B/EV02/vllm-startup-success.log) that the reason rests on: the compile inside the
# profile, and the total vLLM read (the whole 16,311 MiB card under WSL2).
FRESHAIR_EVIDENCE = (
    "Compiling a graph for compile range (1, 2048) takes 16.63 s",
    "saved AOT compiled function",
    "torch.compile took 27.73 s in total",
    "Initial profiling/warmup run took 6.58 s",
    "Free memory on device (14.8/15.9 GiB)",
    "Desired GPU memory utilization is (0.7, 11.13 GiB)",
)


def test_the_cold_wsl_start_is_not_scored_on_its_kv_figure_for_what_its_log_prints(
    bench: ModuleType, scored: tuple
) -> None:
    rows, _ = scored
    kv_ids = {r.case.id for r in rows if r.case.table == "kv"}
    weights = {r.case.id: r for r in rows if r.case.table == "weights"}
    assert FRESHAIR not in kv_ids
    assert abs(weights[FRESHAIR].error_pct) < 3  # its weights stay scored: 7.64 GiB printed, 7.49 of tensors
    why = bench.FIGURES_NOT_COMPARABLE[(FRESHAIR, "KV-cache tokens")]
    assert f"{FRESHAIR} KV-cache tokens" in {u.id for u in bench.unexpressed()}
    record = {log["id"]: log for log in bench.engine_logs()["logs"]}[FRESHAIR]
    for line in FRESHAIR_EVIDENCE:  # every line the reason quotes is in the record's quote of the log
        assert line in why and line in record["quote"], line
    # The reason's arithmetic, from the planner's own pool: the warm Linux estimate, the same with the whole card
    # as total (0.7 x (card - torch's Linux total) more), and that less the cold start's figure the planner warns
    # with (core.serving.vllm_versions.COLD_COMPILE_SEEN_GIB) lands within 5 % of the 1.45 GiB the log prints.
    # Those were h78kv's figures, with the fixed 0.84 GiB of graphs (VLLM_CUDA_GRAPH_BYTES) in the pool.
    entry = next(c for c in bench.OTHER_LOGS if c.log_id == FRESHAIR)
    plan = bench.serving_plan(bench.catalogue(entry.model_id), entry.model_id, entry.gpu, **entry.settings)
    gpu = find_gpu(plan.hardware.gpu)
    with mock.patch.object(serving_engines, "vllm_graph_reserve", lambda *_a, **_k: VLLM_CUDA_GRAPH_BYTES):
        pool = vllm_pool(plan, gpu, rank_layout(plan), DEFAULT_FIT)
        whole_card = pool.pool_bytes + 0.7 * (gpu.memory_bytes - vllm_total_memory(gpu, DEFAULT_FIT))
        assert pool.pool_bytes / GiB == pytest.approx(2.07, abs=0.01)
        assert whole_card / GiB == pytest.approx(2.37, abs=0.01)
        assert (whole_card / GiB - COLD_COMPILE_SEEN_GIB) == pytest.approx(1.45, rel=0.05)
        # The platform setting (h92wsl) gives the whole-card figure itself: the plan under WSL2.
        wsl2 = bench.on_platform({"id": FRESHAIR, "platform": record["platform"]}, plan)
        assert vllm_pool(wsl2, gpu, rank_layout(wsl2), DEFAULT_FIT).pool_bytes == pytest.approx(whole_card, abs=2 * MiB)
    assert "2.07 GiB" in why and "2.37 GiB" in why and f"{COLD_COMPILE_SEEN_GIB:.2f} GiB" in why
    # As the benchmark maps it now (its record: WSL2 and cold), with the graph rule and the cold-compile term: 2.24 GiB,
    # 16,336 tokens, and the profiled peak with the graphs 1.13 GiB against the 1.09 the log prints.
    assert record["compile"] == {"cache": "cold", "basis": "printed", "evidence": record["compile"]["evidence"]}
    mapped = bench.on_platform(record, plan)
    now = vllm_pool(mapped, gpu, rank_layout(mapped), DEFAULT_FIT)
    assert now.pool_bytes / GiB == pytest.approx(2.24, abs=0.01) and now.kv_tokens == 16_336
    assert (now.activation + now.graphs_reserved) / GiB == pytest.approx(1.13, abs=0.01)
    assert "2.24 GiB (16,336 tokens" in why and "1.13 GiB against the 1.09 printed" in why


# Issue 23's sixth held-out round (2026-12-05, h41srv): SGLang 0.5.20 on an RTX 4050 Laptop GPU
# under WSL2, Qwen2.5-3B-Instruct-AWQ at 2,048 tokens, max_total_num_tokens as the note's table
# prints it (Tegdam/pickr_ai@54ed83a, bench/docs/p0b-engine-verification.md, section 6.3), once the
# card entered the catalogue: +8.5 % at 0.80, +14.3 % at 0.60; +3.3 % and +6.4 % once the 0.13 GiB the
# same machine's vLLM start shows held (4.95 GiB free) is the plan's held_by_others (h54held).
SIXTH_ROUND_TOKENS = {
    "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f080": (57_014, 3.3),
    "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f060": (28_239, 6.4),
}


def test_the_sixth_round_logs_are_scored_on_their_printed_tokens_as_held_out(bench: ModuleType, scored: tuple) -> None:
    # Two held-out KV cases of one source, the first SGLang 0.5.20 starts, on the tokens printed.
    assert_round_scored(bench, scored, SIXTH_ROUND_TOKENS, sources=1)


def test_memory_held_by_others_is_read_from_the_logs_printed_free_memory(bench: ModuleType) -> None:
    # held = SGLang's free after start-up on a card nothing else holds (the planner's model) less the free
    # memory the log prints before the weights, at least 0 (engine_logs.json: the records' free_printed field):
    # jerryzsj's RTX 3090 prints 22.76 against 23.08 (docs/SERVING.md: a Windows desktop on the card);
    # durand's L4s print 21.63 against the planner's 21.57: nothing held.
    logs = {log["id"]: log for log in bench.engine_logs()["logs"]}
    cases = {c.log_id: c for c in bench.OTHER_LOGS}

    def held(log_id: str) -> float:
        entry = cases[log_id]
        model = bench.config_model(entry.model_id) if entry.config else bench.catalogue(entry.model_id)
        plan = bench.on_platform(logs[log_id], bench.serving_plan(model, entry.model_id, entry.gpu, **entry.settings))
        return bench.with_printed_free(logs[log_id], plan).hardware.held_by_others / GiB

    # Both WSL2 machines (their records' platform) start from the whole card, so what they hold is 0.42 GiB more than as
    # native Linux (0.32 and 0.127 GiB before h92wsl): the Windows desktop's share, with the same pool.
    assert held("jerryzsj-sglang042-r1-distill-qwen7b-3090") == pytest.approx(0.74, abs=0.005)
    assert held("durand-sglang0434-qwq32b-4xl4-tp4") == 0.0
    assert held("tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f060") == pytest.approx(0.547, abs=0.005)
    assert held("tokenkaki-vllm0191-qwen3-8b-a100-40gb") == 0.0  # a log that prints none is left at 0


def test_sglang_weights_are_the_allocators_segments_of_the_held_out_logs() -> None:
    # SGLang subtracts free device memory, so its weights are PyTorch's segments: replayed through
    # core.allocator's rules they give the two held-out SGLang logs' "Load weight end ... mem
    # usage" to 0.05 GiB, where the tensors alone fall 0.14-0.22 GiB short (docs/SERVING.md).
    segments = load_script(ROOT / "benchmarks" / "realgpu" / "sglang_segments.py", "sglang_segments_test")
    for model_id, tp, logged in segments.LOGGED.values():
        held, tensors = segments.load_usage(find_model(model_id).spec, tp)
        assert abs(held - logged) < 0.05, (model_id, held, logged)
        assert logged - tensors > 0.13, (model_id, tensors, logged)


def test_era_coverage_counts_the_kv_logs_by_the_era_of_their_release(bench: ModuleType) -> None:
    # benchmarks/realgpu/era_coverage.py: every era of core.serving.vllm_versions.ERAS and
    # sglang_versions.ERAS gets a row, the empty ones included; the constants are fitted on no
    # log of 0.20 on, whose rules nine held-out logs of six sources check (docs/SERVING.md,
    # 2026-12-05: 0.22.1, a 0.26.1 build, three 0.27.1 runs, two 0.30.0, 0.31.0; and 0.30.0 with
    # --enforce-eager, h68eager; the 0.29.0 start's KV figure is not comparable, h78kv), and 0.34 has none.
    coverage = load_script(ROOT / "benchmarks" / "realgpu" / "era_coverage.py", "era_coverage_test")
    rows = {name: (fitted, held, sources) for name, fitted, held, sources in coverage.coverage(bench.all_cases())}
    assert len(rows) == 10
    assert rows["vLLM V1 with CUDA-graph profiling (0.20-0.33)"] == (0, 9, 6)
    assert rows["vLLM V1 with the extensible KV cache (0.34)"] == (0, 0, 0)
    assert rows["SGLang 0.5.3-0.5.23"] == (0, 3, 2)  # cli991's 0.5.9-era start, Tegdam's two 0.5.20 starts
    assert "| era | logs fitted on |" in coverage.table(list(coverage.coverage(bench.all_cases())))


def test_a_bench_rows_file_type_is_the_one_it_names(bench: ModuleType) -> None:
    # llama-bench names a file by llama_model_ftype_name ("Q4_K - Medium", XiongjieDai's 4.92 GiB Q4_K_M
    # rows) or a record by llama-quantize's type ("Q2_K": ggml-org/llama.cpp PR #4766's RTX 3090 table,
    # "llama 7B Q2_K | tg128 | 92.69"). The plan used to read every type but F16 / Q4_0 / Q8_0 as Q4_K_M.
    assert bench.bench_quant({"id": "x", "quant": "Q2_K"}) is GgufQuant.Q2_K
    assert bench.bench_quant({"id": "x", "quant": "Q3_K_S"}) is GgufQuant.Q3_K_S
    assert bench.bench_quant({"id": "x", "quant": "Q4_K - Medium"}) is GgufQuant.Q4_K_M
    assert bench.bench_quant({"id": "x", "quant": "F16"}) is GgufQuant.F16
    record = _record(bench, "llamacpp4766-3090-7b-q2_k-tg128")
    assert bench.bench_plan(record).inference.gguf_quant is GgufQuant.Q2_K


def test_a_bench_row_of_an_unknown_file_type_is_refused_with_its_name(bench: ModuleType) -> None:
    # "Q4_K - Small" is llama-bench's name of Q4_K_S, which the records do not use: refused, not read as Q4_K_M.
    with pytest.raises(ValueError, match="'Q4_K - Small' is not a GGUF file type"):
        bench.bench_quant({"id": "made-up", "quant": "Q4_K - Small"})


def test_a_bench_rows_settings_give_flash_attention_and_the_micro_batch(bench: ModuleType) -> None:
    # PR #21024 (0cc4m, RTX 3090, Vulkan, 2026-05-15) prints "fa 1"; PR #4766's January 2024 rows
    # predate flash attention in llama.cpp (April 2024). Records without settings keep the old defaults.
    vulkan = bench.bench_plan(_record(bench, "llamacpp21024-3090-vulkan-8b-q4_0-tg128"))
    assert vulkan.inference.flash_attention and vulkan.inference.llamacpp_backend is LlamaCppBackend.VULKAN
    old = bench.bench_plan(_record(bench, "llamacpp4766-3090-7b-q4_0-tg128"))
    assert not old.inference.flash_attention and old.inference.ubatch == 512
    assert (
        bench.llamacpp_build(_record(bench, "llamacpp4766-3090-7b-q4_0-tg128")["engine_version"])
        < CUDA_GRAPHS_FROM_BUILD
    )


def test_two_and_three_bit_k_quant_decode_rows_are_scored_not_fitted(bench: ModuleType) -> None:
    # PR #4766's RTX 3090: Q2_K 92.69 and Q3_K_S 87.26 t/s below Q4_0's 121.82 though they read fewer
    # bytes; the plan's one rate per byte gives them +57.4 / +56.5 % held out. Their rows set no constant.
    for record_id in ("llamacpp4766-3090-7b-q2_k-tg128", "llamacpp4766-3090-7b-q3_k_s-tg128"):
        record = _record(bench, record_id)
        assert bench.speed_role(record, bench.bench_plan(record)) == ""
    q4_0 = _record(bench, "llamacpp4766-3090-7b-q4_0-tg128")
    assert bench.speed_role(q4_0, bench.bench_plan(q4_0)) == "speed"


def test_the_maintainers_cuda_rows_are_within_15_percent_held_out(scored: tuple) -> None:
    # Each scored with constants fitted without its own source: PR #4766 RTX 3090 Q4_0 121.82 t/s and
    # F16 48.52 (January 2024 master), PR #4812 RTX 3090 Ti Q4_0 127.43 (build 1786), PR #19378 four
    # RTX 4090s, 70B Q4_K_M layer split, 21.23 / 16.86 / 14.18 t/s at 0 / 32,768 / 65,536 tokens of
    # context, PR #12183 RTX 4090 Llama 3.2 3B Q4_K_M 269.83 t/s after a 10-token prompt, PR #4766's RTX 4090
    # (ggerganov, 2024-01-10) CodeLlama 7B F16 61.03 and Q8_0 98.13 t/s, PR #15035's RTX 4090 Qwen2.5 3B
    # Q4_0 230.98 t/s after 8,192 tokens of context; issue 23's 15 %.
    rows, _ = scored
    errors = {r.case.id: r.error_pct for r in rows if r.case.table == "decode"}
    for record_id in (
        "llamacpp4766-3090-7b-q4_0-tg128",
        "llamacpp4766-3090-7b-f16-tg128",
        "llamacpp4812-3090ti-7b-q4_0-tg128",
        "llamacpp19378-4x4090-70b-q4_k_m-tg128",
        "llamacpp19378-4x4090-70b-q4_k_m-tg128-d32768",
        "llamacpp19378-4x4090-70b-q4_k_m-tg128-d65536",
        "llamacpp12183-4090-3b-q4_k_m-isl10-tg200",
        "llamacpp4766gg-4090-7b-f16-tg128",
        "llamacpp4766gg-4090-7b-q8_0-tg128",
        "llamacpp15035-4090-qwen25-3b-q4_0-tg128-d8192",
    ):
        assert abs(errors[record_id]) < 15, (record_id, errors[record_id])


def test_small_model_rows_are_scored_not_fitted(bench: ModuleType) -> None:
    # PR #12183 (RTX 4090): Qwen2.5 1.5B Q4_K_M at 344.43 t/s after 10 prompt tokens, +8.5 % held out,
    # where Llama 3.2 3B is within 2.7 %; fitted on, its rows raise the kernel cycles 4,815 -> 5,045 and
    # the other sources' held-out median 5.2 -> 5.3 % (benchmarks/realgpu/serving.py).
    record = _record(bench, "llamacpp12183-4090-1.5b-q4_k_m-isl10-tg200")
    assert bench.speed_role(record, bench.bench_plan(record)) == ""


ANTON = "anton-vllm0100-qwen3-30b-a3b-awq-3090"


def test_a_log_whose_second_card_shows_the_older_drivers_reserve_is_scored_on_that_drivers_total(
    bench: ModuleType,
) -> None:
    # ljg6861/anton_new@f3b2210 vllm_server.log prints `nvidia-smi --query-gpu=name,memory.total,memory.free`
    # before vLLM starts: "NVIDIA GeForce RTX 3060, 12288, 12027" for the idle second card, 261 MiB not free.
    log = next(entry for entry in bench.engine_logs()["logs"] if entry["id"] == ANTON)
    assert "NVIDIA GeForce RTX 3060, 12288, 12027" in log["quote"]
    not_free_mib = 12288 - 12027
    # What the driver reserves of an RTX 3060 12GB (12,288 MiB) by era, from PyTorch's totals
    # (benchmarks/realgpu/torch_capacity.json): 11.75 GiB in 2022 (smy20011/dreambooth-gui#78), 11.63 GiB
    # in the stored code corpus's undated newer message (file 58322896488).
    linux = [r for r in bench.capacity_records() if r.get("platform") != "windows"]
    totals = {r["total_gib"] for r in linux if r["card"] == "rtx-3060-12gb"}
    assert totals == {11.75, 11.63}
    old_reserve, new_reserve = 12288 - 11.75 * 1024, 12288 - 11.63 * 1024
    assert old_reserve <= not_free_mib < new_reserve  # 256 <= 261 < 379: the older driver
    # So the RTX 3090's total is its old-era median, 23.70 GiB (23.70, 23.70, 23.68), not the 23.58 the
    # catalogue's reserve gives; the case, and only it, is predicted with that reserve.
    assert bench.old_driver_reserve("rtx-3090") == pytest.approx(24 * GiB - 23.70 * GiB)
    assert set(bench.old_driver_logs()) == {ANTON}
    case = next(c for c in bench.other_vllm_cases() if c.id == ANTON and c.table == "kv")
    assert case.held_out and case.identifies == ""
    assert case.predict(DEFAULT_FIT) == 19_856  # -5.3 % of the 20,960 printed (-5.2 % with the benchmark's fit)
    assert bench.estimate_with(case.plan, DEFAULT_FIT).kv_cache_tokens == 18_800  # on today's total: -10.3 %

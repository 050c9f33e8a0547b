"""Multi-head latent attention (DeepSeek-V2-Lite, DeepSeek-V3 / R1, Kimi K2): counts, import, serving cache."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.cli.catalogues import _list_models
from core.dtypes import GgmlType, GgufQuant
from core.errors import PlanError
from core.estimate import estimate
from core.files.measurement import load_measurement, plan_for_case
from core.hfconfig import model_from_hf_config
from core.inputs import Method
from core.plan import Hardware, Plan
from core.serving.kv import kv_bytes_per_token_layer
from core.serving.llamacpp import gguf_tensor_bytes, layer_matrices, quantiser, tensor_type
from core.verdict import Mode

GiB = 2**30


def test_deepseek_v3_counts_the_main_model() -> None:
    spec = find_model("deepseek-v3").spec
    # DeepSeek's README_WEIGHTS.md: 671B main model; a per-tensor count of this config prints
    # 671,026,419,200 (e_score_correction_bias counted); the MTP layer (11.5B unique) is left out.
    assert spec.architecture_params() == 671_026_419_200
    # README_WEIGHTS.md: 36.6B activated without the input embedding (0.9B), the head counted.
    assert round((spec.active_params() - spec.embedding_params()) / 1e9, 1) == 36.6
    # transformers DeepseekV3Attention at 00b676f8: q_a 7168x1536, its norm, q_b 1536x(128x192), kv_a
    # 7168x576, its norm 512, kv_b 512x(128x256), o (128x128)x7168 (the per-tensor table's rows).
    assert spec.attention_params() == 11_010_048 + 1_536 + 37_748_736 + 4_128_768 + 512 + 16_777_216 + 117_440_512
    # Layers 0-2 dense (3 x 132,120,576), then 256 experts and 1 shared of 3 x 14,680,064.
    assert spec.dense_layer_params() - spec.attention_params() - 2 * 7168 == 3 * 132_120_576
    assert spec.moe_layers == 58


def test_deepseek_v2_lite_counts_15_7_billion() -> None:
    spec = find_model("deepseek-v2-lite").spec
    # Model card: 15.7B total, 2.4B activated (without the input embedding: 2,451,435,008, the card cuts it).
    assert spec.architecture_params() == 15_706_484_224
    assert 2.4e9 <= spec.active_params() - spec.embedding_params() < 2.5e9
    assert "q_proj" in spec.latent_shapes() and "q_a_proj" not in spec.latent_shapes()  # q_lora_rank null
    assert spec.adapter_targets() == ("q_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert not spec.router_bias  # DeepSeek-V2's softmax router has no correction bias


def test_kimi_k2_counts_one_trillion() -> None:
    spec = find_model("kimi-k2").spec
    # Model card: 1T total, 32B activated; the Hub shows 1.03T; a public per-preset count of this
    # config prints 1,026,408,232,448.
    assert spec.architecture_params() == 1_026_408_232_448
    assert round(spec.active_params() / 1e9) == 33  # 32.9B with the embedding, 31.7B without: "32B"


def test_block_tensor_sizes_sum_to_the_layer() -> None:
    for model_id in ("deepseek-v3", "deepseek-v2-lite", "kimi-k2"):
        spec = find_model(model_id).spec
        assert sum(spec.layer_tensor_sizes()) == spec.layer_params()
        assert len(spec.layer_tensor_sizes()) == spec.layer_tensors()


def _config(model_id: str) -> dict[str, Any]:
    return dict(find_model(model_id).config)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("index_topk", 2048, "indexer"),  # DeepSeek-V3.2's sparse attention
        ("moe_layer_freq", 2, "moe_layer_freq"),
        ("attention_bias", True, "qkv_bias"),
    ],
)
def test_importer_refuses_what_it_cannot_honour(key: str, value: object, why: str) -> None:
    config = _config("deepseek-v3") | {key: value}
    with pytest.raises(PlanError, match=why):
        model_from_hf_config(config)


def test_importer_refuses_a_config_without_the_latent() -> None:
    config = {k: v for k, v in _config("deepseek-v3").items() if k != "kv_lora_rank"}
    with pytest.raises(PlanError, match="kv_lora_rank"):
        model_from_hf_config(config)


def test_vllm_caches_one_latent_on_every_rank() -> None:
    v3 = find_model("deepseek-v3").spec
    # vllm 001cabc1 MLAAttentionSpec: block x 1 x (512 + 64) x 2 B, no K + V, not split by TP.
    assert kv_bytes_per_token_layer(v3, 2.0, tensor_parallel=1) == 576 * 2
    assert kv_bytes_per_token_layer(v3, 2.0, tensor_parallel=8) == 576 * 2
    assert kv_bytes_per_token_layer(v3, 1.0, tensor_parallel=8) == 576  # fp8 KV
    # transformers' DeepseekV3Attention caches 128 heads x (192 k + 128 v) a layer: 4,997,120 B a token in bf16.
    assert 61 * kv_bytes_per_token_layer(v3, 2.0, latent=False) == 4_997_120


def _served(model_id: str, **inference: Any) -> Plan:
    plan = Plan(model=find_model(model_id).spec, model_id=model_id, hardware=Hardware(gpu="h100-sxm"))
    return plan.with_inference(**inference)


def test_v2_lite_log_on_vllm_0_19() -> None:
    # llm-d-planner d3121e05 accuracy/results/v0.19.0/logs/deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192.log:
    # 43.61 GiB of KV for 1,505,552 tokens, 31,104 B a token (27 layers x 576 x 2 B); weights 29.43 GiB.
    plan = _served(
        "deepseek-v2-lite",
        engine="vllm",
        vllm_version="0.19",
        context=8192,
        gpu_memory_utilization=0.95,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
    )
    inference = estimate(plan).inference
    assert inference.kv_bytes_per_token == 31_104
    assert inference.kv_cache_tokens == pytest.approx(1_505_552, rel=0.01)
    assert inference.weights_bytes / GiB == pytest.approx(29.43, rel=0.01)


def test_tensor_parallel_keeps_the_latent_projections_whole() -> None:
    # vllm 002d6073 deepseek_v2.py: fused_qkv_a_proj (disable_tp) and the q_a / kv_a norms on every rank.
    v3 = find_model("deepseek-v3").spec
    one = estimate(_served("deepseek-v3", engine="vllm", tensor_parallel=1)).inference.weights_bytes
    eight = estimate(_served("deepseek-v3", engine="vllm", tensor_parallel=8)).inference.weights_bytes
    replicated = 61 * v3.replicated_latent_params() * 2  # bf16
    assert eight == pytest.approx(one / 8 + replicated * 7 / 8, rel=1e-9)


def test_plan_refuses_targets_mla_does_not_have() -> None:
    plan = Plan(model=find_model("deepseek-v3").spec, model_id="deepseek-v3")
    with pytest.raises(PlanError, match="no q_proj"):
        replace(plan, method=Method.LORA)  # the default targets are q_proj and v_proj
    ok = replace(plan, method=Method.LORA, lora=replace(plan.lora, targets=("o_proj", "down_proj")))
    assert ok.model.latent_attention


def test_llamacpp_caches_the_latent_as_k_and_no_v() -> None:
    # ggml-org/llama.cpp PR #19067 ("kv-cache : support V-less cache", 2026-01-24): llama_kv_cache makes
    # cache_v_l* only when !hparams.is_mla(); K is kv_lora_rank + n_rot = 512 + 64 (DeepSeek-V2-Lite
    # config.json) per cell and layer, 27 layers: 4,096 cells x 27 x 576 x 2 B (f16) = 127,401,984 B.
    inference = estimate(_served("deepseek-v2-lite", engine="llamacpp", context=4096)).inference
    assert inference.kv_cache_bytes == 4096 * 27 * 576 * 2 == 127_401_984
    assert inference.kv_bytes_per_token == 31_104  # the same latent vLLM keeps (test_v2_lite_log_on_vllm_0_19)
    assert "K only: the 576-wide latent" in inference.formula
    # q8_0: 576 / 32 blocks of 34 B (ggml's block_q8_0: an f16 scale and 32 int8) = 612 B a row.
    q8 = estimate(
        _served("deepseek-v2-lite", engine="llamacpp", context=4096, cache_type="q8_0", flash_attention=True)
    ).inference
    assert q8.kv_cache_bytes == 4096 * 27 * 612


def test_llamacpp_refuses_builds_and_ollama_it_does_not_model() -> None:
    # PR #12801 (2025-04: K 576 + V 512) and PR #19067 (2026-01: K only) have no build number read here.
    with pytest.raises(PlanError, match="#12801"):
        _served("deepseek-v2-lite", engine="llamacpp", llamacpp_build=5000)
    with pytest.raises(PlanError, match="Ollama"):
        _served("deepseek-v2-lite", engine="llamacpp", ollama_version="0.5")


def test_gguf_tensors_hold_every_parameter_once() -> None:
    # The deepseek2 loader's shapes (attn_q / attn_q_a + attn_q_b, attn_kv_a_mqa, attn_k_b {128, 512, H},
    # attn_v_b {512, 128, H}, attn_output, the dense first layer's ffn_*, the experts' ffn_*_exps and
    # ffn_*_shexp) in an F32 file: 4 B for each of transformers' parameters (15,706,484,224 for V2-Lite,
    # 671,026,419,200 for V3; test_deepseek_*_counts).
    for model_id in ("deepseek-v2-lite", "deepseek-v3"):
        spec = find_model(model_id).spec
        per_layer, embedding, output = gguf_tensor_bytes(spec, GgufQuant.F32)
        assert sum(per_layer) + embedding + output == 4 * spec.architecture_params()


def test_attn_k_b_rows_fall_back_to_a_32_block_type() -> None:
    # attn_k_b's rows are qk_nope_head_dim = 128 long, not whole Q4_K blocks of 256: llama_tensor_get_type's
    # fallback (Q4_K -> Q5_0, ggml-org/llama.cpp 8784689f src/llama-quant.cpp) stores them.
    spec = find_model("deepseek-v2-lite").spec
    q = quantiser(spec, GgufQuant.Q4_K_M)
    assert tensor_type(q, "attn_k_b", 5, 128) is GgmlType.Q5_0
    assert [k for k, _, _ in layer_matrices(spec, 0)][-3:] == ["ffn_up", "ffn_down", "ffn_gate"]  # dense first
    assert "ffn_down_shexp" in [k for k, _, _ in layer_matrices(spec, 1)]


def test_training_estimate_is_flagged_as_an_approximation() -> None:
    est = estimate(Plan(model=find_model("deepseek-v2-lite").spec, model_id="deepseek-v2-lite"))
    assert any("multi-head latent attention" in w for w in est.warnings_for(Mode.TRAINING))
    assert not any("multi-head latent attention" in w for w in est.warnings_for(Mode.INFERENCE))


def test_ordinary_models_keep_their_cache() -> None:
    llama = find_model("llama-3.1-8b").spec
    assert not llama.latent_attention and llama.first_k_dense_replace == 0
    # 2 x 8 KV heads x 128 x 2 B = 4,096 B a layer; TP 2 halves the heads.
    assert kv_bytes_per_token_layer(llama, 2.0) == 4096
    assert kv_bytes_per_token_layer(llama, 2.0, tensor_parallel=2) == 2048


def test_picking_an_mla_model_moves_the_targets_it_lacks_to_o_proj() -> None:
    # The window's LoRA default (PEFT's q_proj, v_proj for Llama) names matrices DeepSeek-V3 does not have.
    lora = replace(Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b"), method=Method.LORA)
    assert lora.lora.targets == ("q_proj", "v_proj")
    v3 = lora.on_model(find_model("deepseek-v3").spec, "deepseek-v3")
    assert v3.lora.targets == ("o_proj",)
    # DeepSeek-V2-Lite keeps its plain q_proj (no q_lora_rank).
    lite = lora.on_model(find_model("deepseek-v2-lite").spec, "deepseek-v2-lite")
    assert lite.lora.targets == ("q_proj", "o_proj")
    # Back on Llama the targets stay what they became: nothing is refused, nothing silently dropped.
    assert v3.on_model(find_model("llama-3.1-8b").spec, "llama-3.1-8b").lora.targets == ("o_proj",)


MLA_MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured_mla"


def _measured_error(case_id: str) -> float:
    """The estimate's allocated peak against a committed fake-tensor measurement of a tiny DeepSeek-V3
    (benchmarks/accuracy/cases_mla.json; tools.measure, torch 2.13.0 CPU, transformers 5.25.0, peft 0.18.0)."""
    path = MLA_MEASURED / f"{case_id}.json"
    measured = load_measurement(path)
    plan = plan_for_case(measured.case, json.loads(path.read_text())["model_config"])
    peak = estimate(plan).tensor_peak_bytes
    return (peak - measured.peak_allocated_bytes) / measured.peak_allocated_bytes * 100


def test_mla_training_activations_follow_deepseek_v3_attention() -> None:
    # Every layer with experts, full fine-tuning, SDPA: 805,635,072 B measured; -0.2 % (ordinary attention's
    # rule over the decompressed heads, before: -5.4 %).
    assert abs(_measured_error("mla-tiny-dsv3k0-full-bf16-adamw-sdpa-b4-s1024")) < 0.5
    # One dense first layer (of 4), its own MLP of intermediate_size (1,024) in its share of the blocks (branch h87moe):
    # +0.2 % eager, +0.4 % SDPA (read as an expert layer before: +1.0 %, +2.0 %; before that -0.6 %, -3.4 %).
    for case in ("mla-tiny-dsv3-full-bf16-adamw-eager-b2-s512", "mla-tiny-dsv3-full-bf16-adamw-sdpa-b4-s1024"):
        assert 0 < _measured_error(case) < 1.0, case


def test_mla_lora_is_an_overestimate_the_window_states() -> None:
    # LoRA on o_proj and down_proj: +2.7 % to +3.4 % (before +5.9 % to +7.8 %); with the dense first layer as its own
    # MLP (branch h87moe; +1.2 %, +1.6 % while it was read as an expert layer) the same as the plan on the model
    # without it (k0: +3.4 %). On o_proj alone the first block keeps nothing for q / k / v (no adapter before it),
    # which the rules count: +5.9 % and +6.6 % with SDPA, +21.7 % eager on this 4-layer model (SmolLM2-135M's 30
    # layers, the same plan: +1.5 %).
    for case in ("mla-tiny-dsv3-lora-bf16-adamw-sdpa-b4-s1024", "mla-tiny-dsv3k0-lora-bf16-adamw-sdpa-b4-s1024"):
        assert 0 < _measured_error(case) < 5, case
    assert 0 < _measured_error("mla-tiny-dsv3-lora-o-bf16-adamw-eager-b4-s1024") < 25


def test_sglang_keeps_the_same_latent_and_the_cli_lists_it() -> None:
    # SGLang's MLATokenToKVPool: one (size, 1, kv_lora_rank + qk_rope_head_dim) buffer a layer, whole on each rank:
    # DeepSeek-V3 61 x 576 x 2 B = 70,272 B a token at TP 8, as vLLM.
    for engine in ("sglang", "vllm"):
        inference = estimate(_served("deepseek-v3", engine=engine, tensor_parallel=8)).inference
        assert inference.kv_bytes_per_token == 70_272, engine
    listing = _list_models(as_json=False)  # `vramplan models`
    assert any(line.startswith("kimi-k2 ") and "heads=64/MLA 576" in line for line in listing.splitlines())

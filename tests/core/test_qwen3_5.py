"""Qwen3.5 / Qwen3.6: the image-text hybrid checkpoints read exactly and planned for serving on vLLM 0.17 - 0.34."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import CacheType, GgmlType, GgufQuant
from core.errors import PlanError
from core.estimate import estimate
from core.files.planfile import dumps, loads_saved
from core.hfconfig import model_from_hf_config
from core.hybrid import ATTENTION, GATED_DELTANET, hybrid_from_hf_config
from core.inputs import VllmVersion
from core.plan import Engine, Hardware, Inference, Plan, hybrid_refusal, hybrid_vllm_lines, serving_on, training_refusal
from core.presets import default_plan
from core.serving.llamacpp import llamacpp_buffers, quantiser, tensor_type
from core.serving.llamacpp_hybrid import hybrid_layer_matrices
from core.serving.text_only import skips_vision_tower
from core.serving.vllm_hybrid import plan_pages, state_bytes
from core.serving.vllm_versions import limit_mm_json
from core.units import MiB
from core.verdict import Mode

DATA = Path(__file__).parents[1] / "data" / "hybrid"
# transformers 5.25.0's own counts of each image-text model built on the meta device (the file's
# "wrapped_source"; tools/measure/hybrid_meta_counts.py writes it): whole, the tower's share, its nn.Linear
# weights, the language model's share.
WRAPPED: dict[str, Any] = json.loads((DATA / "meta_counts.json").read_text("utf-8"))["wrapped"]


def config(case: str) -> dict[str, Any]:
    return json.loads(json.dumps(WRAPPED[case]["config"]))  # a deep copy the test may change


def served(model_id: str, **inference: Any) -> Plan:
    entry = find_model(model_id)
    plan = default_plan().with_hardware(gpu="h100-sxm").on_model(entry.spec, entry.id)
    return plan.with_inference(**inference) if inference else plan


@pytest.mark.parametrize("case", sorted(WRAPPED))
def test_whole_tower_and_language_model_equal_the_library_count(case: str) -> None:
    entry = WRAPPED[case]
    model = model_from_hf_config(entry["config"])
    assert model.checkpoint_params() == entry["whole"]
    assert model.vision_params == entry["tower"] and model.vision_linear_params == entry["linear"]
    assert model.total_params() == entry["text"]
    # The decoder alone, as core.hybrid reads text_config: the same language-model count.
    assert hybrid_from_hf_config(entry["config"]["text_config"]).params == entry["text"]


def test_the_released_sizes_against_their_model_cards() -> None:
    # Model cards (huggingface.co/Qwen/Qwen3.5-9B, -27B, -35B-A3B): 9B, 27B, "35B in total and 3B activated".
    # The meta-device counts (above) round to them; the multi-token-prediction layer is not built, not counted.
    assert round(WRAPPED["qwen3.5-9b"]["whole"] / 1e9) == 9
    assert round(WRAPPED["qwen3.5-27b"]["whole"] / 1e9) == 27
    moe = model_from_hf_config(config("qwen3.5-35b-a3b"))
    assert round(moe.checkpoint_params() / 1e9) == 35 and round(moe.active_params() / 1e9) == 3
    # Active: the total less the 248 experts of 3 · 2,048 · 512 a token does not reach in each of 40 layers.
    assert moe.total_params() - moe.active_params() == (256 - 8) * 3 * 2048 * 512 * 40


def test_the_nested_stack_state_and_ssm_dtype() -> None:
    # Qwen3.5-27B's text_config: 64 layers, full_attention_interval 4 -> 16 gated attention, 48 Gated DeltaNet;
    # 16 key heads and 48 value heads of 128, kernel 4; mamba_ssm_dtype "float32".
    model = model_from_hf_config(config("qwen3.5-27b"))
    hybrid = model.hybrid
    assert hybrid is not None and hybrid.mixer.kind == GATED_DELTANET
    assert (hybrid.attention_layers, hybrid.recurrent_layers, model.kv_layers) == (16, 48, 16)
    # vllm 0.17.0 mamba_utils.py gated_delta_net_state_shape: conv (kernel - 1, 2 · 16 · 128 + 48 · 128),
    # temporal (48, 128, 128).
    assert hybrid.state_elements() == (3 * (2 * 16 * 128 + 48 * 128), 48 * 128 * 128)
    assert model.recurrent_state_float32 and model.vision_kind == "Qwen3.5"
    assert (model.family, model.vision_family) == ("qwen3_5_text", "qwen3_5")
    # Without layer_types the pattern comes from full_attention_interval, as Qwen3_5TextConfig builds it.
    text = config("qwen3.5-27b")["text_config"]
    del text["layer_types"]
    assert hybrid_from_hf_config(text).layers == hybrid_from_hf_config(config("qwen3.5-27b")["text_config"]).layers
    assert hybrid_from_hf_config(text).layers[3] == ATTENTION


def test_the_published_spellings_of_the_tower() -> None:
    # Qwen/Qwen3.6-35B-A3B's published config.json names its tower "qwen3_5_moe" and lists deepstack_visual_indexes
    # []; Qwen3_5VisionModel builds no DeepStack merger whatever the list says.
    published = config("qwen3.5-35b-a3b")
    published["vision_config"]["model_type"] = "qwen3_5_moe"
    published["vision_config"]["deepstack_visual_indexes"] = [8, 16, 24]
    assert model_from_hf_config(published).vision_params == WRAPPED["qwen3.5-35b-a3b"]["tower"]
    dense = config("qwen3.5-9b")
    dense["vision_config"]["model_type"] = "qwen3_5"
    assert model_from_hf_config(dense).vision_params == WRAPPED["qwen3.5-9b"]["tower"]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"mamba_ssm_dtype": "float8"}, "config.mamba_ssm_dtype"),
        ({"linear_num_value_heads": 20}, "config.linear_num_value_heads"),
        ({"attention_bias": True}, "config.attention_bias"),
        ({"layer_types": ["linear_attention", "sliding_attention"]}, "config.layer_types"),
    ],
)
def test_what_is_not_modelled_is_refused_by_key(change: dict[str, Any], key: str) -> None:
    whole = config("qwen3.5-9b")
    whole["text_config"].update(change)
    with pytest.raises(PlanError) as info:
        model_from_hf_config(whole)
    assert info.value.field == key


def test_a_bare_text_config_is_refused_with_the_reason() -> None:
    # vLLM 0.17 - 0.19 register Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration only.
    with pytest.raises(PlanError) as info:
        model_from_hf_config(config("qwen3.5-9b")["text_config"])
    assert info.value.field == "config.model_type" and "Qwen3_5ForCausalLM" in str(info.value)


def test_lines_that_do_not_load_it_are_refused_naming_the_first_that_does() -> None:
    # 0.11 - 0.16 take other hybrids but have no qwen3_5.py (the 0.16.0 wheel has none).
    plan = served("qwen3.5-27b")
    for version in (VllmVersion.V0_11, VllmVersion.V0_15, VllmVersion.V0_16):
        with pytest.raises(PlanError) as info:
            plan.with_inference(vllm_version=version)
        assert (info.value.field, info.value.value) == ("inference.vllm_version", version.value)
        assert "vLLM 0.17 is the first" in str(info.value) and "0.17 - 0.34" in str(info.value)


def test_the_lines_that_load_it_and_the_move_to_them() -> None:
    model = find_model("qwen3.5-35b-a3b").spec
    # 0.17 - 0.19 read for Qwen3.5 itself; 0.20 - 0.34 carry the Gated DeltaNet rules core.serving.vllm_hybrid
    # read in those wheels (HYBRID_VLLM_LINES).
    lines = list(VllmVersion)
    assert hybrid_vllm_lines(model) == set(lines[lines.index(VllmVersion.V0_17) : lines.index(VllmVersion.V0_34) + 1])
    assert VllmVersion.V0_11 in hybrid_vllm_lines(find_model("qwen3-next-80b-a3b-instruct").spec)
    for version in (VllmVersion.V0_17, VllmVersion.V0_18):
        assert served("qwen3.5-35b-a3b", vllm_version=version).inference.vllm_version is version
    # A plan on a line that does not load it moves to the newest that does, as for any hybrid.
    on_015 = default_plan().with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_15).inference
    assert serving_on(model, on_015).vllm_version is VllmVersion.V0_34


def test_the_float32_state_sets_the_page() -> None:
    # The checkpoint's mamba_ssm_dtype float32: conv 3 · 10,240 · 2 B + temporal 786,432 · 4 B = 3,207,168 B a
    # layer; one attention token 2 · 4 KV heads · 256 · 2 B = 4,096 B; block 16 · cdiv(3,207,168, 16 · 4,096) = 784.
    plan = served("qwen3.5-27b")
    assert state_bytes(plan) == (2, 4)
    pages = plan_pages(plan, "h100-sxm")
    assert (pages.mamba_page_bytes, pages.attention_token_bytes, pages.block_size) == (3_207_168, 4_096, 784)
    assert "attention block size 784 tokens" in estimate(plan).inference.formula
    # A config without the key keeps the model dtype (2 B), as vLLM's "auto" does.
    text = config("qwen3.5-27b")
    del text["text_config"]["mamba_ssm_dtype"]
    bare = plan.on_model(model_from_hf_config(text, name="no ssm dtype"))
    assert state_bytes(bare) == (2, 2)


def test_text_only_serving_skips_the_tower() -> None:
    # qwen3_5.py (0.17.0, 0.19.0 wheels) marks its tower for image and video: text only needs both limits 0.
    plan = served("qwen3.5-9b")
    text_only = plan.with_inference(text_only=True)
    assert skips_vision_tower(plan.model, text_only.inference) and not skips_vision_tower(plan.model, plan.inference)
    assert limit_mm_json("qwen3_5") == '{"image":0,"video":0}'
    weights = {b.label: b.bytes for b in estimate(plan).inference.buckets}["Weights"]
    lean = {b.label: b.bytes for b in estimate(text_only).inference.buckets}["Weights"]
    assert weights - lean == pytest.approx(WRAPPED["qwen3.5-9b"]["tower"] * 2)  # the bf16 tower


def test_training_is_estimated_and_serving_names_the_lines() -> None:
    model = find_model("qwen3.6-35b-a3b").spec
    assert training_refusal(model) is None  # core.training.gdn since branch h68gdn (tests/core/test_gdn_training.py)
    served_why = hybrid_refusal(model)  # where it is served: vLLM from 0.17 and llama.cpp
    assert "vLLM 0.17 - 0.34 and llama.cpp (a current build) only" in served_why


# A llama-server log of unsloth's Qwen3.5-9B "Q4_K_S" GGUF on an Apple M4 Pro (-c 262144, -ctk/-ctv q8_0, -fa on,
# one slot), stored in the code index as a Russian write-up (index file 61338146820; repository not resolved):
# "CPU_Mapped model buffer size = 545.62 MiB", "KV buffer size = 4352.00 MiB (262144 cells, 8 layers ...)",
# "RS buffer size = 50.25 MiB ... R (f32): 2.25 MiB, S (f32): 48.00 MiB", /v1/models "size": 5383129088.
M4_LOG_MIB = {"host": 545.62, "kv": 4352.00, "rs": 50.25}
M4_LOG_SIZE = 5_383_129_088


def m4_plan() -> Plan:
    return Plan(
        model=find_model("qwen3.5-9b").spec,
        hardware=Hardware(gpu="apple-m4-pro-48gb"),
        inference=Inference(
            engine=Engine.LLAMACPP, gguf_quant=GgufQuant.Q4_K_S, cache_type=CacheType.Q8_0, context=262_144
        ),
    )


def test_llama_cpp_plans_the_qwen35_gguf_as_the_log_prints_it() -> None:
    buffers = llamacpp_buffers(m4_plan())
    assert buffers.layout.host_weights / MiB == pytest.approx(M4_LOG_MIB["host"], abs=0.005)  # token_embd
    assert buffers.device_kv[0] / MiB == M4_LOG_MIB["kv"]  # 8 attention layers only
    assert buffers.device_rs[0] / MiB == M4_LOG_MIB["rs"]  # 24 Gated DeltaNet layers, f32
    # unsloth's file is its own mix (the log's type counts: 48 q8_0, 32 q5_K), not llama-quantize's Q4_K_S recipe:
    # the tensors are compared to 1 %, not exactly.
    total = buffers.layout.host_weights + sum(buffers.layout.device_weights)
    assert total == pytest.approx(M4_LOG_SIZE, rel=0.01)


def test_a_qwen36_moe_caches_its_ten_attention_layers() -> None:
    # ggml-org/llama.cpp PR 22673 (https://github.com/ggml-org/llama.cpp/pull/22673, a 40-layer qwen35moe GGUF, -c
    # 131072, f16 cache): "llama_kv_cache: CUDA0 KV buffer size = 2560.00 MiB", "(131072 cells, 10 layers".
    plan = Plan(
        model=find_model("qwen3.6-35b-a3b").spec,
        hardware=Hardware(gpu="h100-sxm"),
        inference=Inference(engine=Engine.LLAMACPP, gguf_quant=GgufQuant.Q8_0, context=131_072),
    )
    buffers = llamacpp_buffers(plan)
    assert (sum(buffers.device_kv) + buffers.host_kv) / MiB == 2560.00


def test_the_qwen35_layer_holds_llama_cpps_tensors() -> None:
    # src/models/qwen35.cpp (ggml-org/llama.cpp 06e514f6) load_arch_tensors: attn_qkv {d, 2·key + value}, attn_gate
    # {d, value}, ssm_beta / ssm_alpha {d, value heads}, ssm_out {value, d}; the attention layer's attn_q {d, 2·H·hd}.
    model = find_model("qwen3.5-9b").spec  # Qwen/Qwen3.5-9B: d 4096, 16 key heads × 128, 32 value heads × 128
    recurrent, attention = hybrid_layer_matrices(model, 0), hybrid_layer_matrices(model, 3)
    assert recurrent[:5] == (
        ("attn_qkv", 4096, 2 * 16 * 128 + 32 * 128),
        ("attn_gate", 4096, 32 * 128),
        ("ssm_beta", 4096, 32),
        ("ssm_alpha", 4096, 32),
        ("ssm_out", 32 * 128, 4096),
    )
    assert attention[0] == ("attn_q", 4096, 2 * 16 * 256)  # 16 heads of 256, query and gate
    # src/llama-quant.cpp (007dbbf3): category_is_attn_v takes attn_qkv into the attn_v branch, whose counter runs
    # over every layer (one attn_v or attn_qkv each): Q4_K_M gives Q6_K where use_more_bits(layer, 32), else Q4_K.
    q = quantiser(model, GgufQuant.Q4_K_M)
    assert [tensor_type(q, "attn_qkv", i, 4096) for i in (0, 4, 6)] == [GgmlType.Q6_K, GgmlType.Q4_K, GgmlType.Q6_K]
    assert tensor_type(q, "attn_v", 3, 4096) is GgmlType.Q6_K and tensor_type(q, "attn_v", 7, 4096) is GgmlType.Q4_K


def test_llama_cpp_keeps_qwen35_and_ollama_is_refused() -> None:
    plan = served("qwen3.5-9b").with_inference(engine=Engine.LLAMACPP)
    assert plan.inference.engine is Engine.LLAMACPP and estimate(plan).inference.buckets
    on_llamacpp = default_plan().with_inference(engine=Engine.LLAMACPP).inference
    assert serving_on(plan.model, on_llamacpp).engine is Engine.LLAMACPP
    with pytest.raises(PlanError) as info:
        plan.with_inference(ollama_version="0.30")
    assert info.value.field == "inference.ollama_version" and "Go engine" in str(info.value)


def test_the_command_line_plans_qwen35_on_llama_cpp(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--mode", "inference", "--model", "qwen3.5-9b", "--engine", "llamacpp", "--gpu", "rtx-4090"]
    assert main([*args, "--context", "8192"]) == 0
    out = capsys.readouterr().out
    # 8,192 cells × 8 attention layers × (K + V) × 4 KV heads × 256 × 2 B (f16) = 256 MiB; RS as the M4 log prints.
    assert "KV 256.00 MiB (8,192 cells, 8 attention layers)" in out
    assert "RS 50.25 MiB (1 cell × 24 recurrent layers, f32)" in out


def test_a_saved_plan_reads_back_equal() -> None:
    plan = served("qwen3.5-35b-a3b", context=32_768, text_only=True)
    saved = loads_saved(dumps(plan, Mode.INFERENCE))
    assert saved.plan == plan and saved.plan.model.hybrid == plan.model.hybrid
    assert saved.plan.model.vision_family == "qwen3_5_moe"


def test_the_command_line_reads_a_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config("qwen3.5-27b")), "utf-8")
    code = main(["estimate", "--config", str(tmp_path), "--mode", "inference", "--gpu", "h100-sxm", "--json"])
    document = json.loads(capsys.readouterr()[0])
    assert code == 0 and document["training"] is not None and not document.get("training_refused")
    code = main(["estimate", "--config", str(tmp_path), "--mode", "inference", "--vllm-version", "0.16"])
    _, err = capsys.readouterr()
    assert code == 2 and "vLLM 0.17 is the first" in err and err.count("\n") == 1


def test_the_catalogue_entries_serve_on_vllm() -> None:
    for model_id in ("qwen3.5-9b", "qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.6-35b-a3b"):
        plan = served(model_id)
        assert (plan.inference.engine, plan.inference.vllm_version) == (Engine.VLLM, VllmVersion.V0_19)
        assert estimate(plan).inference.buckets
    # Qwen3.6 35B-A3B has Qwen3.5 35B-A3B's widths: the same counts.
    assert (
        find_model("qwen3.6-35b-a3b").spec.checkpoint_params() == find_model("qwen3.5-35b-a3b").spec.checkpoint_params()
    )
    with pytest.raises(PlanError):
        replace(served("qwen3.5-9b"), inference=replace(served("qwen3.5-9b").inference, engine=Engine.SGLANG))

"""Hybrid recurrent models (core.hybrid) and vLLM's pool for them (core.serving.vllm_hybrid)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.errors import PlanError
from core.hfconfig import model_from_hf_config
from core.hybrid import (
    ATTENTION,
    GATED_DELTANET,
    MAMBA2,
    RECURRENT,
    HybridSpec,
    RecurrentMixer,
    hybrid_from_hf_config,
    state_words,
)
from core.serving.vllm_hybrid import hybrid_groups, hybrid_pages, hybrid_pool

DATA = Path(__file__).parents[1] / "data" / "hybrid"
# transformers 5.25.0's own parameter counts of each model built on the meta device (the file's "source";
# tools/measure/hybrid_meta_counts.py writes the file).
META: dict[str, Any] = json.loads((DATA / "meta_counts.json").read_text("utf-8"))["cases"]
# Published vLLM page figures, each with its source and settings (the file's records).
FIGURES: list[dict[str, Any]] = json.loads((DATA / "vllm_page_figures.json").read_text("utf-8"))["figures"]


def spec(case: str) -> HybridSpec:
    return hybrid_from_hf_config(META[case]["config"])


@pytest.mark.parametrize("case", sorted(META))
def test_parameters_equal_the_library_count(case: str) -> None:
    assert spec(case).params == META[case]["whole"]


def test_published_totals() -> None:
    # Model pages: Granite-4.0-H-Small "32.2B" (huggingface.co/ibm-granite/granite-4.0-h-small), NVIDIA-Nemotron-
    # Nano-9B-v2 "8.89B" (huggingface.co/nvidia/NVIDIA-Nemotron-Nano-9B-v2), Bamba-9B "9.78B".
    assert round(spec("granite-4.0-h-small").params / 1e9, 1) == 32.2
    assert round(spec("nemotron-nano-9b-v2").params / 1e9, 2) == 8.89
    assert round(spec("bamba-9b").params / 1e9, 2) == 9.78
    # Granite-4.0-H-Small's "9B active" (the model page): 72 experts, 10 routed, 40 MoE layers.
    assert round(spec("granite-4.0-h-small").active_params / 1e9) == 9


def test_layer_patterns_from_each_spelling() -> None:
    # Granite 4.0-H: layer_types "mamba" / "attention", attention at 5, 15, 25, 35 (the config.json's list).
    tiny = spec("granite-4.0-h-tiny")
    assert (tiny.attention_layers, tiny.recurrent_layers) == (4, 36)
    assert [i for i, k in enumerate(tiny.layers) if k == ATTENTION] == [5, 15, 25, 35]
    # Nemotron-Nano-9B-v2's hybrid_override_pattern: 27 M, 4 *, 25 - (its config.json string).
    nano = spec("nemotron-nano-9b-v2")
    assert (nano.attention_layers, nano.recurrent_layers, len(nano.layers)) == (4, 27, 56)
    # Qwen3-Next: full_attention_interval 4 over 48 layers: 12 attention, 36 Gated DeltaNet.
    nxt = spec("qwen3-next-80b-a3b")
    assert (nxt.attention_layers, nxt.recurrent_layers) == (12, 36)
    # Bamba-9B: attn_layer_indices [9, 18, 27].
    assert spec("bamba-9b").attention_layers == 3


def test_mamba2_state_per_sequence() -> None:
    # vllm 02d71083 mamba_utils.py mamba2_state_shape: conv (kernel - 1, inner + 2 * n_groups * d_state),
    # temporal (heads, head_dim, d_state). Granite-4.0-H-Tiny: inner 2 * 1536 = 3072, 1 group, state 128,
    # kernel 4, 48 heads of 64.
    tiny = spec("granite-4.0-h-tiny")
    assert tiny.mixer.kind == MAMBA2
    assert tiny.state_elements() == (3 * (3072 + 2 * 1 * 128), 48 * 64 * 128)
    # bf16 everywhere: 36 layers × (9,984 + 393,216) × 2 B = 29,030,400 B, whatever the context.
    assert tiny.state_bytes(2, 2) == 36 * (9984 + 393216) * 2
    # TP 2: n_groups 1 does not divide 2, so vLLM widens it to 2 (extra_groups_for_head_shards).
    assert tiny.state_elements(2) == (3 * (3072 + 2 * 2 * 128) // 2, 24 * 64 * 128)


def test_gated_deltanet_state_per_sequence() -> None:
    # vllm 02d71083 mamba_utils.py gated_delta_net_state_shape: conv (kernel - 1, 2 * k_heads * k_dim +
    # v_heads * v_dim), temporal (v_heads, v_dim, k_dim). Qwen3-Next-80B-A3B: 16 key heads, 32 value heads, 128 each.
    nxt = spec("qwen3-next-80b-a3b")
    assert nxt.mixer.kind == GATED_DELTANET
    assert nxt.state_elements() == (3 * (2 * 16 * 128 + 32 * 128), 32 * 128 * 128)
    assert nxt.state_elements(4) == (3 * (2 * 16 * 128 + 32 * 128) // 4, 8 * 128 * 128)


def test_nemotron_asks_for_a_float32_ssm_state() -> None:
    config = {**META["nemotron-nano-9b-v2"]["config"], "mamba_ssm_cache_dtype": "float32"}
    assert hybrid_from_hf_config(config).ssm_state_float32
    assert state_words(spec("nemotron-nano-9b-v2")) == "recurrent state (Mamba-2, 27 layers)"


@pytest.mark.parametrize(
    ("case", "change", "key"),
    [
        ("qwen3-next-80b-a3b", {"mlp_only_layers": [3]}, "config.mlp_only_layers"),
        ("nemotron-nano-9b-v2", {"moe_latent_size": 1024}, "config.moe_latent_size"),
        ("granite-4.0-h-tiny", {"layer_types": ["mamba", "sliding_attention"]}, "config.layer_types"),
        ("granite-4.0-h-tiny", {"mamba_d_head": 63}, "config.mamba_d_head"),
        ("nemotron-nano-9b-v2", {"hybrid_override_pattern": "M*X"}, "config.hybrid_override_pattern"),
        ("bamba-9b", {"attn_layer_indices": [40]}, "config.attn_layer_indices"),
    ],
)
def test_what_is_not_modelled_is_refused_by_key(case: str, change: dict[str, Any], key: str) -> None:
    config = {**META[case]["config"], **change}
    with pytest.raises(PlanError) as info:
        hybrid_from_hf_config(config)
    assert info.value.field == key


def _figure_spec(record: dict[str, Any]) -> tuple[HybridSpec, int, int, int]:
    """The widths a figure's record names, as a spec the page rule reads; (spec, kv, conv, temporal bytes)."""
    if isinstance(record["widths"], str) and record["widths"].startswith("resources/models.json entry "):
        # A Qwen3.5 / Qwen3.6 catalogue entry: its published config.json asks for a float32 delta-rule state
        # (mamba_ssm_dtype), which vLLM 0.17 on reads (Qwen3_5ForConditionalGenerationConfig).
        model = find_model(record["widths"].split()[-1]).spec.hybrid
        assert model is not None and model.ssm_state_float32
        kv = 1 if record["settings"]["kv_cache_dtype"].startswith("fp8") else 2
        return model, kv, 2, 4
    if isinstance(record["widths"], str):
        return spec("granite-4.0-h-small"), 2, 2, 2
    w = record["widths"]
    heads = w.get("mamba_n_heads", w.get("mamba_num_heads"))
    head_dim = w.get("mamba_d_head", w.get("mamba_head_dim"))
    state = w.get("mamba_d_state", w.get("ssm_state_size"))
    groups = w.get("mamba_n_groups", w.get("n_groups"))
    kernel = w.get("mamba_d_conv", w.get("conv_kernel"))
    mixer = RecurrentMixer(MAMBA2, heads, head_dim, state, groups, kernel, w["mamba_inner"])
    hybrid = HybridSpec(
        "granitemoehybrid", (ATTENTION, RECURRENT), 1, 1, 1, w["num_key_value_heads"], w["head_dim"], mixer, 0, 0
    )
    kv = 1 if record["settings"]["kv_cache_dtype"].startswith("fp8") else 2
    temporal = 4 if record["settings"]["mamba_ssm_cache_dtype"] == "float32" else 2
    return hybrid, kv, 2, temporal


@pytest.mark.parametrize("record", FIGURES, ids=[f["id"] for f in FIGURES])
def test_page_rule_reproduces_the_published_figures(record: dict[str, Any]) -> None:
    hybrid, kv, conv, temporal = _figure_spec(record)
    pages = hybrid_pages(hybrid, kv, conv, temporal, record["settings"]["tensor_parallel_size"])
    assert pages.block_size == record["logged"]["block_size"]
    if "mamba_padding_pct" in record["logged"]:
        assert f"{pages.padding_pct:.2f}" == record["logged"]["mamba_padding_pct"]


def test_pool_groups_blocks_and_report() -> None:
    # Granite-4.0-H-Tiny, bf16, 20 GiB of KV memory, max_model_len 131,072 (vllm 001cabc1 kv_cache_utils.py):
    # 4 attention and 36 mamba layers → groups of 4 (min, as 36 ≥ 1.5 · 4): 1 attention + 9 mamba groups.
    assert hybrid_groups(4, 36) == (4, 1, 9)
    # gpt-oss-20b's 12 + 13 (the source's own example) → one group of 13 each.
    assert hybrid_groups(12, 13) == (13, 1, 1)
    tiny = spec("granite-4.0-h-tiny")
    pages = hybrid_pages(tiny, 2, 2, 2)
    # page = 400 tokens · 2 · 4 KV heads · 128 · 2 B = 819,200 B; blocks = 20 GiB // 819,200 // 4 = 6,553.
    pool = hybrid_pool(pages, tiny, 20 * 2**30)
    assert (pages.page_bytes, pool.num_blocks) == (819_200, 6_553)
    # "GPU KV cache size": 6,553 // 10 groups · 400 = 262,000 tokens.
    assert pool.reported_tokens(131_072) == 262_000
    # A request: cdiv(131,072, 400) = 328 attention blocks + 9 mamba blocks; 6,553 / 337 = 19.45x.
    assert pool.blocks_per_request(131_072) == 337
    assert pool.max_concurrency(131_072) == pytest.approx(6_553 / 337)
    # What it holds: 337 blocks · 4 layers · 819,200 B.
    assert pool.bytes_per_request(131_072) == 337 * 4 * 819_200


@pytest.mark.parametrize("case", sorted(META))
def test_the_config_reader_plans_the_model_with_the_exact_count(case: str) -> None:
    # core.hfconfig builds a ModelSpec whose count is the library's own (meta_counts.json) and whose hybrid is
    # the one core.hybrid reads: the same stack and one sequence's state.
    model = model_from_hf_config(META[case]["config"])
    read = spec(case)
    assert model.total_params() == META[case]["whole"]
    assert model.active_params() == read.active_params
    hybrid = model.hybrid
    assert hybrid is not None
    assert (hybrid.attention_layers, hybrid.recurrent_layers) == (read.attention_layers, read.recurrent_layers)
    assert hybrid.state_elements() == read.state_elements() and model.kv_layers == read.attention_layers


def test_the_model_says_its_state_in_the_library_words() -> None:
    # Granite-4.0-H-Tiny: 36 · (9,984 + 393,216) · 2 B = 27.7 MiB of state a sequence (vllm 02d71083 shapes).
    tiny = model_from_hf_config(META["granite-4.0-h-tiny"]["config"]).hybrid
    assert tiny is not None
    assert f"{tiny.state_bytes(2, 2) / 2**20:.1f}" == "27.7"
    assert state_words(tiny) == "recurrent state (Mamba-2, 36 layers)"
    # Nemotron-H's class default mamba_ssm_cache_dtype float32 is carried: 27 · (36,864 · 2 + 1,310,720 · 4) B.
    nano = model_from_hf_config(META["nemotron-nano-9b-v2"]["config"])
    assert nano.recurrent_state_float32
    assert nano.hybrid is not None and f"{nano.hybrid.state_bytes(2, 4) / 2**20:.1f}" == "136.9"


def test_falcon_h1_runs_both_in_every_layer() -> None:
    # FalconH1DecoderLayer: a Mamba-2 mixer beside attention in each of the 24 layers, so 24 KV caches and
    # 24 states; vLLM's groups: 24 attention + 24 mamba layers → one group of 24 each (001cabc1 rule).
    falcon = spec("falcon-h1-1.5b-dims")
    assert (falcon.attention_layers, falcon.recurrent_layers, len(falcon.layers)) == (24, 24, 24)
    assert hybrid_groups(24, 24) == (24, 1, 1)
    # mamba_d_ssm 3,072 is the inner width (not mamba_expand · 2,048): conv 3 · (3,072 + 2 · 256), temporal
    # 48 · 64 · 256 (vllm 02d71083 mamba2_state_shape).
    assert falcon.state_elements() == (3 * (3072 + 2 * 256), 48 * 64 * 256)


def test_a_dense_nemotron_h_is_read_without_experts() -> None:
    # Nemotron Nano 9B v2's config.json (meta_counts.json): no "E" in hybrid_override_pattern, intermediate_size
    # 15,680; it still lists NemotronHConfig's default n_routed_experts 8 and moe_intermediate_size 7,688.
    nano = model_from_hf_config(META["nemotron-nano-9b-v2"]["config"])
    assert META["nemotron-nano-9b-v2"]["config"]["n_routed_experts"] == 8
    assert (nano.num_experts, nano.intermediate_size, nano.gated_mlp) == (1, 15680, False)


def test_typing_another_depth_drops_a_hybrids_layer_order() -> None:
    # The window's dimension editor (gui.forms.model): a new layer count says nothing of where the layers sit,
    # so the order is dropped ("", the counts alone) rather than the edit refused for a pattern of the old length.
    nemotron = find_model("nemotron-nano-9b-v2").spec  # 56 layers, 27 Mamba-2 and 4 attention (its pattern)
    deeper = nemotron.edited(num_layers=60, name="Nemotron (edited)")
    assert (deeper.num_layers, deeper.layer_pattern) == (60, "")
    assert nemotron.edited(hidden_size=4096).layer_pattern == nemotron.layer_pattern

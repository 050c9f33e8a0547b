"""Architectures people fine-tune and serve in 2025–2026, read from their config.json.

Each count below is the library's own: transformers 5.25.0's ``AutoModelForCausalLM.from_config`` built on the
meta device (``with torch.device("meta")``) and ``sum(p.numel() for p in model.parameters())``; a router's
``e_score_correction_bias`` (a buffer the checkpoints store) is added where the family has one, as the DeepSeek
entries count it. The configs are the catalogue's (resources/models.json), each entry citing where it was read.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.catalogue import find_model
from core.errors import PlanError
from core.hfconfig import RECURRENT_MODEL_TYPES, SUPPORTED_MODEL_TYPES, model_from_hf_config
from core.serving.kv import cached_positions, kv_bytes_per_token, kv_cache_bytes


def _config(model_id: str) -> dict[str, Any]:
    entry = find_model(model_id)
    assert entry is not None
    return dict(entry.config)


def test_glm_4_5_air_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Glm4MoeForCausalLM on the meta device: 106,852,245,504 parameters, plus 45 MoE
    # layers × 128 e_score_correction_bias = 5,760; the model card says 106B total, 12B active.
    spec = model_from_hf_config(_config("glm-4.5-air"))
    assert spec.architecture_params() == 106_852_245_504 + 45 * 128
    # config.json: first_k_dense_replace 1 (intermediate_size 10,944), 128 experts of 1,408, 8 per token,
    # n_shared_experts 1 (one ungated MLP of 1,408); 96 heads of head_dim 128 on hidden 4,096.
    assert (spec.first_k_dense_replace, spec.dense_intermediate_size) == (1, 10_944)
    assert (spec.num_experts, spec.experts_per_token, spec.intermediate_size) == (128, 8, 1_408)
    assert (spec.shared_expert_size, spec.shared_expert_gate, spec.router_bias) == (1_408, False, True)
    assert (spec.q_width, spec.num_kv_heads, spec.head_dim) == (12_288, 8, 128)
    # Glm4MoeAttention: q/k/v biased (attention_bias true), o_proj never; use_qk_norm false: no q/k norms.
    assert (spec.qkv_bias, spec.o_bias, spec.qk_norm) == (True, False, "")
    # Model card: 12B active; 12,803,372,672 without the input embedding (151,552 × 4,096 = 620,756,992).
    assert spec.active_params() - spec.embedding_params() == 12_803_372_672


def test_glm_4_5_air_kv_cache_by_hand() -> None:
    spec = model_from_hf_config(_config("glm-4.5-air"))
    # K and V of 8 heads × 128 in bf16: 2 × 8 × 128 × 2 B = 4,096 B a layer; 46 layers → 188,416 B a token.
    assert kv_bytes_per_token(spec, 2) == 188_416
    # 32,768 tokens, no window: 188,416 × 32,768 = 6,174,015,488 B.
    assert kv_cache_bytes(spec, 32_768, 1, 2) == 6_174_015_488


def test_glm_4_5_qk_norm_flag_adds_a_head_wide_norm_pair() -> None:
    # GLM-4.5 (355B) sets use_qk_norm: Glm4MoeAttention.q_norm / k_norm = Glm4MoeRMSNorm(head_dim), 2 × 128 a layer.
    config = _config("glm-4.5-air")
    plain = model_from_hf_config(config)
    normed = model_from_hf_config(dict(config, use_qk_norm=True))
    assert normed.qk_norm == "head"
    assert normed.architecture_params() - plain.architecture_params() == 46 * 2 * 128


def test_glm_4_5_355b_counts_what_transformers_builds() -> None:
    # GLM-4.5's shapes as slime's Megatron script for "glm4.5-355B-A32B" states them (zyzshishui/slime
    # scripts/models/glm4.5-355B-A32B.sh, code search): 3 dense layers then 89 MoE, hidden 5,120, FFN 12,288,
    # 96 heads, 8 query groups of 128, qk layernorm, 160 experts of 1,536, top 8, one shared of 1,536, vocabulary
    # 151,552, untied, q/k/v biases. transformers 5.25.0 Glm4MoeForCausalLM on the meta device: 352,797,814,784
    # parameters, plus 89 × 160 e_score_correction_bias = 14,240; model card: 355B total (its MTP layer too), 32B
    # active.
    config = dict(_config("glm-4.5-air"), first_k_dense_replace=3, hidden_size=5120, intermediate_size=12288)
    config.update(moe_intermediate_size=1536, n_routed_experts=160, num_hidden_layers=92, use_qk_norm=True)
    spec = model_from_hf_config(config)
    assert spec.architecture_params() == 352_797_814_784 + 89 * 160
    assert round((spec.active_params() - spec.embedding_params()) / 1e9, 1) == 32.9


def test_glm_4_5_refuses_a_model_of_dense_layers_only() -> None:
    with pytest.raises(PlanError, match="first_k_dense_replace"):
        model_from_hf_config(dict(_config("glm-4.5-air"), first_k_dense_replace=46))


def test_a_given_head_dim_need_not_divide_the_width() -> None:
    # The defect: head_dim's default (hidden / heads) was computed, and refused, even when config.json gave
    # head_dim. GLM-4.5-Air: hidden 4,096 over 96 heads does not divide; head_dim 128 is given.
    config = _config("glm-4.5-air")
    assert model_from_hf_config(config).head_dim == 128
    # Absent, the division is still required and its refusal names the key.
    with pytest.raises(PlanError, match="config.num_attention_heads"):
        model_from_hf_config({k: v for k, v in config.items() if k != "head_dim"})


def test_olmoe_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 OlmoeForCausalLM on the meta device: 6,919,161,856 (HF page 6.92B; paper: 6.9B total).
    spec = model_from_hf_config(_config("olmoe-1b-7b"))
    assert spec.architecture_params() == 6_919_161_856
    # OlmoeAttention.q_norm = OlmoeRMSNorm(hidden_size): 2,048 + 2,048 (k over 16 KV heads × 128) a layer.
    assert (spec.qk_norm, spec.qk_norm_params()) == ("projection", 4_096)
    assert (spec.num_experts, spec.experts_per_token, spec.shared_expert_size) == (64, 8, 0)
    # Paper: 1.3B active; 16 layers × 56 idle experts × 3 × 2,048 × 1,024 = 5,637,144,576 idle.
    assert spec.active_params() == 6_919_161_856 - 5_637_144_576


def test_olmoe_kv_cache_by_hand() -> None:
    spec = model_from_hf_config(_config("olmoe-1b-7b"))
    # 16 KV heads × 128, K and V, bf16: 8,192 B a layer; 16 layers → 131,072 B a token.
    assert kv_bytes_per_token(spec, 2) == 131_072


def test_olmoe_refuses_a_head_width_its_projection_norm_cannot_match() -> None:
    # OlmoeAttention.q_norm is RMSNorm(hidden_size) whatever head_dim says: with 16 × 64 ≠ 2,048 the
    # checkpoint's q_norm would not fit the projection, so the config is refused, naming head_dim.
    with pytest.raises(PlanError, match="config.head_dim"):
        model_from_hf_config(dict(_config("olmoe-1b-7b"), head_dim=64))


def test_starcoder2_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Starcoder2ForCausalLM on the meta device: 3,030,371,328 (HF page: 3.03B), tied head.
    spec = model_from_hf_config(_config("starcoder2-3b"))
    assert spec.architecture_params() == 3_030_371_328
    assert (spec.norm, spec.gated_mlp, spec.tie_embeddings) == ("layernorm", False, True)
    assert (spec.qkv_bias, spec.o_bias, spec.mlp_bias) == (True, True, True)
    # StarCoder2-15B's shapes (40 layers, 6,144, 24,576, 48 heads, 4 KV heads, untied): transformers 5.25.0
    # counts 15,957,889,024 on the meta device.
    big = dict(_config("starcoder2-3b"), hidden_size=6144, intermediate_size=24576, num_hidden_layers=40)
    big.update(num_attention_heads=48, num_key_value_heads=4, tie_word_embeddings=False)
    assert model_from_hf_config(big).architecture_params() == 15_957_889_024


def test_starcoder2_window_caps_the_cache_on_every_layer() -> None:
    spec = model_from_hf_config(_config("starcoder2-3b"))
    assert (spec.sliding_window, spec.sliding_window_layers) == (4_096, 30)
    # 2 KV heads × 128, K and V, bf16: 1,024 B a layer-position. 16,384 tokens, window 4,096 on all 30
    # layers: 30 × 4,096 = 122,880 positions → 125,829,120 B (120 MiB), a quarter of the unwindowed cache.
    assert cached_positions(spec, 16_384) == 122_880
    assert kv_cache_bytes(spec, 16_384, 1, 2) == 125_829_120
    # sliding_window null: full attention on every layer.
    full = model_from_hf_config(dict(_config("starcoder2-3b"), sliding_window=None))
    assert full.sliding_window is None and cached_positions(full, 16_384) == 30 * 16_384


def test_starcoder2_without_biases() -> None:
    # use_bias false: Starcoder2Attention and Starcoder2MLP drop every linear bias; the LayerNorms keep theirs.
    # Per layer: q 3,072 + k 256 + v 256 + o 3,072 + c_fc 12,288 + c_proj 3,072 = 22,016 fewer.
    with_bias = model_from_hf_config(_config("starcoder2-3b"))
    without = model_from_hf_config(dict(_config("starcoder2-3b"), use_bias=False))
    assert with_bias.architecture_params() - without.architecture_params() == 30 * 22_016


@pytest.mark.parametrize("model_type", sorted(RECURRENT_MODEL_TYPES))
def test_hybrid_recurrent_families_are_refused_with_what_is_missing(model_type: str) -> None:
    config = {"model_type": model_type, "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 4}
    with pytest.raises(PlanError) as caught:
        model_from_hf_config(config)
    message = str(caught.value)
    assert "recurrent state" in message and "unknown architecture" not in message
    assert model_type not in SUPPORTED_MODEL_TYPES


def test_seed_oss_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 SeedOssForCausalLM on the meta device: 36,151,104,512 (model card: 36B).
    spec = model_from_hf_config(_config("seed-oss-36b-instruct"))
    assert spec.architecture_params() == 36_151_104_512
    # SeedOssConfig's defaults, which the config leaves unstated: attention_bias true (q/k/v), attention_out_bias
    # false (o_proj), mlp_bias false; head_dim 128 is given (80 × 128 = 10,240 wide queries on hidden 5,120).
    assert (spec.qkv_bias, spec.o_bias, spec.mlp_bias, spec.q_width) == (True, False, False, 10_240)
    # Without head_dim, SeedOssConfig's default is 128, not 5,120 / 80 = 64.
    unstated = {k: v for k, v in _config("seed-oss-36b-instruct").items() if k != "head_dim"}
    assert model_from_hf_config(unstated).head_dim == 128
    # o_proj's bias when attention_out_bias is true: 5,120 a layer.
    with_o = model_from_hf_config(dict(_config("seed-oss-36b-instruct"), attention_out_bias=True))
    assert with_o.architecture_params() - spec.architecture_params() == 64 * 5_120


def test_seed_oss_kv_cache_by_hand() -> None:
    spec = model_from_hf_config(_config("seed-oss-36b-instruct"))
    # 8 KV heads × 128, K and V, bf16: 4,096 B a layer; 64 layers → 262,144 B (256 KiB) a token.
    assert kv_bytes_per_token(spec, 2) == 262_144


# OLMo 3's block as a public test quotes Olmo-3's config.json (code search: "Olmo-3: layer_types 3 sliding + 1
# full": hidden 4,096, 32 heads and 32 KV heads, sliding_window 4,096, 8 layers of the 3:1 pattern, YaRN ×8
# over 8,192); intermediate_size and vocab_size are Olmo3Config's defaults (11,008 and 50,304, transformers
# 5.25.0 models/olmo3/configuration_olmo3.py), written out because the reader requires them.
_OLMO3 = {
    "architectures": ["Olmo3ForCausalLM"],
    "model_type": "olmo3",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_hidden_layers": 8,
    "rope_theta": 500000,
    "sliding_window": 4096,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"],
    "intermediate_size": 11008,
    "vocab_size": 50304,
}


def test_olmo3_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Olmo3ForCausalLM on the meta device: 2,031,226,880.
    spec = model_from_hf_config(_OLMO3)
    assert spec.architecture_params() == 2_031_226_880
    # OLMo 2's block: q/k norms over the projection, norms after the sub-blocks only.
    assert (spec.qk_norm, spec.post_norm) == ("projection", True)
    assert (spec.sliding_window, spec.sliding_window_layers) == (4_096, 6)


def test_olmo3_window_by_hand() -> None:
    spec = model_from_hf_config(_OLMO3)
    # 32 KV heads × 128, K and V, bf16: 16,384 B a layer-position. 65,536 tokens: 2 full layers keep 65,536
    # positions each, 6 sliding ones 4,096 each: 155,648 positions → 2,550,136,832 B.
    assert cached_positions(spec, 65_536) == 2 * 65_536 + 6 * 4_096
    assert kv_cache_bytes(spec, 65_536, 1, 2) == 2_550_136_832
    # Without layer_types, Olmo3Config makes every fourth layer full: the same 6 of 8 slide.
    default = model_from_hf_config({k: v for k, v in _OLMO3.items() if k != "layer_types"})
    assert default.sliding_window_layers == 6
    # sliding_window null: Olmo3Attention.sliding_window is None on every layer.
    assert model_from_hf_config(dict(_OLMO3, sliding_window=None)).sliding_window is None


@pytest.mark.parametrize(
    "layer_types",
    [["sliding_attention"] * 7, ["sliding_attention"] * 7 + ["chunked_attention"], "sliding_attention", [1] * 8],
)
def test_olmo3_refuses_layer_types_it_cannot_read(layer_types: object) -> None:
    with pytest.raises(PlanError, match="config.layer_types"):
        model_from_hf_config(dict(_OLMO3, layer_types=layer_types))


# baidu/ERNIE-4.5-0.3B-PT's config.json as a public repository keeps a copy (code search: "Ernie4_5_ForCausalLM",
# hidden 1,024, 18 layers, head_dim 128, tie_word_embeddings true).
_ERNIE_03B = {
    "architectures": ["Ernie4_5_ForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "max_position_embeddings": 131072,
    "model_type": "ernie4_5",
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "num_hidden_layers": 18,
    "rms_norm_eps": 1e-05,
    "vocab_size": 103424,
    "rope_theta": 500000,
    "use_bias": False,
    "tie_word_embeddings": True,
}


def test_ernie_4_5_dense_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Ernie4_5ForCausalLM on the meta device: 360,748,032 (the model card's 0.36B).
    spec = model_from_hf_config(_ERNIE_03B)
    assert spec.architecture_params() == 360_748_032
    assert (spec.q_width, spec.kv_width, spec.tie_embeddings) == (2_048, 256, True)
    # Ernie4_5Config ties the head unless told otherwise; use_bias puts a bias on q, k, v, o, gate, up, down:
    # 2,048 + 256 + 256 + 1,024 + 3,072 + 3,072 + 1,024 = 10,752 a layer.
    untied_default = model_from_hf_config({k: v for k, v in _ERNIE_03B.items() if k != "tie_word_embeddings"})
    assert untied_default.tie_embeddings
    biased = model_from_hf_config(dict(_ERNIE_03B, use_bias=True))
    assert biased.architecture_params() - spec.architecture_params() == 18 * 10_752


def test_ernie_4_5_moe_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Ernie4_5_MoeForCausalLM on the meta device: 21,825,437,888 (card: 21B total, 3B active),
    # e_score_correction_bias counted (a parameter there): 27 MoE layers × 64.
    spec = model_from_hf_config(_config("ernie-4.5-21b-a3b"))
    assert spec.architecture_params() == 21_825_437_888
    assert (spec.first_k_dense_replace, spec.dense_intermediate_size, spec.moe_layers) == (1, 12_288, 27)
    assert (spec.num_experts, spec.experts_per_token, spec.intermediate_size) == (64, 6, 1_536)
    # moe_num_shared_experts 2 of 1,536: one ungated MLP of 3,072.
    assert (spec.shared_expert_size, spec.shared_expert_gate, spec.router_bias) == (3_072, False, True)
    # Card: 3B activated; 3,087,384,768 without the (tied) embedding.
    assert spec.active_params() - spec.embedding_params() == 3_087_384_768


def test_ernie_4_5_moe_kv_cache_by_hand() -> None:
    spec = model_from_hf_config(_config("ernie-4.5-21b-a3b"))
    # 4 KV heads × 128, K and V, bf16: 2,048 B a layer; 28 layers → 57,344 B a token; 131,072 tokens → 7 GiB.
    assert kv_bytes_per_token(spec, 2) == 57_344
    assert kv_cache_bytes(spec, 131_072, 1, 2) == 7 * 2**30


@pytest.mark.parametrize(
    ("key", "value"),
    [("moe_layer_interval", 2), ("moe_layer_end_index", 20), ("moe_layer_start_index", 28), ("use_bias", True)],
)
def test_ernie_4_5_moe_refuses_layouts_it_cannot_express(key: str, value: object) -> None:
    # Experts on every other layer, or stopping before the last, or biases beside experts: not the planner's
    # "dense first layers, then experts on each" MoE, so refused naming the key.
    with pytest.raises(PlanError, match=f"config.{key}"):
        model_from_hf_config(dict(_config("ernie-4.5-21b-a3b"), **{key: value}))


# microsoft/Phi-3.5-MoE-instruct's config.json as a public repository's test trims it (code search: "Trimmed
# config matching the phi-3.5-moe-instruct HuggingFace checkpoint"): PhimoeConfig's defaults fill the rest.
_PHI35_MOE = {
    "model_type": "phimoe",
    "vocab_size": 32064,
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "rope_theta": 10000.0,
}


def test_phimoe_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 PhimoeForCausalLM on the meta device: 41,872,793,600 (model card: 42B total, 6.6B active).
    spec = model_from_hf_config(_PHI35_MOE)
    assert spec.architecture_params() == 41_872_793_600
    assert (spec.norm, spec.num_experts, spec.experts_per_token, spec.router_bias) == ("layernorm", 16, 2, False)
    assert spec.active_params() == 6_640_640_000
    # attention_bias and lm_head_bias (PhimoeAttention, PhimoeForCausalLM.lm_head): transformers counts
    # 41,873,153,344, that is 32 × (4,096 + 1,024 + 1,024 + 4,096) + 32,064 more.
    biased = model_from_hf_config(dict(_PHI35_MOE, attention_bias=True, lm_head_bias=True))
    assert biased.architecture_params() == 41_873_153_344 == 41_872_793_600 + 32 * 10_240 + 32_064
    assert (biased.qkv_bias, biased.o_bias, biased.head_bias) == (True, True, True)


def test_phimoe_window_and_kv_cache_by_hand() -> None:
    # 8 KV heads × 128, K and V, bf16: 4,096 B a layer; 32 layers → 131,072 B a token.
    assert kv_bytes_per_token(model_from_hf_config(_PHI35_MOE), 2) == 131_072
    # A window shorter than the context applies to every layer (PhimoeAttention); one as long as it, none.
    windowed = model_from_hf_config(dict(_PHI35_MOE, sliding_window=4096, max_position_embeddings=131072))
    assert (windowed.sliding_window, windowed.sliding_window_layers) == (4_096, 32)
    whole = model_from_hf_config(dict(_PHI35_MOE, sliding_window=131072, max_position_embeddings=131072))
    assert whole.sliding_window is None


# ibm-granite/granite-3.1-3b-a800m-instruct's config.json fields as a public repository's planner fixture
# quotes them (code search: "ibm-granite/granite-3.1-3b-a800m-instruct (config.json, fields the planner reads)").
_GRANITE_MOE = {
    "architectures": ["GraniteMoeForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 1536,
    "intermediate_size": 512,
    "max_position_embeddings": 131072,
    "model_type": "granitemoe",
    "num_attention_heads": 24,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 40,
    "rope_theta": 10000000.0,
    "tie_word_embeddings": True,
    "vocab_size": 49155,
}


def test_granitemoe_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 GraniteMoeForCausalLM on the meta device: 3,298,793,472 (model card: 3.3B, 800M active).
    spec = model_from_hf_config(_GRANITE_MOE)
    assert spec.architecture_params() == 3_298_793_472
    assert (spec.num_experts, spec.experts_per_token, spec.tie_embeddings) == (40, 8, True)
    # 32 layers × 32 idle experts × 3 × 1,536 × 512 = 2,415,919,104 idle: 882,874,368 active.
    assert spec.active_params() == 3_298_793_472 - 2_415_919_104


def test_granitemoe_kv_cache_by_hand() -> None:
    # head_dim 1,536 / 24 = 64; 8 KV heads, K and V, bf16: 2,048 B a layer; 32 layers → 65,536 B a token.
    assert kv_bytes_per_token(model_from_hf_config(_GRANITE_MOE), 2) == 65_536


# LGAI-EXAONE/EXAONE-4.0-32B's config.json as TensorRT-LLM's EXAONE 4 test copies it (code search:
# "EXAONE4_SINGLE_LAYER_CONFIG"), with the two values that test shrinks put back as its own comments give them:
# num_hidden_layers 64 ("we use 4 instead of 64") and sliding_window 4,096 ("we use 4 instead of 4096").
_EXAONE4_32B = {
    "architectures": ["Exaone4ForCausalLM"],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "intermediate_size": 27392,
    "max_position_embeddings": 131072,
    "model_type": "exaone4",
    "num_attention_heads": 40,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000,
    "sliding_window": 4096,
    "sliding_window_pattern": 4,
    "tie_word_embeddings": False,
    "vocab_size": 102400,
}


def test_exaone4_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 Exaone4ForCausalLM on the meta device: 32,003,216,384 (model card: 32B).
    spec = model_from_hf_config(_EXAONE4_32B)
    assert spec.architecture_params() == 32_003_216_384
    # q/k norms of head_dim, norms after the sub-blocks only (OLMo 2's layout).
    assert (spec.qk_norm, spec.post_norm, spec.norms_per_layer) == ("head", True, 2)
    # sliding_window_pattern 4: every fourth layer global, 48 of 64 local (Exaone4Config.__post_init__).
    assert (spec.sliding_window, spec.sliding_window_layers) == (4_096, 48)


def test_exaone4_window_by_hand() -> None:
    spec = model_from_hf_config(_EXAONE4_32B)
    # 8 KV heads × 128, K and V, bf16: 4,096 B a layer-position. 131,072 tokens: 16 global layers keep every
    # position, 48 local ones 4,096: 2,293,760 positions → 9,395,240,960 B.
    assert cached_positions(spec, 131_072) == 16 * 131_072 + 48 * 4_096
    assert kv_cache_bytes(spec, 131_072, 1, 2) == 9_395_240_960


@pytest.mark.parametrize(
    ("overrides", "sliding"),
    [
        ({"sliding_window_pattern": "LLLG"}, 48),  # the config's documentation: "LLLG" is the same as 4
        ({"sliding_window_pattern": "LG"}, 32),
        ({"layer_types": ["sliding_attention"] * 60 + ["full_attention"] * 4}, 60),
        ({"sliding_window": None}, 0),  # Exaone4Config: no window, every layer full
    ],
)
def test_exaone4_window_patterns(overrides: dict[str, Any], sliding: int) -> None:
    assert model_from_hf_config(dict(_EXAONE4_32B, **overrides)).sliding_window_layers == sliding


@pytest.mark.parametrize("pattern", ["LLXG", 0, -4, 2.5, ["L"]])
def test_exaone4_refuses_a_pattern_it_cannot_read(pattern: object) -> None:
    with pytest.raises(PlanError, match="config.sliding_window_pattern"):
        model_from_hf_config(dict(_EXAONE4_32B, sliding_window_pattern=pattern))


# tencent/Hunyuan-7B-Instruct's config.json fields as a public repository's fixture quotes them (code search:
# "HUNYUAN_7B_HF": hidden 4,096, 32 layers, 8 KV heads of 128, vocabulary 128,167, tied).
_HUNYUAN_7B = {
    "model_type": "hunyuan_v1_dense",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128167,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
}


def test_hunyuan_v1_dense_counts_what_transformers_builds() -> None:
    # transformers 5.25.0 HunYuanDenseV1ForCausalLM on the meta device: 7,504,568,320 (model card: 7B).
    spec = model_from_hf_config(_HUNYUAN_7B)
    assert spec.architecture_params() == 7_504_568_320
    # query_layernorm / key_layernorm of head_dim in every layer: 2 × 128.
    assert (spec.qk_norm, spec.qk_norm_params(), spec.tie_embeddings) == ("head", 256, True)
    # 8 KV heads × 128, K and V, bf16: 4,096 B a layer; 32 layers → 131,072 B a token.
    assert kv_bytes_per_token(spec, 2) == 131_072


def test_hunyuan_cross_layer_attention_is_refused() -> None:
    # use_cla shares K and V between layers (Hunyuan-Large): the cache would be smaller than one a layer.
    with pytest.raises(PlanError, match="config.use_cla"):
        model_from_hf_config(dict(_HUNYUAN_7B, use_cla=True))


@pytest.mark.parametrize(
    "config",
    [_config("olmoe-1b-7b"), _OLMO3, _HUNYUAN_7B, _GRANITE_MOE, _EXAONE4_32B],
    ids=lambda c: str(c["model_type"]),
)
def test_a_stray_bias_flag_adds_no_tensor_the_family_lacks(config: dict[str, Any]) -> None:
    # Their MLPs and experts are built with bias=False (transformers 5.25.0 modeling_<type>.py) and their configs
    # have no mlp_bias, so one in config.json changes nothing; EXAONE 4's attention has no bias either.
    plain = model_from_hf_config(config)
    assert model_from_hf_config(dict(config, mlp_bias=True)).architecture_params() == plain.architecture_params()
    if config["model_type"] == "exaone4":
        assert (
            model_from_hf_config(dict(config, attention_bias=True)).architecture_params() == plain.architecture_params()
        )

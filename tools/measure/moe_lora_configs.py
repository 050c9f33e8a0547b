"""The tiny mixture-of-experts configs tools/measure/moe_lora_targets.py builds (issue 22), as config.json keys, kept
apart from torch so that tests/core/test_moe_lora_targets.py reads the same ones (tests/data/moe_lora/ holds what PEFT
adapted on each): hidden 64, expert MLP 32, 4 experts (top 2; Llama 4 top 1), 2 layers, LoRA rank 8. DENSE_FIRST makes
the families that hold dense layers beside their MoE ones build layer 0 dense (an MLP of DENSE_FFN) and layer 1 MoE
(branch h83layers)."""

from __future__ import annotations

from typing import Any, Final

D, FFN, E, K, LAYERS, RANK = 64, 32, 4, 2, 2, 8
DENSE_FFN = 48  # the dense layers' MLP width, apart from the experts' FFN
# fmt: off
COMMON: Final[dict[str, Any]] = dict(
    hidden_size=D, intermediate_size=FFN, num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=128, max_position_embeddings=64,
)
FAMILIES: Final[dict[str, dict[str, Any]]] = {
    "mixtral": dict(num_local_experts=E, num_experts_per_tok=K),
    "qwen3_moe": dict(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=FFN, head_dim=16),
    "qwen2_moe": dict(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=FFN,
                      shared_expert_intermediate_size=FFN),
    "olmoe": dict(num_experts=E, num_experts_per_tok=K),
    "gpt_oss": dict(num_local_experts=E, num_experts_per_tok=K, head_dim=16, layer_types=["full_attention"] * LAYERS),
    "deepseek_v3": dict(n_routed_experts=E, num_experts_per_tok=K, moe_intermediate_size=FFN, n_shared_experts=1,
                        first_k_dense_replace=0, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16, n_group=1, topk_group=1, num_key_value_heads=4),
    "glm4_moe": dict(n_routed_experts=E, num_experts_per_tok=K, moe_intermediate_size=FFN, n_shared_experts=1,
                     first_k_dense_replace=0, head_dim=16, n_group=1, topk_group=1),
    "ernie4_5_moe": dict(moe_num_experts=E, moe_k=K, moe_intermediate_size=FFN, moe_num_shared_experts=1,
                         moe_layer_start_index=0, head_dim=16),
    "llama4_text": dict(num_local_experts=E, num_experts_per_tok=1, intermediate_size_mlp=FFN,
                        interleave_moe_layer_step=1, head_dim=16, no_rope_layers=[1] * LAYERS),
}
# Branch h87moe: families measured for moe_lora_targets only (whether all-linear reaches their routers: Phi-MoE's
# PhimoeTopKRouter, GraniteMoE's router), not for moe_bnb_quant. LORA_FAMILIES: the rows of tests/data/moe_lora/.
ROUTER_FAMILIES: Final[dict[str, dict[str, Any]]] = {
    "phimoe": dict(num_local_experts=E, num_experts_per_tok=K, head_dim=16),
    "granitemoe": dict(num_local_experts=E, num_experts_per_tok=K, head_dim=16),
}
LORA_FAMILIES: Final[dict[str, dict[str, Any]]] = {**FAMILIES, **ROUTER_FAMILIES}
# fmt: on

# The families whose real checkpoints hold dense layers beside the MoE ones, built with layer 0 dense and layer 1
# MoE: DeepSeek-V3 and GLM-4.5 (``first_k_dense_replace``: DeepseekV3MLP / Glm4MoeMLP of ``intermediate_size`` below
# it), ERNIE 4.5 (``moe_layer_start_index``: Ernie4_5_MoeMLP of ``intermediate_size`` below it), Llama 4
# (``interleave_moe_layer_step`` 2: every second layer MoE from layer 1, the others Llama4TextMLP of
# ``intermediate_size_mlp``), as transformers 4.57.1 and 5.25.0 build them. Applied over FAMILIES' keys.
# fmt: off
DENSE_FIRST: Final[dict[str, dict[str, Any]]] = {
    "deepseek_v3": dict(first_k_dense_replace=1, intermediate_size=DENSE_FFN),
    "glm4_moe": dict(first_k_dense_replace=1, intermediate_size=DENSE_FFN),
    "ernie4_5_moe": dict(moe_layer_start_index=1, intermediate_size=DENSE_FFN),
    "llama4_text": dict(interleave_moe_layer_step=2, intermediate_size_mlp=DENSE_FFN),
}
# fmt: on

"""GPT-2's eager attention runs its softmax in the scores' own dtype (issue 22, held-out GPT-2 SDPA benchmark).

Read from huggingface/transformers: v4.42.0 ``models/gpt2/modeling_gpt2.py`` ``GPT2Attention._attn`` and v4.57.1 /
v5.0.0 ``eager_attention_forward`` call ``nn.functional.softmax(attn_weights, dim=-1)`` with no float32 dtype, then
``attn_weights.type(value.dtype)`` (a no-op outside mixed precision) and ``attn_dropout``; the Llama-style
``eager_attention_forward`` (v4.57.1 ``models/llama/modeling_llama.py``) takes ``softmax(..., dtype=torch.float32)
.to(query.dtype)``. With 16-bit weights and no autocast GPT-2 keeps one 16-bit probability tensor for the softmax
backward, dropout its 1-byte mask and its 16-bit output; under autocast softmax runs in float32 (autocast's float32
op list) and the plan keeps the float32 probabilities, as for Llama.
"""

from __future__ import annotations

from core.dtypes import Autocast, Dtype
from core.plan import Attention, Plan, Preset
from core.presets import plan_for_model
from core.training.activations import gpt2_softmax_in_scores_dtype, layer_activations

# gpt2-large: 20 heads (openai-community/gpt2-large config.json n_head 20), attn_pdrop 0.1.
HEADS = 20


def _plan(model: str, preset: Preset, b: int = 1, s: int = 1024) -> Plan:
    plan = plan_for_model(model, preset=preset).with_workload(micro_batch=b, seq_len=s)
    return plan.with_changes(attention=Attention.EAGER)


def _scores_sized(plan: Plan) -> list[float]:
    acts = layer_activations(plan, True)
    return [t.bytes for t in acts.items if "probabilities" in t.label]


def test_gpt2_in_16_bits_keeps_16_bit_probabilities() -> None:
    fp16 = _plan("gpt2-large", Preset.CUSTOM).with_changes(
        weight_dtype=Dtype.FP16, base_dtype=Dtype.FP16, autocast=Autocast.NONE
    )
    scores = 1 * HEADS * 1024 * 1024
    assert gpt2_softmax_in_scores_dtype(fp16)
    # The softmax's 16-bit output (2 B), then dropout's mask and output (1 + 2 B): 5 B an element, not 4 + 1 + 2.
    assert _scores_sized(fp16) == [scores * 2, scores * 3]


def test_gpt2_under_autocast_and_llama_keep_float32_probabilities() -> None:
    mixed = _plan("gpt2-large", Preset.FP32_AUTOCAST_BF16)
    assert not gpt2_softmax_in_scores_dtype(mixed)
    scores = 1 * HEADS * 1024 * 1024
    assert _scores_sized(mixed) == [scores * 4, scores * 3]
    # Llama 3.1 8B in pure bf16 (32 heads, no attention dropout): float32 softmax, then its 16-bit cast.
    llama = _plan("llama-3.1-8b", Preset.PURE_BF16)
    assert not gpt2_softmax_in_scores_dtype(llama)
    assert _scores_sized(llama) == [32 * 1024 * 1024 * 4, 32 * 1024 * 1024 * 2]

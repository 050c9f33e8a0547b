"""A frozen-layers plan whose trained blocks are float32 over a bf16 base, under bf16 autocast (issue 22 item 4).

LLaMA-Factory casts the trained blocks of a freeze run to float32 (v0.9.4 model/adapter.py _setup_freeze_tuning;
v1 plugins/model_plugins/peft.py get_freeze_model); the embedding and the frozen blocks stay bf16. The planner took the
residual stream at the trained blocks' float32. tools/measure/freeze_cast_residual.py (CPU autocast, torch 2.13.0,
transformers 5.25.0, a 4-layer Llama 128 wide, top 2 trained, batch 2 × 64) measured each trained float32 block's
input and output in bf16, and the top block keeping 1,190,912 B against 1,256,448 B for the all-float32 model:
65,536 B less, two norms' normalised values (LlamaRMSNorm: ``self.weight * hidden_states.to(input_dtype)``) at
N·d × 2 rather than × 4. Each test but the last two failed before.
"""

from __future__ import annotations

from dataclasses import replace

from core.hfconfig import model_from_hf_config
from core.plan import Autocast, Dtype, Method, Preset
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.activations import layer_activations

# The measured model (tools/measure/freeze_cast_residual.py CONFIG).
TINY = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 128,
    "intermediate_size": 352, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "bfloat16",
}  # fmt: skip


def _frozen(weight: Dtype, base: Dtype, autocast: Autocast, checkpointing: bool = False):  # type: ignore[no-untyped-def]
    plan = replace(default_plan(), model=model_from_hf_config(TINY, name="tiny llama"))
    return plan.with_changes(
        method=Method.FROZEN, frozen_layers=2, checkpointing=checkpointing,
        workload=replace(plan.workload, micro_batch=2, seq_len=64),
        preset=Preset.CUSTOM, weight_dtype=weight, base_dtype=base, autocast=autocast,
    )  # fmt: skip


def _block_bytes(plan) -> float:  # type: ignore[no-untyped-def]
    return sum(term.bytes for term in layer_activations(plan, True).items)


def test_the_residual_is_the_bf16_base_and_the_block_keeps_less() -> None:
    cast = _frozen(Dtype.FP32, Dtype.BF16, Autocast.BF16)
    dt = dtypes_for(cast)
    assert dt.residual == 2 and dt.mode == "mixed"  # bf16 hidden states; the float32 norm outputs still cast per matmul
    whole = _frozen(Dtype.FP32, Dtype.FP32, Autocast.BF16)
    assert dtypes_for(whole).residual == 4
    n_d = 2 * 64 * 128
    assert _block_bytes(whole) - _block_bytes(cast) == 2 * n_d * 2 == 65_536  # measured: 65,536 B (top block)


def test_checkpointed_block_inputs_are_bf16() -> None:
    # torch.utils.checkpoint keeps each trained block's input: the bf16 hidden states the frozen part hands on.
    cast = _frozen(Dtype.FP32, Dtype.BF16, Autocast.BF16, checkpointing=True)
    whole = _frozen(Dtype.FP32, Dtype.FP32, Autocast.BF16, checkpointing=True)
    assert dtypes_for(cast).residual * 2 == dtypes_for(whole).residual


def test_without_autocast_the_residual_stays_the_models() -> None:
    # No autocast: the float32 blocks' outputs are float32 and the residual add promotes (bf16 + float32), so the
    # float32 model's rule stands (LLaMA-Factory's run without autocast fails at the bf16 head: docs/CONFIGS.md).
    assert dtypes_for(_frozen(Dtype.FP32, Dtype.BF16, Autocast.NONE)).residual == 4


def test_a_base_in_another_16_bit_dtype_than_autocast_promotes() -> None:
    # fp16 hidden states + bf16 matmul outputs promote to float32 at the residual add: the model's dtype stands.
    assert dtypes_for(_frozen(Dtype.FP32, Dtype.FP16, Autocast.BF16)).residual == 4

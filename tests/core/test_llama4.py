"""Llama 4 (``llama4_text``, and the image-text ``llama4`` around it) stays refused, with what is missing.

Counts are transformers 5.25.0's own, the model built on the meta device (tests/data/arch/meta_counts.json, its
"source" says how): Llama4TextConfig's defaults are Llama 4 Scout's text model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.errors import PlanError
from core.hfconfig import model_from_hf_config
from core.model import ModelSpec

_COUNTS = Path(__file__).parents[1] / "data" / "arch" / "meta_counts.json"
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]


def _scout_shapes(**changes: Any) -> ModelSpec:
    # Llama4TextConfig's defaults (Scout): vocabulary 202,048, hidden 5,120, 48 layers, 40 heads of 128, 8 KV heads,
    # 16 experts of 8,192 (Llama4TextExperts: gate_up_proj and down_proj of every expert), top-1, a Llama4Router
    # without bias, a shared expert of 8,192 without a gate (Llama4TextMoe.shared_expert), an untied head.
    shapes: dict[str, Any] = dict(
        name="llama4",
        family="llama4_text",
        vocab_size=202_048,
        hidden_size=5_120,
        num_layers=48,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=8_192,
        num_experts=16,
        experts_per_token=1,
        shared_expert_size=8_192,
        shared_expert_gate=False,
    )
    return ModelSpec(**{**shapes, **changes})


def test_the_spec_counts_scout_and_the_interleaved_layout_exactly() -> None:
    # What keeps Llama 4 out is not its parameters: the spec's fields count them to the parameter.
    scout = _scout_shapes()
    assert scout.architecture_params() == META["llama4_text-default"]["whole"] == 107_769_861_120
    tensors = scout.num_layers * len(scout.layer_tensor_sizes()) + len(scout.outside_tensor_sizes())
    assert tensors == META["llama4_text-default"]["tensors"] == 579
    # interleave_moe_layer_step 2 with 128 experts (Maverick's layout): 24 MoE layers, 24 dense ones of
    # intermediate_size_mlp 16,384; counted as dense layers, whatever their order.
    maverick = _scout_shapes(num_experts=128, first_k_dense_replace=24, dense_intermediate_size=16_384)
    assert maverick.architecture_params() == META["llama4_text-interleave2-128e"]["whole"] == 400_711_848_960


def test_llama4_text_is_refused_with_what_is_missing() -> None:
    with pytest.raises(PlanError) as caught:
        model_from_hf_config(META["llama4_text-default"]["config"])
    message = str(caught.value)
    assert "chunked attention" in message and "ChunkedLocalAttentionSpec" in message
    assert "every expert on every token" in message and "unknown architecture" not in message


def test_the_image_text_llama4_is_refused_for_its_language_model() -> None:
    # Llama4ForConditionalGeneration's language model is a llama4_text: refused with the same reason, before its
    # vision tower (455,178,240 parameters with the projector, meta_counts llama4-default) is read.
    assert META["llama4-default"]["tower"] == 455_178_240
    with pytest.raises(PlanError) as caught:
        model_from_hf_config(META["llama4-default"]["config"])
    assert "chunked attention" in str(caught.value) and "unknown architecture" not in str(caught.value)

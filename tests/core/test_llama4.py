"""Llama 4 (``llama4_text``, and the image-text ``llama4`` around it): read exactly, served on vLLM, not trained.

Counts are transformers 5.25.0's own, the model built on the meta device (tests/data/arch/meta_counts.json, its
"source" says how): Llama4TextConfig's defaults are Llama 4 Scout's text model. vLLM's rules are the released
wheels' (core.serving.vllm_versions says which file of which release).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.advice.compare import compare
from core.advice.diagnosis import diagnose
from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files.planfile import plan_from_dict, plan_to_dict
from core.hfconfig import model_from_hf_config
from core.model import ModelSpec
from core.plan import Engine, Plan, VllmVersion, training_refusal
from core.presets import plan_for_model
from core.serving.vllm_rules import KvGroups, vllm_blocks_per_request, vllm_kv_groups
from core.verdict import Mode

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


def _served(model: ModelSpec, version: str = "0.19", **inference: Any) -> Plan:
    """``model`` picked into a default plan (which moves its serving to vLLM), on H200s at ``version``, two-way
    tensor parallel unless ``inference`` says otherwise."""
    plan = Plan(model=find_model("llama-3.1-8b").spec).on_model(model).with_hardware(gpu="h200-sxm")
    changes = {"tensor_parallel": 2, "vllm_version": VllmVersion(version), **inference}
    return replace(plan, inference=replace(plan.inference, **changes))


def test_the_spec_counts_scout_and_the_interleaved_layout_exactly() -> None:
    scout = _scout_shapes()
    assert scout.architecture_params() == META["llama4_text-default"]["whole"] == 107_769_861_120
    tensors = scout.num_layers * len(scout.layer_tensor_sizes()) + len(scout.outside_tensor_sizes())
    assert tensors == META["llama4_text-default"]["tensors"] == 579
    # interleave_moe_layer_step 2 with 128 experts (Maverick's layout): 24 MoE layers, 24 dense ones of
    # intermediate_size_mlp 16,384; counted as dense layers, whatever their order.
    maverick = _scout_shapes(num_experts=128, first_k_dense_replace=24, dense_intermediate_size=16_384)
    assert maverick.architecture_params() == META["llama4_text-interleave2-128e"]["whole"] == 400_711_848_960


def test_the_config_reader_builds_those_specs_with_the_chunked_layers() -> None:
    # Llama4TextConfig's defaults: no_rope_layers puts RoPE on every layer but each fourth, and layer_types types
    # the RoPE layers "chunked_attention" with attention_chunk_size 8,192 (configuration_llama4.py).
    scout = model_from_hf_config(META["llama4_text-default"]["config"])
    assert scout.architecture_params() == META["llama4_text-default"]["whole"]
    assert scout == replace(
        _scout_shapes(name=scout.name), attention_chunk=8_192, chunked_layers=36, max_position_embeddings=131_072
    )
    assert META["llama4_text-default"]["config"]["layer_types"].count("chunked_attention") == scout.chunked_layers
    maverick = model_from_hf_config(META["llama4_text-interleave2-128e"]["config"])
    assert maverick.architecture_params() == META["llama4_text-interleave2-128e"]["whole"]
    assert (maverick.first_k_dense_replace, maverick.dense_intermediate_size) == (24, 16_384)
    # Without attention_chunk_size every layer attends globally (layer_types: full_attention).
    plain = model_from_hf_config(dict(META["llama4_text-default"]["config"], attention_chunk_size=None))
    assert (plain.attention_chunk, plain.chunked_layers) == (0, 0)


def test_the_image_text_wrapper_counts_the_llama4_vision_tower() -> None:
    # Llama4ForConditionalGeneration: vision_model and multi_modal_projector hold 455,178,240 parameters for
    # Llama4VisionConfig's defaults (meta_counts llama4-default "tower").
    spec = model_from_hf_config(META["llama4-default"]["config"])
    assert spec.vision_params == META["llama4-default"]["tower"] == 455_178_240
    assert spec.architecture_params() == META["llama4-default"]["text"]
    assert (spec.vision_family, spec.chunked_layers) == ("llama4", 36)


def test_vllm_groups_the_chunked_layers_and_sizes_a_request_as_its_spec_does() -> None:
    scout = model_from_hf_config(META["llama4_text-default"]["config"])
    # 12 full and 36 chunked layers: groups of 12, one full and three chunked (_get_kv_cache_groups_uniform_page_size).
    groups = vllm_kv_groups(scout, 48)
    assert groups == KvGroups(size=12, full=1, windowed=3, window=8_192, chunked=True)
    # A 32,768-token request at 8,192 batched tokens: cdiv(32,768, 16) in the full group, and in each chunked group
    # ChunkedLocalAttentionSpec.max_memory_usage_bytes' cdiv(min(8,192 + 8,192, 32,768), 16), no extra block.
    assert vllm_blocks_per_request(groups, 32_768, 8_192) == 2_048 + 3 * 1_024
    # Shorter than chunk + batch: the context caps it.
    assert vllm_blocks_per_request(groups, 4_096, 8_192) == 4 * 256
    # Without the hybrid allocator every layer keeps a full-length cache in one group.
    assert vllm_kv_groups(scout, 48, hybrid=False) == KvGroups(size=48, full=1, windowed=0, window=0)


@pytest.mark.parametrize(("version", "groups"), [("0.9", 1), ("0.13", 1), ("0.14", 4), ("0.19", 4)])
def test_chunked_groups_follow_the_release_default(version: str, groups: int) -> None:
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "0" in 0.10.1.1 - 0.13.0 and "1" from 0.14.0
    # (vllm/envs.py of each wheel); 0.9.2 has no ChunkedLocalAttentionSpec at all.
    scout = model_from_hf_config(META["llama4_text-default"]["config"])
    served = estimate(_served(scout, version, context=32_768)).inference
    assert f"of {48 // groups} layers" in served.formula
    one_group = estimate(_served(scout, "0.13", context=32_768)).inference
    if groups > 1:  # the chunked groups hold less per request: more requests at once from a like pool
        assert served.max_concurrency > one_group.max_concurrency


def test_llama4_is_served_on_vllm_only_and_from_0_8() -> None:
    scout = model_from_hf_config(META["llama4_text-default"]["config"])
    plan = _served(scout)
    assert plan.inference.engine is Engine.VLLM  # picking the model moved the default HF engine to vLLM
    for engine in (Engine.HF, Engine.SGLANG, Engine.LLAMACPP):
        with pytest.raises(PlanError, match="vLLM for a model with chunked attention"):
            replace(plan, inference=replace(plan.inference, engine=engine, tensor_parallel=1))
    with pytest.raises(PlanError, match="0.8 or later for Llama 4"):
        replace(plan, inference=replace(plan.inference, vllm_version=VllmVersion.V0_7))
    # A plan on vLLM 0.7 picks it at the default release instead.
    old = Plan(model=find_model("llama-3.1-8b").spec).with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_7)
    assert old.on_model(scout).inference.vllm_version is VllmVersion.V0_19


def test_training_is_refused_with_the_reason_everywhere() -> None:
    # transformers 5.25.0 models/llama4/modeling_llama4.py Llama4TextMoe: hidden_states.repeat over the 16 experts of
    # Llama4TextConfig's defaults (Scout's): the training rules do not count it, so no training verdict is given.
    scout = model_from_hf_config(META["llama4_text-default"]["config"])
    reason = training_refusal(scout)
    assert reason is not None and "all 16 experts on every token" in reason
    assert training_refusal(find_model("llama-3.1-8b").spec) is None
    plan = _served(scout)
    result = estimate(plan)
    assert not any("experts on every token" in w for w in result.warnings_for(Mode.TRAINING))  # no warning: refused
    with pytest.raises(PlanError, match="experts on every token"):  # a comparison in training mode
        compare([("a", plan), ("b", plan)], Mode.TRAINING)
    assert diagnose(plan, Mode.TRAINING).remedies == ()  # nothing to remedy in a step that is not estimated


def test_text_only_scout_skips_the_tower_from_vllm_0_10() -> None:
    # vLLM 0.10.1.1 - 0.14.0 model_executor/models/mllama4.py build vision_model and multi_modal_projector only
    # when get_limit_per_prompt("image") (vllm-project/vllm PR #22299); 0.15.0 - 0.19.0 inside
    # _mark_tower_model(vllm_config, "image"). The 0.9 line builds them whatever the limit.
    scout = find_model("llama-4-scout-17b-16e").spec
    loaded = estimate(_served(scout, tensor_parallel=4)).inference
    for version in ("0.10", "0.14", "0.19"):
        text_only = estimate(_served(scout, version, tensor_parallel=4, text_only=True)).inference
        skipped = estimate(_served(scout, version, tensor_parallel=4)).inference.weights_bytes - text_only.weights_bytes
        assert skipped == pytest.approx(scout.vision_params * 2 / 4)  # bf16, split over four ranks
    assert loaded.weights_bytes > text_only.weights_bytes
    with pytest.raises(PlanError, match="0.10 or later"):
        estimate(_served(scout, "0.9", tensor_parallel=4, text_only=True))


def test_a_scout_plan_file_round_trips() -> None:
    plan = _served(find_model("llama-4-scout-17b-16e").spec, tensor_parallel=4)
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan, Mode.INFERENCE))))
    assert back == plan and back.model.chunked_layers == 36


def test_the_catalogue_rows_plan_on_vllm_from_the_preset_and_the_command_line() -> None:
    # Scout: the model card's 17B active of 109B; the HF safetensors count 108,641,793,536 (resources/models.json).
    scout = find_model("llama-4-scout-17b-16e")
    assert scout.spec.architecture_params() + scout.spec.vision_params == scout.published_params == 108_641_793_536
    assert plan_for_model(scout.id).inference.engine is Engine.VLLM
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["estimate", "--model", scout.id, "--gpu", "h100-sxm", "--mode", "inference"])
    # One H100 cannot hold its 217 GB of bf16 weights (108.6e9 × 2 B): vLLM's pool is empty and the CLI says so.
    assert code == 0 and "served by vLLM" in out.getvalue() and "GPU KV cache size: 0 tokens" in out.getvalue()


def test_the_command_line_serves_scout_and_refuses_its_training(capsys: pytest.CaptureFixture[str]) -> None:
    # core.plan.training_refusal, as for a hybrid recurrent model (tests/core/test_hybrid_serving.py).
    code = main(["estimate", "--model", "llama-4-scout-17b-16e", "--gpu", "h100-sxm", "--gpus", "8"])
    _, err = capsys.readouterr()
    assert code == 2 and "'training' is not allowed" in err and "experts on every token" in err
    code = main(
        [
            "estimate",
            "--mode",
            "inference",
            "--model",
            "llama-4-scout-17b-16e",
            "--gpu",
            "h100-sxm",
            "--gpus",
            "8",
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr()[0])
    assert code == 0 and document["training"] is None and "experts on every token" in document["training_refused"]

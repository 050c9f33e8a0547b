"""Hybrid recurrent models planned end to end: served on vLLM through estimate(), refused elsewhere."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.realgpu.hybrid_pages import page_figures, plan_for, records
from core.advice.compare import compare
from core.advice.diagnosis import diagnose
from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files.planfile import dumps, loads_saved
from core.inputs import VllmVersion
from core.params import param_counts
from core.plan import HYBRID_VLLM_LINES, HYBRID_VLLM_LINES_TEXT, HYBRID_VLLM_NEWEST, Engine, Plan
from core.presets import default_plan
from core.serving.speed import block_params, head_params
from core.serving.vllm_hybrid import state_bytes_per_request
from core.verdict import Mode

DATA = Path(__file__).parents[1] / "data" / "hybrid"
# transformers 5.25.0's configs and counts of each case (tools/measure/hybrid_meta_counts.py wrote the file).
META: dict[str, Any] = json.loads((DATA / "meta_counts.json").read_text("utf-8"))["cases"]
POOL_WORDS = re.compile(r"([\d,]+) blocks of (\d+) layers × ([\d,]+) = GPU KV cache size")


def served(model_id: str, **inference: Any) -> Plan:
    """The catalogue model served: Plan.on_model moves the engine to vLLM."""
    entry = find_model(model_id)
    plan = default_plan().with_hardware(gpu="h100-sxm").on_model(entry.spec, entry.id)
    return plan.with_inference(**inference) if inference else plan


@pytest.mark.parametrize("record", records(), ids=lambda r: str(r["id"]))
def test_the_published_page_figures_through_estimate(record: dict[str, Any]) -> None:
    # tests/data/hybrid/vllm_page_figures.json: Granite 4.0-H-350m on vLLM 0.11.1 ("Setting attention block size to
    # 400 tokens", "Padding mamba page size by 1.39%"), a Nemotron 3 Nano checkpoint on 0.19.0 with an fp8 cache
    # and a float32 SSM state (4,176 tokens, 0.19%), Granite 4.0-H-Small as vllm-gaudi PR 1453 states it (528).
    # benchmarks.realgpu.hybrid_pages.plan_for says how each record becomes a plan.
    block, pad = page_figures(plan_for(record))
    assert block == record["logged"]["block_size"]
    if "mamba_padding_pct" in record["logged"]:
        assert pad == record["logged"]["mamba_padding_pct"]


def test_the_pool_counts_attention_blocks_and_one_state_block_a_request() -> None:
    # Granite-4.0-H-Tiny (4 attention, 36 Mamba-2 layers: groups of 4, 1 attention + 9 state groups; vllm 001cabc1
    # kv_cache_utils.py), bf16, block 400: "GPU KV cache size" = blocks // 10 groups · 400, and a request of
    # 32,768 tokens takes cdiv(32,768, 400) = 82 attention blocks + 9 state blocks.
    plan = served("granite-4.0-h-tiny", context=32_768)
    result = estimate(plan).inference
    found = POOL_WORDS.search(result.formula)
    assert found is not None
    blocks, size, block = int(found[1].replace(",", "")), int(found[2]), int(found[3].replace(",", ""))
    assert (size, block) == (4, 400)
    assert result.kv_cache_tokens == blocks // 10 * 400
    assert result.max_concurrency == pytest.approx(blocks / (math.ceil(32_768 / 400) + 9))
    # The KV per token is the 4 attention layers' (2 · 4 KV heads · 128 · 2 B each), not 40 layers'.
    assert result.kv_bytes_per_token == 4 * 2 * 4 * 128 * 2
    # The state a decode step reads and writes back: 36 · (3 · 3,328 + 48 · 64 · 128) · 2 B (core.hybrid's shapes).
    assert state_bytes_per_request(plan) == 36 * (3 * 3328 + 48 * 64 * 128) * 2
    # The weights are the exact count in bf16: 6,939,037,248 × 2 B (meta_counts.json).
    assert result.weights_bytes == pytest.approx(META["granite-4.0-h-tiny"]["whole"] * 2)


def test_a_blackwell_card_aligns_a_256_wide_head_to_32_up_to_0_17() -> None:
    # vLLM 0.11.1 - 0.17.0 HybridAttentionMambaModelConfig: kernel_block_alignment_size 32 on a compute-capability
    # 10.0 card for head size 256 (FlashInfer); the 0.18.0 and 0.19.0 wheels align to 16 on every card. Qwen3-Next's
    # heads are 256 wide (config.json head_dim); on four ranks its state page is 274,432 B and one token's K and V
    # 1,024 B (tests/core/test_hybrid_vllm_lines.py): 32 · cdiv(274,432, 32 · 1,024) = 288, 16 · 17 = 272.
    on_h100 = served("qwen3-next-80b-a3b-instruct", tensor_parallel=4, vllm_version=VllmVersion.V0_17)
    on_b200 = on_h100.with_hardware(gpu="b200")
    assert page_figures(on_h100)[0] == 272 and page_figures(on_b200)[0] == 288
    for version in (VllmVersion.V0_18, VllmVersion.V0_19):
        assert page_figures(on_b200.with_inference(vllm_version=version))[0] == 272


@pytest.mark.parametrize("engine", [Engine.HF, Engine.SGLANG])  # llama.cpp: tests/core/test_llamacpp_hybrid.py
def test_other_engines_are_refused_naming_what_is_missing(engine: Engine) -> None:
    plan = served("granite-4.0-h-tiny")
    with pytest.raises(PlanError) as info:
        plan.with_inference(engine=engine)
    assert info.value.field == "inference.engine"
    message = str(info.value)
    assert f"vLLM {HYBRID_VLLM_LINES_TEXT}" in message and "not modelled" in message


@pytest.mark.parametrize("version", [VllmVersion.V0_6, VllmVersion.V0_9, VllmVersion.V0_10])
def test_releases_whose_hybrid_rules_were_not_read_are_refused(version: VllmVersion) -> None:
    with pytest.raises(PlanError) as info:
        served("granite-4.0-h-tiny").with_inference(vllm_version=version)
    assert info.value.field == "inference.vllm_version"
    assert version not in HYBRID_VLLM_LINES


def test_choosing_a_hybrid_moves_the_engine_to_vllm_keeping_a_read_release() -> None:
    hf = default_plan()
    assert hf.inference.engine is Engine.HF
    entry = find_model("bamba-9b")
    moved = hf.on_model(entry.spec, entry.id)
    assert (moved.inference.engine, moved.inference.vllm_version) == (Engine.VLLM, VllmVersion.V0_19)
    kept = hf.with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_15).on_model(entry.spec, entry.id)
    assert kept.inference.vllm_version is VllmVersion.V0_15
    newer = hf.with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_30).on_model(entry.spec, entry.id)
    assert newer.inference.vllm_version is VllmVersion.V0_30
    # A line whose hybrid rules were not read (before 0.11) moves to the newest that were (core.plan).
    older = hf.with_inference(engine=Engine.VLLM, vllm_version=VllmVersion.V0_10).on_model(entry.spec, entry.id)
    assert older.inference.vllm_version is HYBRID_VLLM_NEWEST is VllmVersion.V0_34


def test_splits_a_hybrid_cannot_take() -> None:
    plan = served("granite-4.0-h-tiny")
    with pytest.raises(PlanError) as info:
        replace(plan, inference=replace(plan.inference, pipeline_parallel=2))
    assert info.value.field == "inference.pipeline_parallel"
    # Choosing the model on a two-stage plan drops the stages, as a split a model cannot take does.
    staged = default_plan().with_inference(engine=Engine.VLLM, pipeline_parallel=2)
    entry = find_model("granite-4.0-h-tiny")
    assert staged.on_model(entry.spec, entry.id).inference.pipeline_parallel == 1


def test_training_is_not_estimated_and_says_why() -> None:
    # Qwen3-Next's training is estimated since branch h68gdn (tests/core/test_gdn_training.py), but not with
    # use_cache on in training (core.plan.training_refusal), which is said instead of a made-up figure.
    plan = served("qwen3-next-80b-a3b-instruct").with_changes(training_kv_cache=True)
    trained = diagnose(plan, Mode.TRAINING)
    assert trained.explanation.startswith("Training is not estimated: Training Qwen3-Next 80B-A3B")
    assert "its Gated DeltaNet layers are not modelled" in trained.explanation
    assert trained.remedies == ()
    assert diagnose(plan, Mode.INFERENCE).explanation != trained.explanation
    with pytest.raises(PlanError) as info:
        compare([("next", plan)], Mode.TRAINING)
    assert info.value.field == "mode"
    assert compare([("next", plan)], Mode.INFERENCE).plans[0].estimate.plan == plan


def test_a_saved_hybrid_plan_reads_back_equal() -> None:
    plan = served("nemotron-nano-9b-v2", context=16_384)
    saved = loads_saved(dumps(plan, Mode.INFERENCE))
    assert saved.plan == plan and saved.mode is Mode.INFERENCE
    assert saved.plan.model.hybrid == plan.model.hybrid


def test_the_command_line_serves_a_hybrid_and_refuses_its_training(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", "--mode", "inference", "--model", "granite-4.0-h-small", "--gpu", "h100-sxm"])
    out, _ = capsys.readouterr()
    assert code == 0 and "served by vLLM" in out and "attention block size 528 tokens" in out
    code = main(["estimate", "--model", "qwen3-next-80b-a3b-instruct", "--training-kv-cache"])
    _, err = capsys.readouterr()
    assert code == 2 and "'training' is not allowed" in err and err.count("\n") == 1
    refused = ["estimate", "--mode", "inference", "--model", "qwen3-next-80b-a3b-instruct", "--training-kv-cache"]
    code = main([*refused, "--json"])
    document = json.loads(capsys.readouterr()[0])
    assert document["training"] is None and "not modelled" in document["training_refused"]


def test_the_head_and_lookups_a_step_costs_are_the_hybrid_s_own_shapes() -> None:
    # A hybrid's parameter count is given exactly (core.hybrid), so ModelSpec.params_scale is that count over the
    # attention-model formula's (0.73 for Nemotron Nano 9B v2, 1.22 for Bamba 9B), not a typed P: the head's
    # product is vocabulary × hidden as the published config.json gives them (Nemotron Nano 9B v2: 131,072 ×
    # 4,480), and the blocks' parameters are the active count less the embedding and the untied head.
    for model_id in ("nemotron-nano-9b-v2", "bamba-9b"):
        model = find_model(model_id).spec
        assert model.params_scale != pytest.approx(1.0, abs=0.05)
        plan = default_plan().on_model(model)
        assert head_params(plan) == model.vocab_size * model.hidden_size
        counts = param_counts(plan)
        assert block_params(plan, counts) == counts.active - model.embedding_params() - model.head_params()
    nemotron = find_model("nemotron-nano-9b-v2").spec
    assert (nemotron.vocab_size, nemotron.hidden_size) == (131_072, 4_480)

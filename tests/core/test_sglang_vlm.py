"""What an image-text model holds on SGLang beyond its weights (issue 23 item 2): the multimodal reserve taken from the
token pool from 0.5.18 (core.serving.sglang_versions.mm_reserve_mib, read by core.serving.engines.sglang_memory),
and what SGLang's text-only flag takes. Every figure is read in the released wheel named beside it (``pip download
sglang==X --no-deps``): 0.5.17 / 0.5.18 / 0.5.20 / 0.5.23 mem_cache/kv_cache_configurator.py
(mm_runtime_reservation_gb, _profile_available_bytes), environ.py, arg_groups/model_overrides/qwen3_vl.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_gpu
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.plan import Plan, SglangVersion, serving_refusal
from core.presets import plan_for_model
from core.serving.sglang_versions import Launch, launch_of, mm_reserve_mib
from core.serving.text_only import tower_serving_words
from core.units import MiB

_COUNTS = Path(__file__).parents[1] / "data" / "vision" / "meta_counts.json"
# Configs transformers 5.25.0 wrote (tests/data/vision/meta_counts.json, its "source" says how).
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]
V = SglangVersion
H100 = 81_559  # MiB, resources/gpus.json h100-sxm (nvidia-smi's total)


def served(case: str, version: str, gpu: str = "h100-sxm", **changes: object) -> Plan:
    """The meta-count image-text model ``case`` served on SGLang ``version`` (context 4,096)."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu=gpu)
    plan = plan.with_inference(engine="sglang", context=4096, sglang_version=version, **changes)
    return plan.on_model(model_from_hf_config(META[case]["config"]))


def tokens(plan: Plan) -> int:
    return estimate(plan).inference.kv_cache_tokens


def test_the_reserve_by_release_and_launch() -> None:
    vl = Launch(multimodal=True, vision_family="qwen2_5_vl", hopper=True)
    # mm_runtime_reservation_gb first ships in 0.5.18 (absent from the 0.5.17 wheel); SGLANG_VLM_CACHE_SIZE_MB is
    # EnvInt(100) in 0.5.18 - 0.5.23's environ.py.
    assert mm_reserve_mib(V.V0_5_17, vl, H100) == 0
    assert mm_reserve_mib(V.V0_5_18, vl, H100) == mm_reserve_mib(V.V0_5_23, vl, H100) == 100
    # "if not is_multimodal: return 0.0": a text model, or Gemma 3 at its defaults (mm_disabled_models).
    assert mm_reserve_mib(V.V0_5_23, Launch(vision_family="gemma3", hopper=True), H100) == 0
    # Qwen3-VL on a large Hopper card (sm90, 60 GiB or more): 0.5.20's override sets the cache to 0 and the feature
    # transport to cuda_ipc, whose pool is SGLANG_MM_FEATURE_CACHE_MB = EnvInt(1 * 1024); not in 0.5.19's wheel.
    qwen3 = Launch(multimodal=True, vision_family="qwen3_vl", hopper=True)
    assert mm_reserve_mib(V.V0_5_19, qwen3, H100) == 100
    assert mm_reserve_mib(V.V0_5_20, qwen3, H100) == mm_reserve_mib(V.V0_5_23, qwen3, H100) == 1024
    assert mm_reserve_mib(V.V0_5_23, Launch(multimodal=True, vision_family="qwen3_vl_moe", hopper=True), H100) == 1024
    # Not sm90 (an A100 80GB: 81,920 MiB), or under 60 x 1,024 MiB: the 100 MiB cache.
    assert mm_reserve_mib(V.V0_5_23, Launch(multimodal=True, vision_family="qwen3_vl"), 81_920) == 100
    assert mm_reserve_mib(V.V0_5_23, qwen3, 60 * 1024 - 1) == 100


def test_the_launch_reads_the_family_and_the_cards_architecture() -> None:
    plan = served("qwen3_vl-default", "0.5.23")
    launch = launch_of(plan, find_gpu("h100-sxm"))
    assert launch.multimodal and launch.hopper and launch.vision_family == "qwen3_vl"
    assert not launch_of(plan, find_gpu("a100-80gb-sxm")).hopper


@pytest.mark.parametrize(
    ("case", "gpu", "reserve_mib"),
    [
        ("qwen2_5_vl-7b", "h100-sxm", 100),
        ("mistral3-default", "a100-80gb-sxm", 100),
        ("qwen3_vl-default", "h100-sxm", 1024),
    ],
)
def test_the_pool_loses_the_reserve_from_0_5_18(case: str, gpu: str, reserve_mib: int) -> None:
    # The same given fraction on both sides (a given --mem-fraction-static is not reduced from 0.4.9), so the pools
    # differ by the reserve alone: rest_memory = available - slack - mm_reservation_gb (0.5.18 / 0.5.23
    # _profile_available_bytes). 0.5.17 reserves nothing; the expected count is the engine's own cell size.
    before = served(case, "0.5.17", gpu, mem_fraction_static=0.8)
    after = before.with_inference(sglang_version="0.5.23")
    est = estimate(before).inference
    cell = est.kv_cache_bytes / est.kv_cache_tokens
    assert tokens(before) - tokens(after) == pytest.approx(reserve_mib * MiB / cell, abs=1)
    formula = estimate(after).inference.formula
    assert f"multimodal reserve (embedding cache / feature pool) {reserve_mib * MiB / 2**30:.2f}" in formula
    assert "multimodal reserve" not in est.formula


def test_gemma_3_at_sglangs_defaults_keeps_no_reserve() -> None:
    # Gemma 3 is not multimodal at SGLang's defaults (mm_disabled_models, 0.4.6 - 0.5.23), so mm_runtime_reservation_gb
    # returns 0: the pool is 0.5.17's at the same fraction. Its tower is still built and counted
    # (Gemma3ForConditionalGeneration.__init__ builds SiglipVisionModel unconditionally, 0.4.7 - 0.5.23).
    plan = plan_for_model("gemma-3-4b").with_inference(engine="sglang", context=4096, mem_fraction_static=0.8)
    old, new = plan.with_inference(sglang_version="0.5.17"), plan.with_inference(sglang_version="0.5.23")
    assert tokens(old) == tokens(new)
    # ... and no images are taken without --enable-multimodal: the summary says both (branch h76sglui).
    assert (
        tower_serving_words(new.model, new.inference)
        == "loaded, yet SGLang takes no images without --enable-multimodal"
    )
    assert "multimodal reserve" not in estimate(new).inference.formula


def test_text_only_on_sglang_names_the_flag_that_shipped() -> None:
    # --language-model-only ships from 0.5.18 with an allowlist (ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES: Muse
    # Glimmer, Cosmos 3, DeepSeek-V4 in 0.5.23) that holds no image-text family the planner reads.
    plan = served("qwen2_5_vl-7b", "0.5.23")
    refusal = serving_refusal(plan.model, replace(plan.inference, text_only=True))
    assert refusal is not None and refusal.field == "inference.text_only"
    assert "--language-model-only (0.5.18 on) takes none of these families" in str(refusal)

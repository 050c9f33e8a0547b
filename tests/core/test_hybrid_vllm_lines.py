"""Hybrid recurrent models on vLLM 0.20 - 0.34 (core.serving.vllm_hybrid): the page, the prefix-caching default and
the state blocks a request each release line takes, as read in the released wheels. Each expected figure is vLLM's
own arithmetic on the model's widths, with the file and release it was read in."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.realgpu.hybrid_pages import page_figures
from core.catalogue import find_model
from core.cli.app import main
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.inputs import VllmVersion
from core.plan import Plan
from core.presets import default_plan
from core.serving.vllm_hybrid import state_blocks, state_bytes
from core.serving.vllm_versions import graphs_before_kv, v2_runner

DATA = Path(__file__).parents[1] / "data" / "hybrid"
# transformers 5.25.0's configs of each case (tools/measure/hybrid_meta_counts.py wrote the file).
META: dict[str, Any] = json.loads((DATA / "meta_counts.json").read_text("utf-8"))["cases"]
POOL_WORDS = re.compile(r"([\d,]+) blocks of (\d+) layers × ([\d,]+) = GPU KV cache size")
V = VllmVersion


def served(model_id: str, gpu: str = "h100-sxm", **inference: Any) -> Plan:
    entry = find_model(model_id)
    plan = default_plan().with_hardware(gpu=gpu).on_model(entry.spec, entry.id)
    return plan.with_inference(**inference)


def pool_of(plan: Plan) -> tuple[int, int, int]:
    """(blocks, layers per group, tokens per block) as the estimate's vLLM formula prints them."""
    found = POOL_WORDS.search(estimate(plan).inference.formula)
    assert found is not None
    return int(found[1].replace(",", "")), int(found[2]), int(found[3].replace(",", ""))


# Granite 4.0-H-Small, bf16 on one rank (meta_counts.json: 128 Mamba-2 heads of 64, state 128, 1 group, kernel 4;
# 8 KV heads of 128): a mamba page of (3 · (8,192 + 2 · 128) + 128 · 64 · 128) · 2 = 2,147,840 B and an attention
# page of 2 · 8 · 128 · 2 = 4,096 B a token. vllm/platforms/interface.py _align_hybrid_block_size (0.20.0 - 0.34.0):
# block = alignment · cdiv(mamba page, alignment · 4,096), alignment = max(16, the backend's preferred block):
# 16 up to 0.33.0 → 528 tokens, padded by 528 · 4,096 / 2,147,840 − 1 = 0.69 %; CacheConfig.DEFAULT_BLOCK_SIZE 64
# in 0.34.0 → 576 tokens, 9.85 %. ROCm's RocmAttentionBackend prefers 16 in 0.34.0: 528 on an MI300X.
@pytest.mark.parametrize(
    ("gpu", "version", "block", "pad"),
    [
        ("h100-sxm", V.V0_20, 528, "0.69"),
        ("h100-sxm", V.V0_27, 528, "0.69"),
        ("a100-80gb-sxm", V.V0_28, 528, "0.69"),
        ("h100-sxm", V.V0_33, 528, "0.69"),
        ("h100-sxm", V.V0_34, 576, "9.85"),
        ("b200", V.V0_34, 576, "9.85"),
        ("mi300x", V.V0_34, 528, "0.69"),
    ],
)
def test_the_mamba2_page_on_each_line(gpu: str, version: VllmVersion, block: int, pad: str) -> None:
    plan = served("granite-4.0-h-small", gpu, vllm_version=version)
    assert page_figures(plan) == (block, pad)
    assert pool_of(plan)[2] == block


# Granite 4.0-H-Tiny (4 attention and 36 Mamba-2 layers: 1 attention and 9 recurrent groups of 4), 32,768 tokens a
# request. The blocks a request holds in a recurrent group (vllm/v1/kv_cache_interface.py
# MambaSpec.max_memory_usage_bytes): one without prefix caching (0.20.0 - 0.27.0: EngineArgs leaves it off for a
# hybrid); two in "align" mode, the default from 0.28.0 (vllm/engine/arg_utils.py, models/config.py
# MambaModelConfig); three from 0.32.0 (mamba_mixer2.py: num_prefill_checkpoint_blocks=1). The maximum concurrency is
# the blocks ÷ (cdiv(32,768, block) + 9 · that), get_max_concurrency_for_kv_cache_config.
@pytest.mark.parametrize(
    ("version", "held"),
    [(V.V0_20, 1), (V.V0_27, 1), (V.V0_28, 2), (V.V0_31, 2), (V.V0_32, 3), (V.V0_33, 3), (V.V0_34, 3)],
)
def test_the_state_blocks_a_request_holds_on_each_line(version: VllmVersion, held: int) -> None:
    plan = served("granite-4.0-h-tiny", context=32_768, vllm_version=version)
    result = estimate(plan).inference
    blocks, size, block = pool_of(plan)
    assert size == 4 and state_blocks(plan, "h100-sxm") == held
    per_request = math.ceil(32_768 / block) + 9 * held
    assert result.max_concurrency == pytest.approx(blocks / per_request)
    # 0.21.0 on log "GPU KV cache size" as concurrency × max_model_len (kv_cache_utils._report_kv_cache_config).
    if version is not V.V0_20:
        assert result.kv_cache_tokens == int(blocks / per_request * 32_768)
    words = f"prefix caching on by default (mamba_cache_mode align): {held} state blocks a request"
    assert (words in result.formula) is (held > 1)
    assert ("one state block a request" in result.formula) is (held == 1)


# Qwen3-Next 80B-A3B on four ranks (meta_counts.json: 32 value heads of 128, 16 key heads of 128, kernel 4; 2 KV heads
# of 256): a state page of (3 · (2 · 16 · 128 + 32 · 128) / 4 + 32 / 4 · 128 · 128) · 2 = 274,432 B, an attention page
# of 2 · 1 · 256 · 2 = 1,024 B a token (one KV head a rank). Up to 0.32.0: 16 · cdiv(274,432, 16 · 1,024) = 272
# tokens, on a B200 too (the head-256 alignment of 32 is gone, FlashInfer's smallest block being 16). From 0.33.0
# in "align" mode the Gated DeltaNet layer exports prefill checkpoints where FlashInfer runs its prefill
# (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend: compute capability 9.0, or Blackwell with key dim 128
# under CUDA 13): the block aligns to lcm(16, 64) → 64 · cdiv(274,432, 64 · 1,024) = 320 and a request holds three
# state blocks; Triton elsewhere (A100, MI300X): 272 and two. 0.34.0 aligns to its 64-token default block on NVIDIA.
@pytest.mark.parametrize(
    ("gpu", "version", "block", "held"),
    [
        ("h100-sxm", V.V0_32, 272, 2),
        ("b200", V.V0_32, 272, 2),
        ("h100-sxm", V.V0_33, 320, 3),
        ("b200", V.V0_33, 320, 3),
        ("a100-80gb-sxm", V.V0_33, 272, 2),
        ("a100-80gb-sxm", V.V0_34, 320, 2),
        ("mi300x", V.V0_34, 272, 2),
    ],
)
def test_the_gated_deltanet_page_and_blocks_follow_the_prefill_backend(
    gpu: str, version: VllmVersion, block: int, held: int
) -> None:
    plan = served("qwen3-next-80b-a3b-instruct", gpu, vllm_version=version, tensor_parallel=4)
    assert page_figures(plan)[0] == block
    assert state_blocks(plan, gpu) == held


def test_nemotron_h_reads_a_missing_ssm_dtype_as_float32_from_0_20() -> None:
    # vllm/model_executor/models/config.py NemotronHForCausalLMConfig: a checkpoint without mamba_ssm_cache_dtype
    # keeps a float16 state in 0.13.0 - 0.19.0 and a float32 one from 0.20.0 (DEFAULT_MAMBA_SSM_CACHE_DTYPE).
    config = {k: v for k, v in META["nemotron_h-default"]["config"].items() if k != "mamba_ssm_cache_dtype"}
    model = model_from_hf_config(config, name="Nemotron-H without mamba_ssm_cache_dtype")
    plan = default_plan().with_hardware(gpu="h100-sxm").on_model(model)
    assert state_bytes(plan.with_inference(vllm_version=V.V0_19)) == (2, 2)
    assert state_bytes(plan.with_inference(vllm_version=V.V0_20)) == (2, 4)


def test_a_dense_hybrid_runs_the_v1_runner_until_every_model_runs_v2() -> None:
    # vllm/config/vllm.py _is_default_v2_model_runner_model: "if getattr(model_config, "is_hybrid", False): return
    # False" (0.25.0 - 0.26.0; 0.27.0 - 0.28.0 unless its architecture is listed), so Bamba (dense) gets the V1
    # runner's CUDA-graph estimate before the pool; from 0.29.0 every model runs Model Runner V2.
    for version in (V.V0_25, V.V0_28):
        inf = served("bamba-9b", vllm_version=version).inference
        model = find_model("bamba-9b").spec
        assert not v2_runner(inf, model) and graphs_before_kv(inf, model)
    newest = served("bamba-9b", vllm_version=V.V0_29)
    assert v2_runner(newest.inference, newest.model)


def test_the_command_line_serves_a_hybrid_on_the_newest_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--mode", "inference", "--model", "granite-4.0-h-small", "--gpu", "h100-sxm"]
    code = main([*argv, "--vllm-version", "0.34"])
    out, err = capsys.readouterr()
    assert code == 0 and not err
    assert "vLLM 0.34" in out and "attention block size 576 tokens" in out and "3 state blocks a request" in out
    code = main([*argv, "--vllm-version", "0.10"])
    _, err = capsys.readouterr()
    assert code == 2 and "vLLM 0.11 - 0.34" in err and err.count("\n") == 1

"""vLLM 0.34 on an AMD card: the KV block without --block-size is the attention backend's preferred size
(vllm 0.34.0 vllm/platforms/interface.py update_block_size_for_backend). vllm/platforms/rocm.py lists ROCM_ATTN
first for a non-MLA model (VLLM_ROCM_USE_AITER off by default, vllm/envs.py), whose get_preferred_block_size is 16
(vllm/v1/attention/backends/rocm_attn.py); it refuses attention sinks and head sizes outside 32 … 256's list, and
TRITON_ATTN comes first on gfx1100 / gfx1201; Triton and TRITON_MLA take CacheConfig.DEFAULT_BLOCK_SIZE, 64. The
planner took 64 on every card at 0.34 before (the CUDA backends' block)."""

from __future__ import annotations

import re

import pytest

from core.catalogue import find_model
from core.estimate import estimate
from core.inputs import VllmVersion
from core.plan import Plan
from core.presets import default_plan
from core.serving.vllm_versions import default_block_size

POOL_WORDS = re.compile(r"([\d,]+) blocks of (\d+) layers × ([\d,]+) = GPU KV cache size")
V = VllmVersion


def served(model_id: str, gpu: str, version: VllmVersion = V.V0_34) -> Plan:
    entry = find_model(model_id)
    plan = default_plan().with_hardware(gpu=gpu).on_model(entry.spec, entry.id)
    return plan.with_inference(engine="vllm", vllm_version=version)


@pytest.mark.parametrize(
    ("model_id", "gpu", "version", "block"),
    [
        ("llama-3.1-8b", "mi300x", V.V0_34, 16),  # ROCM_ATTN, head 128
        ("llama-3.1-8b", "mi355x", V.V0_34, 16),  # gfx950: ROCM_ATTN too
        ("llama-3.1-8b", "rx-7900-xtx", V.V0_34, 64),  # gfx1100: TRITON_ATTN first
        ("llama-3.1-8b", "rx-9070-xt", V.V0_34, 64),  # gfx1201: TRITON_ATTN first
        ("gpt-oss-20b", "mi300x", V.V0_34, 64),  # sinks: ROCM_ATTN refuses them (supports_sink False)
        ("deepseek-v2-lite", "mi300x", V.V0_34, 64),  # MLA: TRITON_MLA, MultipleOf(16)
        ("llama-3.1-8b", "h100-sxm", V.V0_34, 64),  # CUDA: FlashAttention takes the default
        ("llama-3.1-8b", "mi300x", V.V0_33, 16),  # DEFAULT_BLOCK_SIZE 16 up to 0.33 (vllm/config/cache.py)
    ],
)
def test_the_default_block_follows_the_rocm_backend(model_id: str, gpu: str, version: VllmVersion, block: int) -> None:
    plan = served(model_id, gpu, version)
    assert default_block_size(plan.model, gpu, version) == block
    found = POOL_WORDS.search(estimate(plan).inference.formula)
    assert found is not None and int(found[3].replace(",", "")) == block


def test_a_hybrid_on_rdna3_aligns_to_triton_s_64() -> None:
    # Granite 4.0-H-Small (tests/core/test_hybrid_vllm_lines.py): alignment max(16, preferred) · cdiv(2,147,840,
    # alignment · 4,096): 528 tokens under ROCM_ATTN's 16 (MI300X), 576 under Triton's 64 on gfx1100.
    for gpu, block in (("mi300x", 528), ("rx-7900-xtx", 576)):
        found = POOL_WORDS.search(estimate(served("granite-4.0-h-small", gpu)).inference.formula)
        assert found is not None and int(found[3].replace(",", "")) == block, gpu

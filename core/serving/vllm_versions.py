"""vLLM by release: which start-up rules each release line follows.

vLLM changed how it sizes the KV cache several times. The planner groups the releases into
eras of identical rules; each era says where its rules were read (a commit of vLLM's source,
or, where the source could not be read, the start-up lines that show the rule):

* **V0 (0.6 – 0.7)**: the V0 engine. Without chunked prefill (the default up to a
  ``max_model_len`` of 32,768 tokens) its profile forward runs ``max(max_model_len,
  max_num_batched_tokens)`` tokens at once; eager PyTorch keeps three hidden-size tensors
  beside the MLP's. Read from the 0.6.4 / 0.6.5 start-up lines of vLLM issue #10517 and
  PR #10511 (``worker.py`` ``determine_num_available_blocks``), which print the profile
  tokens' peak and the 256-sequence V0 default.
* **V1, early (0.8 – 0.9)**: the V1 worker counts every byte allocated outside torch after
  the profile run as non-torch memory, the CUDA context included (vllm-project/vllm commit
  0012cf691b7e69423244d2b1405f4b6832156e19, ``vllm/v1/worker/gpu_worker.py``
  ``determine_available_memory``: ``non_torch_allocations = (total - free) -
  torch_allocated``). Sliding-window layers hold a full-length cache (one KV group).
* **V1 (0.10 – 0.20)**: a baseline snapshot after start-up, so only what the profile run
  adds outside torch is taken; sliding-window and full layers in padded KV groups (the
  hybrid allocator). The 0.19.0 release (commit 2a69949bd) is where
  :mod:`core.serving.vllm_rules` was read; ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is 0,
  so the CUDA-graph pool is captured after the KV cache, outside it.
* **V1 with CUDA-graph profiling (0.21 – 0.28)**: vLLM estimates the CUDA-graph pool and
  sets it aside before the KV cache ("CUDA graph memory profiling is enabled (default since
  v0.21.0)", printed by ``gpu_worker.py`` in the 0.27.1 log of gpustack/runner pull request 251: "The
  current --gpu-memory-utilization=0.8200 is equivalent to --gpu-memory-utilization=0.8048
  without CUDA graph memory profiling"), and ``gpu_memory_utilization`` defaults to 0.92
  (docs.vllm.ai/en/stable/cli/serve, quoted in maximhq/bifrost PR #7175). Not checked against
  a start-up log with a KV size: none in the corpus is of these releases.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.plan import Inference, VllmVersion


class Accounting(StrEnum):
    """What vLLM's profile counts outside torch (the key of ServingFit.vllm_non_torch_bytes)."""

    V0 = "v0"  # V0 worker's memory_profiling
    CONTEXT = "v1-early"  # every non-torch byte after the profile, CUDA context included
    INCREASE = "v1"  # the increase over a baseline snapshot taken after start-up


@dataclass(frozen=True)
class VllmEra:
    name: str
    first: VllmVersion
    last: VllmVersion
    v1: bool
    accounting: Accounting
    hidden_copies: int  # hidden-size tensors live beside the MLP's in the profile forward
    kv_groups: bool  # sliding-window layers in their own padded groups (hybrid allocator)
    graphs_before_kv: bool  # the CUDA-graph estimate is set aside before the KV cache
    default_utilization: float


# V1 (torch.compile) keeps four hidden-size tensors (core.serving.vllm_rules.VLLM_HIDDEN_COPIES);
# V0's eager forward three (the 0.6.x entries of benchmarks/serving/vllm_logs.json).
V0_HIDDEN_COPIES: Final = 3
ERAS: Final = (
    VllmEra(
        "V0 (0.6-0.7)", VllmVersion.V0_6, VllmVersion.V0_7, False, Accounting.V0, V0_HIDDEN_COPIES, False, False, 0.9
    ),
    VllmEra("V1 (0.8-0.9)", VllmVersion.V0_8, VllmVersion.V0_9, True, Accounting.CONTEXT, 4, False, False, 0.9),
    VllmEra("V1 (0.10-0.20)", VllmVersion.V0_10, VllmVersion.V0_20, True, Accounting.INCREASE, 4, True, False, 0.9),
    VllmEra(
        "V1 with CUDA-graph profiling (0.21-0.28)",
        VllmVersion.V0_21,
        VllmVersion.V0_28,
        True,
        Accounting.INCREASE,
        4,
        True,
        True,
        0.92,
    ),
)
# V0 without chunked prefill: chunked prefill is on by default only past this max_model_len.
V0_CHUNKED_PREFILL_FROM: Final = 32_768
_ORDER: Final = list(VllmVersion)


def era_of(version: VllmVersion) -> VllmEra:
    index = _ORDER.index(version)
    return next(e for e in ERAS if _ORDER.index(e.first) <= index <= _ORDER.index(e.last))


def utilization(inf: Inference) -> float:
    """gpu_memory_utilization as given, or the version's default."""
    return inf.gpu_memory_utilization or era_of(inf.vllm_version).default_utilization


def profile_tokens(inf: Inference, batched: int) -> int:
    """Tokens of the profile forward: V0 without chunked prefill runs a whole max_model_len."""
    era = era_of(inf.vllm_version)
    if not era.v1 and inf.context <= V0_CHUNKED_PREFILL_FROM and not inf.max_num_batched_tokens:
        return max(inf.context, batched)
    return batched

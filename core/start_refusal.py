"""A serving engine's refusal to start, classified once where it is decided.

Each check that refuses a plan at start-up (core.context_limit for a context past the model's limit,
core.serving.engines for the memory) returns a :class:`StartRefusal`: its :class:`RefusalKind`, the engine's own
message and the cause in a few words with the plan's figures. The estimate carries them in the order the engine
runs its checks (:func:`in_engine_order`); the verdict, the Diagnosis, the command line and the report read that,
never re-deriving which check refused from the pool's token count (h94start: InferenceEstimate.start_causes did).

The order is the engines' own. vLLM checks the context at config time, before any weight loads or the KV pool is
sized: ``ModelConfig.__post_init__`` calls ``_get_and_verify_max_len`` (vllm 0.19.0 wheel, vllm/config/model.py),
while the memory checks run in the worker after the model loads (the free-memory check in
vllm/v1/worker/gpu_worker.py ``init_device``, the KV pool's ``check_enough_kv_cache_memory`` in
vllm/v1/core/kv_cache_utils.py, called from ``EngineCore._initialize_kv_caches``). SGLang derives the context
length in its ``ModelConfig`` (sglang 0.5.23 wheel, sglang/srt/configs/model_config.py ``_derive_context_length``)
before ``ModelRunner`` profiles its token pool (``profile_max_num_token``). So the context refusal is the one the
engine prints; the memory's, where there is one, would follow once the context is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class RefusalKind(StrEnum):
    """Which start-up check refuses the plan."""

    # A context past the model's max_position_embeddings without VLLM_ALLOW_LONG_MAX_MODEL_LEN /
    # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (core.context_limit): the verdict is WONT_START.
    CONTEXT = "context-past-limit"
    # vLLM's KV pool holds blocks, fewer than one request of max_model_len (core.serving.engines.vllm_kv_refusal).
    KV_POOL_SHORT = "kv-pool-short"
    # vLLM's KV budget leaves no block at all: "No available memory for the cache blocks"
    # (core.serving.engines.vllm_no_blocks_refusal).
    NO_CACHE_BLOCKS = "no-cache-blocks"
    # vLLM's free memory at start-up below gpu_memory_utilization × total (core.serving.engines.vllm_start_refusal).
    FREE_MEMORY = "free-memory"
    # SGLang's token pool left empty by memory other processes hold (core.serving.engines._sglang_refusal).
    EMPTY_POOL = "empty-token-pool"


# The order the engines run their checks (the module's docstring): the context at config time, then the memory.
CHECK_ORDER: Final = (
    RefusalKind.CONTEXT,
    RefusalKind.FREE_MEMORY,
    RefusalKind.EMPTY_POOL,
    RefusalKind.NO_CACHE_BLOCKS,
    RefusalKind.KV_POOL_SHORT,
)
MEMORY_KINDS: Final = frozenset(CHECK_ORDER[1:])


@dataclass(frozen=True)
class StartRefusal:
    kind: RefusalKind
    words: str  # the engine's own message, with what would start it
    cause: str  # the check that refuses, in a few words with the plan's figures (the Diagnosis's likely cause)

    @property
    def memory(self) -> bool:
        """A check of the engine's memory (the verdict stays the memory's OOM), not of the context."""
        return self.kind in MEMORY_KINDS


def in_engine_order(refusals: Iterable[StartRefusal | None]) -> tuple[StartRefusal, ...]:
    """The refusals that apply, in the order the engine runs their checks (:data:`CHECK_ORDER`)."""
    return tuple(sorted((r for r in refusals if r is not None), key=lambda r: CHECK_ORDER.index(r.kind)))

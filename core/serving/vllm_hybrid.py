"""vLLM's KV pool for hybrid recurrent models (Mamba-2, Gated DeltaNet beside attention).

Sources, read at the commits named:

* State shapes — vllm-project/vllm 02d71083 vllm/model_executor/layers/mamba/mamba_utils.py
  (``MambaStateShapeCalculator``): per sequence and recurrent layer a conv state of (kernel − 1) ×
  conv channels and a temporal state; their dtypes (``MambaStateDtypeCalculator._mamba_state_dtype``)
  are the model's (``mamba_cache_dtype`` auto) and, for the temporal state, ``mamba_ssm_cache_dtype``
  (auto: the conv state's). :mod:`core.hybrid` has the shapes.
* Page sizes — vllm-project/vllm 0144dd5b vllm/model_executor/models/config.py
  ``HybridAttentionMambaModelConfig.verify_and_update_config``: one attention token's page is
  2 · KV heads · head size · bytes; the mamba page (``MambaSpec.page_size_bytes``) is one sequence's
  state in one layer; the attention block is raised to ``16 · cdiv(mamba page, 16 · attention page per
  token)`` tokens ("Setting attention block size to N tokens") when the user's is smaller, and the mamba
  page is padded to the attention page ("Padding mamba page size by P%").
* Groups, pool and report — vllm-project/vllm 001cabc1 vllm/v1/core/kv_cache_utils.py:
  ``_get_kv_cache_groups_uniform_page_size`` (each kind's layers cut into groups of the smaller kind's
  count, or the larger's when under 1.5 times it), ``get_kv_cache_config_from_groups`` / ``get_num_blocks``
  (blocks = available // page // layers per group), ``_report_kv_cache_config`` ("GPU KV cache size" =
  blocks // groups · the smallest block size; the mamba groups' block size is max_model_len without prefix
  caching) and ``get_max_concurrency_for_kv_cache_config`` (blocks ÷ a request's blocks: cdiv(max_model_len,
  block) in each attention group, one in each mamba group — ``MambaSpec.max_memory_usage_bytes`` is one
  page without prefix caching).

Prefix caching is off for these models in the lines whose logs are recorded (``enable_prefix_caching=False``
in both); vLLM's later "align" mode keeps one state page per attention block and is not modelled.

A plan reaches these rules through :func:`plan_pages` (the bytes and the alignment its release and card take)
and core.serving.engines.vllm_pool, which sizes the pool in the common page and counts the recurrent groups'
one block a request (core.serving.vllm_rules.KvGroups.recurrent). Which release lines take a hybrid:
core.plan.HYBRID_VLLM_LINES.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from core.dtypes import KV_BYTES, WeightFormat
from core.hybrid import WRAPPED_HYBRID_TYPES, HybridSpec
from core.inputs import VllmVersion
from core.plan import Plan
from core.serving.releases import at_least

# HybridAttentionMambaModelConfig's alignment: FlashAttention needs block sizes that are multiples of 16
# (vllm-project/vllm 0144dd5b vllm/model_executor/models/config.py, "16 * cdiv(mamba_page_size, 16 * ...)").
ATTENTION_BLOCK_ALIGN: Final = 16
DEFAULT_BLOCK_SIZE: Final = 16  # CacheConfig.block_size on CUDA (core.serving.vllm_rules.VLLM_BLOCK_SIZE, 0.19.0)
# From 0.11.1 the alignment is 32 on a compute-capability 10.0 card for a head size of 256 under FlashInfer, the
# default backend there ("kernel_block_alignment_size = 32": vllm 0.11.1 / 0.12.0 wheels'
# vllm/model_executor/models/config.py, is_device_capability(100); 0.13.0 - 0.19.0 is_device_capability_family(100)).
# The 0.11 line is taken as 0.11.1 - 0.11.2 (0.11.0 aligns to 16 everywhere). Of the catalogue's cards the B200.
BLACKWELL_ALIGN: Final = 32
BLACKWELL_HEAD_SIZE: Final = 256
SM100_CARDS: Final = ("b200",)
# NemotronHForCausalLMConfig (0.13.0 - 0.19.0 wheels, vllm/model_executor/models/config.py): with
# mamba_ssm_cache_dtype "auto" it takes the checkpoint's config.json value (float16 when the key is absent, the
# same two bytes as bfloat16); 0.11.0 - 0.12.0 have no such rule and keep the model dtype.
NEMOTRON_SSM_DTYPE_FROM: Final = VllmVersion.V0_13
# Qwen3_5ForConditionalGenerationConfig (0.17.0, 0.18.0 and 0.19.0 wheels, vllm/model_executor/models/config.py, for
# Qwen3_5ForConditionalGeneration and Qwen3_5MoeForConditionalGeneration): with mamba_ssm_cache_dtype "auto" it
# takes the text config's mamba_ssm_dtype ("float32" in the released checkpoints); every line that loads Qwen3.5
# (core.plan.HYBRID_VLLM_FROM) has it. Its state shapes and dtypes are Qwen3-Next's (qwen3_5.py
# get_mamba_state_shape_from_config: gated_delta_net_state_shape of the text config's linear_* widths). Their
# ModelSpec.family is core.hybrid's model_type (WRAPPED_HYBRID_TYPES).


@dataclass(frozen=True)
class HybridPages:
    """The page arithmetic vLLM prints at start-up for a hybrid model on one rank."""

    attention_token_bytes: int  # one token's K and V in one attention layer
    mamba_page_bytes: int  # one sequence's recurrent state in one layer, unpadded
    block_size: int  # attention tokens per block after the rule
    page_bytes: int  # the common page: block_size · attention_token_bytes

    @property
    def padding_pct(self) -> float:
        """ "Padding mamba page size by P%": how much the mamba page grows to the common page."""
        return 100 * (self.page_bytes - self.mamba_page_bytes) / self.mamba_page_bytes


def hybrid_pages(
    spec: HybridSpec,
    kv_bytes: int,
    conv_bytes: int,
    temporal_bytes: int,
    tensor_parallel: int = 1,
    user_block_size: int = DEFAULT_BLOCK_SIZE,
    align: int = ATTENTION_BLOCK_ALIGN,
) -> HybridPages:
    """Attention block size and common page of ``spec`` under vLLM's rule (see the module)."""
    kv_heads = max(1, spec.num_kv_heads // tensor_parallel)  # ModelConfig.get_num_kv_heads
    per_token = 2 * kv_heads * spec.head_dim * kv_bytes
    conv, temporal = spec.state_elements(tensor_parallel)
    mamba = conv * conv_bytes + temporal * temporal_bytes
    aligned = align * math.ceil(mamba / (align * per_token))
    block = max(user_block_size, aligned)
    return HybridPages(per_token, mamba, block, block * per_token)


@dataclass(frozen=True)
class HybridPool:
    """The KV pool's groups and what vLLM reports of it."""

    pages: HybridPages
    group_size: int  # layers per group (each group's layers share one block table)
    attention_groups: int
    recurrent_groups: int
    num_blocks: int

    @property
    def groups(self) -> int:
        return self.attention_groups + self.recurrent_groups

    def reported_tokens(self, max_model_len: int) -> int:
        """ "GPU KV cache size: N tokens": blocks // groups × the smallest group block size (the attention
        block, or max_model_len, the mamba groups' block size, when that is smaller)."""
        smallest = min(self.pages.block_size, max_model_len)
        return self.num_blocks // self.groups * smallest

    def blocks_per_request(self, max_model_len: int) -> int:
        """A request of max_model_len tokens: cdiv(len, block) per attention group, one per mamba group."""
        return self.attention_groups * math.ceil(max_model_len / self.pages.block_size) + self.recurrent_groups

    def max_concurrency(self, max_model_len: int) -> float:
        """ "Maximum concurrency for L tokens per request: X x"."""
        return self.num_blocks / self.blocks_per_request(max_model_len)

    def bytes_per_request(self, max_model_len: int) -> int:
        """The pool a request of max_model_len tokens holds on this rank, padding and groups included."""
        return self.blocks_per_request(max_model_len) * self.group_size * self.pages.page_bytes


def hybrid_groups(attention_layers: int, recurrent_layers: int) -> tuple[int, int, int]:
    """(layers per group, attention groups, recurrent groups): _get_kv_cache_groups_uniform_page_size."""
    kinds = [n for n in (attention_layers, recurrent_layers) if n]
    size = min(kinds)
    if max(kinds) < size * 1.5:
        size = max(kinds)
    return size, math.ceil(attention_layers / size), math.ceil(recurrent_layers / size)


def hybrid_pool(pages: HybridPages, spec: HybridSpec, available_bytes: float) -> HybridPool:
    """The pool ``available_bytes`` of KV memory gives (get_kv_cache_config_from_groups, get_num_blocks)."""
    size, attention, recurrent = hybrid_groups(spec.attention_layers, spec.recurrent_layers)
    blocks = max(0, int(available_bytes // pages.page_bytes // size))
    return HybridPool(pages, size, attention, recurrent, blocks)


def state_bytes(plan: Plan) -> tuple[int, int]:
    """(conv, temporal) bytes an element of the plan's recurrent state takes under vLLM: the model dtype
    (``mamba_cache_dtype`` auto: 4 for an fp32 plan, else 2 — quantised checkpoints run in bf16), the temporal
    state float32 where a Nemotron-H checkpoint asks for it on a release that reads it, or a Qwen3.5 one does."""
    model, inf = plan.model, plan.inference
    conv = 4 if inf.weight_dtype is WeightFormat.FP32 else 2
    nemotron = model.family == "nemotron_h" and at_least(inf.vllm_version, NEMOTRON_SSM_DTYPE_FROM)
    qwen3_5 = model.family in WRAPPED_HYBRID_TYPES
    return conv, 4 if (nemotron or qwen3_5) and model.recurrent_state_float32 else conv


def plan_pages(plan: Plan, gpu_id: str) -> HybridPages:
    """The page rule for the plan's hybrid model, release and card (one rank of its tensor-parallel group)."""
    model, inf = plan.model, plan.inference
    spec = model.hybrid
    if spec is None:
        raise ValueError(f"{model.name} is not a hybrid model")
    conv, temporal = state_bytes(plan)
    wide = gpu_id.startswith(SM100_CARDS) and model.head_dim == BLACKWELL_HEAD_SIZE
    align = BLACKWELL_ALIGN if wide else ATTENTION_BLOCK_ALIGN
    kv = int(KV_BYTES[inf.kv_dtype])
    return hybrid_pages(spec, kv, conv, temporal, inf.tensor_parallel, align=align)


def state_bytes_per_request(plan: Plan) -> float:
    """One request's recurrent state over the rank's recurrent layers, unpadded: what a decode step reads and
    writes back beside the KV cache."""
    spec = plan.model.hybrid
    if spec is None:
        return 0.0
    conv, temporal = state_bytes(plan)
    return spec.state_bytes(conv, temporal, plan.inference.tensor_parallel)

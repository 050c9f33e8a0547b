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
in both).

Release lines 0.20 - 0.34, read in the released wheels (0.20.0 b8160878f, 0.21.0 ad7125a43 ... 0.28.0 2cf0a6915,
0.32.0 5df63a720, 0.33.0 4ba787ec9, 0.34.0 62d4bc3c7: every x.0 release from 0.20.0 to 0.34.0 was compared):

* Page rule — from 0.20.0 ``HybridAttentionMambaModelConfig`` only validates; the block is set by
  vllm/platforms/interface.py ``Platform.update_block_size_for_backend`` → ``_align_hybrid_block_size``: the
  alignment is ``max(the attention backend's smallest kernel block, the block size the backend prefers)`` and
  the block ``alignment · cdiv(mamba page, alignment · attention page per token)``; the mamba page is padded to
  it as before. Every CUDA backend a catalogue card picks for these models takes multiples of 16
  (FlashAttention ``MultipleOf(16)``, FlashInfer ``[16, 32, 64]`` and up, Triton ``MultipleOf(16)``) and
  prefers ``CacheConfig.DEFAULT_BLOCK_SIZE``: 16 up to 0.33, 64 in 0.34. ROCm's first backend
  (``RocmAttentionBackend``) prefers 16 in 0.34 whatever the default ("Keep the native kernel for default-sized
  runs"), except on gfx1100 / gfx1201 where Triton comes first and takes the 64
  (core.serving.vllm_versions.default_block_size).
  0.32.0 adds a round-up to every backend's smallest block (16 here: no change) and
  0.33.0, in "align" mode, the lcm with the recurrent layers' prefill-checkpoint alignment
  (``get_mamba_prefill_checkpoint_alignment``: 64 for Gated DeltaNet under FlashInfer's prefill, none for
  Mamba-2). The Blackwell head-256 alignment of 32 above ends with 0.17.0 (FlashInfer's smallest block is 16).
* Prefix caching — ``ModelConfig.is_prefix_caching_supported`` is False for hybrids up to 0.25.0 ("Hybrid
  models do not support prefix caching"), True from 0.26.0, but ``EngineArgs`` keeps it opt-in for hybrids in
  0.26.0 and 0.27.0 (``default_prefix_caching = ... and not model_config.is_hybrid``); from 0.28.0 it is on by
  default, and ``MambaModelConfig`` then sets ``mamba_cache_mode`` "align" and ``mamba_block_size`` to the
  attention block. The plan's ``inference.prefix_caching`` picks the engine's default, on (``--enable-prefix-caching``,
  "align" mode from 0.26; refused before, where no release line read models it) or off
  (``--no-enable-prefix-caching``: one state block, the mamba block ``max_model_len``): :func:`align_mode`.
* Blocks a request holds in each recurrent group (``MambaSpec.max_memory_usage_bytes``, read by
  ``get_max_concurrency_for_kv_cache_config``): one without prefix caching; in "align" mode two (the running
  state and the last block boundary's: earlier ones are freed, ``remove_skipped_blocks``) plus
  ``num_prefill_checkpoint_blocks``, which ``MambaMixer2.get_kv_cache_spec`` sets to 1 from 0.32.0 and the
  Gated DeltaNet layer (``QwenGatedDeltaNetAttention``) from 0.33.0 when FlashInfer runs its prefill
  (:data:`CHECKPOINT_RULES`, :func:`state_blocks`).
* Groups and pool — ``_get_kv_cache_groups_uniform_page_size`` keeps the same cut for two layer kinds through
  0.34.0 (0.27.0 merges compatible specs of one kind only); the concurrency is blocks ÷ the sum of each group's
  blocks a request (0.27.0 writes it per group: the same figure).
* Nemotron-H's SSM state: ``NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE`` is "float32" from
  0.20.0 (float16 before) for a checkpoint that names none (:func:`state_bytes`).

A plan reaches these rules through :func:`plan_pages` (the bytes and the alignment its release and card take)
and core.serving.engines.vllm_pool, which sizes the pool in the common page and counts the recurrent groups'
blocks a request (core.serving.vllm_rules.KvGroups.recurrent, :func:`state_blocks`). Which release lines take a
hybrid: core.plan.HYBRID_VLLM_LINES.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from core.catalogue import Generation, generation
from core.dtypes import KV_BYTES, WeightFormat
from core.hybrid import GATED_DELTANET, MAMBA2, WRAPPED_HYBRID_TYPES, HybridSpec
from core.inputs import PrefixCaching, VllmVersion
from core.plan import PREFIX_CACHING_OPT_IN_FROM, Inference, Plan
from core.serving.releases import at_least
from core.serving.vllm_versions import default_block_size

# HybridAttentionMambaModelConfig's alignment: FlashAttention needs block sizes that are multiples of 16
# (vllm-project/vllm 0144dd5b vllm/model_executor/models/config.py, "16 * cdiv(mamba_page_size, 16 * ...)").
ATTENTION_BLOCK_ALIGN: Final = 16
DEFAULT_BLOCK_SIZE: Final = 16  # CacheConfig.block_size on CUDA (core.serving.vllm_rules.VLLM_BLOCK_SIZE, 0.19.0)
# From 0.11.1 the alignment is 32 on a compute-capability 10.0 card for a head size of 256 under FlashInfer, the
# default backend there ("kernel_block_alignment_size = 32": vllm 0.11.1 / 0.12.0 wheels'
# vllm/model_executor/models/config.py, is_device_capability(100); 0.13.0 - 0.17.0 is_device_capability_family(100)).
# The 0.11 line is taken as 0.11.1 - 0.11.2 (0.11.0 aligns to 16 everywhere). Of the catalogue's cards the B200.
# The 0.18.0 and 0.19.0 wheels have no such branch (HybridAttentionMambaModelConfig: "kernel_block_alignment_size =
# 16" for every card), nor has any later line (the module): 16 there.
BLACKWELL_ALIGN: Final = 32
BLACKWELL_HEAD_SIZE: Final = 256
SM100_CARDS: Final = ("b200",)
BLACKWELL_ALIGN_UNTIL: Final = VllmVersion.V0_18  # the first line without it
# NemotronHForCausalLMConfig (0.13.0 - 0.19.0 wheels, vllm/model_executor/models/config.py): with
# mamba_ssm_cache_dtype "auto" it takes the checkpoint's config.json value (float16 when the key is absent, the
# same two bytes as bfloat16); 0.11.0 - 0.12.0 have no such rule and keep the model dtype.
NEMOTRON_SSM_DTYPE_FROM: Final = VllmVersion.V0_13
# From 0.20.0 the key's absence reads as float32 (DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32", "Only `float32` is
# known to have no accuracy issues by default"; the same in 0.34.0). core.model.ModelSpec keeps only whether the
# checkpoint names float32, so from this line a Nemotron-H state is taken as float32 either way: a checkpoint that
# names a 16-bit SSM dtype is not told apart (none of the catalogue's does).
NEMOTRON_SSM_FLOAT32_DEFAULT_FROM: Final = VllmVersion.V0_20
# From 0.20.0 the platform aligns the hybrid block (vllm/platforms/interface.py _align_hybrid_block_size) to
# max(the backend's smallest kernel block, its preferred block size), the preferred size being
# CacheConfig.DEFAULT_BLOCK_SIZE where the backend takes it (vllm/v1/attention/backend.py get_preferred_block_size).
BACKEND_ALIGN_FROM: Final = VllmVersion.V0_20
KERNEL_BLOCK_MIN: Final = 16  # FlashAttention MultipleOf(16), FlashInfer [16, 32, 64, ...], Triton MultipleOf(16)
# vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE: 16 in 0.20.0 - 0.33.0, 64 in 0.34.0 (62d4bc3c7), read from
# core.serving.vllm_versions.default_block_size (VllmEra.block_size),
# which on an AMD card gives ROCM_ATTN's 16 (vllm 0.34.0 rocm_attn.py get_preferred_block_size: "return 16") or
# Triton's 64 on gfx1100 / gfx1201.
# The first line whose default turns prefix caching on for a hybrid, so mamba_cache_mode "align"
# (vllm/engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args: 0.26.0 and 0.27.0 keep it opt-in
# for hybrids, "not model_config.is_hybrid"; 0.28.0 - 0.34.0 take is_prefix_caching_supported, True for a
# generative hybrid from 0.26.0; vllm/model_executor/models/config.py MambaModelConfig: "Mamba cache mode is set to
# 'align' ... by default when prefix caching is enabled").
PREFIX_CACHING_FROM: Final = VllmVersion.V0_28
# MambaSpec.max_memory_usage_bytes in "align" mode: page · (2 + num_speculative_blocks + num_prefill_checkpoint_blocks)
# (vllm/v1/kv_cache_interface.py, 0.26.0 - 0.34.0; the checkpoint term from 0.29.0).
ALIGN_STATE_BLOCKS: Final = 2


@dataclass(frozen=True)
class CheckpointRule:
    """When a recurrent mixer's layer keeps one more state block a request in "align" mode (a prefill checkpoint,
    ``num_prefill_checkpoint_blocks=1``) and the token alignment its checkpoints add to the attention block."""

    first: VllmVersion
    flashinfer_prefill_only: bool  # only where FlashInfer runs the mixer's prefill (:func:`gdn_flashinfer_prefill`)
    alignment: int  # lcm'd into the block alignment in "align" mode (0.33.0 on); 1: none


# Keyed by mixer kind (core.hybrid), so a family with a mixer already here takes its rule. Mamba-2: vllm 0.32.0
# vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2.get_kv_cache_spec ("replace(spec,
# num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1)"), and no get_prefill_checkpoint_alignment of
# its own (abstract.py's None). Gated DeltaNet: vllm 0.33.0 vllm/model_executor/layers/mamba/gdn/
# qwen_gdn_linear_attn.py QwenGatedDeltaNetAttention (with mamba_cache_mode "align" and gdn_prefill_backend
# "flashinfer": _checkpoint_alignment = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, 64 in v1/attention/backends/gdn_attn.py,
# and num_prefill_checkpoint_blocks=1). The same in 0.34.0.
CHECKPOINT_RULES: Final[dict[str, CheckpointRule]] = {
    MAMBA2: CheckpointRule(VllmVersion.V0_32, flashinfer_prefill_only=False, alignment=1),
    GATED_DELTANET: CheckpointRule(VllmVersion.V0_33, flashinfer_prefill_only=True, alignment=64),
}
# _resolve_gdn_prefill_backend (0.33.0, 0.34.0) picks FlashInfer on compute capability 9.0, and on 10.x / 12.x for a
# key head dim of 128 under a CUDA 13 runtime: the PyPI wheels are CUDA 13 builds (their METADATA requires
# nvidia-cutlass-dsl[cu13] and torch 2.14.0). Triton elsewhere (Ampere, Ada, ROCm without VLLM_ROCM_USE_AITER, whose
# default is off). A custom card is taken as neither Hopper nor Blackwell.
GDN_FLASHINFER_KEY_DIM: Final = 128
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
    state float32 where a Nemotron-H checkpoint asks for it on a release that reads it, and on every Nemotron-H
    from 0.20 (:data:`NEMOTRON_SSM_FLOAT32_DEFAULT_FROM`); a Qwen3.5 one where its text config's mamba_ssm_dtype
    says float32, on every line that loads it."""
    model, inf = plan.model, plan.inference
    conv = 4 if inf.weight_dtype is WeightFormat.FP32 else 2
    if model.family in WRAPPED_HYBRID_TYPES:
        return conv, 4 if model.recurrent_state_float32 else conv
    if model.family != "nemotron_h" or not at_least(inf.vllm_version, NEMOTRON_SSM_DTYPE_FROM):
        return conv, conv
    float32 = model.recurrent_state_float32 or at_least(inf.vllm_version, NEMOTRON_SSM_FLOAT32_DEFAULT_FROM)
    return conv, 4 if float32 else conv


def default_prefix_caching(version: VllmVersion) -> bool:
    """Whether the release serves a hybrid with prefix caching on by default (:data:`PREFIX_CACHING_FROM`)."""
    return at_least(version, PREFIX_CACHING_FROM)


def align_mode(inf: Inference) -> bool:
    """Whether the plan's vLLM keeps a hybrid's recurrent state in ``mamba_cache_mode`` "align": prefix caching
    on, by the release's default or by ``--enable-prefix-caching`` (from core.plan.PREFIX_CACHING_OPT_IN_FROM;
    Plan validation refuses it before: core.plan.serving_refusal); ``--no-enable-prefix-caching`` turns it off."""
    if inf.prefix_caching is PrefixCaching.DEFAULT:
        return default_prefix_caching(inf.vllm_version)
    return inf.prefix_caching is PrefixCaching.ON and at_least(inf.vllm_version, PREFIX_CACHING_OPT_IN_FROM)


def gdn_flashinfer_prefill(gpu_id: str, key_dim: int) -> bool:
    """Whether vLLM 0.33 - 0.34 runs a Gated DeltaNet prefill with FlashInfer on this card (see
    :data:`GDN_FLASHINFER_KEY_DIM`): every Hopper card of the catalogue is compute capability 9.0, its Blackwell
    cards 10.0 (B200) or 12.0 (RTX 50, RTX PRO 6000)."""
    arch = generation(gpu_id)
    return arch is Generation.HOPPER or (arch is Generation.BLACKWELL and key_dim == GDN_FLASHINFER_KEY_DIM)


def _checkpoint(plan: Plan, gpu_id: str) -> CheckpointRule | None:
    """The plan's mixer's prefill-checkpoint rule where it applies on this release and card, else None."""
    spec = plan.model.hybrid
    version = plan.inference.vllm_version
    if spec is None or not align_mode(plan.inference):
        return None
    rule = CHECKPOINT_RULES.get(spec.mixer.kind)
    if rule is None or not at_least(version, rule.first):
        return None
    if rule.flashinfer_prefill_only and not gdn_flashinfer_prefill(gpu_id, spec.mixer.state):
        return None
    return rule


def state_blocks(plan: Plan, gpu_id: str) -> int:
    """Blocks one request holds in each recurrent group (``MambaSpec.max_memory_usage_bytes`` ÷ its page): one
    without prefix caching, two in "align" mode plus the mixer's prefill-checkpoint block (:data:`CHECKPOINT_RULES`).
    """
    if not align_mode(plan.inference):
        return 1
    return ALIGN_STATE_BLOCKS + (1 if _checkpoint(plan, gpu_id) is not None else 0)


def block_alignment(plan: Plan, gpu_id: str) -> int:
    """The token multiple the attention block is rounded to on this release and card (see the module)."""
    model, version = plan.model, plan.inference.vllm_version
    if not at_least(version, BACKEND_ALIGN_FROM):
        early = not at_least(version, BLACKWELL_ALIGN_UNTIL)
        wide = early and gpu_id.startswith(SM100_CARDS) and model.head_dim == BLACKWELL_HEAD_SIZE
        return BLACKWELL_ALIGN if wide else ATTENTION_BLOCK_ALIGN
    preferred = default_block_size(model, gpu_id, version)
    align = max(KERNEL_BLOCK_MIN, preferred)
    rule = _checkpoint(plan, gpu_id)
    if rule is not None and at_least(version, VllmVersion.V0_33):  # get_mamba_prefill_checkpoint_alignment
        align = math.lcm(align, rule.alignment)
    return align


def plan_pages(plan: Plan, gpu_id: str) -> HybridPages:
    """The page rule for the plan's hybrid model, release and card (one rank of its tensor-parallel group)."""
    model, inf = plan.model, plan.inference
    spec = model.hybrid
    if spec is None:
        raise ValueError(f"{model.name} is not a hybrid model")
    conv, temporal = state_bytes(plan)
    kv = int(KV_BYTES[inf.kv_dtype])
    return hybrid_pages(spec, kv, conv, temporal, inf.tensor_parallel, align=block_alignment(plan, gpu_id))


def state_bytes_per_request(plan: Plan) -> float:
    """One request's recurrent state over the rank's recurrent layers, unpadded: what a decode step reads and
    writes back beside the KV cache."""
    spec = plan.model.hybrid
    if spec is None:
        return 0.0
    conv, temporal = state_bytes(plan)
    return spec.state_bytes(conv, temporal, plan.inference.tensor_parallel)

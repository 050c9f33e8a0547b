"""SGLang by release: how each release line sets the default ``mem_fraction_static``.

SGLang's token pool is what ``mem_fraction_static`` of the GPU leaves after the weights
(:func:`core.serving.engines.sglang_memory`); the default fraction is where the releases
differ. Each rule below was read in the released wheels on PyPI (``pip download sglang==X
--no-deps``), in ``sglang/srt/server_args.py`` (``ServerArgs.__post_init__``, from 0.5.3
``_handle_gpu_memory_settings``) or, from 0.5.20, ``sglang/srt/arg_groups/memory_hook.py``
``handle_gpu_memory_settings``. No wheel records the commit it was built from (0.4.x and
0.5.1-0.5.6 have no ``_version.py``; from 0.5.7 it has ``commit_id = None``), so each rule
cites the wheel's version and the date its ``server_args.py`` carries. ``gpu_mem`` is the
card's total memory in MiB (``get_device_memory_capacity``: 81,559 on an H100 80GB).

* **By tensor-parallel size (0.4.0 - 0.4.5)**: 0.88 on one GPU, 0.87 from 2, 0.85 from 4,
  0.81 from 8, 0.79 from 16 (0.4.0 of 2024-12-03 to 0.4.5).
* **0.4.6** (2025-04-27): that table on cards of at most 81,920 MiB; above,
  ``(gpu_mem - 13 x 1,024) / gpu_mem``.
* **0.4.7** (2025-06-10): the table by TP x PP on cards of at most 81,920 MiB; above, 0.88.
* **By card class (0.4.8 - 0.5.2)** (0.4.8 of 2025-06-24): ``round((gpu_mem - reserved) /
  gpu_mem, 3)`` with reserved = (2.8 + TP x PP / 10) GiB below 35 GiB, (9.5 + TP x PP / 2)
  GiB below 90 GiB, (12 + TP x PP / 2) GiB below 160 GiB, 32 GiB above.
* **From the prefill chunk and CUDA graphs (0.5.3 - 0.5.23)** (0.5.3 of 2025-10-06 to 0.5.23
  of 2026-10-30): reserved = 512 + 1.5 x max(chunked prefill, 2,048) + 2 x the decode graphs'
  largest batch + TP x PP / 8 x 1,024 MiB + 8 MiB per captured prefill token count, at least
  10 GiB on cards above 60 GiB, with the chunked prefill and largest batch set by card size
  (:func:`card_defaults`; the tiers are the same in every wheel of 0.5.10 - 0.5.19). What the
  graph terms count, and what ``--disable-cuda-graph`` (the plan's ``inference.cuda_graphs``
  off) takes out of them, changed within the era: :data:`GRAPH_RESERVES`, one row per change,
  each read in the wheels of its releases (0.5.10 - 0.5.20 all read; 0.5.23 for the last row).
  In short: prefill (piecewise) graphs from 0.5.10, off with pipeline parallelism except in
  0.5.15 - 0.5.18 (the "breakable" prefill default had no such rule then); their token counts
  stop at ``--context-length`` in 0.5.13 - 0.5.16; ``--disable-cuda-graph`` keeps both graph
  terms up to 0.5.13, drops the prefill term only in 0.5.14 and both from 0.5.15. The 10 GiB
  floor stays whatever the switch.

What of the model and card the default reads (:class:`Launch`, :func:`launch_of`):

* **Whether prefill graphs are captured** (:func:`prefill_graphs_off`, the one place the reserve and the
  window's formula ask): not on an AMD card (every release from 0.5.10), not for a multimodal model, not
  for an MLA model in 0.5.15 - 0.5.17, beside pipeline parallelism and ``--disable-cuda-graph`` above.
* **Their size**: an MLA model (DeepSeek-V2 / V3, Kimi K2) reserves 1.5 GiB for them instead of 8 MiB per
  count; a ``--model-path`` holding "llama-2" (lowercased; the catalogue's Hub repository, else the
  model's name) captures at most 4,096 tokens (0.5.10 - 0.5.23).
* **The multimodal reduction** (:func:`vlm_factor`): from 0.4.9 a multimodal model's default fraction is
  multiplied, x 0.90 in 0.4.9, from 0.4.10 by ``adjust_mem_fraction_for_vlm``'s rule of the vision
  config's layers and width. Gemma 3 and Llama 4 are not multimodal at SGLang's defaults
  (``mm_disabled_models``), so neither rule touches them unless the plan passes ``--enable-multimodal``
  (``inference.sglang_enable_multimodal``, :func:`is_multimodal`).
* **The multimodal reserve** (:func:`mm_reserve_mib`, not a fraction: taken from the token pool by
  core.serving.engines.sglang_memory): from 0.5.18 a multimodal model's pool leaves room for the embedding cache
  allocated after it (100 MiB), from 0.5.20 Qwen3-VL's 1 GiB feature pool instead on an sm90 card of 60 GiB or more.

Whether the vision tower is built does not depend on the multimodal switch for the families the planner serves on
SGLang (Gemma 3, Qwen2.5-VL, Qwen3-VL, LLaVA, Mistral 3: core.serving.text_only, read per class); the weights count
it whatever the launch.

``--enable-multimodal`` (``inference.sglang_enable_multimodal``; the flag from 0.4.6, core.inputs
SGLANG_ENABLE_MULTIMODAL_FROM) makes ModelConfig.is_multimodal True for Gemma 3 (and Llama 4, planned on vLLM only),
and everything above that reads it follows: the reduction, no prefill graphs, the reserve. Read in the wheels for what
else it moves: nothing in memory. The chunked prefill stays on (``is_multimodal_chunked_prefill_supported``: its
unsupported list, 0.4.9 - 0.5.23 configs/model_config.py, names neither family), the decode graphs' largest batch is
the card's (0.5.23 memory_hook.py ``expand_multimodal_decode_graph_to_running_limit`` is Qwen3-VL's on a large sm90
card only), and Gemma 3's SigLIP is built either way (above); Llama 4's tower would be built only with the flag
(0.4.10 on models/mllama4.py ``has_vision``), which no SGLang plan reaches.

Not modelled: speculative decoding, DP attention, DeepEP's extra reserves, LoRA serving, torch.compile,
MoE all-to-all backends, context parallelism and GGUF checkpoints (each also turns the prefill graphs off;
no serving plan expresses them), ``--language-only`` and PD disaggregation (which skip the multimodal reduction),
the post-capture KV sizing of 0.5.16 on (``SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`` defaults to False; with it
0.5.20's reduction is a flat 8 GiB), ``--max-total-tokens`` (which also caps the captured counts), NPU / XPU tiers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.catalogue import Generation, GpuSpec, amd_target, generation, hub_repo_of
from core.inputs import SGLANG_ENABLE_MULTIMODAL_FROM, SGLANG_MM_DISABLED_FAMILIES
from core.model import ModelSpec
from core.plan import Inference, Plan, SglangVersion
from core.serving import releases
from core.units import MiB


class FractionRule(StrEnum):
    TP_TABLE = "by tensor-parallel size"
    TABLE_OR_13_GIB = "table to 80 GiB, 13 GiB reserved above"
    TABLE_OR_088 = "table to 80 GiB, 0.88 above"
    CARD_CLASS = "reserve by card class"
    RESERVE = "reserve from the prefill chunk and CUDA graphs"


@dataclass(frozen=True)
class SglangEra:
    name: str
    first: SglangVersion
    last: SglangVersion
    rule: FractionRule


ERAS: Final = (
    SglangEra("0.4.0-0.4.5", SglangVersion.V0_4_0, SglangVersion.V0_4_5, FractionRule.TP_TABLE),
    SglangEra("0.4.6", SglangVersion.V0_4_6, SglangVersion.V0_4_6, FractionRule.TABLE_OR_13_GIB),
    SglangEra("0.4.7", SglangVersion.V0_4_7, SglangVersion.V0_4_7, FractionRule.TABLE_OR_088),
    SglangEra("0.4.8-0.5.2", SglangVersion.V0_4_8, SglangVersion.V0_5_2, FractionRule.CARD_CLASS),
    SglangEra("0.5.3-0.5.23", SglangVersion.V0_5_3, SglangVersion.V0_5_23, FractionRule.RESERVE),
)

# sglang 0.4.0-0.4.7 server_args.py: the default fraction by (TP, or from 0.4.7 TP x PP) size.
TP_TABLE: Final = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
# sglang 0.4.6 / 0.4.7 server_args.py: the table holds up to this card size (MiB).
TABLE_CARD_MIB: Final = 81_920
# sglang 0.4.6 server_args.py: "(gpu_mem - 1024 * 13) / gpu_mem" above TABLE_CARD_MIB.
RESERVE_0_4_6_MIB: Final = 13 * 1024
# sglang 0.4.7 server_args.py: 0.88 above TABLE_CARD_MIB.
FRACTION_0_4_7_LARGE: Final = 0.88
# sglang 0.4.8-0.5.2 server_args.py: (card size below, GiB; reserve GiB = base + TP x PP x per).
CLASS_RESERVES: Final = ((35, 2.8, 0.1), (90, 9.5, 0.5), (160, 12.0, 0.5))
CLASS_RESERVE_HUGE_GIB: Final = 32.0  # "B200, MI300"
# sglang 0.5.3-0.5.23 _handle_gpu_memory_settings / handle_gpu_memory_settings.
RESERVE_BASE_MIB: Final = 512  # "Constant meta data (e.g., from attention backend)"
RESERVE_PER_PREFILL_TOKEN_MIB: Final = 1.5  # "For activation during large prefill"
RESERVE_MIN_PREFILL_TOKENS: Final = 2048
RESERVE_PER_GRAPH_BATCH_MIB: Final = 2  # "For cuda graphs": decode max_bs x 2
RESERVE_PER_RANK_MIB: Final = 1024 / 8  # tp_size x pp_size / 8 x 1024
RESERVE_FLOOR_MIB: Final = 10 * 1024  # on cards above RESERVE_FLOOR_CARD_MIB
RESERVE_FLOOR_CARD_MIB: Final = 60 * 1024
RESERVE_PER_PREFILL_GRAPH_MIB: Final = 8  # per captured prefill token count (non-MLA)


@dataclass(frozen=True)
class GraphReserve:
    """What a release line's default fraction reserves for CUDA graphs (the era from 0.5.3)."""

    first: SglangVersion
    last: SglangVersion
    prefill: bool  # 8 MiB per captured prefill token count
    prefill_with_pp: bool  # prefill graphs stay on by default with pipeline parallelism
    prefill_to_context: bool  # the captured token counts stop at --context-length
    off_keeps_decode: bool  # --disable-cuda-graph leaves the decode graphs' 2 MiB per batch
    off_keeps_prefill: bool  # --disable-cuda-graph leaves the prefill graphs' 8 MiB per count
    mla_off: bool = False  # the CUDA default prefill backend (breakable) is off for an MLA model


V = SglangVersion
# Read in the wheels on PyPI (pip download sglang==X --no-deps; the date is server_args.py's in the wheel).
GRAPH_RESERVES: Final = (
    # 0.5.3 server_args.py _handle_gpu_memory_settings: "reserved_mem += self.cuda_graph_max_bs * 2", not under
    # any condition on disable_cuda_graph; no prefill graphs.
    GraphReserve(V.V0_5_3, V.V0_5_9, False, False, False, True, True),
    # 0.5.10 (2026-04-05), 0.5.11 (2026-05-07), 0.5.12 (2026-05-16) server_args.py: + len(piecewise_cuda_graph_tokens)
    # * 8 unless disable_piecewise_cuda_graph, which _handle_piecewise_cuda_graph sets with pp_size > 1 and never
    # from disable_cuda_graph; the decode term as in 0.5.3.
    GraphReserve(V.V0_5_10, V.V0_5_12, True, False, False, True, True),
    # 0.5.13 (2026-06-11): piecewise_cuda_graph_max_tokens = min(it, context_length) when --context-length is given
    # ("#21112"), before the token counts are generated.
    GraphReserve(V.V0_5_13, V.V0_5_13, True, False, True, True, True),
    # 0.5.14 (2026-06-26): _parse_cuda_graph_config sets the decode and prefill backends to Backend.DISABLED under
    # disable_cuda_graph (--disable-cuda-graph, DeprecatedStoreTrueAction); the prefill term now needs
    # "prefill_cuda_graph_config.backend != Backend.DISABLED", the decode term is still unconditional. The prefill
    # default is tc_piecewise, which _disable_tc_piecewise_cudagraph_if_incompatible turns off with pp_size > 1.
    GraphReserve(V.V0_5_14, V.V0_5_14, True, False, True, True, False),
    # 0.5.15 (2026-07-10), 0.5.16 (2026-07-25): the decode term needs "decode_cuda_graph_config.backend !=
    # Backend.DISABLED"; the prefill default is breakable on CUDA (model_executor/cuda_graph_config.py
    # default_prefill_backend), whose _disable_breakable_cudagraph_if_incompatible has no pipeline-parallel rule
    # and turns an MLA model's prefill graphs off ("MLA attention").
    GraphReserve(V.V0_5_15, V.V0_5_16, True, True, True, False, False, mla_off=True),
    # 0.5.17 (2026-08-08), 0.5.18 (2026-08-21): the context_length clamp is gone from _handle_gpu_memory_settings
    # (0.5.16 reserve_for_graph_mb, read again in 0.5.18, holds both terms). 0.5.17's breakable rules still turn
    # an MLA model's prefill graphs off ("MLA attention (non-DSA)": DeepSeek-V2 / V3 and Kimi K2 are not DSA);
    # 0.5.18's have no MLA rule.
    GraphReserve(V.V0_5_17, V.V0_5_17, True, True, False, False, False, mla_off=True),
    GraphReserve(V.V0_5_18, V.V0_5_18, True, True, False, False, False),
    # 0.5.19 (2026-09-04) arg_groups/cuda_graph_hook.py apply_cuda_graph_compatibility: "PP prefill graph replay is
    # opt-in", breakable prefill off with pp_size > 1; memory_hook.reserve_for_graph_mb as 0.5.18. Read again in
    # 0.5.20 (2026-09-18) and 0.5.23.
    GraphReserve(V.V0_5_19, V.V0_5_23, True, False, False, False, False),
)
# Below 35 GiB (A10, RTX 4090 / 5090): the largest decode graph with TP < 4 is 16 in 0.5.3 and
# 0.5.4, 24 from 0.5.5; from 0.5.20 the chunk is 4,096 tokens and the batches 48 / 160.
SMALL_CARD_BS_24_FROM: Final = SglangVersion.V0_5_5
SMALL_CARD_4K_FROM: Final = SglangVersion.V0_5_20


def era_of(version: SglangVersion) -> SglangEra:
    return releases.era_of(version, ERAS)


def at_least(version: SglangVersion, first: SglangVersion) -> bool:
    return releases.at_least(version, first)


def card_mib(gpu: GpuSpec) -> float:
    """get_device_memory_capacity: the card's total memory in MiB."""
    return gpu.memory_bytes / MiB


def _table(size: int) -> float:
    return next(f for ranks, f in TP_TABLE if size >= ranks)


def card_defaults(version: SglangVersion, gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, the decode CUDA graphs' largest batch) SGLang 0.5.3+ picks by card
    size (NVIDIA tiers of _handle_gpu_memory_settings; the same in 0.5.3-0.5.23 but below 35 GiB)."""
    if gpu_mib < 20 * 1024:  # T4, RTX 4080
        return 2048, 8
    if gpu_mib < 35 * 1024:  # A10, RTX 4090 / 5090
        if at_least(version, SMALL_CARD_4K_FROM):
            return 4096, 48 if tp < 4 else 160
        return 2048, (24 if at_least(version, SMALL_CARD_BS_24_FROM) else 16) if tp < 4 else 80
    if gpu_mib < 60 * 1024:  # A100 40GB, L40
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * 1024:  # H100, A100 80GB, H20, H200
        return 8192, 256 if tp < 4 else 512
    return 16384, 512  # B200, MI300


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """generate_prefill_cuda_graph_batch_sizes (0.5.23 cuda_graph_hook.py; 0.5.10's
    _generate_piecewise_cuda_graph_tokens is the same list): the captured token counts."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_tokens + 1, 512),
    ]
    return [s for s in sizes if s <= max_tokens]


def graph_rule(version: SglangVersion) -> GraphReserve:
    """The :data:`GRAPH_RESERVES` row of a release of the reserve era (0.5.3 on)."""
    return releases.era_of(version, GRAPH_RESERVES)


def reserves_for_graphs(version: SglangVersion) -> bool:
    """Whether the release's default fraction is a reserve with graph terms (0.5.3 on, :data:`GRAPH_RESERVES`);
    before it the fraction is a table or a class of card, which ``--disable-cuda-graph`` does not change."""
    return releases.at_least(version, GRAPH_RESERVES[0].first)


def graphs_reserved(version: SglangVersion, graphs: bool) -> tuple[bool, bool]:
    """(decode, prefill): which graph terms the release's default fraction keeps, all with graphs on (and
    before the reserve era, whose fractions have none to drop), under ``--disable-cuda-graph`` (``graphs``
    False) what :data:`GRAPH_RESERVES` says."""
    if graphs or not reserves_for_graphs(version):
        return True, True
    rule = graph_rule(version)
    return rule.off_keeps_decode, rule.off_keeps_prefill


# --- What the launch is: the model and card the defaults read beyond the Inference -------------------------------

# Which releases' ModelConfig.is_multimodal is True for a vision family (configs/model_config.py of each wheel):
# (first, last) release. The family's architecture enters multimodal_model_archs: Qwen2_5_VLForConditionalGeneration
# in 0.4.3 (0.4.3.post4's list; 0.4.2's lacks it), Gemma3 / Llama4ForConditionalGeneration in 0.4.5, Mistral3 /
# LlavaForConditionalGeneration in 0.4.7, Qwen3VLForConditionalGeneration in 0.5.3 (0.5.2's lacks it). From 0.4.6
# mm_disabled_models sets enable_multimodal False for Gemma 3 and Llama 4 unless --enable-multimodal (read to 0.5.23).
# A family in no list (LLaVA-NeXT / OneVision's HF classes, a tower of no recorded family) is multimodal from 0.5.10,
# where has_multimodal_subconfig reads the wrapper's vision_config.
MULTIMODAL_RELEASES: Final[dict[str, tuple[SglangVersion, SglangVersion]]] = {
    "qwen2_5_vl": (SglangVersion.V0_4_3, SglangVersion.V0_5_23),
    "gemma3": (SglangVersion.V0_4_5, SglangVersion.V0_4_5),
    "llama4": (SglangVersion.V0_4_5, SglangVersion.V0_4_5),
    "mistral3": (SglangVersion.V0_4_7, SglangVersion.V0_5_23),
    "llava": (SglangVersion.V0_4_7, SglangVersion.V0_5_23),
    "qwen3_vl": (SglangVersion.V0_5_3, SglangVersion.V0_5_23),
}
MULTIMODAL_SUBCONFIG_FROM: Final = SglangVersion.V0_5_10
# The multimodal reduction by release: model_executor/model_runner.py ModelRunner.__init__ "if self.is_multimodal:
# self.mem_fraction_static *= 0.95" (0.4.0 - 0.4.4), "*= 0.90" (0.4.5 - 0.4.8), on the fraction given or not; 0.4.9
# server_args.py __post_init__ "*= 0.90" on the default only; 0.4.10 on adjust_mem_fraction_for_vlm (below), the
# default only.
RUNNER_FACTORS: Final = ((SglangVersion.V0_4_0, 0.95), (SglangVersion.V0_4_5, 0.90))
DEFAULT_ONLY_FROM: Final = SglangVersion.V0_4_9
VLM_FACTOR_0_4_9: Final = 0.90
# sglang 0.4.10 - 0.5.18 server_args.py adjust_mem_fraction_for_vlm, 0.5.19 - 0.5.23 arg_groups/memory_hook.py (the
# same arithmetic): 0.95 x clamp(1 - 0.1 x (layers x hidden² / (24 x 1,024²) - 1), 0.8, 1.05), layers and hidden
# read with getattr(vision_config, "num_hidden_layers", 24) / ("hidden_size", 1024) ("baseline ViT-L/14").
VLM_FACTOR_FROM: Final = SglangVersion.V0_4_10
VLM_BASE_FACTOR: Final = 0.95
VLM_BASELINE_LAYERS: Final = 24
VLM_BASELINE_HIDDEN: Final = 1024
VLM_SENSITIVITY: Final = 0.1
VLM_ADJUST_RANGE: Final = (0.8, 1.05)
# From 0.5.10 (server_args.py; 0.5.19 on arg_groups/memory_hook.py): 'if "llama-2" in model_path.lower()' caps the
# captured prefill token counts at 4,096 ("TODO(yuwei): remove this after the issue is fixed"), read to 0.5.23.
LLAMA2_PATH_TEXT: Final = "llama-2"
LLAMA2_PREFILL_CAP: Final = 4096
# sglang 0.5.10 - 0.5.23: an MLA model's prefill graphs reserve 1.5 x 1,024 MiB instead of 8 MiB per count ("For MLA
# backend the memory overhead is much higher than expected with fa3").
RESERVE_MLA_PREFILL_GRAPHS_MIB: Final = 1.5 * 1024
# The multimodal reserve out of the token pool (:func:`mm_reserve_mib`): sglang 0.5.18 - 0.5.23
# mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb (sgl-project/sglang PR #34141, merged 2026-08-09; not in
# the 0.5.17 wheel), subtracted in _profile_available_bytes ("rest_memory = available_gpu_memory - slack_gb -
# mm_reservation_gb", GiB: reserved_mb / 1024) for a model whose ModelConfig.is_multimodal holds: the embedding cache
# SGLANG_VLM_CACHE_SIZE_MB (environ.py EnvInt(100) in 0.5.18, 0.5.20 and 0.5.23), plus SGLANG_MM_FEATURE_CACHE_MB
# (EnvInt(1 * 1024)) where the feature transport is cuda_ipc / cuda_vmm, which _handle_multimodal_feature_transport
# leaves at "cpu" on one node unless asked (0.5.18 server_args.py; 0.5.20 arg_groups/serving_hook.py).
MM_RESERVE_FROM: Final = SglangVersion.V0_5_18
VLM_CACHE_MIB: Final = 100
MM_FEATURE_CACHE_MIB: Final = 1024
# sglang 0.5.20 - 0.5.23 arg_groups/model_overrides/qwen3_vl.py _qwen3vl_hopper_serving_overrides (not in 0.5.19):
# Qwen3-VL (hf_config.model_type in _HOPPER_QWEN3_VL_TYPES) served as multimodal on an sm90 card of at least 60 GiB
# (large_hopper_qwen3_vl_model_type) sets SGLANG_VLM_CACHE_SIZE_MB to 0 and, with no cache retained on one node, the
# feature transport to cuda_ipc; the overrides run (handle_model_specific_adjustments) before the transport is
# resolved (handle_environment_variables), so the reserve is the 1,024 MiB feature pool instead of the 100 MiB cache
# (3 GiB with --max-running-requests 400 or more, which no serving plan gives).
HOPPER_QWEN3_VL_FROM: Final = SglangVersion.V0_5_20
HOPPER_QWEN3_VL_CARD_MIB: Final = 60 * 1024
HOPPER_QWEN3_VL_TYPES: Final = frozenset(("qwen3_vl", "qwen3_vl_moe"))


@dataclass(frozen=True)
class Launch:
    """What SGLang's start-up reads of the model and the card for its default fraction (:func:`launch_of`)."""

    multimodal: bool = False  # ModelConfig.is_multimodal (:func:`is_multimodal`, --enable-multimodal included)
    mla: bool = False  # use_mla_backend: the model's attention is multi-head latent (DeepSeek-V2 / V3, Kimi K2)
    llama2_path: bool = False  # "llama-2" in --model-path, lowercased
    amd: bool = False  # a ROCm build (is_hip): the card is an AMD one
    vit_layers: int = 0  # vision_config.num_hidden_layers as the config object answers it; 0: none (SGLang: 24)
    vit_hidden: int = 0  # vision_config.hidden_size; 0: none (SGLang: 1,024)
    vision_family: str = ""  # the image-text wrapper's model_type (ModelSpec.vision_family); "" for a text model
    hopper: bool = False  # an sm90 card (is_sm90_supported): H100, H200, H20, GH200


TEXT_LAUNCH: Final = Launch()


def is_multimodal(version: SglangVersion, model: ModelSpec, enable_multimodal: bool = False) -> bool:
    """SGLang's ModelConfig.is_multimodal for the model, by release (:data:`MULTIMODAL_RELEASES`), at its defaults or,
    ``enable_multimodal``, with ``--enable-multimodal``: then a family of mm_disabled_models (Gemma 3, Llama 4) is
    multimodal from 0.4.6, the first release with the flag ("enable_multimodal and is_multimodal_model(...)": both
    architectures are in multimodal_model_archs from 0.4.5 to 0.5.23). The flag changes no other model: every other
    family's enable_multimodal is True already, and a text model is in no list."""
    if not model.vision_params:
        return False
    opted_in = enable_multimodal and model.vision_family in SGLANG_MM_DISABLED_FAMILIES
    if opted_in and releases.at_least(version, SGLANG_ENABLE_MULTIMODAL_FROM):
        return True
    first, last = MULTIMODAL_RELEASES.get(model.vision_family, (MULTIMODAL_SUBCONFIG_FROM, SglangVersion.V0_5_23))
    return releases.at_least(version, first) and releases.at_least(last, version)


def model_path(plan: Plan) -> str:
    """The --model-path the plan's launch gives (core.files.launch.common model_reference): the Hub repository of
    the catalogue model the plan's model is (core.catalogue.hub_repo_of), else the model's own name (an imported
    model's Hub id or folder name, an edited model's)."""
    return hub_repo_of(plan) or plan.model.name


def launch_of(plan: Plan, gpu: GpuSpec) -> Launch:
    """The plan's :class:`Launch` on ``gpu``."""
    model = plan.model
    return Launch(
        multimodal=is_multimodal(plan.inference.sglang_version, model, plan.inference.sglang_enable_multimodal),
        mla=model.latent_attention,
        llama2_path=LLAMA2_PATH_TEXT in model_path(plan).lower(),
        amd=amd_target(gpu.id) is not None,
        vit_layers=model.vision_config_layers,
        vit_hidden=model.vision_config_hidden,
        vision_family=model.vision_family,
        hopper=generation(gpu.id) is Generation.HOPPER,
    )


def prefill_graphs_off(version: SglangVersion, graphs: bool, pp: int, launch: Launch = TEXT_LAUNCH) -> str:
    """Why the release captures no prefill (piecewise) CUDA graphs for this launch, as the default fraction's
    reserve counts them; "" when it captures them. Read per release (file + release at each rule):

    * before 0.5.10: the release has none;
    * ``--disable-cuda-graph``: what :data:`GRAPH_RESERVES` says (the term kept up to 0.5.13);
    * pipeline parallelism: 0.5.10 - 0.5.14 and 0.5.19 on (``prefill_with_pp``);
    * an AMD card: 0.5.10 - 0.5.13 server_args.py _handle_piecewise_cuda_graph "Non-CUDA hardware"; 0.5.14 - 0.5.20
      the default off CUDA is tc_piecewise (model_executor/cuda_graph_config.py default_prefill_backend), whose
      rules (_disable_tc_piecewise_cudagraph_if_incompatible; 0.5.19 on arg_groups/cuda_graph_hook.py) turn it off
      on "non-CUDA hardware (HIP/NPU/CPU/MPS/XPU)"; 0.5.23's default off CUDA is Backend.DISABLED;
    * a multimodal model (:func:`is_multimodal`): "Multimodal / VLM models" in 0.5.10 - 0.5.13, "multimodal model"
      in the tc_piecewise (0.5.14) and breakable rules (0.5.15 on); their allowlists (model_config.py
      multimodal_piecewise / breakable_cuda_graph_supported_model_archs: Cohere2Vision, KimiK25, MiniMaxM3, and from
      0.5.16 Qwen3.5's, hybrid models the planner does not serve on SGLang) hold no family the planner serves there;
    * an MLA model: 0.5.15 - 0.5.17 (``mla_off``, the breakable rules' "MLA attention").

    LoRA (--enable-lora / --lora-paths), speculative decoding (0.5.10), DP attention, torch.compile, MoE all-to-all
    backends, context parallelism and GGUF weights also turn them off; no serving plan expresses them."""
    if not reserves_for_graphs(version) or not graph_rule(version).prefill:
        return f"SGLang {version.value} captures none"
    rule = graph_rule(version)
    rules = (  # the first that holds names the reason, as SGLang's own rule lists do
        (not graphs and not rule.off_keeps_prefill, "--disable-cuda-graph"),
        (pp > 1 and not rule.prefill_with_pp, "pipeline parallelism"),
        (launch.amd, "an AMD card (ROCm)"),
        (launch.multimodal, "a multimodal model"),
        (launch.mla and rule.mla_off, "MLA attention"),
    )
    return next((why for off, why in rules if off), "")


def prefill_graphs_mib(version: SglangVersion, chunk: int, context: int | None, launch: Launch = TEXT_LAUNCH) -> float:
    """The prefill graphs' term of the reserve when they are captured: 1.5 GiB for an MLA model, else 8 MiB per
    captured token count, up to the chunk, 4,096 for a "llama-2" path, the context in 0.5.13 - 0.5.16."""
    if launch.mla:
        return RESERVE_MLA_PREFILL_GRAPHS_MIB
    tokens = min(chunk, LLAMA2_PREFILL_CAP) if launch.llama2_path else chunk
    if graph_rule(version).prefill_to_context and context:
        tokens = min(tokens, context)
    return RESERVE_PER_PREFILL_GRAPH_MIB * len(prefill_graph_sizes(tokens))


def reserved_mib(
    version: SglangVersion,
    gpu_mib: float,
    tp: int,
    pp: int,
    graphs: bool = True,
    context: int | None = None,
    launch: Launch = TEXT_LAUNCH,
) -> float:
    """What SGLang 0.5.3+ keeps outside mem_fraction_static for activations and CUDA graphs
    (``graphs`` False: ``--disable-cuda-graph``; ``context``: the ``--context-length`` the launch gives)."""
    chunk, max_bs = card_defaults(version, gpu_mib, tp)
    decode, _ = graphs_reserved(version, graphs)
    reserve = RESERVE_BASE_MIB + RESERVE_PER_PREFILL_TOKEN_MIB * max(chunk, RESERVE_MIN_PREFILL_TOKENS)
    reserve += RESERVE_PER_RANK_MIB * tp * pp
    if decode:
        reserve += RESERVE_PER_GRAPH_BATCH_MIB * max_bs
    if not prefill_graphs_off(version, graphs, pp, launch):
        reserve += prefill_graphs_mib(version, chunk, context, launch)
    if gpu_mib > RESERVE_FLOOR_CARD_MIB:
        reserve = max(reserve, RESERVE_FLOOR_MIB)
    return reserve


def mm_reserve_mib(version: SglangVersion, launch: Launch, gpu_mib: float) -> float:
    """What SGLang keeps out of the token pool for a multimodal model's later allocations (:data:`MM_RESERVE_FROM`):
    0 before 0.5.18 and for a launch that is not multimodal (Gemma 3 without --enable-multimodal:
    :func:`is_multimodal`); the embedding cache's 100 MiB; from 0.5.20 Qwen3-VL's 1,024 MiB feature pool on an sm90
    card of 60 GiB or more."""
    if not launch.multimodal or not releases.at_least(version, MM_RESERVE_FROM):
        return 0.0
    large_hopper = launch.hopper and gpu_mib >= HOPPER_QWEN3_VL_CARD_MIB
    if large_hopper and launch.vision_family in HOPPER_QWEN3_VL_TYPES and at_least(version, HOPPER_QWEN3_VL_FROM):
        return MM_FEATURE_CACHE_MIB
    return VLM_CACHE_MIB


def runner_factor(version: SglangVersion, launch: Launch) -> float:
    """What 0.4.0 - 0.4.8's ModelRunner multiplies any fraction, given or default, by for a multimodal model
    (:data:`RUNNER_FACTORS`); 1 from 0.4.9, where the reduction touches the default only."""
    if not launch.multimodal or releases.at_least(version, DEFAULT_ONLY_FROM):
        return 1.0
    return next(f for first, f in reversed(RUNNER_FACTORS) if releases.at_least(version, first))


def vlm_factor(version: SglangVersion, launch: Launch) -> float:
    """What SGLang multiplies its default fraction by for a multimodal model: 1 for a text model; the ModelRunner's
    0.95 / 0.90 up to 0.4.8 (:func:`runner_factor`); 0.90 in 0.4.9; from 0.4.10 adjust_mem_fraction_for_vlm's rule of
    the vision config (:data:`VLM_BASE_FACTOR`)."""
    if not launch.multimodal:
        return 1.0
    if not releases.at_least(version, DEFAULT_ONLY_FROM):
        return runner_factor(version, launch)
    if not releases.at_least(version, VLM_FACTOR_FROM):
        return VLM_FACTOR_0_4_9
    layers = launch.vit_layers or VLM_BASELINE_LAYERS
    hidden = launch.vit_hidden or VLM_BASELINE_HIDDEN
    ratio = layers * hidden**2 / (VLM_BASELINE_LAYERS * VLM_BASELINE_HIDDEN**2)
    low, high = VLM_ADJUST_RANGE
    return VLM_BASE_FACTOR * max(low, min(high, 1.0 - VLM_SENSITIVITY * (ratio - 1.0)))


def release_default(inf: Inference, gpu: GpuSpec, launch: Launch = TEXT_LAUNCH) -> float:
    """The release's rounded default before the multimodal reduction."""
    version, tp, pp = inf.sglang_version, inf.tensor_parallel, inf.pipeline_parallel
    gpu_mib = card_mib(gpu)
    rule = era_of(version).rule
    if rule is FractionRule.TP_TABLE:
        return _table(tp)
    if rule is FractionRule.TABLE_OR_13_GIB:
        return _table(tp) if gpu_mib <= TABLE_CARD_MIB else (gpu_mib - RESERVE_0_4_6_MIB) / gpu_mib
    if rule is FractionRule.TABLE_OR_088:
        return _table(tp * pp) if gpu_mib <= TABLE_CARD_MIB else FRACTION_0_4_7_LARGE
    if rule is FractionRule.CARD_CLASS:
        gib = next(
            (base + tp * pp * per for below, base, per in CLASS_RESERVES if gpu_mib < below * 1024),
            CLASS_RESERVE_HUGE_GIB,
        )
        return round((gpu_mib - gib * 1024) / gpu_mib, 3)
    reserve = reserved_mib(version, gpu_mib, tp, pp, inf.cuda_graphs, inf.context, launch)
    return round((gpu_mib - reserve) / gpu_mib, 3)


def default_fraction(inf: Inference, gpu: GpuSpec, launch: Launch = TEXT_LAUNCH) -> float:
    """mem_fraction_static when none is given, by the plan's SGLang release (``launch``: the model and card it
    reads, :func:`launch_of`): the release's rounded rule, times :func:`vlm_factor` for a multimodal model (not
    rounded again: ``*= 0.90``, later ``original x final_overall_factor``)."""
    return release_default(inf, gpu, launch) * vlm_factor(inf.sglang_version, launch)


def default_notes(inf: Inference, gpu: GpuSpec, launch: Launch) -> list[str]:
    """What of the launch changed the release's default, in words for the window's formula (the same conditions
    as :func:`default_fraction`): prefill graphs a reserve-era release leaves out (--disable-cuda-graph is said
    apart), the llama-2 cap where the chunk is larger, the multimodal reduction."""
    notes: list[str] = []
    version = inf.sglang_version
    if reserves_for_graphs(version) and graph_rule(version).prefill:
        why = prefill_graphs_off(version, inf.cuda_graphs, inf.pipeline_parallel, launch)
        chunk, _ = card_defaults(version, card_mib(gpu), inf.tensor_parallel)
        if why and why != "--disable-cuda-graph":
            notes.append(f"no prefill CUDA graphs: {why}")
        elif not why and launch.llama2_path and not launch.mla and chunk > LLAMA2_PREFILL_CAP:
            notes.append(f'prefill graphs to {LLAMA2_PREFILL_CAP:,} tokens: "{LLAMA2_PATH_TEXT}" in the model path')
    factor = vlm_factor(version, launch)
    if factor != 1.0:
        notes.append(f"× {factor:.4g} for {multimodal_words(inf, launch)}")
    return notes


def multimodal_words(inf: Inference, launch: Launch) -> str:
    """What the formula calls a multimodal launch: "a multimodal model", naming --enable-multimodal where the plan's
    flag made it one (a family of SGLang's mm_disabled_models, :func:`is_multimodal`)."""
    opted_in = inf.sglang_enable_multimodal and launch.vision_family in SGLANG_MM_DISABLED_FAMILIES
    return "a multimodal model (--enable-multimodal)" if opted_in else "a multimodal model"

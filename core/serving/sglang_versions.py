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

Not modelled: speculative decoding, DP attention, DeepEP and MLA backends' extra reserves, the
multimodal reduction (0.4.9 on, ``adjust_mem_fraction_for_vlm``), the post-capture KV sizing of
0.5.16 on (``SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`` defaults to False), NPU / XPU tiers, the
prefill graphs' other switches-off (LoRA, multimodal and GGUF models, MoE all-to-all, context
parallelism) and their 4,096-token cap for a model path holding "llama-2" (0.5.10 - 0.5.23).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.catalogue import GpuSpec
from core.plan import Inference, SglangVersion
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
    # default_prefill_backend), whose _disable_breakable_cudagraph_if_incompatible has no pipeline-parallel rule.
    GraphReserve(V.V0_5_15, V.V0_5_16, True, True, True, False, False),
    # 0.5.17 (2026-08-08), 0.5.18 (2026-08-21): the context_length clamp is gone from _handle_gpu_memory_settings
    # (0.5.16 reserve_for_graph_mb, read again in 0.5.18, holds both terms).
    GraphReserve(V.V0_5_17, V.V0_5_18, True, True, False, False, False),
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


def reserved_mib(
    version: SglangVersion, gpu_mib: float, tp: int, pp: int, graphs: bool = True, context: int | None = None
) -> float:
    """What SGLang 0.5.3+ keeps outside mem_fraction_static for activations and CUDA graphs
    (``graphs`` False: ``--disable-cuda-graph``; ``context``: the ``--context-length`` the launch gives)."""
    chunk, max_bs = card_defaults(version, gpu_mib, tp)
    rule = graph_rule(version)
    decode, prefill = graphs_reserved(version, graphs)
    reserve = RESERVE_BASE_MIB + RESERVE_PER_PREFILL_TOKEN_MIB * max(chunk, RESERVE_MIN_PREFILL_TOKENS)
    reserve += RESERVE_PER_RANK_MIB * tp * pp
    if decode:
        reserve += RESERVE_PER_GRAPH_BATCH_MIB * max_bs
    if prefill and rule.prefill and (pp == 1 or rule.prefill_with_pp):
        tokens = min(chunk, context) if rule.prefill_to_context and context else chunk
        reserve += RESERVE_PER_PREFILL_GRAPH_MIB * len(prefill_graph_sizes(tokens))
    if gpu_mib > RESERVE_FLOOR_CARD_MIB:
        reserve = max(reserve, RESERVE_FLOOR_MIB)
    return reserve


def default_fraction(inf: Inference, gpu: GpuSpec) -> float:
    """mem_fraction_static when none is given, by the plan's SGLang release."""
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
    reserve = reserved_mib(version, gpu_mib, tp, pp, inf.cuda_graphs, inf.context)
    return round((gpu_mib - reserve) / gpu_mib, 3)

"""SGLang by release (issue 23): the default mem_fraction_static each release line sets, as
core.serving.sglang_versions gives it. Every figure is the rule of the released wheel
(``pip download sglang==X --no-deps``; sglang/srt/server_args.py, from 0.5.20
sglang/srt/arg_groups/memory_hook.py) worked by hand for the card sizes nvidia-smi prints
(resources/gpus.json: H100 81,559 MiB, H200 143,771, B200 183,359, RTX 4090 24,564)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from core.catalogue import find_gpu
from core.errors import PlanError
from core.estimate import estimate
from core.files import planfile
from core.plan import Hardware, Inference, Plan, SglangVersion
from core.presets import plan_for_model
from core.serving.engines import SERVING_OVERHEAD_BYTES, sglang_fraction, sglang_rope_cache_bytes
from core.serving.sglang_versions import GRAPH_RESERVES, default_fraction, era_of, graph_rule, prefill_graph_sizes
from core.serving.vllm_rules import vllm_total_memory


def sglang_plan(**changes: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="h100-sxm")
    return plan.with_inference(engine="sglang", context=8192, **changes)


def fraction(version: str, gpu: str, tp: int = 1) -> float:
    return default_fraction(Inference(sglang_version=SglangVersion(version), tensor_parallel=tp), find_gpu(gpu))


def test_up_to_0_4_5_the_default_follows_the_tensor_parallel_size_only() -> None:
    # 0.4.0 / 0.4.5 server_args.py: 0.88 at TP 1, 0.87 from 2, 0.85 from 4, 0.81 from 8, 0.79 from 16.
    assert [fraction("0.4.0", "h200-sxm", tp) for tp in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    assert fraction("0.4.5", "b200") == 0.88


def test_0_4_6_and_0_4_7_change_it_above_80_gib_only() -> None:
    # 0.4.6: (gpu_mem - 1024 * 13) / gpu_mem above 81,920 MiB; 0.4.7: 0.88 there.
    assert fraction("0.4.6", "h100-sxm") == 0.88
    assert fraction("0.4.6", "h200-sxm") == pytest.approx((143_771 - 13_312) / 143_771)
    assert fraction("0.4.7", "h200-sxm") == 0.88 and fraction("0.4.7", "h100-sxm", 4) == 0.85


def test_0_4_8_to_0_5_2_reserve_by_card_class() -> None:
    # reserved_mem = (9.5 + TP x PP / 2) GiB below 90 GiB: (81,559 - 10,240) / 81,559 = 0.874;
    # (12 + 1/2) GiB below 160 GiB: 0.911; 32 GiB above ("B200, MI300"): 0.821; below 35 GiB
    # (2.8 + 1/10) GiB: 0.879.
    assert fraction("0.4.8", "h100-sxm") == 0.874 and fraction("0.5.2", "h100-sxm") == 0.874
    assert fraction("0.4.10", "h200-sxm") == 0.911
    assert fraction("0.5.1", "b200") == 0.821
    assert fraction("0.4.9", "rtx-4090") == 0.879


def test_from_0_5_3_the_reserve_follows_the_prefill_chunk_and_the_graphs() -> None:
    # 0.5.3 on an H100: 512 + 1.5 x 8,192 + 2 x 256 + 1 / 8 x 1,024 = 13,440 MiB -> 0.835.
    assert fraction("0.5.3", "h100-sxm") == 0.835
    # From 0.5.10 the prefill graphs add 8 MiB per captured size: 58 sizes up to 8,192 -> 13,904 MiB.
    assert len(prefill_graph_sizes(8192)) == 58
    assert fraction("0.5.10", "h100-sxm") == 0.83 and fraction("0.5.23", "h100-sxm") == 0.83
    # B200: 512 + 1.5 x 16,384 + 2 x 512 + 128 + 74 x 8 = 26,832 MiB -> 0.854.
    assert fraction("0.5.23", "b200") == 0.854


def test_small_cards_follow_the_release_of_their_chunk_and_batch() -> None:
    # RTX 4090 (24,564 MiB, no 10 GiB floor): 0.5.3 / 0.5.4 capture decode graphs up to 16:
    # 512 + 3,072 + 32 + 128 -> 0.848; 0.5.5 up to 24 -> 0.847; 0.5.19 adds 42 prefill sizes x 8
    # -> 0.833; 0.5.20 prefills 4,096 tokens and captures 48: 512 + 6,144 + 96 + 128 + 50 x 8 -> 0.704.
    assert fraction("0.5.3", "rtx-4090") == 0.848
    assert fraction("0.5.5", "rtx-4090") == 0.847
    assert fraction("0.5.19", "rtx-4090") == 0.833
    assert fraction("0.5.20", "rtx-4090") == 0.704


def test_the_default_release_is_the_newest_read_and_moves_the_pool() -> None:
    # Before: the 0.4 table's 0.88 on one H100 whatever the release; 0.5.23 takes 0.83.
    plan = sglang_plan()
    gpu = find_gpu("h100-sxm")
    assert plan.inference.sglang_version is SglangVersion.V0_5_23
    assert sglang_fraction(plan.inference, gpu) == 0.83
    total = vllm_total_memory(gpu) - SERVING_OVERHEAD_BYTES
    new = estimate(plan).inference
    old = estimate(sglang_plan(sglang_version="0.4.4")).inference
    rope = 131_072 * 128 * 4  # the float32 cos/sin table (test_the_rotary_table_is_taken_before_the_pool)
    assert new.kv_cache_tokens == (total * 0.83 - new.weights_bytes - rope) // 131_072
    assert old.kv_cache_tokens == (total * 0.88 - old.weights_bytes - rope) // 131_072
    assert "SGLang 0.5.23's default" in new.formula
    # A given fraction is kept whatever the release.
    given = sglang_plan(mem_fraction_static=0.8)
    assert sglang_fraction(given.inference, gpu) == 0.8


def test_every_release_has_one_era() -> None:
    assert era_of(SglangVersion.V0_4_0).name == "0.4.0-0.4.5"
    assert era_of(SglangVersion.V0_5_2).name == "0.4.8-0.5.2"
    assert era_of(SglangVersion.V0_5_23).name == "0.5.3-0.5.23"
    assert all(era_of(v) for v in SglangVersion)


def test_a_release_not_covered_is_refused_with_the_ones_that_are() -> None:
    with pytest.raises(PlanError) as caught:
        Plan(model=sglang_plan().model, hardware=Hardware(gpu="h100-sxm")).with_inference(sglang_version="0.5.0")
    text = str(caught.value)
    assert "0.5.0" in text and "0.4.0" in text and "0.5.23" in text


def test_a_file_without_the_release_reads_as_the_table_it_was_estimated_with() -> None:
    plan = sglang_plan()
    document = json.loads(planfile.dumps(plan))
    del document["plan"]["inference"]["sglang_version"]
    old = planfile.plan_from_dict(document)
    assert old.inference.sglang_version is SglangVersion.V0_4_0
    assert sglang_fraction(old.inference, find_gpu("h100-sxm")) == 0.88
    # A file that names its release keeps it.
    assert planfile.loads(planfile.dumps(plan)).inference.sglang_version is SglangVersion.V0_5_23


def test_the_command_line_takes_the_release_and_refuses_one_not_covered(capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    args = ("estimate", "--model", "llama-3.1-8b", "--mode", "inference", "--engine", "sglang", "--gpu", "h100-sxm")
    assert main([*args, "--sglang-version", "0.4.4"]) == 0
    assert "mem_fraction_static 0.88 (SGLang 0.4.4's default)" in capsys.readouterr().out
    assert main([*args, "--sglang-version", "0.5.0"]) != 0
    err = capsys.readouterr().err
    assert "'0.5.0'" in err and "'0.4.0'" in err and "'0.5.23'" in err


def test_the_rotary_table_is_taken_before_the_pool() -> None:
    # sglang/srt/layers/rotary_embedding.py (sgl-project/sglang 00a66ebe): on CUDA the cos/sin
    # table stays float32, max_position rows × rotary_dim, one per model, built while the model
    # loads. Llama 3.1 8B: 131,072 positions × 128 × 4 B = 64 MiB, out of the pool like weights.
    plan = sglang_plan(mem_fraction_static=0.8)
    model = plan.model
    assert sglang_rope_cache_bytes(model) == 131_072 * 128 * 4 == 64 * 2**20
    gpu = find_gpu("h100-sxm")
    total = vllm_total_memory(gpu) - SERVING_OVERHEAD_BYTES
    inf = estimate(plan).inference
    cell = 131_072  # 32 layers × 8 KV heads × 128 × 2 (K and V) × 2 B
    assert inf.kv_cache_tokens == int((total * 0.8 - inf.weights_bytes - 64 * 2**20) // cell)
    assert "rotary cos/sin table (float32) 0.06" in inf.formula
    # No rotary embedding, no table: ALiBi (BLOOM, MPT) or learned positions (GPT-2).
    assert sglang_rope_cache_bytes(replace(model, alibi=True)) == 0.0
    assert sglang_rope_cache_bytes(replace(model, learned_positions=1024)) == 0.0


# --- CUDA graphs in 0.5.10 - 0.5.19 (server_args.py of each wheel, 0.5.19 arg_groups/memory_hook.py) ---
# H100 81,559 MiB, TP 1, PP 1: chunk 8,192, decode graphs up to 256 in every wheel 0.5.10 - 0.5.19. Without the
# graph terms: 512 + 1.5 x 8,192 + 1 / 8 x 1,024 = 12,928 MiB; decode graphs 2 x 256 = 512; prefill graphs
# 58 counts x 8 = 464.


def at_8k(version: str, graphs: bool) -> float:
    """The default fraction on an H100 at 8,192 tokens of context (no context clamp: it is the chunk)."""
    inf = Inference(sglang_version=SglangVersion(version), cuda_graphs=graphs, context=8192)
    return default_fraction(inf, find_gpu("h100-sxm"))


@pytest.mark.parametrize("version", ["0.5.10", "0.5.11", "0.5.12", "0.5.13"])
def test_up_to_0_5_13_disabling_graphs_keeps_both_reserves(version: str) -> None:
    # server_args.py: "reserved_mem += self.cuda_graph_max_bs * 2" and the piecewise term under
    # "if not self.disable_piecewise_cuda_graph", neither reading disable_cuda_graph: 13,904 MiB -> 0.83.
    assert at_8k(version, graphs=False) == at_8k(version, graphs=True) == 0.83


def test_0_5_14_drops_the_prefill_graphs_reserve_only() -> None:
    # 0.5.14 _parse_cuda_graph_config: disable_cuda_graph -> both backends DISABLED; the prefill term needs
    # "backend != Backend.DISABLED", the decode term does not: 12,928 + 512 = 13,440 MiB -> 0.835.
    assert at_8k("0.5.14", graphs=False) == 0.835 and at_8k("0.5.14", graphs=True) == 0.83
    plan = sglang_plan(sglang_version="0.5.14", cuda_graphs=False)
    assert "its reserve for decode graphs kept, none for prefill graphs" in estimate(plan).inference.formula


@pytest.mark.parametrize("version", ["0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19"])
def test_from_0_5_15_disabling_graphs_drops_both_reserves(version: str) -> None:
    # 0.5.15 server_args.py: the decode term needs "decode_cuda_graph_config.backend != Backend.DISABLED" too
    # (0.5.16 - 0.5.18 reserve_for_graph_mb, 0.5.19 memory_hook.reserve_for_graph_mb): 12,928 MiB -> 0.841.
    assert at_8k(version, graphs=False) == 0.841 and at_8k(version, graphs=True) == 0.83
    plan = sglang_plan(sglang_version=version, cuda_graphs=False)
    assert "--disable-cuda-graph: no reserve for graphs" in estimate(plan).inference.formula


@pytest.mark.parametrize(
    ("version", "expected"), [("0.5.12", 0.83), ("0.5.13", 0.831), ("0.5.16", 0.831), ("0.5.17", 0.83)]
)
def test_0_5_13_to_0_5_16_stop_the_prefill_graphs_at_the_context_length(version: str, expected: float) -> None:
    # 0.5.13 - 0.5.16: prefill max tokens = min(chunk, context_length) when --context-length is given (the export
    # always gives it). At 2,048 tokens 42 counts (4 - 32 by 4, 48 - 256 by 16, 288 - 512 by 32, 576 - 1,024 by 64,
    # 1,280 - 2,048 by 256) x 8 = 336 MiB: 12,928 + 512 + 336 = 13,776 -> 0.831; 0.5.12 and 0.5.17 keep 58 -> 0.83.
    inf = Inference(sglang_version=SglangVersion(version), context=2048)
    assert len(prefill_graph_sizes(2048)) == 42
    assert default_fraction(inf, find_gpu("h100-sxm")) == expected


@pytest.mark.parametrize(
    ("version", "expected"), [("0.5.14", 0.834), ("0.5.15", 0.828), ("0.5.18", 0.828), ("0.5.19", 0.834)]
)
def test_pipeline_parallelism_keeps_the_prefill_graphs_in_0_5_15_to_0_5_18(version: str, expected: float) -> None:
    # PP 2: 512 + 12,288 + 2 / 8 x 1,024 + 512 = 13,568 MiB -> 0.834 when pp_size > 1 turns the prefill graphs off
    # (0.5.14 tc_piecewise rules; 0.5.19 apply_cuda_graph_compatibility); 0.5.15 - 0.5.18's breakable default has
    # no such rule: + 464 = 14,032 -> 0.828 (at 8,192 tokens, past the chunk: no context clamp in 0.5.15).
    inf = Inference(sglang_version=SglangVersion(version), pipeline_parallel=2, context=8192)
    assert default_fraction(inf, find_gpu("h100-sxm")) == expected


def test_the_graph_rules_cover_the_reserve_era_without_a_gap() -> None:
    order = list(SglangVersion)
    era = era_of(SglangVersion.V0_5_3)
    assert GRAPH_RESERVES[0].first is era.first and GRAPH_RESERVES[-1].last is era.last
    for before, row in itertools.pairwise(GRAPH_RESERVES):
        assert order.index(row.first) == order.index(before.last) + 1
    assert graph_rule(SglangVersion.V0_5_11).first is SglangVersion.V0_5_10


def test_every_release_takes_cuda_graphs_off() -> None:
    # The monkey test picked SGLang 0.4.4 with CUDA graphs off and graphs_reserved raised StopIteration: the
    # releases before 0.5.3 size their default fraction by a table or a class of card (core.serving.sglang_versions
    # ERAS), with no graph term for --disable-cuda-graph to drop, so their fraction is the same either way.
    from core.estimate import estimate
    from core.inputs import SglangVersion
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-8b")
    for version in SglangVersion:
        on = estimate(plan.with_inference(engine="sglang", sglang_version=version))
        off = estimate(plan.with_inference(engine="sglang", sglang_version=version, cuda_graphs=False))
        assert off.inference is not None and on.inference is not None
        if version.value.startswith("0.4"):
            assert "does not change" in off.inference.formula
            assert off.inference.kv_cache_tokens == on.inference.kv_cache_tokens, version

"""PyTorch's caching allocator: its settings as PyTorch reads them, and its size rules.

Source: pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp at 001074d25084fdb87a799823e395a50f5ec044d3
(kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer 2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc
10 MiB, kRoundLarge 2 MiB; should_split; get_free_block) and c10/core/AllocatorConfig.cpp at
065861fba7598880aa3216822742a1172d0a197c (parseArgs and its checks).
"""

from __future__ import annotations

import pytest

from core.allocator import (
    AllocatorConfig,
    fits_free_block,
    parse_alloc_conf,
    round_size,
    segment_size,
    splits,
)
from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.plan import Hardware, Method, Plan, Workload
from core.units import MiB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", AllocatorConfig(text="")),
        ("expandable_segments:True", AllocatorConfig(expandable_segments=True, text="expandable_segments:True")),
        (
            "max_split_size_mb:512, garbage_collection_threshold:0.6",
            AllocatorConfig(
                max_split_size_mb=512,
                garbage_collection_threshold=0.6,
                text="max_split_size_mb:512, garbage_collection_threshold:0.6",
            ),
        ),
        ("backend:cudaMallocAsync", AllocatorConfig(backend="cudaMallocAsync", text="backend:cudaMallocAsync")),
        (
            "roundup_power2_divisions:4",
            AllocatorConfig(roundup_power2_divisions=(4,) * 16, text="roundup_power2_divisions:4"),
        ),
    ],
)
def test_settings_pytorch_accepts_are_read(text: str, expected: AllocatorConfig) -> None:
    assert parse_alloc_conf(text) == expected


def test_the_bracketed_divisions_fill_the_intervals_as_pytorch_does() -> None:
    # parseRoundUpPower2Divisions: the first entry also covers every interval below it; ">"
    # fills from the last one named on, that one included (std::fill from last_index), so 512
    # takes ">"'s 8 too. Intervals are MB: 256 is 2^8, index 8.
    table = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8]").roundup_power2_divisions
    assert table[:8] == (1,) * 8 and table[8] == 1 and table[9:] == (8,) * 7


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("expandable_segments:true", "Expected a single True/False argument for expandable_segments"),
        ("max_split_size_mb:10", "max_split_size_mb too small, must be >= 20"),
        ("max_non_split_rounding_mb:4", "max_non_split_rounding_mb too small, must be >= 20"),
        ("garbage_collection_threshold:1.0", "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
        ("garbage_collection_threshold:0", "set it in (0.0, 1.0)"),
        ("roundup_power2_divisions:3", "the divisons has to be power of 2"),
        ("backend:malloc", "Unknown allocator backend"),
        ("expandable_segment:True", "Unrecognized CachingAllocator option: expandable_segment"),
        ("max_split_size_mb", "expected ':'"),
        ("max_split_size_mb:512 expandable_segments:True", "must be a whole number"),
    ],
)
def test_a_setting_pytorch_refuses_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(PlanError) as caught:
        Hardware(alloc_conf=text)
    assert caught.value.field == "hardware.alloc_conf" and reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_command_line_refuses_a_bad_setting_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--model", "llama-3.2-1b", "--alloc-conf", "max_split_size_mb:4"]) == 2
    err = capsys.readouterr().err.strip()
    assert "hardware.alloc_conf" in err and "must be >= 20" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_request_and_segment_sizes_follow_the_allocator() -> None:
    assert round_size(1) == 512 and round_size(513) == 1024 and round_size(10 * MiB) == 10 * MiB
    # roundup_power2_divisions 4 between 64 and 128 MiB: steps of 16 MiB.
    assert round_size(65 * MiB, divisions=4) == 80 * MiB and round_size(64 * MiB, divisions=4) == 64 * MiB
    assert segment_size(512) == 2 * MiB and segment_size(1 * MiB) == 2 * MiB  # the small pool
    assert segment_size(1 * MiB + 512) == 20 * MiB and segment_size(10 * MiB - 512) == 20 * MiB  # shared 20 MiB
    assert segment_size(10 * MiB) == 10 * MiB and segment_size(10 * MiB + 1) == 12 * MiB  # rounded to 2 MiB


def test_splitting_and_oversize_blocks() -> None:
    plain = AllocatorConfig()
    assert splits(2 * MiB, 1024, small_pool=True, config=plain)
    assert not splits(12 * MiB, 11 * MiB, small_pool=False, config=plain)  # 1 MiB left: kept whole
    assert splits(12 * MiB, 10 * MiB, small_pool=False, config=plain)
    limited = AllocatorConfig(max_split_size_mb=64)
    assert not splits(200 * MiB, 100 * MiB, small_pool=False, config=limited)  # oversize: never split
    assert not fits_free_block(100 * MiB, 30 * MiB, limited)  # a small request never takes an oversize block
    assert fits_free_block(100 * MiB, 90 * MiB, limited) and not fits_free_block(120 * MiB, 90 * MiB, limited)
    assert splits(100 * MiB, 30 * MiB, small_pool=False, config=AllocatorConfig(expandable_segments=True))


def test_expandable_segments_leave_no_fragmentation_term() -> None:
    plan = Plan(model=find_model("llama-3.2-1b").spec, method=Method.LORA, workload=Workload(micro_batch=4))
    plain = estimate(plan)
    grown = estimate(plan.with_hardware(alloc_conf="expandable_segments:True"))
    assert grown.peak_bytes == plain.peak_bytes  # allocated is the tensors': unchanged
    assert grown.reserved_bytes < plain.reserved_bytes
    labels = [t.label for t in grown.buckets[-1].terms]
    assert any("expandable segments" in label for label in labels)
    assert not any("partly used segments" in label for label in labels)

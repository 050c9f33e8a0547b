"""SGLang's weights through PyTorch's caching allocator (core.serving.sglang_weights,
core.allocator.resident_segment_bytes): the rank's tensors in SGLang's construction order and the
segments they leave behind, counted by hand on small cases and checked on the held-out logs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.allocator import AllocatorConfig, resident_segment_bytes
from core.catalogue import find_model
from core.dtypes import WeightFormat, int4_group_bytes_per_weight
from core.model import ModelSpec
from core.serving.sglang_weights import _linear, rank_tensors, rope_bytes, sglang_weights
from core.units import GiB

MiB = 1 << 20


@pytest.mark.parametrize(
    ("requests", "held"),
    [
        ([100], 2 * MiB),  # small pool: one 2 MiB segment
        ([100, 1000, MiB - 1024], 2 * MiB),  # 512 + 1024 + (1 MiB − 1 KiB) share it
        ([5 * MiB] * 4, 20 * MiB),  # 1-10 MiB: one 20 MiB segment, split down to nothing
        ([5 * MiB] * 5, 40 * MiB),  # the fifth finds no block left: a second 20 MiB segment
        ([12 * MiB + MiB // 2], 14 * MiB),  # ≥ 10 MiB: rounded up to 2 MiB
        ([12 * MiB + MiB // 2, 3 * MiB // 2], 14 * MiB),  # the 1.5 MiB tail is split off and reused
        ([11 * MiB, 3 * MiB // 2], 32 * MiB),  # a 1 MiB tail is not split (> 1 MiB only): 12 + 20
        ([9 * MiB, 8 * MiB, 9 * MiB], 40 * MiB),  # 9 + 8 fill 17 of 20; the next 9 needs a new one
    ],
)
def test_resident_segments_follow_pytorchs_rules(requests: list[int], held: int) -> None:
    assert resident_segment_bytes(requests) == held


def test_resident_segments_respect_max_split_size() -> None:
    # 20.5 MiB takes a 22 MiB segment; by default its 1.5 MiB tail is split off and holds the next
    # 1.5 MiB request. With max_split_size_mb:20 a request at or above the limit is never split
    # (should_split), so the 1.5 MiB request opens a 20 MiB segment of its own.
    requests = [20 * MiB + MiB // 2, 3 * MiB // 2]
    assert resident_segment_bytes(requests) == 22 * MiB
    config = AllocatorConfig(max_split_size_mb=20, text="max_split_size_mb:20")
    assert resident_segment_bytes(requests, config) == 42 * MiB


TINY = ModelSpec(
    name="tiny",
    family="qwen2",
    vocab_size=1000,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    intermediate_size=128,
    qkv_bias=True,
    max_position_embeddings=256,
)


def test_a_small_model_s_tensors_in_sglang_s_order_by_hand() -> None:
    # Embedding: 1,000 rows padded to 1,024 (DEFAULT_VOCAB_PADDING_SIZE 64) × 64 × 2 B. Per layer:
    # fused qkv (4 + 2 · 2 heads) × 16 = 128 rows × 64 × 2 B and its bias 128 × 2 B, o 64 × 64 × 2 B,
    # the rotary table once (256 positions × 16 × 4 B) after the first layer's o, gate_up
    # 256 × 64 × 2 B, down 128 × 64 × 2 B, two norms of 64 × 2 B; the final norm; the untied head.
    layer = [16_384, 256, 8_192]
    rest = [32_768, 16_384, 128, 128]
    expected = [131_072, *layer, 16_384, *rest, *layer, *rest, 128, 131_072]
    assert rank_tensors(TINY, WeightFormat.BF16, 1, 2) == expected
    # TP 2: one KV head per rank, half the q heads, half the vocabulary and MLP; norms whole.
    per_rank = rank_tensors(TINY, WeightFormat.BF16, 2, 2)
    assert per_rank[:4] == [65_536, (2 + 2) * 16 * 64 * 2, 64 * 2, 32 * 64 * 2]
    # Every tensor fits the small pool: one 2 MiB segment holds them all.
    replay = sglang_weights(TINY, WeightFormat.BF16, 1, 1)
    assert replay is not None
    assert replay.segments == 2 * MiB
    assert replay.tensors + replay.rope == sum(expected) and replay.rope == rope_bytes(TINY) == 16_384


def test_int4_tensors_hold_the_bytes_the_planner_counts() -> None:
    # AWQ: qweight in × out / 2, qzeros (in / 128) × out / 2, scales (in / 128) × out × 2; GPTQ adds
    # g_idx (in × 4 B): both the 0.5 + 2.5 / 128 bytes per weight core.dtypes counts, GPTQ + g_idx.
    n_in, n_out = 5120, 1280
    awq = _linear(WeightFormat.AWQ_INT4, n_in, n_out)
    assert awq == [n_in * n_out // 2, 40 * n_out // 2, 40 * n_out * 2]
    assert sum(awq) == n_in * n_out * int4_group_bytes_per_weight()
    assert sum(_linear(WeightFormat.GPTQ_INT4, n_in, n_out)) == sum(awq) + 4 * n_in
    assert _linear(WeightFormat.FP8, n_in, n_out, shards=3) == [n_in * n_out, 12]


def test_formats_and_counts_it_cannot_replay_keep_the_planner_s_bytes() -> None:
    assert sglang_weights(TINY, WeightFormat.NF4, 1, 1) is None
    assert sglang_weights(TINY, WeightFormat.MXFP4, 1, 1) is None
    assert sglang_weights(replace(TINY, params_override=10**6), WeightFormat.BF16, 1, 1) is None


def test_qwq_32b_at_tp4_leaves_the_segments_the_log_prints() -> None:
    # didier-durand/llms-in-clouds@b001c869 docs/sglang.md (SGLang 0.4.3.post4, QwQ-32B, TP 4 on four
    # L4s): "Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem
    # usage=15.54 GB" (SGLang's GB is GiB). The tensors and rotary table are 15.32 GiB; the
    # allocator's segments 15.541, the log's figure.
    replay = sglang_weights(find_model("qwen2.5-32b").spec, WeightFormat.BF16, 4, 1)
    assert replay is not None
    assert replay.segments / GiB == pytest.approx(15.54, abs=0.005)
    assert (replay.tensors + replay.rope) / GiB == pytest.approx(15.32, abs=0.005)
    assert replay.rounding / GiB == pytest.approx(0.22, abs=0.005)


def test_r1_distill_qwen_7b_on_one_gpu_within_the_log_s_rounding() -> None:
    # jerryzsj/my-deepseek-r1@bd9f5c77 README.md (SGLang 0.4.2.x, one RTX 3090): "Load weight begin.
    # avail mem=22.76 GB" then "Load weight end. … avail mem=8.37 GB": 14.39 GiB; the segments 14.346.
    replay = sglang_weights(find_model("deepseek-r1-distill-qwen-7b").spec, WeightFormat.BF16, 1, 1)
    assert replay is not None
    assert replay.segments / GiB == pytest.approx(22.76 - 8.37, abs=0.05)


def test_the_replay_is_kept_per_model_format_and_layout() -> None:
    model = find_model("qwen2.5-32b").spec
    assert sglang_weights(model, WeightFormat.BF16, 4, 1) is sglang_weights(model, WeightFormat.BF16, 4, 1)

"""A matmul's shape efficiency: tile and wave quantization (core.training.gemm_shape).

Sources: NVIDIA's "Matrix Multiplication Background User's Guide" (docs.nvidia.com/deeplearning/
performance/dl-performance-matrix-multiplication: cuBLAS's 256 x 128 tiles, one per SM, a wave of
108 on an A100); CUTLASS's efficient_gemm.md ("Split K"); BigScience's chronicle of the prequel
runs (bigscience-workshop/bigscience@39ed811 train/tr11-176B-ml/chronicles-prequel.md, 02-20:
NHIDDEN 13824 at 120.05 TFLOPs against 14400 at 94.39 on the same 40 nodes, TP 8, MBS 1).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.catalogue import find_gpu
from core.params import param_counts
from core.plan import Attention, Hardware, Method, Parallelism, Plan, Preset, Workload
from core.presets import plan_for_model
from core.training.efficiency import coefficient
from core.training.gemm_shape import shape_efficiency
from core.training.speed import step_work

A100_SMS = 108  # the guide's A100 wave: 108 tiles of 256 x 128


def test_an_output_of_whole_tiles_and_whole_waves_wastes_nothing() -> None:
    # 12 x 9 tiles of 256 x 128 = 108: exactly one wave on the A100.
    assert shape_efficiency(12 * 256, 9 * 128, A100_SMS) == pytest.approx(1.0)
    assert shape_efficiency(8192, 8192, A100_SMS) < 1.0  # 32 x 64 = 2048 tiles: 18.96 waves run as 19
    assert shape_efficiency(8192, 8192, A100_SMS) == pytest.approx(2048 / (19 * 108))


def test_a_dimension_off_the_tile_pays_for_the_whole_last_tile() -> None:
    # Tile quantization alone (no SM count): 1,800 columns fill 14.06 of 15 tiles of 128, and the
    # 128 x 256 orientation does no better (2048 rows are whole either way).
    assert shape_efficiency(2048, 1800, None) == pytest.approx(1800 / (15 * 128))
    assert shape_efficiency(2048, 1792, None) == pytest.approx(1.0)  # 14 x 128


def test_an_output_under_one_wave_is_split_along_its_reduction() -> None:
    # A 125M model's QKV weight gradient (768 x 2,304, reduced over every token): 54 tiles, half an
    # A100's wave; split-K runs it as 2 x 54 = 108 blocks, a full wave (0.5 without the split).
    assert shape_efficiency(768, 2304, A100_SMS) == pytest.approx(1.0)
    # On an H100's 132 SMs the same 2 parts fill 108 of 132.
    assert shape_efficiency(768, 2304, find_gpu("h100-sxm").sm_count) == pytest.approx(108 / 132)


def test_adapters_and_routers_are_left_to_the_bytes() -> None:
    assert shape_efficiency(65536, 16, A100_SMS) == 1.0  # a LoRA A of rank 16
    assert shape_efficiency(65536, 8, A100_SMS) == 1.0  # a router of 8 experts


def test_bigscience_s_14400_wide_layers_waste_more_than_13824_as_its_chronicle_measured() -> None:
    # The chronicle's 02-20 pair: the same cluster and layout, only NHIDDEN changed, and 13824 (a
    # multiple of 128 after TP 8) ran 1.272x the TFLOPs. Tiles and waves give part of it: the
    # prequel's 4h-wide MLP at TP 8, 2,048 tokens a micro-batch, on the A100's 108 SMs.
    def matmul_seconds(hidden: int) -> float:
        plan = _prequel(hidden)
        work = step_work(plan, param_counts(plan), find_gpu("a100-80gb-sxm"))
        return work.features["gemm:ampere/16-bit"] / work.hardware_flops

    wide, round_ = matmul_seconds(14400), matmul_seconds(13824)
    assert wide > round_ * 1.05  # per FLOP, 14400's matmuls take longer (1.07x)
    assert wide < round_ * 1.272  # and less than all of the measured gap


def test_a_batched_matmul_is_tile_quantized_per_matrix_and_its_batch_fills_the_waves() -> None:
    # BigScience's 200B prequel (chronicles-prequel.md: NHIDDEN=14400, NHEADS=96, TP=8, MBS=1,
    # SEQ_LEN=2048): eager attention's PV is one batched GEMM of 12 matrices (96 heads / TP 8) of
    # 2,048 x 150 (Megatron-DeepSpeed's torch.bmm). 150 columns fill 150 / 256 of two tiles of 128;
    # 12 x 16 = 192 tiles run 1.78 waves of 108 as 2.
    assert shape_efficiency(2048, 150, A100_SMS, 12) == pytest.approx(150 / 256 * 192 / 216)
    # Its QK^T (baddbmm): 2,048 x 2,048 is 128 whole tiles a matrix, 1,536 tiles: 14.2 waves as 15.
    assert shape_efficiency(2048, 2048, A100_SMS, 12) == pytest.approx(1536 / (15 * 108))
    assert shape_efficiency(2048, 2048, A100_SMS) == pytest.approx(128 / 216)  # one matrix alone: 2 waves


def _prequel(hidden: int, num_layers: int | None = None, **changes: Any) -> Plan:
    """BigScience's prequel layer shape (chronicles-prequel.md: 96 heads, a 4h ungated MLP) at
    TP 8, MBS 1, 2,048 tokens on an A100 80GB, hidden width ``hidden``."""
    plan = plan_for_model(
        "llama-2-7b",
        method=Method.FULL,
        workload=Workload(micro_batch=1, seq_len=2048, grad_accum=1, tokens=10**9),
        hardware=Hardware(gpu="a100-80gb-sxm"),
    )
    model = replace(
        plan.model,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_heads=96,
        num_kv_heads=96,
        head_dim=hidden // 96,
        gated_mlp=False,
        num_layers=num_layers or plan.model.num_layers,
    )
    return plan.with_changes(model=model, parallel=Parallelism(tensor_parallel=8, gpus_per_node=8), **changes)


def _prequel_200b(attention: Attention, head_dim: int) -> Plan:
    # The 200B prequel's layer (NHIDDEN 14400 = 96 heads x 150) at TP 8, MBS 1, 2,048 tokens.
    return _prequel(96 * head_dim, 8, attention=attention, checkpointing=False)


def test_eager_attention_runs_as_cublas_matmuls_at_their_rate_in_whole_tiles() -> None:
    # Megatron-DeepSpeed's CoreAttention (bigscience-workshop/Megatron-DeepSpeed@8387ae1
    # megatron/model/transformer.py) computes QK^T with torch.baddbmm and PV with torch.bmm:
    # cuBLAS batched GEMMs (pytorch/pytorch@0040fe0 aten/src/ATen/cuda/CUDABlas.cpp bgemm), timed
    # as matmuls: at the card's matmul coefficient, not a fused attention kernel's.
    gpu = find_gpu("a100-80gb-sxm")
    plan = _prequel_200b(Attention.EAGER, 150)
    work = step_work(plan, param_counts(plan), gpu)
    assert "attention:ampere/eager" in work.features
    assert coefficient("attention:ampere/eager") == coefficient("gemm:ampere/16-bit")
    # Its seconds at the peak are the counted FLOPs over the tiles' fill: QK^T and dP = dO V^T
    # fill 2,048 x 2,048 tiles (a), PV, dV, dQ, dK 2,048 x 150 (c); forward (a + c) / 2, backward
    # (a + 3c) / 4 of waste, the backward twice the forward's FLOPs.
    a = 1 / shape_efficiency(2048, 2048, A100_SMS, 12)
    c = 1 / shape_efficiency(2048, 150, A100_SMS, 12)
    per_layer = 4.0 * 2048 * 2048 * 14400 / 8  # forward: 2 matmuls of 2·s·s·hd per local head
    counted = per_layer * plan.model.num_layers * 3
    at_peak = work.features["attention:ampere/eager"] * gpu.peak_tflops("bf16") * 1e12
    assert at_peak == pytest.approx(per_layer * plan.model.num_layers * ((a + c) / 2 + 2 * (a + 3 * c) / 4))
    assert at_peak > counted * 1.5  # a head dimension of 150 wastes most of its second tile of 128
    # A head dimension of 128 fills whole tiles: only the waves are partly empty.
    round_ = _prequel_200b(Attention.EAGER, 128)
    round_work = step_work(round_, param_counts(round_), gpu)
    round_counted = 4.0 * 2048 * 2048 * 96 * 128 / 8 * 8 * 3
    round_at_peak = round_work.features["attention:ampere/eager"] * gpu.peak_tflops("bf16") * 1e12
    assert round_at_peak / round_counted < at_peak / counted / 1.4


def test_a_fused_attention_kernel_keeps_its_own_rate_and_is_not_tiled_as_cublas() -> None:
    gpu = find_gpu("a100-80gb-sxm")
    plan = _prequel_200b(Attention.FLASH, 150)
    work = step_work(plan, param_counts(plan), gpu)
    assert "attention:ampere/flash" in work.features and "attention:ampere/eager" not in work.features
    # The causal count, forward once and the backward at the five matmuls it runs (2.5 x the
    # forward: FlashAttention's own count, Dao-AILab/flash-attention@0469c72
    # benchmarks/benchmark_flash_attention.py; core.training.speed.FUSED_BACKWARD_OVER_COUNTED).
    forward = 4.0 * 2048 * (2048 + 1) / 2 * 14400 / 8 * 8
    at_peak = work.features["attention:ampere/flash"] * gpu.peak_tflops("bf16") * 1e12
    assert at_peak == pytest.approx(forward * (1 + 2.5))


def test_eager_attention_in_float32_takes_the_float32_matmul_coefficient() -> None:
    # A float32 plan's bmm runs cuBLAS's float32 (TF32) GEMM: the card's fp32 matmul coefficient.
    plan = _prequel_200b(Attention.EAGER, 128).with_changes(preset=Preset.FP32)
    work = step_work(plan, param_counts(plan), find_gpu("a100-80gb-sxm"))
    assert "attention:ampere/eager-fp32" in work.features
    assert coefficient("attention:ampere/eager-fp32") == coefficient("gemm:ampere/fp32")

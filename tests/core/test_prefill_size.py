"""The cold-prefill size experiment (benchmarks/realgpu/prefill_size.py; docs/SERVING.md, "Cold prefill by model
size and GPU count"): its split of each prediction, the prompt products' shape share it compares, and the finding
that no rule tried holds up with each source held out."""

from __future__ import annotations

import pytest

from benchmarks.realgpu import prefill_size
from benchmarks.realgpu import serving as srv
from core.catalogue import find_gpu
from core.serving.fit import DEFAULT_FIT
from core.serving.speed import SERVING_UTILISATION


def _row(case_id: str) -> prefill_size.Split:
    return next(r for r in prefill_size.cuda_rows() if r.case.id == case_id)


def test_the_split_gives_back_the_benchmarks_own_prediction() -> None:
    # An identity of the model: compute_s / 0.4 + rest_s is the serving benchmark's predicted time, and a prompt
    # of 512 tokens is compute-bound, so the time is linear in 1 / utilisation on every CUDA row.
    rows = prefill_size.cuda_rows()
    assert rows
    for row in rows:
        assert row.linear, row.case.id
        assert row.predicted(SERVING_UTILISATION) == pytest.approx(
            srv._prefill_seconds(row.plan, DEFAULT_FIT), rel=1e-9
        ), row.case.id


def test_the_shape_share_of_llama_3_8b_on_an_a100_is_its_waves_by_hand() -> None:
    # Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json): hidden 4,096, 8 KV heads x 128 = 1,024, FFN 14,336.
    # A100: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper; resources/gpus.json sm_count). Tiles of
    # 256 x 128 (NVIDIA's Matrix Multiplication Background guide, core.training.gemm_shape.TILES) over a 512-token
    # micro-batch (llama-bench's n_ubatch): q, o, down 16 x 4 = 64 tiles in one wave of 108; k, v 4 x 4 = 16
    # tiles, split-K into 6 x 16 = 96 of 108; gate, up 56 x 4 = 224 tiles in three waves (324).
    row = _row("xd-a100-pcie-x1-8b-f16-pp512")
    square, kv, wide = 4096 * 4096, 1024 * 4096, 14336 * 4096
    flops = 2 * square + 2 * kv + 3 * wide
    padded = 2 * square / (64 / 108) + 2 * kv / (96 / 108) + 2 * wide / (224 / 324) + wide / (64 / 108)
    assert prefill_size.shape_share(row.plan, find_gpu("a100-80gb-pcie"), 512) == pytest.approx(flops / padded)


def test_wave_quantization_explains_little_of_the_70b_rows_speed_on_an_a100() -> None:
    # XiongjieDai's A100 80GB PCIe rows (XiongjieDai/GPU-Benchmarks-on-LLM-Inference aa72e0e, "LLaMA 3/Professional
    # GPUs/A100_PCIe_v3.ipynb" cell 13 and "A100_PCIe_4_v3.ipynb" cells 13 and 17, llama-bench b2836): Llama 3 8B
    # F16 pp512 7,741.34 and 8,088.79 t/s on one and four cards, 70B F16 1,172.14 t/s on four. The
    # 70B rows' implied matmul utilisation is more than 1.3 x the 8B rows'; the products' shape share (tiles and
    # waves) grows by less than 1.1 x from 8B to 70B.
    small = [_row("xd-a100-pcie-x1-8b-f16-pp512"), _row("xd-a100-pcie-x4-8b-f16-pp512")]
    big = _row("xd-a100-pcie-x4-70b-f16-pp512")
    gpu = find_gpu("a100-80gb-pcie")
    observed = big.utilisation / max(r.utilisation for r in small)
    shape = prefill_size.shape_share(big.plan, gpu, 512) / prefill_size.shape_share(small[0].plan, gpu, 512)
    assert observed > 1.3
    assert 1.0 < shape < 1.1


def test_no_rule_tried_beats_the_flat_utilisation_with_each_source_held_out() -> None:
    # The corpus' CUDA cold-prefill rows (benchmarks/realgpu/serving_speed.json): neither the size rule nor the
    # shape rule, each constant set without the scored source, brings more rows within x 1.5 than today's flat 40 %.
    rows = prefill_size.cuda_rows()

    def within(rule: prefill_size.Rule) -> int:
        return sum(max(x, 1 / x) <= srv.TTFT_RATIO for _, x in prefill_size.scored(rows, rule))

    today = within(prefill_size.flat)
    assert within(prefill_size.by_size) < today
    assert within(prefill_size.by_shape) < today

"""Float8 linears' memory (torchao Float8Linear, pytorch/ao 36027d8): FSDP2's float8 all-gather
(torchao/float8/config.py ``enable_fsdp_float8_all_gather``; fsdp_utils.py
``fsdp_pre_all_gather`` sends the float8 data) gathers a block's linear weights in one byte."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.errors import PlanError
from core.estimate import estimate
from core.plan import Float8, Method, MpDtype, Parallelism, Plan, Preset, Stack, Strategy, Workload


def fsdp_plan(all_gather: bool, float8: Float8 = Float8.TENSORWISE) -> Plan:
    # torchtitan's Llama 3.1 8B recipe as Trainy ran it (memory_figures.json trainy-h200-8b-4nodes):
    # FSDP2, bf16 param dtype, fp32 reduce, float8 tensorwise, compile, batch 2 × 8192.
    return Plan(
        model=find_model("llama-3.1-8b").spec,
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        workload=Workload(micro_batch=2, seq_len=8192),
        stack=Stack.COMPILE,
        float8=float8,
        parallel=Parallelism(
            gpus_per_node=8,
            strategy=Strategy.FSDP,
            fsdp_param_dtype=MpDtype.BF16,
            fsdp_reduce_dtype=MpDtype.FP32,
            fsdp_float8_all_gather=all_gather,
        ),
    )


def gathered(est: object, label: str) -> float:
    for phase in est.phases:  # type: ignore[attr-defined]
        for key in BucketKey:
            for t in phase.bucket(key).terms:
                if t.label.startswith(label):
                    return float(t.bytes)
    raise AssertionError(label)


def test_float8_all_gather_gathers_a_blocks_linears_in_one_byte() -> None:
    on, off = estimate(fsdp_plan(True)), estimate(fsdp_plan(False))
    # Llama 3.1 8B block linears: q, o 4096² each, k, v 4096 × 1024 each, gate/up/down 3 × 4096 × 14336
    # = 218,103,808 elements, one byte less each in the block whose all-gather is in flight.
    label = "one block's all-gather output in flight"
    assert gathered(off, label) - gathered(on, label) == 218_103_808
    assert off.peak_bytes - on.peak_bytes >= 218_103_808


def test_float8_all_gather_is_refused_without_tensorwise_scaling() -> None:
    with pytest.raises(PlanError) as caught:
        fsdp_plan(True, Float8.ROWWISE)
    assert caught.value.field == "parallel.fsdp_float8_all_gather"
    assert "tensorwise" in str(caught.value)

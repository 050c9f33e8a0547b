"""Gradient accumulation outside the weight-gradient matmul (core.training.speed.grad_accum_bytes).

A rank holding its whole gradient over a step's micro-batches (DDP, ZeRO-1) adds every micro-batch's
gradient after the first into it: autograd's AccumulateGrad (``grad += new``), or Megatron's hook
``param.main_grad.add_(param.grad.data)`` (bigscience-workshop/Megatron-DeepSpeed@541b967
megatron/model/distributed.py) where Megatron-LM does not fuse it into the weight-gradient GEMM
(``--no-gradient-accumulation-fusion``, NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from core.catalogue import find_gpu
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import GradSync, Plan, Stack, Strategy
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training.speed import grad_accum_bytes, step_work
from tests.scripts import load_script

A100 = "a100-80gb-sxm"


def _plan(strategy: Strategy, accum: int, stack: Stack | None = None, **parallel: object) -> Plan:
    plan = plan_for_model("llama-3.2-1b").with_workload(micro_batch=2, seq_len=2048, grad_accum=accum)
    plan = plan.with_parallel(strategy=strategy, **parallel)
    return plan.with_changes(stack=stack) if stack is not None else plan


def _accumulate(plan: Plan) -> float:
    return step_work(plan, param_counts(plan), find_gpu(A100)).features.get("grad_accum", 0.0)


def test_ddp_adds_each_later_micro_batch_into_the_held_gradient() -> None:
    plan = _plan(Strategy.DDP, 4)
    counts = param_counts(plan)
    stage = layout(plan).stages[0]
    grad = dtypes_for(plan).grad
    # AccumulateGrad: the held gradient and the new one read, the sum written, each in its dtype.
    assert grad_accum_bytes(plan, counts, stage) == pytest.approx(counts.trainable * 3 * grad)
    bandwidth = find_gpu(A100).memory_bandwidth_gb_s * 1e9
    assert _accumulate(plan) == pytest.approx(3 * counts.trainable * 3 * grad / bandwidth)


def test_one_micro_batch_or_sharded_gradients_add_nothing() -> None:
    assert _accumulate(_plan(Strategy.DDP, 1)) == 0.0
    # FSDP2 reduce-scatters every micro-batch (no no_sync), ZeRO-2 likewise: 1/N shards accumulate.
    assert _accumulate(_plan(Strategy.FSDP, 4, grad_sync=GradSync.EACH)) == 0.0
    assert _accumulate(_plan(Strategy.ZERO2, 4)) == 0.0


def test_fsdp1_under_no_sync_accumulates_the_unsharded_gradient() -> None:
    # accelerate's Accelerator.accumulate enters FSDP1's no_sync() for every micro-batch but the last
    # (huggingface/accelerate v0.28.0 accelerator.py; layout.fsdp_no_sync): the whole gradient is held.
    plan = _plan(Strategy.FSDP, 4, fsdp1_wrap=True, grad_sync=GradSync.AUTO)
    counts = param_counts(plan)
    ddp = _plan(Strategy.DDP, 4)
    assert grad_accum_bytes(plan, counts, layout(plan).stages[0]) == pytest.approx(
        grad_accum_bytes(ddp, param_counts(ddp), layout(ddp).stages[0])
    )
    assert _accumulate(plan) > 0.0


def test_megatron_fuses_it_unless_told_not_to() -> None:
    fused = _plan(Strategy.ZERO1, 4, Stack.MEGATRON)
    assert fused.parallel.grad_accum_fusion  # Megatron-LM's default (--no-gradient-accumulation-fusion)
    assert _accumulate(fused) == 0.0
    apart = _plan(Strategy.ZERO1, 4, Stack.MEGATRON, grad_accum_fusion=False, grad_reduce_in_fp32=True)
    counts = param_counts(apart)
    # main_grad.add_(param.grad): the 16-bit gradient read, the float32 buffer read and written.
    per = grad_accum_bytes(apart, counts, layout(apart).stages[0])
    assert per == pytest.approx(counts.trainable * (2 + 2 * 4))
    sixteen = apart.with_parallel(grad_reduce_in_fp32=False)
    assert grad_accum_bytes(sixteen, counts, layout(sixteen).stages[0]) == pytest.approx(counts.trainable * 6)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(Path("benchmarks/realgpu/throughput.py"), "throughput_grad_accum")


def test_bigscience_ran_megatron_deepspeed_with_16_bit_gradients(bench: ModuleType) -> None:
    records = {r["id"]: r for r in bench.load()["figures"]}
    prequel = bench.case_of(records["bigscience-prequel-bf16-200b-160gpu"]).plan.parallel
    # Megatron-DeepSpeed@541b967 has no gradient accumulation fusion; the 02-17 runs accumulated in
    # 16 bits (chronicles-prequel.md, bigscience@39ed811: "fp16 which grad accumulates in fp16", the
    # fp32-accumulating BF16 optimizer came after them).
    assert not prequel.grad_accum_fusion and not prequel.grad_reduce_in_fp32
    bloom = bench.case_of(records["bloom-176b-384gpu"]).plan.parallel
    assert not bloom.grad_accum_fusion and bloom.grad_reduce_in_fp32  # DeepSpeed's BF16 optimizer: fp32
    nemo = next(r for r in records.values() if r["source_id"] == "nvidia-nemo-24.07")
    assert bench.case_of(nemo).plan.parallel.grad_accum_fusion


def test_the_prequel_rows_pay_for_their_accumulation(bench: ModuleType) -> None:
    report = bench.build(bench.load())
    errors = {s.case.id: s.error for s in report.scored if s.case.family == "BigScience"}
    # The chronicle's 02-17 logs (bigscience@39ed811 chronicles-prequel.md): 434.14 s (bf16, 160 GPUs)
    # and 853.81 s (bf16, 80 GPUs) a step; +25.6 / +24.6 % predicted fast before the 1,024 / 2,048
    # micro-batches' accumulation passes were timed.
    assert errors["bigscience-prequel-bf16-200b-160gpu"] < 23.0
    assert errors["bigscience-prequel-bf16-200b-80gpu"] < 23.0
    assert max(abs(e) for e in errors.values()) < 25.0

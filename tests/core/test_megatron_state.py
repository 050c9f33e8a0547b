"""What a rank holds under Megatron-Core's DDP and distributed optimizer (core.parallel.state._megatron).

Each number is Megatron-Core's, read at NVIDIA/Megatron-LM d98e8a64:
- megatron/core/distributed/param_and_grad_buffer.py: one gradient buffer of every trainable element,
  ``grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype``, allocated when the model is
  wrapped and never freed; ``param.main_grad`` a view into it;
- distributed_data_parallel.py ``_make_backward_post_hook``: ``param.main_grad.add_(param.grad.data)``,
  ``param.grad = None``: no whole set of ``.grad`` tensors beside the buffer;
- optimizer/optimizer.py ``Float16OptimizerWithFloat16Params``: ``param.detach().clone().float()``
  (the float32 main parameters) and ``main_param.grad = model_param.main_grad.float()`` (the buffer
  itself when it is float32, a float32 copy when it is 16-bit), freed by the next train_step's
  ``optimizer.zero_grad()`` (training/training.py train_step);
- optimizer/distrib_optimizer.py: the same per shard (``shard_model_param.clone().float()``;
  ``shard_main_param.grad = shard_model_grad.float()``), a float32 parameter's shard a view
  (``model_param.view(-1)[param_range.start : param_range.end]``);
- optimizer/__init__.py: Adam is Transformer Engine's / Apex's FusedAdam (no foreach temporaries).
The model is Llama 3.1 8B (the catalogue's, Meta's config.json) on 2 × 8 GPUs, data parallel 16.
"""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, Phase, StepPhase
from core.catalogue import find_model
from core.estimate import estimate
from core.params import param_counts
from core.plan import OptimizerImpl, Parallelism, Plan, Preset, Stack, Strategy, Workload

LLAMA_8B = find_model("llama-3.1-8b")
DP = 16


def _plan(strategy: Strategy, fp32: bool = True, preset: Preset = Preset.FP32_AUTOCAST_BF16) -> Plan:
    return Plan(
        model=LLAMA_8B.spec,
        model_id=LLAMA_8B.id,
        preset=preset,
        parallel=Parallelism(nodes=2, gpus_per_node=8, strategy=strategy, grad_reduce_in_fp32=fp32),
        workload=Workload(micro_batch=1, seq_len=4096, grad_accum=4),
        stack=Stack.MEGATRON,
    )


def _phase(plan: Plan, kind: StepPhase) -> Phase:
    phases = estimate(plan).worst.phases
    if kind.is_backward:
        return next(p for p in phases if p.kind.is_backward)
    return next(p for p in phases if p.kind is kind)


def _bytes(plan: Plan, kind: StepPhase, key: BucketKey) -> float:
    return _phase(plan, kind).bucket(key).bytes


def _labels(plan: Plan, kind: StepPhase) -> list[str]:
    return [t.label for b in _phase(plan, kind).buckets for t in b.terms]


def test_ddp_with_a_float32_buffer_holds_the_gradients_once() -> None:
    # The float32 buffer is the gradients (main_param.grad = main_grad.float() is the buffer itself):
    # T x 4 B in the forward, the backward and at the step. It was counted twice (a .grad set and
    # torch DDP's bucket copy): 8 B a gradient.
    plan = _plan(Strategy.DDP)
    trainable = param_counts(plan).trainable
    for kind in (StepPhase.FORWARD, StepPhase.BACKWARD_START, StepPhase.OPTIMIZER):
        assert _bytes(plan, kind, BucketKey.GRADIENTS) == pytest.approx(trainable * 4, rel=1e-9), kind


def test_a_16_bit_buffers_float32_copy_exists_only_from_the_step() -> None:
    # grad_reduce_in_fp32 off: the 2-B buffer throughout; the float32 copy the step reads is made at the
    # step (and freed by the next train_step's zero_grad), not held through the backward (it was: 6 B).
    plan = _plan(Strategy.DDP, fp32=False)
    trainable = param_counts(plan).trainable
    assert _bytes(plan, StepPhase.BACKWARD_START, BucketKey.GRADIENTS) == pytest.approx(trainable * 2, rel=1e-9)
    assert _bytes(plan, StepPhase.OPTIMIZER, BucketKey.GRADIENTS) == pytest.approx(trainable * (2 + 4), rel=1e-9)


def test_the_distributed_optimizer_keeps_the_whole_buffer_and_no_deepspeed_partition() -> None:
    # At the step the whole float32 buffer is alive (it is never freed) and the shard's main grad is a
    # view of it: T x 4 B. It counted a flattened partition and DeepSpeed's float32 partition gradient
    # (T / 16 x 4 B each) instead of the buffer.
    plan = _plan(Strategy.ZERO1)
    trainable = param_counts(plan).trainable
    assert _bytes(plan, StepPhase.OPTIMIZER, BucketKey.GRADIENTS) == pytest.approx(trainable * 4, rel=1e-9)
    assert not any("partition" in label for label in _labels(plan, StepPhase.OPTIMIZER))
    # 16-bit buffer: the whole 2-B buffer and the shard's float32 copy.
    off = _plan(Strategy.ZERO1, fp32=False)
    expected = trainable * 2 + trainable / DP * 4
    assert _bytes(off, StepPhase.OPTIMIZER, BucketKey.GRADIENTS) == pytest.approx(expected, rel=1e-9)


def test_megatrons_fused_adam_makes_no_torch_optim_temporary() -> None:
    # Even with the plan's optimizer implementation at foreach, Megatron's step is FusedAdam's.
    for strategy in (Strategy.DDP, Strategy.ZERO1):
        plan = _plan(strategy).with_changes(optimizer_impl=OptimizerImpl.FOREACH)
        assert not any("foreach" in label for label in _labels(plan, StepPhase.OPTIMIZER)), strategy


def test_a_16_bit_model_keeps_float32_main_parameters_and_state() -> None:
    # A --bf16 run (bf16 parameters, no autocast: the importer's plan): float32 main parameters and
    # Adam's two float32 moments, whole under DDP (12 B), the rank's shard under the distributed
    # optimizer (12 / 16 B); the buffer float32 (4 B). It priced Adam's moments at the parameters'
    # 2 B with no main copy, and the buffer at 2 B.
    ddp = _plan(Strategy.DDP, preset=Preset.PURE_BF16)
    trainable = param_counts(ddp).trainable
    assert _bytes(ddp, StepPhase.OPTIMIZER, BucketKey.OPTIMIZER) == pytest.approx(trainable * 12, rel=1e-5)
    assert _bytes(ddp, StepPhase.OPTIMIZER, BucketKey.GRADIENTS) == pytest.approx(trainable * 4, rel=1e-9)
    assert _bytes(ddp, StepPhase.OPTIMIZER, BucketKey.WEIGHTS) == pytest.approx(param_counts(ddp).total * 2, rel=1e-9)
    zero = _plan(Strategy.ZERO1, preset=Preset.PURE_BF16)
    assert _bytes(zero, StepPhase.OPTIMIZER, BucketKey.OPTIMIZER) == pytest.approx(trainable * 12 / DP, rel=1e-5)
    assert _bytes(zero, StepPhase.OPTIMIZER, BucketKey.GRADIENTS) == pytest.approx(trainable * 4, rel=1e-9)


def test_a_float32_parameters_shard_is_its_own_main_parameter() -> None:
    # The distributed optimizer's float32 shard is a view of the parameter: only Adam's moments, 8 / 16 B.
    # DeepSpeed's clone (a float32 master partition) was counted.
    plan = _plan(Strategy.ZERO1)
    trainable = param_counts(plan).trainable
    assert _bytes(plan, StepPhase.OPTIMIZER, BucketKey.OPTIMIZER) == pytest.approx(trainable * 8 / DP, rel=1e-5)

"""DeepSpeed ZeRO-1's ipg reduce bucket, allocated in the backward though stage 1 reduces only at the step.

Source: deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/stage_1_and_2.py. ``__init__`` registers the
gradient hooks when ``partition_gradients or overlap_comm or use_grad_accum_attribute or contiguous_gradients``
(``contiguous_gradients`` defaults to True, zero/config.py), so under stage 1 too; the first hook of a backward
runs ``setup_buckets``: ``buf_0`` of ``reduce_bucket_size`` elements in the 16-bit dtype (``buf_1`` as well with
``overlap_comm``). Stage 1 fills and frees them (``_release_ipg_buffers``) only at the accumulation boundary
(``reduce_gradients``, called by engine.py ``allreduce_gradients`` there only), so with gradient accumulation
they are held from the first micro-batch's backward through the later micro-batches' forwards.
"""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, StepPhase
from core.dtypes import Dtype
from core.estimate import Estimate, estimate
from core.params import param_counts
from core.plan import Method, Plan, Preset, Strategy
from core.presets import plan_for_model

BUCKET = 500_000_000  # reduce_bucket_size's default (zero/config.py: pp_int(5e8))
FIRST = "ipg reduce bucket"
SECOND = "second ipg reduce bucket (overlap_comm)"


def _plan(strategy: Strategy = Strategy.ZERO1, accum: int = 1, **parallel: object) -> Plan:
    # Llama 3.2 1B in bf16 (1.24e9 trainable: a whole 5e8-element bucket) on 16 GPUs.
    plan = plan_for_model("llama-3.2-1b").with_changes(preset=Preset.TRAINER_BF16)
    plan = plan.with_workload(micro_batch=1, seq_len=256, grad_accum=accum)
    return plan.with_parallel(nodes=2, gpus_per_node=8, strategy=strategy, **parallel)


def _buckets(est: Estimate, kind: StepPhase) -> list[tuple[str, float]]:
    """The ipg buckets among the gradients of the phases of ``kind``."""
    terms = [t for ph in est.phases if ph.kind is kind for t in ph.bucket(BucketKey.GRADIENTS).terms]
    return [(t.label, t.bytes) for t in terms if "ipg" in t.label]


def test_zero1_holds_one_bucket_of_reduce_bucket_size_16_bit_elements_in_the_backward() -> None:
    est = estimate(_plan())
    assert _buckets(est, StepPhase.BACKWARD_END) == [(FIRST, BUCKET * 2)]  # 5e8 × 2 B (bf16)
    # Allocated by the first gradient hook, freed after the boundary's reduction: not before, not at the step.
    assert _buckets(est, StepPhase.FORWARD) == [] and _buckets(est, StepPhase.OPTIMIZER) == []


def test_the_bucket_is_its_full_size_even_above_the_trainable_parameters() -> None:
    # stage_1_and_2.py setup_buckets: torch.empty(int(self.reduce_bucket_size), dtype=self.dtype, ...),
    # whatever the number of trainable parameters (no cap).
    plan = _plan(zero_bucket_elements=2_000_000_000)
    assert param_counts(plan).trainable < 2e9
    assert _buckets(estimate(plan), StepPhase.BACKWARD_END) == [(FIRST, 2_000_000_000 * 2)]


def test_a_lora_plan_under_zero2_counts_the_whole_bucket_not_its_trainable_parameters() -> None:
    # A LoRA run with DeepSpeed's default reduce_bucket_size (5e8) in bf16: setup_buckets allocates
    # buf_0 = torch.empty(int(self.reduce_bucket_size), dtype=self.dtype), 1 GB, not trainable × 2 B
    # (self.dtype: the optimizer's first parameter's, bf16 adapters here).
    plan = _plan(Strategy.ZERO2).with_method(Method.LORA).with_changes(adapter_dtype=Dtype.BF16)
    trainable = param_counts(plan).trainable
    assert 0 < trainable < BUCKET
    assert _buckets(estimate(plan), StepPhase.BACKWARD_BLOCK) == [(FIRST, BUCKET * 2)]


def test_ddp_has_none() -> None:
    est = estimate(_plan(Strategy.DDP))
    assert all(not _buckets(est, kind) for kind in StepPhase)


def test_overlap_comm_adds_the_second() -> None:
    est = estimate(_plan(zero_overlap_comm=True))
    assert _buckets(est, StepPhase.BACKWARD_END) == [(FIRST, BUCKET * 2), (SECOND, BUCKET * 2)]


def test_the_backward_peak_moves_by_the_bucket() -> None:
    small, big = (estimate(_plan(zero_bucket_elements=n)) for n in (100_000_000, BUCKET))
    assert big.phases[-1].kind is StepPhase.OPTIMIZER
    assert max(big.phases, key=lambda p: p.allocated_bytes).kind is StepPhase.BACKWARD_END
    assert big.peak_bytes - small.peak_bytes == pytest.approx((BUCKET - 100_000_000) * 2)


def test_with_accumulation_the_buckets_stay_through_the_later_forwards() -> None:
    est = estimate(_plan(accum=4, zero_overlap_comm=True))
    both = [(FIRST, BUCKET * 2), (SECOND, BUCKET * 2)]
    assert _buckets(est, StepPhase.FORWARD) == both  # the first micro-batch's, not yet freed
    assert _buckets(est, StepPhase.OPTIMIZER) == []  # freed by the boundary's reduce_gradients
    # ZeRO-2 frees its bucket at the end of every backward (allreduce_gradients' epilogue each micro-batch).
    assert _buckets(estimate(_plan(Strategy.ZERO2, accum=4)), StepPhase.FORWARD) == []

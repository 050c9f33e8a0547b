"""DeepSpeed ZeRO-1/2's ``zero_optimization.overlap_comm`` as a plan setting (parallel.zero_overlap_comm).

Source: deepspeedai/DeepSpeed edaa7221 (v0.19.5+), deepspeed/runtime/zero/config.py
``overlap_comm_valid`` (None means True for stage 3 only) and deepspeed/runtime/zero/stage_1_and_2.py:
with overlap_comm the gradient hooks fill ipg buckets of ``reduce_bucket_size`` elements and reduce each
full one on ``self.reduction_stream`` during the backward (``reduce_independent_p_g_buckets_and_remove_grads``,
``reduce_ipg_grads``, ``average_tensor``), the last one after it (``independent_gradient_partition_epilogue``);
stage 1 only in the accumulation-boundary micro-batch (``reduce_ready_partitions_and_remove_grads``);
``setup_buckets`` allocates a second bucket ``buf_1`` ("double buffers ... when overlap_comm is enabled").
The all-gather of the updated parameters after the step (``all_gather_dp_groups``) stays on the compute stream.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from core.breakdown import BucketKey, StepPhase
from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.deepspeed import read_deepspeed
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.comm import CommTerm, step_communication
from core.params import param_counts
from core.plan import Plan, Preset, Stack, Strategy
from core.presets import plan_for_model
from tests.core.planfile_compat import reload_and_without

FIELD = "parallel.zero_overlap_comm"
BUCKET = 500_000_000  # reduce_bucket_size's default (zero/config.py: pp_int(5e8))


def _plan(strategy: Strategy = Strategy.ZERO2, overlap: bool = False, accum: int = 4) -> Plan:
    # Llama 3.1 8B trained in full on 2 nodes of 8 H100s.
    plan = plan_for_model("llama-3.1-8b").with_workload(micro_batch=1, seq_len=4096, grad_accum=accum)
    return plan.with_parallel(nodes=2, gpus_per_node=8, strategy=strategy, zero_overlap_comm=overlap)


def _reduce(plan: Plan, compute: float, contention: float = 0.0) -> tuple[CommTerm, CommTerm, float]:
    """The gradient reduction, the parameter all-gather and the exposed seconds of one step of ``plan``
    over ``compute`` seconds of compute, a third of it the forward."""
    comm = step_communication(plan, param_counts(plan), compute, 1 / 3, dp_contention=contention)
    reduce, gather = comm.terms
    return reduce, gather, comm.exposed_seconds


def _launches(plan: Plan) -> int:
    return math.ceil(param_counts(plan).trainable / BUCKET)


def test_without_overlap_the_reduction_waits_whole_and_with_it_only_the_last_bucket() -> None:
    off, gather, exposed_off = _reduce(_plan(overlap=False), compute=100.0)
    assert not off.overlapped and exposed_off == pytest.approx(off.seconds + gather.seconds)
    on, gather_on, exposed_on = _reduce(_plan(overlap=True), compute=100.0)
    assert on.overlapped and on.seconds == pytest.approx(off.seconds)  # the same bytes, now beside the backward
    assert not gather_on.overlapped  # all_gather_dp_groups after the step: never overlapped in stage 1/2
    # ZeRO-2: 4 reductions, each under its micro-batch's backward (2/3 of 100 s ÷ 4); the last of the
    # 17 buckets (8.03e9 / 5e8) of each waits.
    assert on.window_seconds == pytest.approx(100.0 * 2 / 3)
    assert _launches(_plan()) == 17
    assert on.unhidden_seconds == pytest.approx(on.seconds / 17)
    assert exposed_on == pytest.approx(gather.seconds + on.seconds / 17)


def test_zero1_reduces_under_the_last_micro_batchs_backward_only() -> None:
    off, _, _ = _reduce(_plan(Strategy.ZERO1, overlap=False), compute=100.0)
    on, gather, _ = _reduce(_plan(Strategy.ZERO1, overlap=True), compute=100.0)
    assert on.bytes == pytest.approx(off.bytes)  # once per step either way
    assert on.window_seconds == pytest.approx(100.0 / 4 * 2 / 3)  # one micro-batch's backward
    # A backward too short to hide it: what it cannot hide waits on top of the last bucket.
    short, gather, exposed = _reduce(_plan(Strategy.ZERO1, overlap=True), compute=0.03)
    window = 0.03 / 4 * 2 / 3
    last = short.seconds / 17
    assert exposed == pytest.approx(gather.seconds + last + max(0.0, short.seconds - last - window))


def test_the_data_parallel_contention_share_applies_to_the_overlapped_reduction() -> None:
    on, _, _ = _reduce(_plan(overlap=True), compute=100.0, contention=0.2)
    last = on.seconds / 17
    assert on.unhidden_seconds == pytest.approx(last + 0.2 * (on.seconds - last))
    off, _, _ = _reduce(_plan(overlap=False), compute=100.0, contention=0.2)
    assert off.unhidden_seconds == 0.0  # blocking: counted whole, no share


def test_it_matters_for_deepspeed_zero1_and_zero2_only() -> None:
    matters = input_at(FIELD).matters
    assert matters(_plan(Strategy.ZERO1)) and matters(_plan(Strategy.ZERO2))
    assert not matters(_plan(Strategy.ZERO3)) and not matters(_plan(Strategy.FSDP))
    assert not matters(_plan(Strategy.ZERO1).with_changes(stack=Stack.MEGATRON))  # Megatron's own overlap
    megatron = _plan(Strategy.ZERO1).with_changes(stack=Stack.MEGATRON)
    off = _reduce(megatron, 10.0)
    on = _reduce(megatron.with_parallel(zero_overlap_comm=True), 10.0)
    assert off == on
    z3 = _plan(Strategy.ZERO3)
    assert step_communication(z3, param_counts(z3), 10.0, 1 / 3) == step_communication(
        z3.with_parallel(zero_overlap_comm=True), param_counts(z3), 10.0, 1 / 3
    )


def _backward(strategy: Strategy, overlap: bool) -> tuple[float, list[tuple[str, float]]]:
    """The peak and the ipg buckets of the backward of Llama 3.2 1B in bf16 (1.24e9 trainable, so a
    whole 5e8-element bucket), ``strategy`` on 16 GPUs, 4 micro-batches of 256 tokens."""
    plan = plan_for_model("llama-3.2-1b").with_workload(micro_batch=1, seq_len=256, grad_accum=4)
    plan = plan.with_parallel(nodes=2, gpus_per_node=8, strategy=strategy, zero_overlap_comm=overlap)
    est = estimate(plan.with_changes(preset=Preset.TRAINER_BF16))
    backward = [ph for ph in est.phases if ph.kind in (StepPhase.BACKWARD_BLOCK, StepPhase.BACKWARD_END)]
    buckets = [(t.label, t.bytes) for ph in backward for t in ph.bucket(BucketKey.GRADIENTS).terms if "ipg" in t.label]
    return est.peak_bytes, buckets


def test_overlap_adds_the_second_ipg_bucket_in_the_backward() -> None:
    # stage_1_and_2.py setup_buckets: buf_1 of reduce_bucket_size elements in the 16-bit dtype (bf16: 2 B).
    second = ("second ipg reduce bucket (overlap_comm)", BUCKET * 2)
    peak_off, off = _backward(Strategy.ZERO2, False)
    peak_on, on = _backward(Strategy.ZERO2, True)
    assert off == [("ipg reduce bucket", BUCKET * 2)] and on == [*off, second]
    assert peak_on - peak_off == pytest.approx(BUCKET * 2)  # the backward's peak, one bucket more
    # ZeRO-1 allocates both too, but frees them only at the accumulation boundary: with 4 micro-batches
    # they stay through the later forwards, so the backward's start is the peak (test_zero1_ipg_bucket.py).
    peak_off, _ = _backward(Strategy.ZERO1, False)
    peak_on, _ = _backward(Strategy.ZERO1, True)
    assert peak_on - peak_off == pytest.approx(BUCKET * 2)
    # Nothing for ZeRO-3: its bucket is allocated at start-up either way.
    assert _backward(Strategy.ZERO3, True) == _backward(Strategy.ZERO3, False)


def test_the_deepspeed_export_writes_it_and_reads_it_back() -> None:
    for strategy, stage in ((Strategy.ZERO1, 1), (Strategy.ZERO2, 2)):
        for overlap in (True, False):
            out = export(_plan(strategy, overlap=overlap), Target.DEEPSPEED)
            zero = json.loads(out.text)["zero_optimization"]
            assert zero["stage"] == stage and zero["overlap_comm"] is overlap
            assert FIELD not in {u.field for u in out.unexpressed}
            assert read_deepspeed(json.loads(out.text))[FIELD] is overlap
    # Stage 3 runs overlapped here (DeepSpeed's default there) and is written so.
    z3 = json.loads(export(_plan(Strategy.ZERO3), Target.DEEPSPEED).text)["zero_optimization"]
    assert z3["overlap_comm"] is True
    assert FIELD not in read_deepspeed({"zero_optimization": {"stage": 3, "overlap_comm": False}})
    # A config that does not say runs DeepSpeed's default below stage 3: off.
    assert read_deepspeed({"zero_optimization": {"stage": 2}})[FIELD] is False


@pytest.mark.parametrize("overlap", [True, False])
def test_a_trainers_deepspeed_config_carries_it(overlap: bool) -> None:
    out = export(_plan(Strategy.ZERO2, overlap=overlap), Target.TRL)
    document = yaml.safe_load(out.text)
    assert document["deepspeed"]["zero_optimization"]["overlap_comm"] is overlap
    run = loads_run_config(out.text.encode(), "trl.yaml")
    assert run.settings.zero_overlap_comm is overlap
    assert plan_from_run(run, _plan(Strategy.ZERO2, overlap=not overlap)).parallel.zero_overlap_comm is overlap


def test_the_run_config_importer_reads_the_key_or_deepspeeds_default() -> None:
    def read(zero: dict[str, object]) -> bool | None:
        text = yaml.safe_dump({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": zero}})
        return loads_run_config(text.encode(), "trl.yaml").settings.zero_overlap_comm

    assert read({"stage": 1, "overlap_comm": True}) is True
    assert read({"stage": 2, "overlap_comm": False}) is False
    assert read({"stage": 2}) is False  # DeepSpeed's default below stage 3
    assert read({"stage": 3, "overlap_comm": True}) is None  # stage 3: timed overlapped whatever it says


def test_targets_without_the_key_list_it_where_it_is_on() -> None:
    for target in (Target.ACCELERATE, Target.TORCHTITAN, Target.TORCHRUN):
        on = {u.field: u.why for u in export(_plan(Strategy.ZERO2, overlap=True), target).unexpressed}
        assert FIELD in on and on[FIELD].strip(), target
        assert FIELD not in {u.field for u in export(_plan(Strategy.ZERO2), target).unexpressed}


def test_plan_files_keep_it_and_older_files_read_it_off(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(overlap=True), tmp_path, "parallel", "zero_overlap_comm")
    assert loaded.parallel.zero_overlap_comm is True
    assert older.parallel.zero_overlap_comm is False  # DeepSpeed's default below stage 3


def test_the_command_line_sets_it_both_ways() -> None:
    def given(*flags: str) -> bool:
        args = build_parser().parse_args(["estimate", "--model", "llama-3.1-8b", "--strategy", "zero2", *flags])
        return plan_from_args(args).parallel.zero_overlap_comm

    assert given("--zero-overlap-comm") is True
    assert given("--no-zero-overlap-comm") is False
    assert given() is False

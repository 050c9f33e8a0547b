"""DeepSpeed ZeRO-3's ``zero_optimization.overlap_comm`` as a plan setting (parallel.zero3_overlap_comm).

Source: deepspeedai/DeepSpeed edaa7221. deepspeed/runtime/zero/config.py ``overlap_comm_valid``: None becomes
``self.stage == ZeroStageEnum.weights``, so on by default at stage 3. stage3.py ``__init__``:
``reduce_and_partition_stream = ... Stream() if overlap_comm else get_accelerator().default_stream()``, the stream
``__reduce_and_partition_ipg_grads`` reduce-scatters on; parameter_offload.py ``__allgather_stream`` likewise, the
stream partitioned_param_coordinator.py ``fetch_sub_module`` gathers (and prefetches) on. Off: both in line with
the compute. The ipg bucket (``__init__``, under contiguous_gradients) and the prefetch are the same either way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.deepspeed import read_deepspeed
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.comm import step_communication
from core.params import param_counts
from core.plan import Plan, Strategy
from core.presets import plan_for_model
from tests.core.planfile_compat import reload_and_without

FIELD = "parallel.zero3_overlap_comm"


def _plan(overlap: bool = True, strategy: Strategy = Strategy.ZERO3) -> Plan:
    # Llama 3.1 8B trained in full on 2 nodes of 8 H100s.
    plan = plan_for_model("llama-3.1-8b").with_workload(micro_batch=1, seq_len=4096, grad_accum=2)
    return plan.with_parallel(nodes=2, gpus_per_node=8, strategy=strategy, zero3_overlap_comm=overlap)


def test_on_by_default_as_deepspeeds_stage_3_default() -> None:
    assert input_at(FIELD).default is True
    assert plan_for_model("llama-3.1-8b").parallel.zero3_overlap_comm is True
    assert input_at(FIELD).matters(_plan()) and not input_at(FIELD).matters(_plan(strategy=Strategy.ZERO2))


def test_off_the_gathers_and_reduce_scatters_wait_and_the_memory_is_the_same() -> None:
    plan_on, plan_off = _plan(True), _plan(False)
    on = step_communication(plan_on, param_counts(plan_on), 10.0, 1 / 3)
    off = step_communication(plan_off, param_counts(plan_off), 10.0, 1 / 3)
    assert all(t.overlapped for t in on.terms) and not any(t.overlapped for t in off.terms)
    assert [t.seconds for t in off.terms] == [t.seconds for t in on.terms]
    assert off.exposed_seconds == pytest.approx(sum(t.seconds for t in off.terms))
    assert off.exposed_seconds > on.exposed_seconds
    assert estimate(plan_off).peak_bytes == estimate(plan_on).peak_bytes


def test_fsdp_is_not_touched() -> None:
    plan = _plan(False, Strategy.FSDP)
    assert all(t.overlapped for t in step_communication(plan, param_counts(plan), 10.0, 1 / 3).terms)


@pytest.mark.parametrize("overlap", [True, False])
def test_the_deepspeed_export_writes_it_and_reads_it_back(overlap: bool) -> None:
    out = export(_plan(overlap), Target.DEEPSPEED)
    assert json.loads(out.text)["zero_optimization"]["overlap_comm"] is overlap
    assert FIELD not in {u.field for u in out.unexpressed}
    assert read_deepspeed(json.loads(out.text))[FIELD] is overlap
    # A stage-3 config that does not say runs DeepSpeed's default there: on.
    assert read_deepspeed({"zero_optimization": {"stage": 3}})[FIELD] is True


@pytest.mark.parametrize("overlap", [True, False])
def test_a_trainers_deepspeed_config_carries_it(overlap: bool) -> None:
    out = export(_plan(overlap), Target.TRL)
    assert yaml.safe_load(out.text)["deepspeed"]["zero_optimization"]["overlap_comm"] is overlap
    run = loads_run_config(out.text.encode(), "trl.yaml")
    assert run.settings.zero3_overlap_comm is overlap
    assert plan_from_run(run, _plan(not overlap)).parallel.zero3_overlap_comm is overlap


def test_the_run_config_importer_reads_deepspeeds_stage_3_default() -> None:
    text = yaml.safe_dump({"per_device_train_batch_size": 1, "deepspeed": {"zero_optimization": {"stage": 3}}})
    assert loads_run_config(text.encode(), "trl.yaml").settings.zero3_overlap_comm is True


def test_plan_files_keep_it_and_older_files_read_it_on(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(False), tmp_path, "parallel", "zero3_overlap_comm")
    assert loaded.parallel.zero3_overlap_comm is False
    assert older.parallel.zero3_overlap_comm is True  # what every ZeRO-3 plan was timed as before
    assert estimate(older).peak_bytes == estimate(_plan(True)).peak_bytes


@pytest.mark.parametrize(
    ("flags", "expected"), [((), True), (("--no-zero3-overlap-comm",), False), (("--zero3-overlap-comm",), True)]
)
def test_the_command_line_sets_it_both_ways(flags: tuple[str, ...], expected: bool) -> None:
    args = build_parser().parse_args(["estimate", "--model", "llama-3.1-8b", "--strategy", "zero3", *flags])
    assert plan_from_args(args).parallel.zero3_overlap_comm is expected

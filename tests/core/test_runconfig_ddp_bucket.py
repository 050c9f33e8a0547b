"""``ddp_bucket_cap_mb`` read into the plan's DDP bucket (branch h89lf); it was listed as having no effect."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.files.launch import Target, export
from core.files.runconfig import ConfigKind, loads_run_config, plan_from_run
from core.presets import default_plan


def test_ddp_bucket_cap_mb_reaches_the_plan() -> None:
    # transformers 5.25.0 trainer.py lines 759-760 pass it as DDP's bucket_cap_mb (MiB), the plan's unit.
    run = loads_run_config(b"per_device_train_batch_size: 2\nddp_bucket_cap_mb: 100\n", "args.yaml")
    assert run.kind is ConfigKind.HF and run.unknown == ()
    assert run.settings.ddp_bucket_mb == 100
    assert plan_from_run(run, default_plan()).parallel.ddp_bucket_mb == 100
    # Absent: the plan's own (torch's 25 MiB, core/inputs.py DDP_BUCKET_MB).
    absent = loads_run_config(b"per_device_train_batch_size: 2\n", "args.yaml")
    assert plan_from_run(absent, default_plan()).parallel.ddp_bucket_mb == 25


def test_ddp_bucket_cap_mb_in_axolotl_and_llamafactory() -> None:
    # axolotl 067b021 core/builders/causal.py lines 229-230 hand cfg.ddp_bucket_cap_mb to TrainingArguments;
    # LLaMA-Factory (v0) passes every TrainingArguments key through.
    axolotl = loads_run_config(b"base_model: x\nmicro_batch_size: 1\nddp_bucket_cap_mb: 50\n", "a.yaml")
    assert axolotl.kind is ConfigKind.AXOLOTL and axolotl.settings.ddp_bucket_mb == 50 and axolotl.unknown == ()
    factory = loads_run_config(b"finetuning_type: lora\nddp_bucket_cap_mb: 200\n", "f.yaml")
    assert factory.kind is ConfigKind.LLAMA_FACTORY and factory.settings.ddp_bucket_mb == 200


def test_the_trainer_export_round_trips_the_bucket() -> None:
    # core/files/launch/hf_trainer.py writes ddp_bucket_cap_mb; reading it back used to drop it.
    base = default_plan()
    plan = base.with_changes(parallel=replace(base.parallel, ddp_bucket_mb=64.0, gpus_per_node=2))
    text = export(plan, Target.TRL).text
    assert "ddp_bucket_cap_mb" in text
    run = loads_run_config(text.encode(), "args.json")
    assert run.settings.ddp_bucket_mb == 64


def test_a_bad_bucket_is_one_line() -> None:
    with pytest.raises(Exception) as refused:
        loads_run_config(b"per_device_train_batch_size: 2\nddp_bucket_cap_mb: -3\n", "args.yaml")
    assert "ddp_bucket_cap_mb" in str(refused.value) and "\n" not in str(refused.value)

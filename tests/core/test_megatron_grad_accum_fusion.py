"""Megatron's gradient accumulation fusion through the config files (parallel.grad_accum_fusion),
wired as its sibling ``parallel.grad_reduce_in_fp32`` is (tests/core/test_megatron_grad_reduce.py).

Megatron-Core's ``ModelParallelConfig.gradient_accumulation_fusion`` (NVIDIA/Megatron-LM d98e8a64
megatron/core/model_parallel_config.py; Megatron-LM's ``--no-gradient-accumulation-fusion``,
megatron/training/arguments.py, on by default) is Megatron-Bridge's ``model.gradient_accumulation_fusion``
(NVIDIA-NeMo/Megatron-Bridge 067f987d src/megatron/bridge/models/gpt_provider.py, on where the fused
kernel is installed; the B200 / B300 / GB200 Llama 3 performance recipes set it False,
src/megatron/bridge/perf_recipes/llama/b200/llama3.py). It matters for the Megatron stack's DDP /
distributed optimizer under accumulation (core.inputs; core.training.speed.grad_accum_bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.files.launch import SERVING_TARGETS, Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.plan import Plan, Stack, Strategy
from core.presets import plan_for_model
from tests.core.planfile_compat import reload_and_without

FIELD = "parallel.grad_accum_fusion"
TRAINING_TARGETS = [t for t in Target if t not in SERVING_TARGETS]


def _plan(fused: bool = True, strategy: Strategy = Strategy.ZERO1, accum: int = 4) -> Plan:
    # Llama 3.2 1B, a Megatron-Bridge recipe (llama32_1b), on 8 GPUs under the Megatron stack.
    plan = plan_for_model("llama-3.2-1b").with_workload(micro_batch=1, seq_len=2048, grad_accum=accum)
    plan = plan.with_parallel(gpus_per_node=8, strategy=strategy, grad_accum_fusion=fused)
    return plan.with_changes(stack=Stack.MEGATRON)


def _read(document: Mapping[str, object]) -> bool | None:
    return loads_run_config(yaml.safe_dump(document).encode(), "run_config.yaml").settings.grad_accum_fusion


def test_the_megatron_bridge_importer_reads_it() -> None:
    train = {"train": {"micro_batch_size": 1}}
    assert _read({**train, "model": {"gradient_accumulation_fusion": False}}) is False
    assert _read({**train, "model": {"gradient_accumulation_fusion": True}}) is True
    assert _read(train) is None  # the provider's: a file that does not say keeps the plan's
    run = loads_run_config(
        yaml.safe_dump({**train, "model": {"gradient_accumulation_fusion": False}}).encode(), "run_config.yaml"
    )
    assert [f.source for f in run.fields if f.setting == "grad_accum_fusion"] == ["model.gradient_accumulation_fusion"]
    assert plan_from_run(run, _plan(fused=True)).parallel.grad_accum_fusion is False
    # The key alone says Megatron-Bridge (only Megatron-Core names it).
    alone = loads_run_config(b"model:\n  gradient_accumulation_fusion: false\n", "run_config.yaml")
    assert alone.settings.grad_accum_fusion is False


def test_the_megatron_bridge_export_writes_it_and_reads_it_back() -> None:
    for fused in (True, False):
        out = export(_plan(fused=fused), Target.MEGATRON_BRIDGE)
        document = yaml.safe_load(out.text)
        assert document["model"]["gradient_accumulation_fusion"] is fused
        assert f"model.gradient_accumulation_fusion={str(fused).lower()}" in out.text  # the run_recipe.py line
        assert FIELD not in {u.field for u in out.unexpressed}
        run = loads_run_config(out.text.encode(), "run_config.yaml")
        assert plan_from_run(run, _plan(fused=not fused)).parallel.grad_accum_fusion is fused
    # FSDP's gradients are not in Megatron's buffer: Megatron-LM refuses the fusion with torch FSDP2
    # (d98e8a64 megatron/training/arguments.py), so the export writes it off whatever the plan holds.
    fsdp = yaml.safe_load(export(_plan(fused=True, strategy=Strategy.FSDP), Target.MEGATRON_BRIDGE).text)
    assert fsdp["model"]["gradient_accumulation_fusion"] is False


@pytest.mark.parametrize("target", [t for t in TRAINING_TARGETS if t is not Target.MEGATRON_BRIDGE])
def test_the_other_exports_list_it_where_it_matters_and_is_off(target: Target) -> None:
    def listed(plan: Plan) -> dict[str, str]:
        return {u.field: u.why for u in export(plan, target).unexpressed}

    off = listed(_plan(fused=False))
    assert FIELD in off and off[FIELD].strip()
    assert FIELD not in listed(_plan(fused=True))  # the default: nothing to say
    assert FIELD not in listed(_plan(fused=False, accum=1))  # one micro-batch: nothing accumulated
    assert FIELD not in listed(_plan(fused=False, strategy=Strategy.FSDP))  # not Megatron's buffer


def test_plan_files_keep_it_and_older_files_fuse(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(fused=False), tmp_path, "parallel", "grad_accum_fusion")
    assert loaded.parallel.grad_accum_fusion is False
    assert older.parallel.grad_accum_fusion is True  # Megatron-LM's default


def test_the_command_line_sets_it_both_ways() -> None:
    def given(*flags: str) -> bool:
        args = build_parser().parse_args(["estimate", "--model", "llama-3.2-1b", *flags])
        return plan_from_args(args).parallel.grad_accum_fusion

    assert given("--no-grad-accum-fusion") is False
    assert given("--grad-accum-fusion") is True
    assert given() is True

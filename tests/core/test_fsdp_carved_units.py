"""FSDP2's unit layout for the embedding and head (``parallel.fsdp_units``): the root unit (accelerate
up to 1.13, torchtitan before 83e69410) or carved units (accelerate 1.14.0 on, PR #4015; torchtitan
b5bcd76c ``apply_fsdp_to_decoder``): the untied embedding its own unit, resharded after its forward,
[final norm, head] one unit kept gathered from its forward to its backward.

The measured figures are read from the committed fake-process-group measurements
(``benchmarks/parallel/measured/``, made by ``tools/measure``, torch 2.13.0): the same Llama-3.1-8B
FSDP2 rank (8 ranks, bf16 gathers, float32 reduce) wrapped both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.parallel import plan_for_parallel_case
from core.breakdown import BucketKey
from core.cli.app import main
from core.dtypes import MpDtype
from core.errors import PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.parallel.layout import carved_ends, layout
from core.plan import FsdpUnits, Method, Plan, Strategy
from core.presets import default_plan, plan_for_model
from tests.core.planfile_compat import reload_and_without

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "parallel" / "measured"
CARVED_CASE = "fsdp-carved-llama31-8b-mp-fused-ckpt-w8-b1-s4096"
ROOT_CASE = "fsdp-llama31-8b-mp-fused-ckpt-w8-b1-s4096"  # the same run, accelerate <= 1.13's units
RUNCONFIGS = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def _measured(case_id: str) -> tuple[Plan, dict[str, Any]]:
    document = json.loads((MEASURED / f"{case_id}.json").read_text())
    return plan_for_parallel_case(document["case"], document["model_config"]), document


def _fsdp_8b(units: FsdpUnits = FsdpUnits.CARVED) -> Plan:
    plan = plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.FSDP)
    return plan.with_parallel(fsdp_param_dtype=MpDtype.BF16, fsdp_reduce_dtype=MpDtype.FP32, fsdp_units=units)


def _phase(plan: Plan, name: str) -> float:
    return next(p.allocated_bytes for p in estimate(plan).phases if p.name == name)


# ---- the memory ----------------------------------------------------------------------------
def test_the_carved_measurement_is_reproduced_phase_by_phase() -> None:
    plan, measured = _measured(CARVED_CASE)
    assert plan.parallel.fsdp_units is FsdpUnits.CARVED
    step = measured["phase_peaks"]["step2"]  # the second step: the optimizer state exists
    for phase, key in (("forward + loss", "forward"), ("backward", "backward")):
        assert _phase(plan, phase) == pytest.approx(step[key], rel=0.005), phase


def test_carving_saves_the_embedding_and_the_prefetched_block_as_measured() -> None:
    carved, carved_run = _measured(CARVED_CASE)
    root, root_run = _measured(ROOT_CASE)
    assert root.parallel.fsdp_units is FsdpUnits.ROOT and carved.with_parallel(fsdp_units=FsdpUnits.ROOT) == root
    saved = root_run["peak_allocated_bytes"] - carved_run["peak_allocated_bytes"]
    estimated = estimate(root).peak_bytes - estimate(carved).peak_bytes
    assert estimated == pytest.approx(saved, rel=0.01)
    # What the saving is: the embedding (gathered in bf16) and one block's all-gather output, no longer
    # held as the backward starts (the units' sizes as the measurement lists them).
    units = {u["module"]: u["numel"] for u in carved_run["fsdp_units"]}
    assert saved == pytest.approx(2 * (units["model.embed_tokens"] + units["model.layers.31"]), rel=0.001)


def test_the_forward_holds_the_head_units_gather_output_and_the_backward_start_does_not() -> None:
    phases = {p.name: p for p in estimate(_fsdp_8b()).phases}
    forward = [t.label for t in phases["forward + loss"].bucket(BucketKey.WEIGHTS).terms]
    assert any("all-gather output" in label and "[final norm, head]" in label for label in forward)
    assert not any("root unit" in label for label in forward)
    backward = phases["backward"]  # the loss's backward, before the head's pre-backward hook prefetches
    assert backward.description.startswith("start of the backward pass")
    held = [t.label for t in backward.bucket(BucketKey.WEIGHTS).terms]
    assert any("[final norm, head] unit gathered" in label for label in held)
    assert not any("prefetch" in label or "all-gather output" in label for label in held)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "llama-3.2-1b"},  # tied: [norm, embedding] one unit, gathered the whole step either way
        {"reshard_after_forward": False},  # every unit stays gathered after its forward
        {"strategy": Strategy.ZERO3},  # not FSDP2
        {"fsdp1_wrap": True},  # FSDP1's own wrap
    ],
)
def test_where_carving_changes_nothing_the_estimate_is_the_root_layouts(change: dict[str, Any]) -> None:
    change = dict(change)  # the parameter itself stays as given
    model = change.pop("model", "llama-3.1-8b")
    plan = plan_for_model(model).on_gpus(8, change.pop("strategy", Strategy.FSDP)).with_parallel(**change)
    carved = plan.with_parallel(fsdp_units=FsdpUnits.CARVED)
    assert carved_ends(carved, layout(carved).stages[0], 1) is None
    assert estimate(carved).peak_bytes == estimate(plan).peak_bytes


@pytest.mark.parametrize("method", [Method.FULL, Method.LORA])
def test_carving_never_adds_to_an_untied_plans_peak(method: Method) -> None:
    for gpus in (2, 8, 64):
        root = _fsdp_8b(FsdpUnits.ROOT).with_changes(method=method)
        root = root.on_gpus(gpus, Strategy.FSDP)
        assert estimate(root.with_parallel(fsdp_units=FsdpUnits.CARVED)).peak_bytes <= estimate(root).peak_bytes


def test_the_embedding_unit_is_reduced_last_alone() -> None:
    # Two ranks, 128 tokens: the backward's end is the peak. There the root layout holds the root unit's
    # (embedding + norm + head) unsharded gradients (bf16, 2 B) and reduce-scatter input (float32, 4 B),
    # less its missing float32 shard (4 B ÷ 2); carved, the embedding unit's alone, [norm, head] already
    # reduced to its shard. Llama 3.1 8B config: vocabulary 128,256, hidden 4,096, untied.
    base = _fsdp_8b().on_gpus(2, Strategy.FSDP).with_workload(seq_len=128, micro_batch=1)
    carved, root = estimate(base), estimate(base.with_parallel(fsdp_units=FsdpUnits.ROOT))
    assert carved.peak_phase == root.peak_phase == "backward"
    tail = 128_256 * 4_096 + 4_096  # head + final RMSNorm weight
    assert root.peak_bytes - carved.peak_bytes == pytest.approx(tail * (2 + 4 - 4 / 2), rel=1e-6)
    ends = next(p for p in carved.phases if p.name == "backward")
    labels = [t.label for t in ends.bucket(BucketKey.GRADIENTS).terms]
    assert "embedding unit's reduce-scatter input" in labels and not any("root's" in x for x in labels)
    assert "embedding unit" in ends.description


# ---- the files, the command line, the importers and exports --------------------------------
def test_a_plan_file_keeps_the_layout_and_an_older_file_reads_root(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_fsdp_8b(), tmp_path, "parallel", "fsdp_units")
    assert loaded == _fsdp_8b()
    assert older == _fsdp_8b(FsdpUnits.ROOT)


def test_a_plan_file_with_another_layout_is_refused_with_the_accepted_ones() -> None:
    document = planfile.plan_to_dict(_fsdp_8b())
    document["plan"]["parallel"]["fsdp_units"] = "per-layer"
    with pytest.raises(PlanFileError) as refused:
        planfile.loads(json.dumps(document))
    assert "plan.parallel.fsdp_units: 'per-layer' is not allowed" in str(refused.value)
    assert "one of root, carved" in str(refused.value)


def test_the_command_line_sets_it_and_refuses_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    args = ["estimate", "--model", "llama-3.1-8b", "--gpus", "8", "--strategy", "fsdp"]
    assert main([*args, "--fsdp-units", "carved", "--save", str(path)]) == 0
    assert planfile.load(path).parallel.fsdp_units is FsdpUnits.CARVED
    capsys.readouterr()
    assert main([*args, "--fsdp-units", "layer"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and "'root', 'carved'" in err and "Traceback" not in err


def test_a_torchtitan_config_reads_carved_and_its_export_writes_torchtitans_default() -> None:
    run = loads_run_config((RUNCONFIGS / "torchtitan_llama3_8b.toml").read_bytes(), "llama3_8b.toml")
    assert run.settings.fsdp_units == "carved"
    assert plan_from_run(run, default_plan(), None).parallel.fsdp_units is FsdpUnits.CARVED
    titan = export(_fsdp_8b(), Target.TORCHTITAN)
    assert 'fsdp_reshard_after_forward = "default"' in titan.text
    assert "parallel.fsdp_units" not in {u.field for u in titan.unexpressed}
    root = export(_fsdp_8b(FsdpUnits.ROOT), Target.TORCHTITAN)
    assert "parallel.fsdp_units" in {u.field for u in root.unexpressed}


def test_accelerate_has_no_key_for_it_and_says_so_for_a_carved_plan() -> None:
    for target in (Target.ACCELERATE, Target.ACCELERATE_LAUNCH, Target.TRL):
        why = {u.field: u.why for u in export(_fsdp_8b(), target).unexpressed}
        assert "1.14" in why["parallel.fsdp_units"], target
        assert "parallel.fsdp_units" not in {u.field for u in export(_fsdp_8b(FsdpUnits.ROOT), target).unexpressed}

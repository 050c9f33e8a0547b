"""Comparisons: rows from each plan's own estimate, differences, the cheapest that fits, the file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.advice.compare import MAX_PLANS, compare
from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.estimate import Mode, Verdict, estimate
from core.files.comparison import dumps, from_dict, load, save, to_dict
from core.files.planfile import save as save_plan
from core.plan import Method, Offload, Plan, Precision, Strategy, training_refusal
from core.presets import default_plan, lesson_plan
from tests.core.strategies import plans


def four_plans() -> list[tuple[str, object]]:
    base = default_plan().with_workload(micro_batch=1, seq_len=1024)
    return [
        ("LoRA on a 4090", base.with_hardware(gpu="rtx-4090")),
        ("QLoRA on a 3060", base.with_changes(method=Method.QLORA).with_hardware(gpu="rtx-3060-12gb")),
        ("Full on 4 × A100", base.with_changes(method=Method.FULL).on_gpus(4, Strategy.ZERO3)),
        ("Lesson 7B, 16-bit full", lesson_plan(Method.FULL, Precision.BF16)),
    ]


def test_rows_are_each_plans_own_figures() -> None:
    named = four_plans()
    comparison = compare(named)  # type: ignore[arg-type]
    rows = {r.key: r for r in comparison.rows()}
    for index, (_, plan) in enumerate(named):
        est = estimate(plan)  # type: ignore[arg-type]
        assert rows["total"].values[index] == est.total_bytes
        assert rows["cost"].values[index] == est.compute.cost or math.isnan(est.compute.cost)
        assert rows["bucket.weights"].values[index] == est.bucket(est.buckets[0].key).bytes
    # The lesson's 7B 16-bit full fine-tune: 81.9 GB (lesson) in row "Peak + overhead".
    assert round(rows["total"].values[3] / 1e9, 1) == 81.9  # type: ignore[operator]


def test_the_price_row_is_the_price_the_cost_is_at() -> None:
    """Before: a plan on the catalogue's price (the Price field left at 0) showed "Price per
    GPU-hour 0.00" beside a cost worked out at the catalogue's $2.50 for the A100 80GB SXM
    (resources/gpus.json, "Modal on-demand list price"); a typed price shows as typed."""
    base = default_plan().with_hardware(gpu="a100-80gb-sxm")
    named = [
        ("catalogue", base.with_hardware(price_per_gpu_hour=0.0)),
        ("typed", base.with_hardware(price_per_gpu_hour=1.5)),
    ]
    for mode in Mode:
        rows = {r.key: r for r in compare(named, mode).rows()}  # type: ignore[arg-type]
        assert rows["price"].values == (pytest.approx(2.4984), 1.5)
    training = {r.key: r for r in compare(named).rows()}  # type: ignore[arg-type]
    hours = training["hours"].values[0]
    assert training["cost"].values[0] == pytest.approx(hours * 2.4984)  # type: ignore[operator]


def test_differences_are_marked_and_equal_rows_are_not() -> None:
    rows = {r.key: r for r in compare(four_plans()).rows()}  # type: ignore[arg-type]
    assert rows["method"].differs and rows["gpu"].differs and rows["total"].differs
    assert not rows["optimizer"].differs and not rows["tokens"].differs


def test_cheapest_that_fits() -> None:
    comparison = compare(four_plans())  # type: ignore[arg-type]
    best = comparison.cheapest_fit()
    assert best is not None and comparison.plans[best].estimate.verdict is Verdict.FITS
    fitting_costs = [
        p.estimate.compute.cost
        for p in comparison.plans
        if p.estimate.verdict is Verdict.FITS and math.isfinite(p.estimate.compute.cost)
    ]
    assert comparison.plans[best].estimate.compute.cost == min(fitting_costs)
    none_fit = compare([("7B full on a 3060", lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-3060-12gb"))])
    assert none_fit.cheapest_fit() is None


def test_phases_on_one_axis_with_the_lesson_plan_missing_detailed_phases() -> None:
    comparison = compare(four_plans())  # type: ignore[arg-type]
    names = comparison.phase_names()
    # The lesson plan's judged figure is its sum, not nvidia-smi's (h55ux): the row names both.
    total = "nvidia-smi / lesson sum (judged)"
    assert names[-1] == total and "backward" in names and "training step" in names
    table = dict(zip(names, comparison.phase_bytes(), strict=True))
    assert table["training step"][:3] == (None, None, None)  # lesson accounting has its own single phase
    assert table[total] == tuple(p.estimate.total_bytes for p in comparison.plans)


def test_one_to_four_plans() -> None:
    with pytest.raises(PlanError, match="1 to 4 plans"):
        compare([])
    with pytest.raises(PlanError, match="1 to 4 plans"):
        compare([(f"p{i}", default_plan()) for i in range(MAX_PLANS + 1)])


def test_file_round_trip(tmp_path: Path) -> None:
    comparison = compare(four_plans())  # type: ignore[arg-type]
    path = tmp_path / "c.json"
    save(comparison, path)
    again = load(path)
    assert again.names == comparison.names
    assert [p.plan for p in again.plans] == [p.plan for p in comparison.plans]
    assert json.loads(dumps(comparison))["version"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(version=2), "newer"),
        (lambda d: d.update(extra=1), "unknown key"),
        (lambda d: d["plans"][0].update(name=""), "plans[0].name"),
        (
            lambda d: d["plans"][1]["plan"]["plan"]["workload"].update(micro_batch=0),
            "plans[1].workload.micro_batch",
        ),
        (lambda d: d.update(plans=[]), "1 to 4 plans"),
    ],
)
def test_bad_comparison_files_name_the_field(tmp_path: Path, change: object, message: str) -> None:
    document = to_dict(compare(four_plans()[:2]))  # type: ignore[arg-type]
    change(document)  # type: ignore[operator]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(PlanFileError) as info:
        load(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(PlanError):
        from_dict(document)


def test_cli_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for index, (_, plan) in enumerate(four_plans()):
        path = tmp_path / f"plan{index}.json"
        save_plan(plan, path)  # type: ignore[arg-type]
        paths.append(str(path))
    saved = tmp_path / "cmp.json"
    assert main(["compare", *paths, "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "cheapest that fits" in out and "* Method" in out
    assert main(["compare", str(saved), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["plans"] == ["plan0", "plan1", "plan2", "plan3"] and document["cheapest_fit"]
    assert main(["compare", str(saved), "--markdown"]) == 0
    assert "| **Method** |" in capsys.readouterr().out
    assert main(["compare", *paths, paths[0]]) == 2
    assert "1 to 4" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=30).filter(str.strip), plans()), min_size=1, max_size=4))
def test_comparison_file_round_trips_any_plans(named: list[tuple[str, Plan]]) -> None:
    # A hybrid recurrent model's or Llama 4's training is not estimated (core.advice.compare refuses it,
    # core.plan.training_refusal): its plans are compared served.
    mode = Mode.INFERENCE if any(training_refusal(plan) is not None for _, plan in named) else Mode.TRAINING
    comparison = compare(named, mode)
    again = from_dict(json.loads(dumps(comparison)))
    assert again.mode is mode
    assert [p.plan for p in again.plans] == [p.plan for p in comparison.plans]
    assert again.names == tuple(name.strip() for name, _ in named)


def test_offload_and_the_model_parallel_degrees_have_rows_of_their_own() -> None:
    """h55ux: Llama 3.1 70B QLoRA on 2 × RTX 4090 under FSDP, compared with the same plan with FSDP's CPU
    offload (Answer.AI's recipe), differed in every figure and in no input row: the offload, like the
    tensor-parallel degree a remedy picks, had no row."""
    base = default_plan().on_gpus(2, Strategy.FSDP)
    offloaded = base.with_parallel(offload=Offload.PARAMS)
    split = base.with_parallel(tensor_parallel=2)
    rows = {r.key: r for r in compare([("fsdp", base), ("offload", offloaded), ("tp", split)]).rows()}
    assert rows["offload"].values == ("none", "parameters + optimizer to CPU", "none") and rows["offload"].differs
    assert rows["model_parallel"].values == ("1 / 1 / 1", "1 / 1 / 1", "2 / 1 / 1") and rows["model_parallel"].differs
    assert rows["offload"].label == "CPU offload" and rows["model_parallel"].label == "Tensor / pipeline / context"

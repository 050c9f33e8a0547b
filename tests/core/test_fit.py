"""Which cards fit: every catalogue GPU × 1-8, each row the estimator's own answer, sorted by cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import load_gpus
from core.cli import main
from core.estimate import Verdict, estimate
from core.fit import cards_for, cheapest_fit, plan_on
from core.plan import Method, Precision, Strategy
from core.planfile import save
from core.presets import default_plan, lesson_plan


def test_every_card_and_count_once_each() -> None:
    rows = cards_for(default_plan())
    assert len(rows) == len(load_gpus()) * 8
    assert {(r.gpu.id, r.count) for r in rows} == {(g.id, n) for g in load_gpus() for n in range(1, 9)}


def test_rows_are_the_estimators_own_answers_sorted_by_cost() -> None:
    rows = cards_for(default_plan().with_changes(method=Method.FULL))
    for row in rows[:: len(rows) // 12]:
        again = estimate(row.plan)
        assert (row.estimate.total_bytes, row.verdict, row.cost) == (
            again.total_bytes,
            again.verdict,
            again.compute.cost,
        )
        assert row.plan.hardware.gpu == row.gpu.id
    costs = [round(r.cost, 6) for r in rows]
    assert costs == sorted(costs)
    # Equal costs (compute scales with the card count) list fewer cards first.
    b200 = [r.count for r in rows if r.gpu.id == "b200"]
    assert b200 == sorted(b200)


def test_lesson_examples_on_the_cards_the_lesson_names() -> None:
    # The lesson: LoRA r=8 on a 4-bit 7B base needs 5.1 GB and runs on a 12 GB card;
    # 16-bit full fine-tuning with Adam needs 81.9 GB, far beyond a 24 GB card.
    qlora = {(r.gpu.id, r.count): r for r in cards_for(lesson_plan(Method.QLORA, Precision.BF16), counts=(1,))}
    assert qlora["rtx-3060-12gb", 1].verdict is Verdict.FITS
    assert round(qlora["rtx-3060-12gb", 1].estimate.total_bytes / 1e9, 1) == 5.1
    full = {(r.gpu.id, r.count): r for r in cards_for(lesson_plan(Method.FULL, Precision.BF16), counts=(1,))}
    assert full["rtx-4090", 1].verdict is Verdict.OOM


def test_several_cards_shard_unless_told_to_keep_the_plans_sharding() -> None:
    plan = default_plan().with_changes(method=Method.FULL)
    one = plan_on(plan, "a100-80gb-sxm", 1)
    four = plan_on(plan, "a100-80gb-sxm", 4)
    kept = plan_on(plan, "a100-80gb-sxm", 4, keep_sharding=True)
    assert (one.parallel.strategy, four.parallel.strategy, kept.parallel.strategy) == (
        Strategy.DDP,
        Strategy.FSDP,
        Strategy.DDP,
    )
    # Plain data parallel holds everything on every card, and its gradient buckets besides:
    # no less memory per card than one GPU.
    assert estimate(kept).total_bytes > estimate(one).total_bytes > estimate(four).total_bytes


def test_cheapest_fit_is_the_first_fitting_row() -> None:
    rows = cards_for(default_plan())
    best = cheapest_fit(rows)
    assert best is not None and best.fits
    assert all(r.cost >= best.cost for r in rows if r.fits)
    assert cheapest_fit(r for r in rows if not r.fits) is None


def test_a_price_table_sets_each_cards_cost() -> None:
    plan = default_plan()
    rows = cards_for(plan, counts=(1,), prices={"rtx-4090": 0.0})
    assert rows[0].gpu.id == "rtx-4090" and rows[0].cost == 0.0


def test_cli_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    save(lesson_plan(Method.QLORA, Precision.BF16), path)
    assert main(["fit", str(path), "--max-count", "2"]) == 0
    out = capsys.readouterr().out
    assert "cheapest that fits" in out and "RTX 3060" in out
    assert main(["fit", str(path), "--json", "--fits-only"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["verdict"] == "fits" for r in rows)
    assert [round(r["cost"], 6) for r in rows] == sorted(round(r["cost"], 6) for r in rows)


def test_cli_fit_bad_count_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    save(default_plan(), path)
    assert main(["fit", str(path), "--max-count", "9"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cards_with_a_catalogue_price_are_priced_at_it() -> None:
    from core.catalogue import load_gpus

    priced = next(g for g in load_gpus() if g.hourly_price() is not None)
    listed = priced.hourly_price()
    assert listed is not None
    row = next(r for r in cards_for(default_plan(), counts=(1,)) if r.gpu.id == priced.id)
    assert (row.price, row.price_from) == listed  # the catalogue's price and its source
    unpriced = next(r for r in cards_for(default_plan(), counts=(1,)) if r.gpu.hourly_price() is None)
    assert (unpriced.price, unpriced.price_from) == (default_plan().hardware.price_per_gpu_hour, "the plan")

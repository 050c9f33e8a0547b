"""What the tests of the real-GPU memory evidence share: benchmarks/realgpu/memory_figures.json, the
checks every held-out source passes (recorded in full, fitting nothing), and which families the
mapping (benchmarks/realgpu/mapping.py) plans with a given setting on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"
# What every source of memory_figures.json records: who, where, when, why it is independent, how it measured.
SOURCE_KEYS = (
    "kind",
    "authors_or_org",
    "url_or_repo",
    "commit_or_date",
    "independence_note",
    "how_metric_was_determined",
)


def corpus() -> dict[str, Any]:
    """memory_figures.json, read afresh (a test may edit what it gets)."""
    data: dict[str, Any] = json.loads((FOLDER / "memory_figures.json").read_text())
    return data


def assert_recorded(source: dict[str, Any]) -> None:
    """The source's record names everything SOURCE_KEYS asks for."""
    for key in SOURCE_KEYS:
        assert source[key], (source["id"], key)


def recorded_figures(source_id: str) -> list[dict[str, Any]]:
    """The figures of ``source_id``, after checking its record names everything SOURCE_KEYS asks for."""
    data = corpus()
    (source,) = [s for s in data["sources"] if s["id"] == source_id]
    assert_recorded(source)
    return [f for f in data["figures"] if f["source_id"] == source_id]


def assert_rejected_with_why(*names: str) -> None:
    """Each candidate named (by the start of its ``where``) is in the corpus' "rejected" list once, with a reason
    of more than a sentence: found and not usable, never silently dropped."""
    rejected = corpus()["rejected"]
    for name in names:
        (entry,) = [r for r in rejected if r["where"].startswith(name)]
        assert len(entry["why"]) > 100, name


def assert_moves_no_fit(bench: ModuleType, result: Any, sources: set[str] | tuple[str, ...]) -> None:
    """Held out: ``result`` (``bench.run()`` on every figure) fits what the run without ``sources``' figures fits:
    the same all-family constant, and the same constant for each family left out."""
    others = bench.run([m.figure for m in result.mapped if m.source not in sources])
    assert others.fitted_all == result.fitted_all
    assert others.fitted_without == {k: v for k, v in result.fitted_without.items() if k in others.fitted_without}


def assert_held_out(source: str, family: str, count: int, scored: Sequence[str], module_name: str) -> list[Any]:
    """The ``count`` figures of ``source`` are held out (mapping.py ``HELD_OUT_SOURCES``) in ``family``, exactly
    ``scored`` are scored (each other one says what is missing or why it is not scored), and they fit nothing.
    Returns their ``Mapped`` records for the caller's own checks."""
    mapping = load_script(FOLDER / "mapping.py", f"{module_name}_mapping")
    bench = load_script(FOLDER / "memory.py", f"{module_name}_memory")
    result = bench.run()
    mine = [m for m in result.mapped if m.source == source]
    assert len(mine) == count and source in mapping.HELD_OUT_SOURCES
    for m in mine:
        assert m.held_out and m.family == family, m.id
        assert m.scored == (m.id in scored), m.id
        assert m.scored or m.missing or m.unscored, m.id
    assert sorted(r.mapped.id for r in result.rows if r.mapped.source == source) == sorted(scored)
    assert_moves_no_fit(bench, result, {source})
    return mine


def figure_plan(figure_id: str, module_name: str) -> Any:
    """The plan mapping.py makes of the recorded figure ``figure_id`` (None where it makes none)."""
    mapping = load_script(FOLDER / "mapping.py", module_name)
    (figure,) = [f for f in corpus()["figures"] if f["id"] == figure_id]
    return mapping.map_figure(figure).plan


def scored_error_pct(figure_id: str, module_name: str) -> float:
    """The scored figure's error, % (memory.py ``run()``, every figure)."""
    bench = load_script(FOLDER / "memory.py", module_name)
    (row,) = [r for r in bench.run().rows if r.mapped.id == figure_id]
    return float(row.error_pct)


def families_planned_with(setting: str, module_name: str) -> set[str]:
    """The families whose figures the mapping plans with the plan's boolean ``setting`` on."""
    mapping = load_script(FOLDER / "mapping.py", module_name)
    return {
        mapping.FAMILY[f["source_id"]]
        for f in corpus()["figures"]
        if (m := mapping.map_figure(f)).plan is not None and getattr(m.plan, setting)
    }

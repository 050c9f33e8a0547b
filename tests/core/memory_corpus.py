"""What the tests of the real-GPU memory evidence share: benchmarks/realgpu/memory_figures.json, the
checks every held-out source passes (recorded in full, fitting nothing), and which families the
mapping (benchmarks/realgpu/mapping.py) plans with a given setting on."""

from __future__ import annotations

import json
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


def assert_moves_no_fit(bench: ModuleType, result: Any, sources: set[str] | tuple[str, ...]) -> None:
    """Held out: ``result`` (``bench.run()`` on every figure) fits what the run without ``sources``' figures fits:
    the same all-family constant, and the same constant for each family left out."""
    others = bench.run([m.figure for m in result.mapped if m.source not in sources])
    assert others.fitted_all == result.fitted_all
    assert others.fitted_without == {k: v for k, v in result.fitted_without.items() if k in others.fitted_without}


def families_planned_with(setting: str, module_name: str) -> set[str]:
    """The families whose figures the mapping plans with the plan's boolean ``setting`` on."""
    mapping = load_script(FOLDER / "mapping.py", module_name)
    return {
        mapping.FAMILY[f["source_id"]]
        for f in corpus()["figures"]
        if (m := mapping.map_figure(f)).plan is not None and getattr(m.plan, setting)
    }

"""View → Which cards fit: rows from core.advice.fit, click applies the card as one undoable edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.advice.fit import cards_for, cheapest_fit
from gui.main_window import MainWindow


def test_table_lists_the_fitting_cards_by_cost_and_a_click_applies(window: MainWindow, qtbot: Any) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    rows = cards_for(window.controller.plan)
    fitting = [r for r in rows if r.fits]
    assert panel.table.rowCount() == len(fitting)
    assert panel.table.item(0, 0).text() == fitting[0].gpu.name  # cheapest first
    best = cheapest_fit(rows)
    assert best is not None and best.gpu.name in panel.summary.text()
    panel.fits_only.setChecked(False)
    assert panel.table.rowCount() == len(rows)
    before = window.controller.plan
    target = next(i for i, r in enumerate(panel.shown_rows) if r.count == 2 and r.gpu.id == "rtx-4090")
    panel.table.cellClicked.emit(target, 0)
    applied = window.controller.plan
    assert (applied.hardware.gpu, applied.world_size, applied.parallel.strategy.value) == ("rtx-4090", 2, "fsdp")
    window.controller.undo_stack.undo()
    assert window.controller.plan == before


def test_edits_refresh_the_table_once_visible(window: MainWindow, qtbot: Any) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    first = panel.rows
    window.controller.update("workload", lambda p: p.with_workload(micro_batch=64), "batch")
    qtbot.waitUntil(lambda: panel.rows is not first, timeout=2000)
    assert all(r.plan.workload.micro_batch == 64 for r in panel.rows)


def test_screenshot(window: MainWindow, qtbot: Any, tmp_path: Path) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    panel.resize(900, 600)
    assert not panel.grab().isNull()
    panel.grab().save(str(tmp_path / "fit.png"))

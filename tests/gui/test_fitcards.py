"""View → Which cards fit: rows from core.advice.fit, found in the worker process with progress
and Cancel; a click applies the card as one undoable edit."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from core.advice.fit import cards_for, cheapest_fit
from gui.main_window import MainWindow
from gui.tools.fitcards import FitCardsPanel
from gui.tools.searches import find_cards
from tests.gui import worker_jobs


def answered(qtbot: Any, panel: FitCardsPanel) -> None:
    qtbot.waitUntil(lambda: panel.answer is not None and not panel.searching, timeout=30_000)


def test_table_lists_the_fitting_cards_by_cost_and_a_click_applies(window: MainWindow, qtbot: Any) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    answered(qtbot, panel)
    rows = cards_for(window.controller.plan)
    fitting = [r for r in rows if r.fits]
    assert panel.table.rowCount() == len(fitting)
    assert panel.table.item(0, 0).text() == fitting[0].gpu.name  # cheapest first
    best = cheapest_fit(rows)
    assert best is not None and best.gpu.name in panel.summary.text()
    # Rows as core sorts them; an unknown cost (NaN) compared as such.
    shown = [(r.gpu_id, r.count, r.cost if math.isfinite(r.cost) else None) for r in panel.rows]
    assert shown == [(r.gpu.id, r.count, r.cost if math.isfinite(r.cost) else None) for r in rows]
    panel.fits_only.setChecked(False)
    assert panel.table.rowCount() == len(rows)
    before = window.controller.plan
    target = next(i for i, r in enumerate(panel.shown_rows) if r.count == 2 and r.gpu_id == "rtx-4090")
    panel.table.cellClicked.emit(target, 0)
    applied = window.controller.plan
    assert (applied.hardware.gpu, applied.world_size, applied.parallel.strategy.value) == ("rtx-4090", 2, "fsdp")
    window.controller.undo_stack.undo()
    assert window.controller.plan == before


def test_edits_refresh_the_table_once_visible(window: MainWindow, qtbot: Any) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    answered(qtbot, panel)
    first = panel.answer
    window.controller.update("workload", lambda p: p.with_workload(micro_batch=64), "batch")
    qtbot.waitUntil(lambda: panel.answer is not first, timeout=30_000)
    assert panel.answer is not None and panel.answer.request.plan.workload.micro_batch == 64


def test_the_search_runs_off_the_gui_thread_with_progress_and_cancel(window: MainWindow, qtbot: Any) -> None:
    """576 estimates froze the window for seconds: now the search runs in the worker process,
    its progress shows, and Cancel stops it (issue 26, item 17; issue 28, item 15)."""
    window.show()
    panel = window.plan_tools.show_fit()
    answered(qtbot, panel)
    before = panel.answer
    panel.jobs.run = worker_jobs.slow_search  # reports its progress for a minute
    seen: list[tuple[int, int]] = []
    panel.jobs.progressed.connect(lambda done, total: seen.append((done, total)))
    panel.keep_sharding.setChecked(True)  # a new request
    assert panel.searching  # the GUI thread did not wait for it
    qtbot.waitUntil(lambda: len(seen) >= 2 and panel.progress.bar.isVisible(), timeout=30_000)
    assert all(0 <= done <= total == worker_jobs.SEARCH_STEPS for done, total in seen)
    assert panel.progress.button.text() == "Cancel"
    qtbot.mouseClick(panel.progress.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.searching, timeout=10_000)
    assert panel.jobs.stopped == 1 and panel.answer is before
    assert panel.progress.button.text() == "Search again" and not panel.progress.bar.isVisible()
    panel.jobs.run = find_cards
    qtbot.mouseClick(panel.progress.button, Qt.MouseButton.LeftButton)  # and again, to the end
    answered(qtbot, panel)
    assert panel.answer is not before and panel.answer is not None and panel.answer.request.keep_sharding


def test_the_worker_runs_the_searches_without_qt() -> None:
    """The worker process imports the jobs' modules by name: they (and gui/tools/__init__.py)
    must not pull Qt in, or every worker would start as slowly as the window."""
    code = (
        "import sys, gui.worker.process, gui.tools.searches, core.advice.diagnosis; "
        "print(sorted(m for m in ('PySide6', 'pyqtgraph') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_screenshot(window: MainWindow, qtbot: Any, tmp_path: Path) -> None:
    window.show()
    panel = window.plan_tools.show_fit()
    answered(qtbot, panel)
    panel.resize(900, 600)
    assert not panel.grab().isNull()
    panel.grab().save(str(tmp_path / "fit.png"))

"""View → Compare plans: pin and open plans, the table's differences, cheapest that fits, undo, save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAccessible, QFont, QFontMetrics, QPalette
from PySide6.QtTest import QTest

from core.files import comparison as comparison_file
from core.files.planfile import save as save_plan
from core.files.report import CHART_MIN_WIDTH, chart_least_height, chart_svg, chart_svg_sized
from core.plan import Method
from core.presets import plan_for_model
from gui import dialogs, theme
from gui.main_window import MainWindow
from gui.screenshot import issue_plans
from gui.tools.compare import CURRENT, ComparePanel, chart_ink
from gui.tools.compare_table import NAMES_HEADING, SPOKEN
from tests.core.test_compare import four_plans
from tests.core.test_report import count_layouts


def rows_of(panel: ComparePanel) -> dict[str, list[str]]:
    """Each row's label and the plans' cells, read from either layout of the table."""
    table = panel.table
    if not table.stacked:
        return {
            table.verticalHeaderItem(r).data(SPOKEN): [table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())
        }
    rows: dict[str, list[str]] = {}
    for r in range(table.rowCount()):
        if table.columnSpan(r, 0) == 2:  # a block's heading
            label = table.item(r, 0).data(SPOKEN)
            rows[label] = []
        else:
            rows[label].append(table.item(r, 1).text())
    del rows[NAMES_HEADING]
    return rows


def plan_labels(panel: ComparePanel) -> list[str]:
    """What names each plan: its column's header side by side, its number in the names' block in blocks."""
    table = panel.table
    if not table.stacked:
        return [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    return [table.item(r, 0).text() for r in range(1, 1 + len(panel.comparison.plans))]  # type: ignore[union-attr]


def test_pin_keep_editing_and_undo(window: MainWindow) -> None:
    window.show()
    panel = window.plan_tools.show_compare()
    assert panel.table.columnCount() == 1 and panel.comparison is not None
    assert panel.comparison.names == (CURRENT,)
    assert panel.pin_current()
    window.controller.update("method", lambda p: p.with_changes(method=Method.QLORA), "QLoRA")
    panel.refresh()
    assert panel.comparison is not None and len(panel.comparison.plans) == 2
    rows = rows_of(panel)
    assert rows["Method"] == ["LoRA", "QLoRA (quantised base)"]
    method_row = list(rows).index("Method")
    optimizer_row = list(rows).index("Optimizer")
    assert panel.table.item(method_row, 0).background().color().name() == "#fff3cd"  # differs
    assert panel.table.item(optimizer_row, 0).background().style().name == "NoBrush"  # same
    # Undo the method change, then the pin: one history for both.
    window.controller.undo_stack.undo()
    assert window.controller.plan.method is Method.LORA
    window.controller.undo_stack.undo()
    assert panel.pinned == []
    window.controller.undo_stack.redo()
    assert len(panel.pinned) == 1


def test_four_plan_files_and_the_cheapest_that_fits(
    window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for index, (name, plan) in enumerate(four_plans()):
        path = tmp_path / f"{index}-{name.split()[0]}.json"
        save_plan(plan, path)  # type: ignore[arg-type]
        paths.append(str(path))
    monkeypatch.setattr(dialogs, "open_files", lambda *a: paths)
    window.show()
    panel = window.plan_tools.show_compare()
    assert panel.open_files()
    comparison = panel.comparison
    assert comparison is not None and len(comparison.plans) == 4  # the live plan makes way for four files
    best = comparison.cheapest_fit()
    assert best is not None and plan_labels(panel)[best].startswith("★")
    assert "Cheapest that fits" in panel.summary.text()
    assert not panel.pin_current()  # full


def test_save_and_reopen_a_comparison(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window.show()
    panel = window.plan_tools.show_compare()
    panel.pin_current()
    saved = tmp_path / "two.comparison.json"
    fake_dialogs.paths.append(str(saved))
    assert panel.save()
    assert comparison_file.load(saved).names == panel.comparison.names  # type: ignore[union-attr]
    monkeypatch.setattr(dialogs, "open_files", lambda *a: [str(saved)])
    panel.include_current.setChecked(False)
    assert panel.open_files()
    assert len(panel.pinned) == 3  # one pinned + the file's two (pinned + live)


def test_selected_plan_becomes_current_and_remove(window: MainWindow) -> None:
    window.show()
    panel = window.plan_tools.show_compare()
    panel.pin_current()
    window.controller.update("method", lambda p: p.with_changes(method=Method.FULL), "full")
    panel.table.selectColumn(0)
    assert panel.use_selected()
    assert window.controller.plan.method is Method.LORA
    panel.table.selectColumn(0)
    assert panel.remove_selected() and panel.pinned == []


def test_report_of_the_comparison(window: MainWindow, fake_dialogs: Any, tmp_path: Path, qtbot: Any) -> None:
    window.show()
    panel = window.plan_tools.show_compare()
    panel.pin_current()
    out = tmp_path / "cmp.pdf"
    fake_dialogs.paths.append(str(out))
    job = panel.export_report()  # the plans diagnosed in the worker; the PDF drawn here, with Qt
    assert job is not None
    with qtbot.waitSignal(job.done, timeout=60_000) as done:
        pass
    assert done.args == [True]
    assert out.read_bytes().startswith(b"%PDF-")
    assert panel.copy_markdown().startswith("# Plan comparison")


def test_a_plan_the_estimator_refuses_is_reported_not_added(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "odd.json"
    save_plan(window.controller.plan.with_hardware(gpu="no-such-card"), path)
    monkeypatch.setattr(dialogs, "open_files", lambda *a: [str(path)])
    window.show()
    panel = window.plan_tools.show_compare()
    assert not panel.open_files()
    assert panel.pinned == [] and "no-such-card" in fake_dialogs.errors()[0]


def test_names_from_files_are_plain_text(window: MainWindow) -> None:
    window.show()
    panel = window.plan_tools.show_compare()
    hostile = "<b>x</b> \u202eevil & co"
    panel.add_plans([(hostile, window.controller.plan)], "add")
    header = panel.table.horizontalHeaderItem(0).text()
    assert "<b>x</b>" in header and "\u202e" not in header and "\\u202e" in header
    panel.table.selectColumn(0)
    assert panel.remove_selected()
    assert "evil && co" in window.controller.undo_stack.undoText()


def test_a_pinned_plan_is_named_as_people_read_it(window: MainWindow) -> None:
    # Issue 26, cosmetic: pins were named by catalogue ids ("lora, rtx-4090 × 1").
    window.show()
    panel = window.plan_tools.show_compare()
    window.controller.set_plan(plan_for_model("llama-3.1-8b", method=Method.LORA).with_hardware(gpu="rtx-4090"))
    assert panel.pin_current()
    name = panel.pinned[-1][0]
    assert "Llama 3.1 8B" in name and "LoRA" in name and "NVIDIA GeForce RTX 4090" in name
    assert "rtx-4090" not in name and "× 1" not in name


def test_four_names_read_whole_in_their_headers(window: MainWindow) -> None:
    # Issue 26, cosmetic: four pinned plans' names were cut after a few words in the headers.
    window.show()
    panel = window.plan_tools.show_compare()
    for gpu in ("rtx-4090", "a100-80gb", "h100-sxm", "l40s"):
        window.controller.set_plan(plan_for_model("llama-3.1-8b", method=Method.LORA).with_hardware(gpu=gpu))
        assert panel.pin_current()
    panel.refresh()
    header = panel.table.horizontalHeader()
    metrics = header.fontMetrics()
    for column in range(panel.table.columnCount()):
        item = panel.table.horizontalHeaderItem(column)
        assert item is not None and "NVIDIA" in item.toolTip()
        widest = max(metrics.horizontalAdvance(line) for line in item.text().splitlines())
        assert widest <= header.sectionSize(column), item.text()


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1280, 720)])
def test_opening_the_comparison_keeps_the_window_and_its_chart(
    qtbot: Any, window: MainWindow, width: int, height: int
) -> None:
    """Before: the comparison's seven buttons in one row held its dock at ~810 px: opening it
    at 1280 × 720 grew the window to 1,325 px and squeezed the memory chart to a 60 px sliver;
    in two fixed rows (~430 px) the chart was 149 px wide at 1024 × 700."""
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    window.plan_tools.show_compare().add_plans(four_plans()[:3], "Compare")  # type: ignore[arg-type]
    qtbot.wait(50)
    assert (window.width(), window.height()) == (width, height)
    assert window.chart.plot.width() >= 300


def test_greyed_buttons_say_why(window: MainWindow) -> None:
    # "Pin current plan" greyed at four pinned plans (core.advice.compare.MAX_PLANS) with its tip unchanged,
    # "Keep a copy of the plan as it is now"; "Remove" and "Edit this plan" greyed with nothing pinned.
    window.show()
    panel = window.plan_tools.show_compare()
    assert not panel.remove_button.isEnabled() and "No plan is pinned" in panel.remove_button.toolTip()
    assert not panel.use_button.isEnabled() and "No plan is pinned" in panel.use_button.toolTip()
    for rank in (4, 8, 16, 32):
        assert panel.pin_current()
        window.controller.update("lora", lambda p, r=rank: p.with_lora(rank=r), f"rank {rank}")
    assert not panel.pin_button.isEnabled()
    assert panel.pin_button.toolTip() == "4 plans are compared at most: remove one to pin another"
    assert panel.remove_button.isEnabled() and panel.remove_button.toolTip().startswith("Remove the selected plan")


def test_money_cells_carry_the_plans_currency(window: MainWindow) -> None:
    # The start-up plan is priced from the catalogue (a US list price: Compute.currency is "$"); the Compute
    # tab says "$3.70 at $2.50 per GPU-hour" while the comparison's cells read "2.50" and "3.70".
    window.show()
    panel = window.plan_tools.show_compare()
    compute = window.controller.estimate.compute
    assert compute.currency == "$"
    texts = {label: cells[0] for label, cells in rows_of(panel).items()}
    assert texts["Price per GPU-hour"] == f"${compute.price_per_gpu_hour:,.2f}"
    assert texts["Cost"] == f"${compute.cost:,.2f}"


def test_the_chart_is_drawn_at_the_tab_s_own_size(qtbot: Any, window: MainWindow) -> None:
    # docs/GUI.md, 2026-12-07 (left 1): the 760 × 320 report chart was scaled into the dock, its 11 px text ~6 px
    # at 1366 × 768. The chart is now drawn for the view's size (core.files.report.chart_svg_sized): 1:1.
    window.show()
    panel = window.plan_tools.show_compare()
    panel.include_current.setChecked(False)
    assert panel.add_plans(four_plans(), "Compare")  # type: ignore[arg-type]
    dock = window.plan_tools.docks["compare"]
    dock.setFloating(True)
    for width, height in ((1300, 1000), (800, 900)):
        dock.resize(width, height)
        qtbot.waitUntil(lambda: panel.chart.renderer.defaultSize() == panel.chart.size())
        assert panel.chart.width() >= CHART_MIN_WIDTH  # drawn 1:1 above it
    panel.chart._drawn_at = panel.chart.size()  # as if drawn; a box below the least size is drawn at it
    panel.chart.set_chart(
        lambda w, h, ink: chart_svg_sized(panel.comparison, "GB", CHART_MIN_WIDTH - 60, 150, ink),  # type: ignore[arg-type]
        lambda w: 240,
    )
    drawn = panel.chart.renderer.defaultSize()
    assert drawn.width() == CHART_MIN_WIDTH and drawn.height() >= 240  # core.files.report.CHART_MIN_HEIGHT
    window.controller.undo_stack.setClean()


def test_the_chart_follows_a_dark_palette_and_a_report_keeps_its_own(qtbot: Any, window: MainWindow) -> None:
    # docs/GUI.md, 2026-12-07: in the dark theme the chart was a white block with black text. The view now paints
    # the palette's Base and draws the SVG in its Text and Mid colours (gui.theme.dark_palette: #1f2023, #e6e6e6,
    # #4a4d52); a report's chart (printed on white) keeps black text and colours.GRIDLINE (#ddd).
    window.show()
    panel = window.plan_tools.show_compare()
    panel.include_current.setChecked(False)
    assert panel.add_plans(four_plans(), "Compare")  # type: ignore[arg-type]
    panel.setPalette(theme.dark_palette())
    chart = panel.chart
    qtbot.waitUntil(lambda: chart.renderer.defaultSize() == chart.size())
    svg = chart._draw(chart.width(), chart.height(), chart_ink(chart.palette()))  # type: ignore[misc]
    assert 'font-size="11" fill="#e6e6e6">' in svg and 'stroke="#4a4d52"' in svg and 'stroke="#ddd"' not in svg
    assert chart.grab().toImage().pixelColor(2, 2).name() == "#1f2023"
    report = chart_svg(panel.comparison)  # type: ignore[arg-type]
    assert 'font-size="11">' in report and 'stroke="#ddd"' in report and "#e6e6e6" not in report
    window.controller.undo_stack.setClean()


def _docked(qtbot: Any, window: MainWindow, size: tuple[int, int], dock_width: int = 0) -> ComparePanel:
    """The window at ``size`` with the Compare tab docked (``dock_width`` px wide, where given) on four plans."""
    window.resize(*size)
    window.show()
    panel = window.plan_tools.show_compare()
    panel.include_current.setChecked(False)
    assert panel.add_plans(four_plans(), "Compare")  # type: ignore[arg-type]
    dock = window.plan_tools.docks["compare"]
    qtbot.waitUntil(dock.isVisible)
    if dock_width:
        qtbot.wait(20)  # the window lays its docks out first; resizeDocks then narrows this one
        window.resizeDocks([dock], [dock_width], Qt.Orientation.Horizontal)
        qtbot.waitUntil(lambda: dock.width() <= dock_width + 25)
    chart = panel.chart
    qtbot.waitUntil(lambda: chart.renderer.defaultSize() == chart.size())
    return panel


def test_docked_at_375_px_the_chart_shows_whole_and_scrolls_rather_than_shrink(qtbot: Any, window: MainWindow) -> None:
    # At 1366 × 768 with the Compare tab docked ~375 px wide the splitter gave the chart 200 px and the 360 × 333 px
    # chart (four plans: its legend wraps) was scaled to 0.6, its 11 px text ~6.6 px. The view keeps the chart's
    # least size (CHART_MIN_WIDTH × chart_least_height) and its scroll area scrolls: drawn 1:1. Then the first
    # share gave it 180 of 417 px and its pane, 8 px in from each side, was 359 px: it scrolled down 167 px and
    # sideways 15 px. The first share is now its least height, across the dock's whole width: no scrolling.
    panel = _docked(qtbot, window, (1366, 768), 375)
    chart, scroll = panel.chart, panel.chart_scroll
    assert chart.width() >= CHART_MIN_WIDTH
    assert chart.height() >= chart_least_height(panel.comparison, chart.width()) > 240  # type: ignore[arg-type]
    table = panel.table
    kept = table.kept_rows(2)  # side by side two rows under the names' header; in blocks the names' block
    two_rows, next_row = sum(table.rowHeight(r) for r in range(kept)), table.rowHeight(kept)
    assert scroll.horizontalScrollBar().maximum() == 0 and table.viewport().height() >= two_rows
    # Down only where the table's two rows leave the chart short (0 px run alone here, 4 px after the whole suite)
    assert scroll.verticalScrollBar().maximum() == 0 or table.viewport().height() < two_rows + next_row
    # The handle moved by hand: the pane stays where put, and a pane smaller than the chart scrolls, down only.
    total = sum(panel.splitter.sizes())
    panel.splitter.splitterMoved.emit(150, 1)
    panel.splitter.setSizes([150, total - 150])
    window.resize(1366, 760)
    qtbot.waitUntil(lambda: chart.renderer.defaultSize() == chart.size())
    assert panel.splitter.sizes()[0] <= 150
    assert scroll.viewport().height() < chart.height()  # the pane is smaller: it scrolls
    assert scroll.horizontalScrollBar().maximum() == 0  # beside the vertical bar the chart keeps its least width
    window.controller.undo_stack.setClean()


@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720), (1920, 1080), (0, 768)])
def test_docked_the_chart_takes_its_pane_s_width_and_never_scrolls_sideways(
    qtbot: Any, window: MainWindow, width: int, height: int
) -> None:
    # At 1024 × 768 the Compare tab is docked 270 px wide (the Details dock's least width, gui.main_window
    # DETAILS_MIN_WIDTH) and its chart's pane is 256 px beside its vertical scroll bar: the chart, held at 360 px
    # (CHART_MIN_WIDTH before), scrolled sideways by 104 px. It is now drawn at its pane's width, down to
    # CHART_MIN_WIDTH (240 px). Width 0: the window opened at 1024 px, then narrowed to the least width it allows.
    window.resize(width or 1024, height)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(20)
    plot = window.chart.plot.width()
    panel = _docked(qtbot, window, (width or 1024, height))
    if not width:
        window.resize(1, height)  # the window keeps its least width
        qtbot.waitUntil(lambda: panel.chart.renderer.defaultSize() == panel.chart.size())
        assert window.width() < 1024
    scroll = panel.chart_scroll
    assert scroll.horizontalScrollBar().maximum() == 0
    assert panel.chart.width() == scroll.viewport().width() >= CHART_MIN_WIDTH
    assert panel.chart.renderer.defaultSize() == panel.chart.size()  # drawn for its box: 1:1, nothing scaled
    if width:  # tabbed beside the Details, the dock takes no width from the memory chart (307 px at 1024 × 768)
        assert window.chart.plot.width() == plot
    window.controller.undo_stack.setClean()


@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720), (1920, 1080)])
def test_the_first_split_gives_the_chart_its_least_height_where_the_table_keeps_two_rows(
    qtbot: Any, window: MainWindow, width: int, height: int
) -> None:
    # The splitter's 320 : 420 gave the chart 162 px at 1024 × 768 and 160 at 1280 × 720 (its least 333 px): it
    # started scrolled. Now the chart's pane takes its least height where the table keeps the plans' names (its
    # header; in blocks, the names' block) and two rows, and the table takes the rest: a tall dock keeps the old
    # share (327 px of 757 at 1920 × 1080).
    panel = _docked(qtbot, window, (width, height))
    chart, scroll, table = panel.chart, panel.chart_scroll, panel.table
    pane, rest = panel.splitter.sizes()
    kept = table.kept_rows(2)  # side by side two rows under the names' header; in blocks the names' block
    two_rows, next_row = sum(table.rowHeight(r) for r in range(kept)), table.rowHeight(kept)
    least = chart_least_height(panel.comparison, chart.width())  # type: ignore[arg-type]
    assert table.viewport().height() >= two_rows
    if scroll.verticalScrollBar().maximum():  # the chart scrolls: only because the table would lose its two rows
        assert pane > (pane + rest) * 320 // 740 and table.viewport().height() < two_rows + next_row
    else:
        assert pane >= least and pane >= (pane + rest) * 320 // 740
    window.controller.undo_stack.setClean()


def test_one_redraw_lays_the_chart_out_once(qtbot: Any, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    # SvgView._redraw asks the chart's least height, then the sized chart, which asks the chart: each called
    # core.files.report._layout (the legend flowed into rows, the phase names into lines) for the same comparison
    # and width, 3 times a redraw before. Now once.
    window.show()
    panel = window.plan_tools.show_compare()
    panel.include_current.setChecked(False)
    assert panel.add_plans(four_plans(), "Compare")  # type: ignore[arg-type]
    chart = panel.chart
    qtbot.waitUntil(lambda: chart.renderer.defaultSize() == chart.size())
    calls = count_layouts(monkeypatch)
    chart._drawn_at = QSize()  # as a resize or a palette change does
    chart._redraw()
    assert calls == [chart.width()]
    chart._drawn_at = QSize()  # the same box drawn again (a palette change): nothing laid out again
    chart._redraw()
    assert calls == [chart.width()]
    # A refresh (a new comparison) lays it out once for each width asked, the splitter's share included
    # (ComparePanel._share_chart asks at the width beside a vertical scroll bar). New widths: tests/core/test_report.py.
    calls.clear()
    panel.refresh()
    qtbot.waitUntil(lambda: chart.renderer.defaultSize() == chart.size())
    assert calls and len(calls) == len(set(calls)), calls
    window.controller.undo_stack.setClean()


def _words_fit(panel: ComparePanel) -> list[str]:
    """Every word (a run between spaces: a number is one) of every cell, header and label wider than its box: the
    text's advance plus the 8 px QTableView.sizeHintForColumn adds to it in Fusion (PySide6 6.11, offscreen)."""
    table = panel.table
    cells = table.fontMetrics()
    bold = QFont(table.font())
    bold.setBold(True)
    heads = QFontMetrics(bold)  # headers and labels measured bold (the cheapest's and the differing rows')
    cut = []
    for c in range(table.columnCount()):
        width = table.columnWidth(c)
        for r in range(table.rowCount()):
            item = table.item(r, c)
            if item is None or table.columnSpan(r, c) > 1:
                continue
            words = item.text().split()
            cut += [f"{word} in {width} px" for word in words if cells.horizontalAdvance(word) + 8 > width]
        if not table.stacked:
            lines = table.horizontalHeaderItem(c).text().splitlines()  # within the header's margins (4 px a side)
            cut += [f"{line!r} in header {c}" for line in lines if heads.horizontalAdvance(line) + 8 > width]
    if not table.stacked:
        labels = table.verticalHeader().width()
        for r in range(table.rowCount()):
            lines = table.verticalHeaderItem(r).text().splitlines()
            cut += [f"{line!r} in {labels} px" for line in lines if heads.horizontalAdvance(line) + 8 > labels]
    return cut


def _laid_out(qtbot: Any, window: MainWindow, size: tuple[int, int], plans: int = 4) -> ComparePanel:
    """The window at ``size`` with the Compare tab docked on ``plans`` of gui.screenshot.issue_plans(), its table
    laid out for its width."""
    window.resize(*size)
    window.show()
    panel = window.plan_tools.show_compare()
    panel.include_current.setChecked(False)
    assert panel.add_plans(issue_plans()[:plans], "Compare")  # type: ignore[arg-type]
    qtbot.waitUntil(window.plan_tools.docks["compare"].isVisible)
    table = panel.table
    qtbot.waitUntil(lambda: table._laid_out_at == table.width())
    qtbot.wait(20)  # the rows laid out, the vertical scroll bar shown
    return panel


@pytest.mark.parametrize("plans", [2, 3, 4])
@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720), (1920, 1080)])
def test_docked_the_table_never_scrolls_sideways_and_cuts_no_word(
    qtbot: Any, window: MainWindow, width: int, height: int, plans: int
) -> None:
    # docs/GUI.md, 2026-12-07 (last), left: each plan column was held at its header's widest line (142 px) and the
    # labels took 180 px, so the docked table scrolled sideways at every size: by 210 / 354 / 496 px (2 / 3 / 4 plans
    # of gui.screenshot.issue_plans) at 1024 × 768 (the dock 270 px), 88 / 231 / 372 px at 1280 × 720 (392 px) and
    # 92 px with four plans at 1920 × 1080 (672 px). Now the columns take their words' widths where they fit, and one
    # block a row where they do not: no sideways scrolling, no word cut, the plans' columns kept where they fit.
    panel = _laid_out(qtbot, window, (width, height), plans)
    table = panel.table
    assert table.horizontalScrollBar().maximum() == 0
    assert table.horizontalHeader().length() <= table.viewport().width()
    if not table.stacked:  # the labels and the columns within the room a vertical scroll bar leaves
        assert table.verticalHeader().width() + table.horizontalHeader().length() <= table.room()
    assert _words_fit(panel) == []
    if width == 1920 or (width, plans) == (1280, 2):  # 672 px holds four plans' columns, 392 px two
        assert not table.stacked and table.columnCount() == plans
    assert rows_of(panel)["Method"][:2] == ["LoRA", "QLoRA (quantised base)"]
    window.controller.undo_stack.setClean()


def test_in_blocks_the_plans_are_named_selected_and_read_out_as_side_by_side(qtbot: Any, window: MainWindow) -> None:
    # Below the width the plans' columns fit (the dock's 270 px at 1024 × 768), one block a row: its label, then each
    # plan's number and value. The plans are still named whole, selected by keyboard, removed and edited, and each
    # cell tells a screen reader its row and plan, as the columns' headers did.
    window.resize(1024, 768)
    window.show()
    panel = window.plan_tools.show_compare()
    named = issue_plans()
    assert panel.add_plans(named[:2], "Compare")  # type: ignore[arg-type]
    table = panel.table
    qtbot.waitUntil(lambda: table._laid_out_at == table.width())
    assert table.stacked and table.horizontalScrollBar().maximum() == 0
    comparison = panel.comparison
    assert comparison is not None and len(comparison.plans) == 3  # the live plan third
    heading = table.item(0, 0)  # a block's heading: across the table, shaded as a header section is (its Window role)
    assert heading.text() == "Plans" and table.columnSpan(0, 0) == 2
    assert heading.background().color() == table.palette().color(QPalette.ColorRole.Window)
    names = [table.item(r, 1).text() for r in range(1, 4)]
    assert names == [named[0][0], named[1][0], CURRENT]  # whole, wrapped at spaces by the cell if need be
    assert plan_labels(panel)[comparison.cheapest_fit()].startswith("★")  # type: ignore[index]
    assert "RTX 3060" in table.item(2, 0).toolTip()
    # A screen reader: the table's name, a number read as its plan, a value with its row and plan.
    view = QAccessible.queryAccessibleInterface(table)
    assert view.text(QAccessible.Text.Name) == "Plans compared"
    spoken = {
        (view.child(k).text(QAccessible.Text.Name), view.child(k).text(QAccessible.Text.Description))
        for k in range(view.childCount())
    }
    assert (f"2. {named[1][0]}", "") in spoken
    assert ("QLoRA (quantised base)", f"Method, 2. {named[1][0]}") in spoken
    # The keyboard: down from the first plan's model to the second's selects the second plan; Remove takes it out.
    model = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == "Model")
    table.setFocus()
    table.setCurrentCell(model + 1, 1)
    QTest.keyClick(table, Qt.Key.Key_Down)
    assert panel.selected_index() == 1
    assert panel.remove_selected() and [name for name, _ in panel.pinned] == [named[0][0]]
    # Copy as Markdown: the comparison's whole text, whatever the table's layout.
    markdown = panel.copy_markdown()
    assert named[0][0] in markdown and "| Optimizer code path |" in markdown
    window.controller.undo_stack.setClean()


def test_side_by_side_the_wrapped_names_and_labels_are_read_whole(qtbot: Any, window: MainWindow) -> None:
    # At 1920 × 1080 the four plans' columns fit (672 px): a name wraps onto lines in its header and a label in the
    # vertical header, and a screen reader reads each whole, as before it was wrapped.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    assert not table.stacked
    header = table.horizontalHeaderItem(1)
    assert "\n" in header.text() and header.data(SPOKEN) == "2. QLoRA r16 on an RTX 3060"
    best = panel.comparison.cheapest_fit()  # type: ignore[union-attr]
    assert best is not None and table.horizontalHeaderItem(best).data(SPOKEN).endswith(", cheapest that fits")
    labels = {item.data(SPOKEN): item.text() for item in map(table.verticalHeaderItem, range(table.rowCount()))}
    assert labels["Optimizer code path"] != "Optimizer code path"  # wrapped where shown
    window.controller.undo_stack.setClean()


def test_a_larger_font_lays_the_table_out_again(qtbot: Any, window: MainWindow) -> None:
    # The words are measured in the table's font: at 1920 × 1080 the four plans' columns fit at the offscreen 9 pt
    # font; at 18 pt their words no longer fit the dock's 672 px, and the table turns into blocks, not scrolling.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    assert not table.stacked
    font = QFont(table.font())
    font.setPointSizeF(18)
    table.setFont(font)
    qtbot.waitUntil(lambda: table.stacked)
    qtbot.wait(20)
    assert table.horizontalScrollBar().maximum() == 0 and _words_fit(panel) == []
    window.controller.undo_stack.setClean()

"""The Compare table's finish (docs/GUI.md, 2026-12-08): balanced header lines, verdicts legible on the changed rows'
shade in both themes, a floating dock that keeps the chart's least width and lays nothing over anything, and the
selected plans copied as a table."""

from __future__ import annotations

from itertools import combinations, pairwise
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QGuiApplication, QKeySequence, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyleFactory

from core.colours import CAUTION, FITS, PROBLEM, UNCERTAIN
from core.files.report import CHART_MIN_WIDTH
from gui import theme
from gui.main_window import MainWindow
from gui.screenshot import issue_plans
from gui.tools.compare_table import SPOKEN, words
from tests.gui.test_compare import _laid_out

WCAG_AA = 4.5  # WCAG 2.1 SC 1.4.3: text at its usual size against its background


def _bold(font: QFont) -> QFontMetrics:
    bold = QFont(font)
    bold.setBold(True)
    return QFontMetrics(bold)


def _least_widest(tokens: list[str], lines: int, metrics: QFontMetrics) -> int:
    """The least widest line of any way to break ``tokens`` into ``lines`` lines, tried one by one."""
    best = None
    for cuts in combinations(range(1, len(tokens)), lines - 1):
        edges = (0, *cuts, len(tokens))
        widest = max(metrics.horizontalAdvance(" ".join(tokens[a:b])) for a, b in pairwise(edges))
        best = widest if best is None else min(best, widest)
    assert best is not None
    return best


@pytest.mark.parametrize(("size", "plans"), [((1920, 1080), 4), ((1920, 1080), 3), ((1280, 720), 2)])
def test_wrapped_names_and_labels_break_into_balanced_lines(
    qtbot: Any, window: MainWindow, size: tuple[int, int], plans: int
) -> None:
    # Before: each line was filled greedily, so at 1920 × 1080 "4. LoRA r16 on an L4" read "4. LoRA r16 on an" over
    # a lone "L4", "2. QLoRA r16 on" over "an RTX 3060" and "Tensor / pipeline / context" put "/ context" on a line
    # of its own. Now each name and label takes as many lines as before at the least width that holds them (its
    # widest line no wider than any other break into that many lines), and no line starts with "/" or "×".
    panel = _laid_out(qtbot, window, size, plans)
    table = panel.table
    assert not table.stacked
    shown = [(table.horizontalHeaderItem(c).text(), table.horizontalHeader()) for c in range(table.columnCount())]
    shown += [(table.verticalHeaderItem(r).text(), table.verticalHeader()) for r in range(table.rowCount())]
    assert any("\n" in text for text, _ in shown)
    for text, header in shown:
        lines = text.splitlines()
        metrics = _bold(header.font())  # measured bold: the cheapest's header and the differing rows' labels
        widest = max(metrics.horizontalAdvance(line) for line in lines)
        assert widest == _least_widest(words(" ".join(lines)), len(lines), metrics), lines
        starts = [line.split()[0] for line in lines]
        assert all(word == "★" or any(ch.isalnum() for ch in word) for word in starts), lines
    assert table.horizontalHeaderItem(3 if plans == 4 else 0).data(SPOKEN).startswith(("4. LoRA", "1. LoRA"))
    window.controller.undo_stack.setClean()


def _palettes() -> dict[str, QPalette]:
    fusion = QStyleFactory.create("Fusion")
    return {"light": fusion.standardPalette(), "dark": theme.dark_palette()}


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_verdict_reads_at_4_5_to_1_on_the_base_and_on_a_changed_row(name: str) -> None:
    # The verdict panel's shades for a light background (gui.panels.verdict.TEXT_SHADES) on the changed rows' pale
    # yellow #fff3cd: Over headroom #B07800 3.4:1, Fits #009E73 3.1:1, Out of memory #D55E00 3.5:1; the same yellow
    # stood in the dark theme. gui.theme.legible darkens (light) or lightens (dark) each towards the Text.
    palette = _palettes()[name]
    base, text = palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Text)
    shade = theme.changed_row(palette)
    assert theme.contrast(text, shade) >= WCAG_AA  # a changed row's own text
    assert theme.contrast(shade, base) > 1.1  # and the shade seen against the unchanged rows (#fff3cd on white: 1.1)
    for colour in (FITS, CAUTION, UNCERTAIN, PROBLEM):  # core.files.report.VERDICT_COLOURS and a narrow fit's
        ink = theme.legible(QColor(colour), (base, shade), text)
        assert min(theme.contrast(ink, base), theme.contrast(ink, shade)) >= WCAG_AA, (name, colour, ink.name())
        assert ink != text  # still the verdict's hue, not the plain text colour


@pytest.mark.parametrize("name", ["light", "dark"])
def test_the_verdict_cells_contrast_with_their_shade_in_either_theme(qtbot: Any, window: MainWindow, name: str) -> None:
    # gui.screenshot.issue_plans: "Fits narrowly" (yellow) and "Over headroom" (orange) on the changed row's shade.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    panel.setPalette(_palettes()[name])
    qtbot.waitUntil(
        lambda: table.palette().color(QPalette.ColorRole.Base) == _palettes()[name].color(QPalette.ColorRole.Base)
    )
    labels = [table.verticalHeaderItem(r).data(SPOKEN) for r in range(table.rowCount())]
    verdicts = labels.index("Verdict")
    base = table.palette().color(QPalette.ColorRole.Base)
    for c in range(table.columnCount()):
        for r in range(table.rowCount()):
            item = table.item(r, c)
            background: QBrush = item.background()
            shown = background.color() if background.style() != Qt.BrushStyle.NoBrush else base
            foreground: QBrush = item.foreground()
            ink = (
                foreground.color()
                if foreground.style() != Qt.BrushStyle.NoBrush
                else table.palette().color(QPalette.ColorRole.Text)
            )
            assert theme.contrast(ink, shown) >= WCAG_AA, (name, labels[r], c, ink.name(), shown.name())
        assert table.item(verdicts, c).background().color() == theme.changed_row(table.palette())
    window.controller.undo_stack.setClean()


def test_a_floating_dock_keeps_the_chart_s_least_width_and_lays_nothing_over_anything(
    qtbot: Any, window: MainWindow
) -> None:
    # Before: floating, the dock could be dragged to its layout's 213 × 231 px: the chart's pane, 213 px less its
    # scroll bar, scrolled sideways under CHART_MIN_WIDTH (240 px), and the buttons' four rows were drawn over the
    # "Include the current plan" box and the summary. Now the panel holds the chart's least width beside a vertical
    # scroll bar and the height its buttons' rows take at its width; the chart's pane gives way and scrolls, down only.
    panel = _laid_out(qtbot, window, (1280, 720))
    dock = window.plan_tools.docks["compare"]
    dock.setFloating(True)
    dock.resize(100, 100)
    qtbot.waitUntil(lambda: panel.width() < 400)  # as narrow as the dock lets it be
    qtbot.wait(20)
    scroll = panel.chart_scroll
    assert scroll.viewport().width() >= CHART_MIN_WIDTH and scroll.horizontalScrollBar().maximum() == 0
    buttons = [panel.pin_button, panel.open_button, panel.remove_button, panel.use_button, panel.save_button]
    buttons += [panel.report_button, panel.copy_button]
    parts = [*buttons, panel.include_current, panel.summary, panel.splitter]
    for a, b in combinations(parts, 2):
        assert not a.geometry().intersects(b.geometry()), (repr(a), a.geometry(), repr(b), b.geometry())
    assert all(panel.rect().contains(part.geometry()) for part in parts)
    assert panel.summary.height() >= panel.summary.heightForWidth(panel.summary.width())
    window.controller.undo_stack.setClean()


def _clipboard_after_copy(qtbot: Any, table: Any) -> list[list[str]]:
    QGuiApplication.clipboard().clear()
    table.setFocus()
    QTest.keySequence(table, QKeySequence.StandardKey.Copy)
    return [line.split("\t") for line in QGuiApplication.clipboard().text().splitlines()]


@pytest.mark.parametrize("size", [(1920, 1080), (1024, 768)])
def test_copy_puts_the_selected_plans_on_the_clipboard_as_a_table(
    qtbot: Any, window: MainWindow, size: tuple[int, int]
) -> None:
    # Before: Ctrl+C in the table copied the current cell's text alone ("QLoRA (quantised base)"), whichever plan
    # was selected. Now the selected plan's rows, labelled, tab-separated as a spreadsheet pastes them; with no
    # selection every plan. Side by side (1920 × 1080: a column a plan) and in blocks (1024 × 768) alike.
    panel = _laid_out(qtbot, window, size)
    table = panel.table
    assert table.stacked is (size == (1024, 768))
    names = [f"{i + 1}. {name}" for i, (name, _) in enumerate(issue_plans())]
    table.clearSelection()
    lines = _clipboard_after_copy(qtbot, table)
    assert lines[0] == ["", *names]
    rows = {line[0]: line[1:] for line in lines[1:]}
    assert rows["Method"] == ["LoRA", "QLoRA (quantised base)", "Full fine-tuning", "LoRA"]
    assert rows["Margin"][1] == "'-0.10 GB"  # a spreadsheet would read "-0.10 GB" as a formula (core's csv_text)
    if table.stacked:  # the second plan's row in the Method block
        method = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == "Method")
        table.setCurrentCell(method + 2, 1)
    else:
        table.setCurrentCell(0, 1)
    assert panel.selected_index() == 1
    lines = _clipboard_after_copy(qtbot, table)
    assert lines[0] == ["", names[1]] and ["Method", "QLoRA (quantised base)"] in lines
    assert len(lines) == 1 + len(panel.comparison.rows())  # type: ignore[union-attr]
    window.controller.undo_stack.setClean()


def test_delete_removes_the_selected_plan_and_undo_brings_it_back(qtbot: Any, window: MainWindow) -> None:
    # The keyboard's way to the Remove button: Delete (or Backspace) in the table, undone with Ctrl+Z like it.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    table.setFocus()
    table.setCurrentCell(0, 1)
    QTest.keyClick(table, Qt.Key.Key_Delete)
    assert [name for name, _ in panel.pinned] == [name for i, (name, _) in enumerate(issue_plans()) if i != 1]
    window.controller.undo_stack.undo()
    assert len(panel.pinned) == 4
    table.clearSelection()
    QTest.keyClick(table, Qt.Key.Key_Delete)  # nothing selected: nothing removed
    assert len(panel.pinned) == 4
    window.controller.undo_stack.setClean()


def test_selecting_a_plan_keeps_the_differing_rows_labels_apart(qtbot: Any, window: MainWindow) -> None:
    # Before: selecting a plan's column selected every row, and the vertical header drew every label bold as a
    # highlighted section: the bold that marks the rows whose values differ between the plans was lost. Measured in
    # the labels' pixels: a label's ink is as wide as its text drawn in the font it is shown in.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    labels = [table.verticalHeaderItem(r) for r in range(table.rowCount())]
    same = next(r for r, item in enumerate(labels) if not item.font().bold() and "\n" not in item.text())
    header = table.verticalHeader()

    def ink_width() -> int:
        image = header.grab().toImage()
        top, height = header.sectionViewportPosition(same), header.sectionSize(same)
        text = table.palette().color(QPalette.ColorRole.WindowText).lightness()
        columns = [
            x
            for x in range(image.width() - 2)
            for y in range(top + 2, top + height - 2)
            if abs(image.pixelColor(x, y).lightness() - text) < 60
        ]
        return max(columns) - min(columns) if columns else 0

    before = ink_width()
    table.setCurrentCell(0, 1)
    qtbot.wait(20)
    assert panel.selected_index() == 1
    assert ink_width() == before > 0, labels[same].text()
    window.controller.undo_stack.setClean()


def test_the_right_click_menu_copies_the_plan_under_it(qtbot: Any, window: MainWindow) -> None:
    # A table with no menu left the keyboard's Copy to be guessed. Right-clicking a plan's cell selects it
    # (QAbstractItemView) and the menu offers to copy it; with nothing selected, every plan.
    panel = _laid_out(qtbot, window, (1920, 1080))
    table = panel.table
    table.clearSelection()
    menu = table.context_menu()
    assert [action.text() for action in menu.actions()] == ["Copy every plan"]
    table.setCurrentCell(0, 2)
    menu = table.context_menu()
    copy = menu.actions()[0]
    assert copy.text() == "Copy the selected plan" and copy.shortcut() == QKeySequence(QKeySequence.StandardKey.Copy)
    QGuiApplication.clipboard().clear()
    copy.trigger()
    lines = [line.split("\t") for line in QGuiApplication.clipboard().text().splitlines()]
    assert lines[0] == ["", "3. Full on 2 × A100 80GB"] and ["Method", "Full fine-tuning"] in lines
    window.controller.undo_stack.setClean()

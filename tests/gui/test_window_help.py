"""Looks and small courtesies (issue 13, items 11 and 12): theme changes reach the chart's
legend, dark check boxes can be seen, counts read as English, every focus stop has a name,
Help explains the window, Open Recent forgets files that are gone, `make run` talks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAccessible, QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication, QCheckBox, QLabel, QStyle, QStyleOptionButton, QWidget

from gui import theme
from gui.main_window import MainWindow
from gui.plotstyle import contrast as _contrast  # WCAG 2.1

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_theme(qapp: Any) -> Any:
    yield
    theme.apply_theme(qapp, "light")


def legend_html(window: MainWindow) -> list[str]:
    return [label.item.toHtml().lower() for _, label in window.chart.legend.items]


def test_the_legend_follows_a_theme_change(window: MainWindow, restore_theme: Any) -> None:
    window.show()
    for choice in ("light", "dark", "light"):
        window.set_theme(choice)
        QApplication.processEvents()
        text = window.chart.palette().color(QPalette.ColorRole.Text).name().lower()
        # Before: the labels kept the colour of the theme they were made in.
        assert all(text in html for html in legend_html(window)), choice


def test_follow_the_system_keeps_the_platform_palette_when_qt_reports_no_scheme(
    qapp: Any, monkeypatch: pytest.MonkeyPatch, restore_theme: Any
) -> None:
    monkeypatch.setattr(theme, "color_scheme", lambda _app: Qt.ColorScheme.Unknown, raising=False)
    monkeypatch.setattr(theme, "platform_palette", lambda: theme.dark_palette(), raising=False)
    theme.apply_theme(qapp, "system")
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 100  # not forced light


@pytest.mark.parametrize("choice", ["light", "dark"])
def test_an_unchecked_box_stands_out_from_its_background(qapp: Any, choice: str, restore_theme: Any) -> None:
    theme.apply_theme(qapp, choice)
    box = QCheckBox("k")
    box.resize(box.sizeHint())
    image = QImage(box.size(), QImage.Format.Format_ARGB32)
    box.render(image)
    option = QStyleOptionButton()
    option.initFrom(box)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    background = box.palette().color(QPalette.ColorRole.Window)
    # WCAG 2.1 SC 1.4.11 asks 3:1 for the parts of a control that show its state.
    best = max(
        _contrast(QColor(image.pixel(QPoint(x, y))), background)
        for x in range(rect.left(), rect.right() + 1)
        for y in range(rect.top(), rect.bottom() + 1)
    )
    assert best >= 3.0
    box.deleteLater()


def test_counts_read_as_english(window: MainWindow) -> None:
    accumulation = window.workload_form.grad_accum
    window.controller.set_plan(window.controller.plan.with_workload(grad_accum=1))
    assert accumulation.text() == "1 step"
    window.controller.set_plan(window.controller.plan.with_workload(grad_accum=2))
    assert accumulation.text() == "2 steps"
    window.controller.set_plan(window.controller.plan.with_inference(concurrent=1))
    assert window.serving_form.fields["inference.concurrent"].text().endswith("1 request")


def accessible_name(widget: QWidget) -> str:
    """The name a screen reader announces (a button's text when no name was set)."""
    interface = QAccessible.queryAccessibleInterface(widget)
    return interface.text(QAccessible.Text.Name).strip() if interface is not None else ""


def test_every_focus_stop_has_an_accessible_name(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        QApplication.processEvents()
        unnamed = [
            f"{type(w).__name__} in {type(w.parent()).__name__} {w.parent().objectName()}"
            for w in window.findChildren(QWidget)
            if w.isVisible() and w.focusPolicy() & Qt.FocusPolicy.TabFocus and not accessible_name(w)
        ]
        assert unnamed == [], window.tabs.tabText(index)


def test_help_explains_the_window_and_its_shortcuts(window: MainWindow, fake_dialogs: Any) -> None:
    actions = {a.text().replace("&", ""): a for a in window.help_menu.actions() if a.text()}
    assert {"How to read this window", "Keyboard shortcuts"} <= set(actions)
    actions["Keyboard shortcuts"].trigger()
    ((_name, args),) = [call for call in fake_dialogs.calls if call[0] == "info"]
    text = str(args[-1])
    for action in (window.undo_action, window.save_action, window.lesson_action, window.export_png_action):
        assert action.shortcut().toString(action.shortcut().SequenceFormat.NativeText) in text
    actions["How to read this window"].trigger()
    assert "Diagnosis" in str(fake_dialogs.calls[-1][1][-1])


def test_a_missing_recent_file_leaves_the_list(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    gone = str(tmp_path / "gone.vramplan.json")
    window.settings.add_recent(gone)
    window._fill_recent()
    action = next(a for a in window.recent_menu.actions() if a.statusTip() == gone)
    action.trigger()
    assert gone not in window.settings.recent_files
    assert any("gone.vramplan.json" in message for message in fake_dialogs.errors())


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_says_what_it_is_doing(tmp_path: Path) -> None:
    # A first start (no virtual environment yet) installs for about a minute before the window.
    result = subprocess.run(
        ["make", "-n", "run", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    echoes = [line for line in result.stdout.splitlines() if line.lstrip().startswith(("echo", "@echo", "printf"))]
    assert any("first" in line.lower() and "minute" in line.lower() for line in echoes), result.stdout
    assert any("Starting VRAM Planner" in line for line in echoes), result.stdout


def test_serving_texts_count_requests_in_english(window: MainWindow) -> None:
    # "1 request(s)" in the serving verdict, the Serving panel and the Diagnosis limits (issue 13 item 12).
    from gui.format import counted

    assert (counted(1, "request"), counted(51, "request")) == ("1 request", "51 requests")
    window.set_chart_mode("inference")
    window.controller.set_plan(window.controller.plan.with_inference(concurrent=1))
    texts = [w.text() for w in window.findChildren(QLabel)]
    assert not any("request(s)" in text for text in texts)
    assert any("1 request ×" in text for text in texts)


def test_the_shortcuts_list_has_every_menu_shortcut(window: MainWindow, fake_dialogs: Any) -> None:
    # Issue 26, cosmetic: Help → Keyboard shortcuts missed the tools' Ctrl+Shift ones.
    from PySide6.QtGui import QAction, QKeySequence

    text = "\n".join(window.shortcut_lines())
    native = QKeySequence.SequenceFormat.NativeText
    shortcuts = {a.shortcut().toString(native) for a in window.findChildren(QAction) if not a.shortcut().isEmpty()}
    shortcuts = {s for s in shortcuts if s.startswith("Ctrl+Shift")}
    assert shortcuts >= {"Ctrl+Shift+G", "Ctrl+Shift+C", "Ctrl+Shift+F"}
    assert all(s in text for s in shortcuts)


def test_the_headroom_band_shows_on_the_dark_theme(window: MainWindow, restore_theme: Any) -> None:
    # docs/GUI.md, 2026-12-04: vermillion at alpha 40 on the dark base was 1.2 : 1, nearly
    # invisible, in the plot and in the legend's swatch; the light theme keeps its alpha 40.
    window.show()
    for choice, alpha in (("dark", None), ("light", 40)):
        window.set_theme(choice)
        QApplication.processEvents()
        base = window.chart.palette().color(QPalette.ColorRole.Base)
        for brush in (window.chart.band.brush(), window.chart.legend.band_sample.opts["brush"]):
            band = QColor(brush.color())
            if alpha is not None:
                assert band.alpha() == alpha
                continue
            share = band.alpha() / 255
            shown = QColor.fromRgbF(
                *(c * share + b * (1 - share) for c, b in zip(band.getRgbF()[:3], base.getRgbF()[:3], strict=True))
            )
            assert _contrast(shown, base) >= 1.6, choice

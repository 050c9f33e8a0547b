"""``python -m gui.screenshot`` renders the sizes and themes a README shows, and refuses bad
options in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage, QPalette

from gui import screenshot, theme


def test_renders_the_asked_size_and_theme(qapp: Any, tmp_path: Path) -> None:
    out = tmp_path / "dark.png"
    try:
        assert screenshot.main([str(out), "--size", "1280x720", "--theme", "dark"]) == 0
        image = QImage(str(out))
        assert (image.width(), image.height()) == (1280, 720)
        # The dark palette's window colour (gui.theme.dark_palette) fills the status bar.
        window_colour = theme.dark_palette().color(QPalette.ColorRole.Window).name()
        assert image.pixelColor(4, image.height() - 4).name() == window_colour
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 100
    finally:
        theme.apply_theme(qapp, "light")


@pytest.mark.parametrize(
    ("option", "value"), [("--size", "12x"), ("--size", "99999x720"), ("--theme", "blue"), ("--gpu", "no-such-card")]
)
def test_bad_options_get_one_line(option: str, value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert screenshot.main([str(tmp_path / "x.png"), option, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and value in err
    assert not (tmp_path / "x.png").exists()


def test_the_compare_dock_renders_docked_at_the_asked_size(qapp: Any, tmp_path: Path) -> None:
    # --compare-docked: View → Compare plans with issue_plans()'s four, docked as the window places it; the window at
    # 1024 × 768 is where its chart scrolled sideways (tests/gui/test_compare.py).
    out = tmp_path / "compare.png"
    assert screenshot.main([str(out), "--size", "1024x768", "--compare-docked"]) == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1024, 768)

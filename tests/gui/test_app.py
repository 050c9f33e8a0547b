"""Starting the application: the no-display message, the screenshot script, a long session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gui import app

ROOT = Path(__file__).resolve().parents[2]


def test_no_display_message_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    assert app.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no display" in err[0] and "vramplan estimate --help" in err[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the check is for X11/Wayland systems")
def test_python_m_gui_without_display_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run(
        [sys.executable, "-m", "gui"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no display" in result.stderr


def test_screenshot_renders_the_main_window(qapp: Any, tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    from gui.screenshot import render

    out = tmp_path / "shot.png"
    render(str(out), 1400, 900)
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)


def test_many_edits_do_not_exhaust_pyside(window: Any) -> None:
    """PySide6 6.12.0 on Python 3.11 drops a reference to None per void call and aborts
    the process after a few thousand calls; pyproject.toml excludes that release."""
    spin = window.workload_form.micro_batch
    for value in range(1, 600):
        spin.setValue(value % 64 + 1)
    assert window.controller.plan.workload.micro_batch == spin.value()

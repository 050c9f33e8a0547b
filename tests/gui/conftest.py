"""GUI test set-up: every test gets its own QSettings folder, and dialogs never block."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QCoreApplication, QSettings

from core.presets import default_plan
from gui import dialogs
from gui.controller import PlanController
from gui.main_window import MainWindow
from gui.settings import Settings

# The offscreen platform warns about a feature it lacks whenever a window with a layout is
# shown; that is the test platform talking, not the app.
OFFSCREEN_NOISE = r"^This plugin does not support (propagateSizeHints|raise|grabbing the keyboard)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gui)
            # Any Qt warning fails a GUI test (pytest-qt); set here rather than in pyproject.toml,
            # whose settings would be unknown, and so an error, where pytest-qt is not installed.
            item.add_marker(pytest.mark.qt_log_level_fail("WARNING"))
            item.add_marker(pytest.mark.qt_log_ignore(OFFSCREEN_NOISE))


class DialogRecorder:
    """Stands in for gui.dialogs: answers from a queue, records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.paths: list[str | None] = []
        self.save_choice: dialogs.SaveChoice = "discard"
        self.replace = False  # the answer to "replace a file VRAM Planner did not write?"
        self.confirm = False  # the answer to every other yes-or-cancel question

    def _next_path(self, name: str, args: tuple[Any, ...]) -> str | None:
        self.calls.append((name, args))
        if not self.paths:
            raise AssertionError(f"unexpected {name} dialog: {args}")
        return self.paths.pop(0)

    def errors(self) -> list[str]:
        return [str(args[-1]) for name, args in self.calls if name == "error"]


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path: Path, qapp: Any) -> Iterator[Path]:
    folder = tmp_path / "settings"
    folder.mkdir()
    QCoreApplication.setOrganizationName("vramplan-tests")
    QCoreApplication.setApplicationName("vramplan-tests")
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(folder))
    yield folder


@pytest.fixture(autouse=True)
def fake_dialogs(monkeypatch: pytest.MonkeyPatch) -> DialogRecorder:
    recorder = DialogRecorder()
    monkeypatch.setattr(dialogs, "open_file", lambda *a: recorder._next_path("open_file", a))
    monkeypatch.setattr(dialogs, "open_folder", lambda *a: recorder._next_path("open_folder", a))
    monkeypatch.setattr(dialogs, "save_file", lambda *a: recorder._next_path("save_file", a))
    monkeypatch.setattr(dialogs, "error", lambda *a: recorder.calls.append(("error", a)))
    monkeypatch.setattr(dialogs, "info", lambda *a: recorder.calls.append(("info", a)))
    monkeypatch.setattr(dialogs, "ask_text", lambda *a: recorder._next_path("ask_text", a))

    def ask(*a: Any) -> dialogs.SaveChoice:
        recorder.calls.append(("ask_save_changes", a))
        return recorder.save_choice

    monkeypatch.setattr(dialogs, "ask_save_changes", ask)

    def confirm_replace(*a: Any) -> bool:
        recorder.calls.append(("confirm_replace", a))
        return recorder.replace

    monkeypatch.setattr(dialogs, "confirm_replace", confirm_replace, raising=False)

    def confirm(*a: Any) -> bool:
        recorder.calls.append(("confirm", a))
        return recorder.confirm

    monkeypatch.setattr(dialogs, "confirm", confirm, raising=False)
    # Never block on the crash dialog or the restore question: record them, decline restore.
    monkeypatch.setattr(dialogs, "unexpected_error", lambda *a: recorder.calls.append(("unexpected_error", a)))

    def ask_restore(*a: Any) -> bool:
        recorder.calls.append(("ask_restore", a))
        return False

    monkeypatch.setattr(dialogs, "ask_restore", ask_restore)
    return recorder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(os.path.join(tmp_path, "settings", "vramplan.ini"))


@pytest.fixture
def controller() -> PlanController:
    return PlanController(default_plan())


@pytest.fixture
def window(qtbot: Any, settings: Settings) -> MainWindow:
    main = MainWindow(settings=settings)
    qtbot.addWidget(main)
    main.resize(1400, 900)
    return main

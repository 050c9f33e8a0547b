"""Autosave and crash recovery: written after an edit, offered after a crash, never after a clean quit."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from core.files import planfile
from core.plan import Plan
from core.presets import default_plan
from gui import app, autosave, crash, dialogs
from gui import settings as settings_module
from gui.autosave import Autosave, offer_recovery
from gui.main_window import MainWindow
from gui.settings import Settings


class Asked:
    """Stands in for dialogs.ask_restore: answers ``answer``, records each question."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.parents: list[Any] = []

    def __call__(self, parent: Any) -> bool:
        self.parents.append(parent)
        return self.answer


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Asked:
    recorder = Asked(True)
    monkeypatch.setattr(dialogs, "ask_restore", recorder)
    return recorder


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / autosave.FILE_NAME


def edited(plan: Plan) -> Plan:
    return plan.with_workload(seq_len=plan.workload.seq_len * 2).with_parallel(gpus_per_node=3)


def crashed_session(qtbot: Any, settings: Settings, path: Path) -> Plan:
    """A window whose plan is autosaved, then a crash: no clean quit, the lock goes stale."""
    window = MainWindow(settings=settings)
    qtbot.addWidget(window)
    saver = Autosave(window.controller, path, delay_ms=10)
    assert saver.start()
    window.controller.set_plan(edited(window.controller.plan))
    qtbot.waitUntil(lambda: path.exists() and not saver.pending)
    saver._lock.unlock()  # what the operating system's end of the process amounts to
    return window.controller.plan


def test_autosave_is_written_a_moment_after_a_burst_of_edits(
    qtbot: Any, window: MainWindow, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[Plan] = []
    save = planfile.save
    monkeypatch.setattr(planfile, "save", lambda plan, where, **kw: (writes.append(plan), save(plan, where, **kw)))
    saver = Autosave(window.controller, path, delay_ms=50)
    assert saver.start()
    for value in (2, 3, 5, 6, 7):
        window.workload_form.micro_batch.setValue(value)
    assert not path.exists() and saver.pending  # not at each keystroke
    qtbot.waitUntil(lambda: path.exists() and not saver.pending)
    assert len(writes) == 1  # the burst was coalesced into one write
    assert planfile.load(path) == window.controller.plan
    assert window.controller.plan.workload.micro_batch == 7
    window.undo_action.trigger()  # undo is a change like any other
    qtbot.waitUntil(lambda: len(writes) == 2)
    assert planfile.load(path) == window.controller.plan
    saver.finish()


def test_plan_is_offered_back_after_a_crash(qtbot: Any, settings: Settings, path: Path, asked: Asked) -> None:
    lost = crashed_session(qtbot, settings, path)
    window = MainWindow(settings=settings)  # the next start
    qtbot.addWidget(window)
    window.restore_session()
    assert window.controller.plan != lost
    saver = Autosave(window.controller, path)
    assert saver.start()
    assert offer_recovery(window, saver)
    assert asked.parents == [window]
    assert window.controller.plan == lost
    assert window.path is None  # untitled: it may not be what any file holds
    saver.finish()


def test_declined_recovery_is_not_offered_again(qtbot: Any, settings: Settings, path: Path, asked: Asked) -> None:
    crashed_session(qtbot, settings, path)
    asked.answer = False
    window = MainWindow(settings=settings)
    qtbot.addWidget(window)
    saver = Autosave(window.controller, path)
    assert saver.start()
    assert not offer_recovery(window, saver)
    assert window.controller.plan == default_plan()
    assert not path.exists()
    assert not offer_recovery(window, saver)
    assert len(asked.parents) == 1


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"\xff\xfe\x00", b'{"format": "vramplan-plan", "version": 99, "plan": {}}', b"[]" * 100_000],
)
def test_corrupt_autosave_is_ignored_with_a_log_line(
    window: MainWindow, path: Path, asked: Asked, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    saver = Autosave(window.controller, path)
    assert saver.start()
    with caplog.at_level(logging.WARNING, logger="gui.autosave"):
        assert saver.recover() is None
        assert not offer_recovery(window, saver)
    assert asked.parents == []
    assert any("damaged autosave" in record.getMessage() for record in caplog.records)
    assert window.controller.plan == default_plan()
    saver.finish()


def test_clean_quit_leaves_nothing_to_restore(qtbot: Any, window: MainWindow, path: Path, asked: Asked) -> None:
    saver = Autosave(window.controller, path, delay_ms=10)
    assert saver.start()
    window.controller.set_plan(edited(window.controller.plan))
    qtbot.waitUntil(lambda: path.exists())
    saver.finish()
    assert not path.exists()
    again = Autosave(window.controller, path)
    assert again.start()  # the lock was given back
    assert again.recover() is None
    assert not offer_recovery(window, again)
    assert asked.parents == []
    again.finish()


def test_a_second_instance_leaves_the_first_ones_autosave_alone(qtbot: Any, window: MainWindow, path: Path) -> None:
    first = Autosave(window.controller, path, delay_ms=10)
    assert first.start()
    window.controller.set_plan(edited(window.controller.plan))
    qtbot.waitUntil(lambda: path.exists())
    other = MainWindow(settings=Settings(str(path.parent / "other.ini")))
    qtbot.addWidget(other)
    second = Autosave(other.controller, path, delay_ms=10)
    assert second.start() and second.path != path  # its own slot (issue 14 item 6)
    assert second.recover() is None
    other.controller.set_plan(default_plan().with_workload(micro_batch=1))
    qtbot.wait(50)
    second.finish()
    assert planfile.load(path) == window.controller.plan  # neither overwritten nor removed
    first.finish()


def test_unwritable_autosave_folder_is_logged_not_raised(
    qtbot: Any, window: MainWindow, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    saver = Autosave(window.controller, blocked / autosave.FILE_NAME)
    with caplog.at_level(logging.WARNING, logger="gui.autosave"):
        assert not saver.start()
    assert saver.recover() is None
    assert "cannot create" in caplog.text


def test_app_main_recovers_and_quits_cleanly(
    qtbot: Any, tmp_path: Path, asked: Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole start-up: hooks installed, the crashed session's plan offered and taken,
    a normal quit that removes the autosave, keeps the plan as the session's, and puts the
    test's own hooks back."""
    data = tmp_path / "data"
    monkeypatch.setattr(settings_module, "data_folder", lambda: data)
    data.mkdir()
    lost = edited(default_plan())
    planfile.save(lost, data / autosave.FILE_NAME)
    hooks = sys.excepthook, sys.stderr
    seen: dict[str, Any] = {}

    def quit_soon() -> None:
        window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible())
        seen["plan"] = window.controller.plan
        seen["hook"] = getattr(sys.excepthook, "__self__", None)
        window.close()
        QApplication.quit()

    QTimer.singleShot(0, quit_soon)
    assert app.main([]) == 0
    assert asked.parents and seen["plan"] == lost
    assert isinstance(seen["hook"], crash.CrashHandler)
    assert (sys.excepthook, sys.stderr) == hooks
    assert not (data / autosave.FILE_NAME).exists()
    assert Settings().last_plan and planfile.loads(Settings().last_plan) == lost


def test_app_main_builds_a_returning_window_on_its_last_plan(
    qtbot: Any, tmp_path: Path, asked: Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A returning user's start works out one plan, the last session's: before, the window was
    built on the default plan (estimated, every view drawn) and then restored to the last one."""
    import gui.controller

    monkeypatch.setattr(settings_module, "data_folder", lambda: tmp_path / "data")
    last = edited(default_plan())
    Settings().last_plan = planfile.dumps(last)
    estimated: list[Plan] = []
    real = gui.controller.estimate
    monkeypatch.setattr(gui.controller, "estimate", lambda plan: (estimated.append(plan), real(plan))[1])
    seen: dict[str, Any] = {}

    def quit_soon() -> None:
        window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible())
        seen["plan"] = window.controller.plan
        window.close()
        QApplication.quit()

    QTimer.singleShot(0, quit_soon)
    assert app.main([]) == 0
    assert seen["plan"] == last
    assert estimated[:1] == [last] and default_plan() not in estimated

"""The crash handler: an unexpected error is logged with the plan, shown once, and the app runs on."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import qCritical, qInstallMessageHandler

from core import __version__
from core.estimate import Estimate
from core.files import planfile
from gui import crash, dialogs
from gui.crash import CrashHandler
from gui.main_window import MainWindow


class Shown:
    """Stands in for dialogs.unexpected_error."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, str, str | None, threading.Thread]] = []

    def __call__(self, parent: Any, summary: str, log_path: str | None) -> None:
        self.calls.append((parent, summary, log_path, threading.current_thread()))


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> Shown:
    recorder = Shown()
    monkeypatch.setattr(dialogs, "unexpected_error", recorder)
    return recorder


@pytest.fixture
def handler(window: MainWindow, tmp_path: Path) -> Iterator[CrashHandler]:
    """Installed for the test's body only, then pytest-qt's own hooks are back."""
    report = CrashHandler(tmp_path / "logs", lambda: window.controller.plan, lambda: window)
    before = sys.excepthook, threading.excepthook
    report.install(fault_log=False)
    try:
        yield report
    finally:
        report.uninstall()
    assert (sys.excepthook, threading.excepthook) == before


def break_the_verdict(window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(estimate: Estimate) -> None:
        raise RuntimeError(f"verdict cannot show {estimate.plan.workload.micro_batch}\nsecond line")

    monkeypatch.setattr(window.verdict, "show_estimate", broken)


def crash_logs(handler: CrashHandler) -> list[Path]:
    return sorted(handler.folder.glob("crash-*.log"))


def test_exception_in_a_slot_is_logged_and_shown_once(
    qtbot: Any, window: MainWindow, handler: CrashHandler, shown: Shown, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_the_verdict(window, monkeypatch)
    window.workload_form.micro_batch.setValue(3)  # the slot that draws the estimate raises

    qtbot.waitUntil(lambda: len(shown.calls) == 1)
    [log] = crash_logs(handler)
    parent, line, path, thread = shown.calls[0]
    assert parent is window
    assert line == "RuntimeError: verdict cannot show 3"  # one line: the message's first
    assert path == str(log)
    assert thread is threading.main_thread()

    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert 'raise RuntimeError(f"verdict cannot show' in text
    assert f"VRAM Planner {__version__}" in text
    assert "Platform " in text and "PySide6 " in text
    plan_json = text[text.index('{\n  "format": "vramplan-plan"') :]
    assert planfile.loads(plan_json) == window.controller.plan

    # The plan survives: the edit was made, and the next ones are too.
    assert window.controller.plan.workload.micro_batch == 3
    window.workload_form.micro_batch.setValue(5)  # the same error again: logged, not shown again
    qtbot.wait(20)
    assert len(shown.calls) == 1 and crash_logs(handler) == [log]
    monkeypatch.undo()
    window.workload_form.micro_batch.setValue(6)
    assert window.controller.plan.workload.micro_batch == 6
    assert "again (2 times now)" in (handler.folder / crash.LOG_FILE).read_text(encoding="utf-8")


def test_exception_in_a_thread_is_shown_on_the_gui_thread(qtbot: Any, handler: CrashHandler, shown: Shown) -> None:
    def work() -> None:
        raise ValueError("worker failed")

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: len(shown.calls) == 1)
    _parent, line, path, thread = shown.calls[0]
    assert line == "ValueError: worker failed"
    assert thread is threading.main_thread()
    assert path is not None and "in worker" in Path(path).read_text(encoding="utf-8")


def test_qt_critical_messages_go_to_the_log(tmp_path: Path) -> None:
    received: list[str] = []
    # Stands in for the handler that was there before (pytest-qt's, in a test run).
    before = qInstallMessageHandler(lambda _mode, _context, message: received.append(message))
    report = CrashHandler(tmp_path)
    report.install(fault_log=False)
    try:
        qCritical("card memory went missing")
    finally:
        report.uninstall()
        qInstallMessageHandler(before)
    assert "Qt critical: card memory went missing" in (tmp_path / crash.LOG_FILE).read_text(encoding="utf-8")
    assert received == ["card memory went missing"]  # the previous handler still gets every message


def test_no_stderr_and_no_log_folder_are_survived(
    qtbot: Any, tmp_path: Path, shown: Shown, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A windowed Windows build has no stderr; a log folder may be unwritable."""
    monkeypatch.setattr(sys, "stderr", None)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the log folder should be")
    report = CrashHandler(blocked / "logs")
    try:
        raise OSError("disk gone")
    except OSError as error:
        assert report.handle((type(error), error, error.__traceback__)) is None
    qtbot.waitUntil(lambda: len(shown.calls) == 1)
    assert shown.calls[0][1:3] == ("OSError: disk gone", None)


def test_summary_is_one_short_line() -> None:
    assert crash.summary(KeyError("gpu")) == "KeyError: 'gpu'"
    assert crash.summary(RuntimeError()) == "RuntimeError"
    long = crash.summary(ValueError("x" * 1000 + "\nmore"))
    assert "\n" not in long and len(long) == crash.SUMMARY_CHARS


def test_old_reports_are_pruned(tmp_path: Path) -> None:
    report = CrashHandler(tmp_path)
    for number in range(crash.MAX_REPORTS + 5):
        try:
            raise LookupError(number)
        except LookupError as error:
            # Distinct errors: each raised from its own line would be; here each is reported anew.
            report._seen.clear()
            report.handle((type(error), error, error.__traceback__))
    assert len(list(tmp_path.glob("crash-*.log"))) == crash.MAX_REPORTS


def test_importing_the_module_installs_nothing() -> None:
    assert not isinstance(getattr(sys.excepthook, "__self__", None), CrashHandler)
    assert not isinstance(getattr(threading.excepthook, "__self__", None), CrashHandler)

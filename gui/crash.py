"""Unexpected errors: written to a log file with the plan, reported once, and the app runs on.

:func:`install` (called by ``gui.app.main`` only, never on import) puts a
:class:`CrashHandler` in ``sys.excepthook`` and ``threading.excepthook``, routes Qt's
critical and fatal messages to the log, and keeps Python's own trace of hard crashes
(``faulthandler``). An exception that escapes a slot writes ``crash-<time>.log`` (the
traceback, the versions, the platform and the current plan as JSON) under
:func:`log_folder` and shows one dialog through :func:`gui.dialogs.unexpected_error`; the
event loop, and with it the plan, carry on.

Windowed Windows builds have no ``sys.stderr``: nothing here prints unguarded.
"""

from __future__ import annotations

import contextlib
import datetime
import faulthandler
import logging
import logging.handlers
import platform
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from PySide6.QtCore import (
    QMessageLogContext,
    QObject,
    Qt,
    QtMsgType,
    Signal,
    qInstallMessageHandler,
)
from PySide6.QtWidgets import QWidget

from core.plan import Plan
from gui import settings

LOG = logging.getLogger(__name__)
MAX_REPORTS = 20  # crash logs kept; the oldest go first
SUMMARY_CHARS = 200
LOG_FILE = "vramplan.log"
FAULT_FILE = "faults.log"

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def log_folder() -> Path:
    return settings.data_folder() / "logs"


def say(text: str) -> None:
    """Print to stderr where there is one (a windowed Windows build has none)."""
    stream = sys.stderr
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            print(text, file=stream, flush=True)


def versions() -> str:
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import qVersion

    from core import __version__

    return (
        f"VRAM Planner {__version__}\n"
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"PySide6 {pyside_version}, Qt {qVersion()}\n"
        f"Platform {platform.platform()} ({platform.machine() or 'unknown machine'})"
    )


def summary(value: BaseException) -> str:
    """One line for the dialog: the exception's type and the first line of its message."""
    message = str(value).strip().splitlines()[0] if str(value).strip() else ""
    line = f"{type(value).__name__}: {message}" if message else type(value).__name__
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def _signature(info: ExcInfo) -> tuple[str, str, int]:
    """What makes two errors "the same one again": its type and the line that raised it."""
    kind, _value, tb = info
    frames = traceback.extract_tb(tb) if tb is not None else []
    last = frames[-1] if frames else None
    if last is None:
        return (kind.__qualname__, "", 0)
    return (kind.__qualname__, last.filename, last.lineno or 0)


class CrashHandler(QObject):
    """Writes crash reports under ``folder`` and asks the GUI thread to show them."""

    # (one-line summary, log file path or ""): queued, so that the dialog opens from the
    # event loop, never inside a paint event or another thread.
    reported = Signal(str, str)

    def __init__(
        self,
        folder: Path,
        plan: Callable[[], Plan | None] = lambda: None,
        parent_widget: Callable[[], QWidget | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.folder = folder
        self.plan = plan
        self.parent_widget = parent_widget
        self.reports: list[Path] = []
        self._seen: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()
        self._showing = False
        self._previous: dict[str, Any] = {}
        self._fault_file: IO[str] | None = None
        self._log_handler: logging.Handler | None = None
        self.reported.connect(self._show, Qt.ConnectionType.QueuedConnection)

    # ---- hooks ---------------------------------------------------------------------
    def excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous = self._previous.get("excepthook", sys.__excepthook__)
            previous(kind, value, tb)
            return
        self.handle((kind, value, tb), threading.current_thread().name)

    def thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or issubclass(args.exc_type, SystemExit):
            return
        thread = args.thread.name if args.thread is not None else "a thread"
        self.handle((args.exc_type, args.exc_value, args.exc_traceback), thread)

    def qt_message(self, mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        if mode in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
            where = f" ({context.file}:{context.line})" if context is not None and context.file else ""
            level = "fatal" if mode == QtMsgType.QtFatalMsg else "critical"
            LOG.critical("Qt %s: %s%s", level, message, where)
            if self._log_handler is not None:
                self._log_handler.flush()  # a fatal message aborts as soon as this returns
        previous = self._previous.get("qt")
        if previous is not None:
            previous(mode, context, message)
        else:
            say(message)  # Qt's own handler would have printed it

    # ---- reporting -----------------------------------------------------------------
    def handle(self, info: ExcInfo, thread: str = "MainThread") -> Path | None:
        """Log ``info``; the first time an error is seen, write a report and show it. Never raises."""
        try:
            text = "".join(traceback.format_exception(*info))
            say(text.rstrip())
            key = _signature(info)
            with self._lock:
                repeats = self._seen.get(key, 0)
                self._seen[key] = repeats + 1
            if repeats:
                # A paint event that fails fails on every repaint: one report is enough.
                LOG.error("%s again (%d times now), in %s", summary(info[1]), repeats + 1, thread)
                return None
            path = self.write_report(info, thread, text)
            LOG.error("%s, in %s; report %s", summary(info[1]), thread, path or "not written")
            self.reported.emit(summary(info[1]), str(path) if path else "")
            return path
        except BaseException:  # the error handler itself must never raise
            with contextlib.suppress(BaseException):
                say("vramplan: the crash handler failed:\n" + traceback.format_exc())
            return None

    def write_report(self, info: ExcInfo, thread: str, text: str) -> Path | None:
        stamp = datetime.datetime.now()
        lines = [
            f"VRAM Planner: unexpected error at {stamp.isoformat(timespec='seconds')}, in {thread}",
            versions(),
            "",
            text.rstrip(),
            "",
            "The plan at the time (File → Open can read it back once saved as .vramplan.json):",
            self._plan_json(),
        ]
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"crash-{stamp:%Y%m%d-%H%M%S-%f}.log"
            with open(path, "x", encoding="utf-8", newline="\n") as handle:
                handle.write("\n".join(lines) + "\n")
        except OSError as error:
            LOG.error("cannot write a crash report in %s: %s", self.folder, error)
            return None
        self.reports.append(path)
        self._prune()
        return path

    def _plan_json(self) -> str:
        try:
            plan = self.plan()
            if plan is None:
                return "(no plan yet)"
            from core.files import planfile

            return planfile.dumps(plan).rstrip()
        except Exception as error:  # a report without the plan beats none
            return f"(the plan could not be written: {error!r})"

    def _prune(self) -> None:
        with contextlib.suppress(OSError):
            reports = sorted(self.folder.glob("crash-*.log"))
            for old in reports[:-MAX_REPORTS]:
                old.unlink()

    def _show(self, line: str, path: str) -> None:
        if self._showing:
            return  # one dialog at a time; the log has every error
        self._showing = True
        try:
            from gui import dialogs

            dialogs.unexpected_error(self.parent_widget(), line, path or None)
        except Exception:  # the window may be gone (an error while quitting): the log has it
            LOG.exception("cannot show the error dialog")
        finally:
            self._showing = False

    # ---- installing ----------------------------------------------------------------
    def install(self, *, qt_messages: bool = True, fault_log: bool = True) -> None:
        """Become the process's exception hook; ``uninstall`` puts the previous ones back."""
        self._start_log_file()
        self._previous["excepthook"] = sys.excepthook
        self._previous["threading"] = threading.excepthook
        sys.excepthook = self.excepthook
        threading.excepthook = self.thread_excepthook
        if qt_messages:
            self._previous["qt"] = qInstallMessageHandler(self.qt_message)
        if fault_log:
            # Python's own trace of a hard crash (a segfault in Qt, an abort): the only
            # record there is, since no Python code runs after one.
            self._previous["faulthandler"] = faulthandler.is_enabled()
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self.folder.mkdir(parents=True, exist_ok=True)
                self._fault_file = open(self.folder / FAULT_FILE, "a", encoding="utf-8")  # noqa: SIM115
                faulthandler.enable(self._fault_file)

    def uninstall(self) -> None:
        if sys.excepthook == self.excepthook:
            sys.excepthook = self._previous.get("excepthook", sys.__excepthook__)
        if threading.excepthook == self.thread_excepthook:
            threading.excepthook = self._previous.get("threading", threading.__excepthook__)
        if "qt" in self._previous:
            qInstallMessageHandler(self._previous["qt"])
        if self._fault_file is not None:
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                faulthandler.disable()
                if self._previous.get("faulthandler") and sys.__stderr__ is not None:
                    faulthandler.enable(sys.__stderr__)  # as it was (pytest keeps one on)
            self._fault_file.close()
            self._fault_file = None
        if self._log_handler is not None:
            logging.getLogger("gui").setLevel(self._previous.get("gui_level", logging.NOTSET))
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None
        self._previous.clear()

    def _start_log_file(self) -> None:
        """The app's running log (autosave notes, Qt criticals, errors seen again)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(
                self.folder / LOG_FILE, maxBytes=1_000_000, backupCount=2, encoding="utf-8", delay=True
            )
        except OSError as error:
            say(f"vramplan: cannot keep a log in {self.folder}: {error}")
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        logging.getLogger().addHandler(handler)
        self._previous["gui_level"] = logging.getLogger("gui").level
        logging.getLogger("gui").setLevel(logging.INFO)
        self._log_handler = handler


def install(
    plan: Callable[[], Plan | None] = lambda: None,
    parent_widget: Callable[[], QWidget | None] = lambda: None,
    folder: Path | None = None,
) -> CrashHandler:
    """Install a handler that logs under ``folder`` (default :func:`log_folder`)."""
    handler = CrashHandler(folder if folder is not None else log_folder(), plan, parent_widget)
    handler.install()
    return handler

"""``vramplan`` with no subcommand: the desktop application."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from gui.settings import SettingsRepair

NO_DISPLAY_MESSAGE = (
    "vramplan: no display found (DISPLAY and WAYLAND_DISPLAY are unset); "
    "for the command line, try `vramplan estimate --help`"
)


def display_available() -> bool:
    """False on Linux/BSD with no X11 or Wayland display and no explicit Qt platform."""
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return True
    return any(os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"))


def _say(text: str) -> None:
    # Windowed Windows builds have no stderr at all.
    stream = sys.stderr or sys.stdout
    if stream is not None:
        print(text, file=stream)


def tell_repair(window: QWidget, repaired: SettingsRepair) -> None:
    """Say once, at start-up, what a damaged settings file lost (gui.settings.Settings.repair)."""
    from gui import dialogs

    if repaired.dropped:
        dialogs.info(window, "Settings repaired", repaired.message())


def main(argv: Sequence[str] | None = None) -> int:
    """Build the application and its window, restore the last session, run; the exit code."""
    if not display_available():
        _say(NO_DISPLAY_MESSAGE)
        return 2
    args = list(sys.argv if argv is None else ["vramplan", *argv])

    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from gui.settings import APPLICATION, ORGANIZATION, Settings
    from gui.theme import apply_theme, follow_system

    existing = QApplication.instance()
    if existing is None:
        # Fractional scale factors (150 %) as they are, not rounded: crisp text and lines.
        # Only before the application exists; Qt warns (and ignores it) after.
        QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = existing if isinstance(existing, QApplication) else QApplication(args)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("VRAM Planner")
    from gui import crash

    # Here, not on import: tests keep pytest-qt's exception and Qt-message capture.
    report = crash.install()
    try:
        settings = Settings()
        repaired = settings.repair()  # a damaged settings file never stops the start
        apply_theme(app, settings.theme)
        follow_system(app)

        from gui.autosave import FILE_NAME, Autosave, offer_recovery, report_problems
        from gui.document import Document
        from gui.main_window import MainWindow
        from gui.settings import data_folder

        # Built on the last session's plan: restore_session then has nothing to estimate again
        # (built on the default one, a returning user's window worked out and drew two plans).
        stored = Document.stored_plan(settings)
        window = MainWindow(settings=settings, plan=stored)
        gc.freeze()  # what start-up made stays for the process: later collections skip it
        report.plan = lambda: window.controller.plan
        report.parent_widget = lambda: window
        window.restore_session(stored)  # the plan read once
        plan_path = next((a for a in args[1:] if not a.startswith("-")), None)
        if plan_path:
            window.open_path(plan_path)
        window.start_local_machine()  # its GPUs and downloaded models, once the window has painted
        window.show()
        tell_repair(window, repaired)
        autosave = Autosave(window.controller, data_folder() / FILE_NAME, parent=window)
        report_problems(window, autosave)
        if autosave.start():
            offer_recovery(window, autosave)
        code = int(app.exec())
        autosave.finish()  # a normal quit: nothing to recover next time
        return code
    finally:
        report.uninstall()

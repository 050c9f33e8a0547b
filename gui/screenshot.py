"""Render the real main window offscreen to a PNG: ``python -m gui.screenshot out.png``.

Used for the README's docs/screenshot.png (the start-up plan) and, with ``--diagnosis``,
docs/diagnosis.png (the lesson's 7B model, full 16-bit fine-tuning, on a 24 GB card, with
the Diagnosis tab open). No user settings are read or written (a temporary folder).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

WIDTH, HEIGHT = 1400, 900


def render(
    path: str, width: int = WIDTH, height: int = HEIGHT, *, mode: str = "training", diagnosis: bool = False
) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from gui.settings import Settings
    from gui.theme import apply_theme

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(["vramplan-screenshot"])
    with tempfile.TemporaryDirectory() as folder:
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, folder)
        settings = Settings(os.path.join(folder, "screenshot.ini"))
        apply_theme(app, "light")
        from gui.main_window import MainWindow

        window = MainWindow(settings=settings)
        window.set_chart_mode(mode)
        window.resize(width, height)
        if diagnosis:
            from PySide6.QtCore import Qt

            from core.plan import Method, Precision
            from core.presets import lesson_plan

            window.controller.reset(lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090"))
            window.tabs.setCurrentWidget(window.diagnosis)
        window.show()
        if diagnosis:
            # A wider Details column so the remedies table reads without scrolling.
            window.resizeDocks([window.plan_dock, window.details_dock], [330, 470], Qt.Orientation.Horizontal)
        for _ in range(5):
            app.processEvents()
        if diagnosis:
            import time

            deadline = time.monotonic() + 30  # the diagnosis runs in a worker process
            while window.diagnosis.stale and time.monotonic() < deadline:
                app.processEvents()
                time.sleep(0.01)
            for _ in range(5):
                app.processEvents()
        if not window.grab().save(path):
            raise OSError(f"cannot write {path}")
        window.controller.undo_stack.setClean()
        window.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m gui.screenshot OUT.png [--inference] [--diagnosis]")
        return 0 if args else 2
    render(args[0], mode="inference" if "--inference" in args else "training", diagnosis="--diagnosis" in args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Render the real main window offscreen to a PNG: ``python -m gui.screenshot out.png``.

Used for the README's docs/screenshot.png. The default plan is shown; no user settings
are read or written (settings go to a temporary folder).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

WIDTH, HEIGHT = 1400, 900


def render(path: str, width: int = WIDTH, height: int = HEIGHT, *, mode: str = "training") -> None:
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
        window.show()
        for _ in range(3):
            app.processEvents()
        if not window.grab().save(path):
            raise OSError(f"cannot write {path}")
        window.controller.undo_stack.setClean()
        window.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m gui.screenshot OUT.png [--inference]")
        return 0 if args else 2
    render(args[0], mode="inference" if "--inference" in args else "training")
    return 0


if __name__ == "__main__":
    sys.exit(main())

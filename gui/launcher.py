"""The ``vramplan`` entry point: command-line subcommands go to ``core.cli.app`` without
loading Qt; ``--self-test`` runs the headless end-to-end check (gui/selftest.py);
anything else opens the desktop application."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

CLI_COMMANDS = frozenset(
    {
        "estimate",
        "models",
        "gpus",
        "links",
        "optimizers",
        "fit",
        "fewest-gpus",
        "report",
        "compare",
        "export",
        "import-command",
        "--version",
        "-h",
        "--help",
    }
)
SELF_TEST = "--self-test"
# benchmarks/startup.py sets this: print the monotonic time of the first painted window, exit.
EXIT_AFTER_PAINT = "VRAMPLAN_EXIT_AFTER_PAINT"


def main(argv: Sequence[str] | None = None) -> int:
    """Ctrl-C at any point, start-up included (importing Qt takes a while), ends quietly."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        if sys.stderr is not None:  # windowed Windows builds have no stderr
            print("vramplan: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it


def not_a_command(word: str) -> str | None:
    """The usage error for a first argument that reads as a mistyped subcommand (``estimat``:
    a bare word, no option, no existing file), or None: the window opens it as a plan."""
    import difflib  # only for a mistyped command: not at every start

    if word.startswith("-") or any(c in word for c in "./\\") or os.path.exists(word):
        return None
    commands = sorted(c for c in CLI_COMMANDS if not c.startswith("-"))
    close = difflib.get_close_matches(word, commands, n=1)
    hint = f"; did you mean `vramplan {close[0]}`?" if close else ""
    return f"vramplan: {word!r} is not a command{hint} (commands: {', '.join(commands)}; no command opens the window)"


def _main(argv: Sequence[str] | None = None) -> int:
    # The worker processes (gui.worker: diagnosis, searches) are started with "spawn":
    # in the frozen app that re-runs this executable, which must then become the worker.
    import multiprocessing

    multiprocessing.freeze_support()
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in CLI_COMMANDS:
        from core.cli.app import main as cli_main

        if args[0] == "report" and any(_names_pdf(arg) for arg in args[1:]):
            register_pdf_writer()
        return cli_main(args)
    refusal = not_a_command(args[0]) if args and args[0] != SELF_TEST else None
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    if args and args[0] == SELF_TEST:
        from gui.selftest import main as selftest_main

        return selftest_main(args[1:])
    # No cycle collection while the window is built: start-up makes hundreds of thousands of
    # objects that live as long as the process (modules, classes, Qt's enums, the widgets), and
    # collecting them as they are made found nothing to free but took 0.14-0.18 s of a 2-core
    # box's start-up. The window's collector (gui/collector.py) collects on the GUI thread from
    # then on, and gui.app freezes what start-up made out of later collections.
    import gc

    gc.disable()
    if os.environ.get(EXIT_AFTER_PAINT) == "1":
        install_first_paint_probe()
    from gui.app import main as gui_main  # Qt is imported only when the window is wanted

    return gui_main(args)


def _names_pdf(arg: str) -> bool:
    """``--pdf``, ``--pdf=OUT`` or a prefix argparse takes for it (``--pd``, ``--p``: no other option of
    ``report`` starts so): the spellings ``report`` accepts, each of which once said Qt was missing."""
    return arg.split("=", 1)[0] in ("--p", "--pd", "--pdf")


def register_pdf_writer() -> None:
    """PDF reports are drawn with Qt; hand core's command line the writer when Qt imports."""
    try:
        from gui.tools.report_export import write_pdf
    except ImportError:
        return  # the command says PDF needs the app's Qt
    from core.cli.report import set_pdf_writer

    set_pdf_writer(write_pdf)


def install_first_paint_probe() -> None:
    """Start-up benchmark hook: once the first window has painted, print
    ``first-paint <time.monotonic()>`` and exit at once.

    The first Paint event starts a paint pass that covers the whole window (the repaint
    manager paints every dirty widget in one go); a zero timer then fires after it and
    after the backing store is flushed. (A top-level window fully covered by opaque
    children never gets a Paint event of its own, so any widget's counts.)

    gui.app creates its QApplication from ``PySide6.QtWidgets.QApplication`` (looked up
    when it runs), so a subclass put there sees every event from the very start without
    gui.app knowing about the benchmark. packaging/bare_window.py does the same for the
    baseline, so both are measured the same way.
    """
    import time

    from PySide6 import QtWidgets
    from PySide6.QtCore import QEvent, QObject, QTimer

    def report() -> None:
        stamp = time.monotonic()
        if sys.stdout is not None:
            print(f"first-paint {stamp:.6f}", flush=True)
        os._exit(0)  # no teardown: the measurement is over

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint and isinstance(watched, QtWidgets.QWidget):
                app = QtWidgets.QApplication.instance()
                if app is not None:
                    app.removeEventFilter(self)
                QTimer.singleShot(0, report)  # after the whole paint pass
            return False

    class ProbedApplication(QtWidgets.QApplication):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            self._first_paint = FirstPaint(self)
            self.installEventFilter(self._first_paint)

    QtWidgets.QApplication = ProbedApplication  # type: ignore[misc,assignment]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

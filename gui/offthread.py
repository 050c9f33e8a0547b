"""Reading a file the user chose without blocking the window.

One pattern for every file the window opens (a plan, a comparison, a measurement, a
config.json, a training config): the reader runs off the GUI thread and the GUI thread waits
in an event loop, so timers fire and the window repaints; a progress dialog with Cancel
shows once the read has taken :data:`SHOW_PROGRESS_AFTER_MS`. The caller sees a plain call
that returns the answer, raises the reader's error, or returns None when the user cancelled.

Why: the README promises that the window is never blocked longer than 100 ms on input the
user gave, and a JSON file at its size cap (5 MB for a plan, 10 MB for a measurement, 20 MB
for each file of a comparison, 2 MB for a config.json) took 0.2-2 s and more to parse on the
GUI thread of the shared 2-core machine (``benchmarks/gui_input_audit.py``).

Where: a file under :data:`SMALL_BYTES` is read at once (milliseconds); a larger one in the
worker process of the ``files`` lane (:mod:`gui.worker`). Not a thread: ``json.loads`` runs
in C and never gives up the interpreter lock, so a 5 MB file parsed in a thread froze the
window as long as on the GUI thread (0.57 s of 0.58 s). A training config is always read in
a thread at least (YAML and TOML are parsed in Python, which lets the GUI thread in).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from PySide6.QtCore import QEventLoop, Qt
from PySide6.QtWidgets import QLabel, QProgressDialog, QWidget

from gui import plaintext
from gui.worker.runner import LatestJobRunner, Worker

Answer = TypeVar("Answer")

# Every read is capped (size, entries, depth); one not done after this is stuck.
READ_DEADLINE_S = 60.0
SHOW_PROGRESS_AFTER_MS = 250  # a quick read never flashes a dialog
# Files up to this size are parsed where they are asked for: 128 kB of the slowest JSON (short
# keys) takes about 15 ms (5 MB: 0.58 s, measured with benchmarks/gui_input_audit.py); larger
# files go to the worker process, whose first start costs about a second (with the progress
# dialog). A plan the app writes is a few kB.
SMALL_BYTES: Final = 128_000


def worker_for(paths: Iterable[str]) -> Worker | None:
    """Where reading ``paths`` runs: None (no need to leave the GUI thread) for small files, the
    worker process for large ones. A folder counts what it holds (a model's shards); what
    cannot be looked at counts nothing (the reader says why)."""
    total = 0
    for path in paths:
        try:
            if os.path.isdir(path):
                with os.scandir(path) as entries:
                    total += sum(e.stat().st_size for e in entries if e.is_file())
            else:
                total += os.stat(path).st_size
        except OSError:
            continue
        if total > SMALL_BYTES:
            return "process"
    return None


def read_file(
    parent: QWidget | None, read: Callable[[Any], Answer], path: str, *, title: str, name: str
) -> Answer | None:
    """``read(path)`` of one file the user opened, as :func:`read_off_the_gui_thread` does it for
    files: a large one in the worker process, "Reading <file>…" in the progress dialog."""
    return read_off_the_gui_thread(
        parent,
        read,
        path,
        lane="files",
        title=title,
        text=f"Reading {os.path.basename(path)}…",
        name=name,
        worker=worker_for([path]),
    )


def read_off_the_gui_thread(
    parent: QWidget | None,
    read: Callable[[Any], Answer],
    request: Any,
    *,
    lane: str,
    title: str,
    text: str,
    name: str,
    worker: Worker | None = "thread",
) -> Answer | None:
    """``read(request)`` off the GUI thread; the GUI thread runs its event loop meanwhile.

    ``worker`` is where (:func:`worker_for`; None: at once, on the GUI thread); for
    "process", ``read`` must be a module-level function and ``request`` picklable.
    ``title`` and ``text`` are the progress dialog's
    (shown after :data:`SHOW_PROGRESS_AFTER_MS`), ``name`` its object name. Returns None when
    cancelled; an error ``read`` raises is raised here (a deadline passed is :class:`JobFailed`).
    """
    if worker is None:
        return read(request)
    runner: LatestJobRunner[Any, Answer] = LatestJobRunner(read, lane=lane, deadline_s=READ_DEADLINE_S, worker=worker)
    loop = QEventLoop()
    outcome: list[object] = []

    def ended(_request: object, value: object) -> None:
        outcome.append(value)
        loop.quit()

    runner.finished.connect(ended)
    runner.failed.connect(ended)
    progress = QProgressDialog("", "Cancel", 0, 0, parent)
    progress.setLabel(
        plaintext.plain_label(QLabel(plaintext.escape_controls(text)))
    )  # it names the user's file: never markup
    progress.setObjectName(name)
    progress.setWindowTitle(title)
    progress.setWindowModality(Qt.WindowModality.WindowModal)
    progress.setMinimumDuration(SHOW_PROGRESS_AFTER_MS)
    progress.canceled.connect(loop.quit)
    runner.submit(request)
    try:
        if not outcome:
            loop.exec()
    finally:
        progress.close()
        progress.deleteLater()
        runner.cancel()
        runner.deleteLater()
    if not outcome:
        return None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]  # type: ignore[return-value]

"""Importing a model for the window: a folder's safetensors headers are read off the GUI
thread, with progress and Cancel, so that a large (or hostile) checkpoint never freezes the
window: in the worker process when there is more than :data:`gui.offthread.SMALL_BYTES` to
read (``json.loads`` of a header holds the interpreter lock, so a thread froze the window as
long as the GUI thread would: 100,000 tensors, about 1 s), else in a thread. A lone config.json
(at most 2 MB: 0.2-0.5 s to parse at the cap) goes through :mod:`gui.offthread` the same way.

:func:`core.files.importer.import_model` stays synchronous; it takes the progress and cancel
callbacks the worker passes it, and its budget (:data:`core.files.importer.MAX_TOTAL_TENSORS`,
:data:`core.files.importer.MAX_TOTAL_HEADER_BYTES`) bounds what even an uncancelled read costs.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Final

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal
from PySide6.QtWidgets import QProgressDialog, QWidget

from core.errors import ImportCancelled, PlanError, PlanFileError
from core.files.importer import ImportedModel, import_model
from gui import offthread
from gui.worker.machine import import_folder
from gui.worker.runner import JobFailed, LatestJobRunner

LOG = logging.getLogger(__name__)
SHARD_PATTERN: Final = "*.safetensors"
# A folder's headers are capped (100 MB, 500,000 tensors: 10-20 s); one not read after this is stuck.
READ_DEADLINE_S: Final = 120.0

# Worker threads still reading; kept here so that a thread outlives the window that started
# it (a QThread destroyed while running aborts the process) and is stopped at quit.
_RUNNING: set[_ReadThread] = set()


class _ReadThread(QThread):
    progressed = Signal(int, int)
    succeeded = Signal(object)  # ImportedModel
    failed = Signal(str)

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            result = import_model(self.path, progress=self.progressed.emit, cancelled=self.stop.is_set)
        except ImportCancelled:
            return
        except (PlanFileError, PlanError) as error:
            self.failed.emit(str(error))
            return
        except Exception as error:  # a bug in reading: reported as a failed import, logged in full
            LOG.exception("reading the model at %s failed", self.path)
            self.failed.emit(f"{self.path}: could not be read ({type(error).__name__})")
            return
        self.succeeded.emit(result)


def _stop_all() -> None:
    for thread in list(_RUNNING):
        thread.stop.set()
        thread.wait()


def _shard_count(path: str) -> int:
    """Safetensors files the import would read; 0 when there are none or the folder cannot
    be listed (the synchronous import then gives the error)."""
    try:
        folder = Path(path)
        return sum(1 for _ in folder.glob(SHARD_PATTERN)) if folder.is_dir() else 0
    except OSError:
        return 0


class ModelImporter(QObject):
    """``read(path)`` ends in ``imported(ImportedModel)`` or ``failed(message)``; a
    cancelled read ends in neither."""

    imported = Signal(object)
    failed = Signal(str)

    def __init__(self, parent: QWidget | None) -> None:
        super().__init__(parent)
        self._parent = parent
        self._thread: _ReadThread | None = None
        self._jobs: LatestJobRunner[str, ImportedModel] | None = None  # a large folder, in the worker process
        self.progress: QProgressDialog | None = None
        app = QCoreApplication.instance()
        if app is not None and not app.property("vramplanStopsImports"):
            app.aboutToQuit.connect(_stop_all)
            app.setProperty("vramplanStopsImports", True)

    @property
    def running(self) -> bool:
        return self._thread is not None or self._jobs is not None

    def read(self, path: str) -> None:
        if self.running:
            return  # one import at a time; the progress dialog is modal to the window
        shards = _shard_count(path)
        if shards == 0:
            try:
                result = offthread.read_file(
                    self._parent, import_model, path, title="Import model", name="importConfigProgress"
                )
            except (PlanFileError, PlanError, JobFailed) as error:
                self.failed.emit(str(error))
                return
            if result is not None:
                self.imported.emit(result)
            return
        progress = self._progress(shards)
        if offthread.worker_for([path]) == "process":
            self._read_in_worker(path, progress)
            return
        thread = _ReadThread(path)
        progress.canceled.connect(thread.stop.set)
        thread.progressed.connect(lambda done, total: progress.setValue(done) if total else None)
        thread.succeeded.connect(self.imported)
        thread.failed.connect(self.failed)
        thread.finished.connect(lambda: self._done(thread))
        self._thread, self.progress = thread, progress
        _RUNNING.add(thread)
        thread.start()

    def _progress(self, shards: int) -> QProgressDialog:
        progress = QProgressDialog(
            f"Reading the safetensors headers of {shards:,} files…", "Cancel", 0, shards, self._parent
        )
        progress.setObjectName("importProgress")
        progress.setWindowTitle("Import model")
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(300)  # a quick read never flashes a dialog
        progress.setAutoReset(False)
        progress.setAutoClose(False)
        return progress

    def _read_in_worker(self, path: str, progress: QProgressDialog) -> None:
        jobs: LatestJobRunner[str, ImportedModel] = LatestJobRunner(
            import_folder, lane="files", deadline_s=READ_DEADLINE_S, worker="process", progress_ms=100
        )

        def finished(_path: str, result: ImportedModel) -> None:
            self._end_jobs()
            self.imported.emit(result)

        def failed(_path: str, error: BaseException) -> None:
            self._end_jobs()
            if not isinstance(error, (PlanFileError, PlanError, JobFailed)):
                LOG.error("reading the model at %s failed: %r", path, error)
                error = PlanFileError(path, f"could not be read ({type(error).__name__})")
            self.failed.emit(str(error))

        jobs.finished.connect(finished)
        jobs.failed.connect(failed)
        jobs.progressed.connect(lambda done, total: progress.setValue(done) if total else None)
        progress.canceled.connect(self._end_jobs)
        self._jobs, self.progress = jobs, progress
        jobs.submit(path)

    def _end_jobs(self) -> None:
        if self._jobs is None:
            return  # the thread's read, or nothing
        jobs, self._jobs = self._jobs, None
        progress, self.progress = self.progress, None  # closing it says "canceled": back here, to nothing
        jobs.cancel()
        jobs.deleteLater()
        if progress is not None:
            progress.close()
            progress.deleteLater()

    def _done(self, thread: _ReadThread) -> None:
        _RUNNING.discard(thread)
        if self.progress is not None:
            self.progress.close()
            self.progress.deleteLater()
        self._thread, self.progress = None, None
        thread.deleteLater()

    def cancel(self) -> None:
        if self._thread is not None:
            self._thread.stop.set()
        self._end_jobs()

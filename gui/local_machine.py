"""This machine, for the window: its GPUs and the models it has downloaded, found off the GUI thread.

- GPUs: :func:`core.files.local_gpus.detect_local_gpus` in a thread (it waits on drivers and
  tools, holding no lock), within :data:`DETECT_TIMEOUT_S` in all: a hung ``nvidia-smi`` is
  stopped at the deadline and becomes one quiet note. The window starts it once it has
  painted (:meth:`gui.main_window.MainWindow.start_local_machine`), so it never delays the
  first paint. The same run reads the host's RAM and its speed (``LocalGpus.host``,
  :mod:`core.files.local_host`), which the Hardware and Serving forms offer to the plan.
- The Hugging Face cache: :func:`core.files.hfcache.scan_cache` in the "machine" worker
  process, with progress and Cancel; a model chosen from it has its safetensors headers read
  there too, as does a Hub id typed in the model picker (:mod:`core.files.model_source`).

Each of the three is a :class:`~gui.worker.runner.LatestJobRunner`: a new request replaces
one waiting, and an answer is heard only for the latest. Nothing here opens a dialog: a driver
that fails or a job that is stopped is a signal with its reason, for the window to show quietly.
"""

from __future__ import annotations

from typing import Final

from PySide6.QtCore import QObject, Signal

from core.files.hfcache import CachedModel, CacheScan
from core.files.local_gpus import LocalGpus
from gui.worker.machine import (
    DetectRequest,
    ModelAnswer,
    ModelRequest,
    ScanRequest,
    detect_gpus,
    read_model,
    scan,
)
from gui.worker.runner import JobFailed, LatestJobRunner, Worker

DETECT_TIMEOUT_S: Final = 1.0  # issue 27: GPU detection within a second, off the GUI thread
# "Look again": a driver without persistence mode takes a few seconds to wake (nvidia-smi's
# first query initialises every GPU); asked for by the user, so a longer wait is fine.
DETECT_AGAIN_TIMEOUT_S: Final = 10.0
# The runner's own limit on a detection job: detect_local_gpus keeps its deadline itself; this
# only ends a job that somehow did not (its thread is then left to end, unheard).
DETECT_GRACE_S: Final = 5.0
# A scan of 200 models takes well under a second (benchmarks/hfcache_scan.py); one still
# running after this is stuck on the file system, and its worker is killed.
SCAN_DEADLINE_S: Final = 120.0
READ_DEADLINE_S: Final = 120.0
PROGRESS_MS: Final = 100


class LocalMachine(QObject):
    """What this machine has, as the window learns it. ``worker="thread"`` runs the cache jobs
    in threads (tests that substitute a job with a function a process could not receive)."""

    gpusDetected = Signal(object)  # LocalGpus
    scanStarted = Signal()
    scanProgressed = Signal(int, int)  # models read, models in all
    scanned = Signal(object)  # CacheScan
    scanStopped = Signal(str)  # cancelled ("") or failed (why)
    modelStarted = Signal(str)  # what is being read, in words
    modelProgressed = Signal(int, int)  # shards read, shards in all
    modelRead = Signal(object)  # ModelAnswer
    modelStopped = Signal(str)  # cancelled ("") or failed (why)

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        cache_root: str | None = None,
        worker: Worker = "process",
        detect_timeout_s: float = DETECT_TIMEOUT_S,
    ) -> None:
        super().__init__(parent)
        self.gpus: LocalGpus | None = None  # None until the first detection has answered
        self.cache: CacheScan | None = None
        self.cache_root = cache_root  # None: where huggingface_hub looks
        self.detect_timeout_s = detect_timeout_s
        self.again_timeout_s = DETECT_AGAIN_TIMEOUT_S  # "Look again": the user asked, and may wait
        self.detections = 0  # answers heard; tests read it
        self._attempt = 0
        self._gpu_jobs: LatestJobRunner[DetectRequest, LocalGpus] = LatestJobRunner(
            detect_gpus, lane="gpus", deadline_s=DETECT_AGAIN_TIMEOUT_S + DETECT_GRACE_S, worker="thread", parent=self
        )
        self._gpu_jobs.finished.connect(self._detected)
        self._gpu_jobs.failed.connect(self._detect_failed)
        self._scan_jobs: LatestJobRunner[ScanRequest, CacheScan] = LatestJobRunner(
            scan, lane="machine", deadline_s=SCAN_DEADLINE_S, worker=worker, progress_ms=PROGRESS_MS, parent=self
        )
        self._scan_jobs.finished.connect(self._scanned)
        self._scan_jobs.failed.connect(self._scan_failed)
        self._scan_jobs.progressed.connect(self.scanProgressed)
        self._model_jobs: LatestJobRunner[ModelRequest, ModelAnswer] = LatestJobRunner(
            read_model, lane="machine", deadline_s=READ_DEADLINE_S, worker=worker, progress_ms=PROGRESS_MS, parent=self
        )
        self._model_jobs.finished.connect(lambda _request, answer: self.modelRead.emit(answer))
        self._model_jobs.failed.connect(self._read_failed)
        self._model_jobs.progressed.connect(self.modelProgressed)

    # ---- GPUs ----------------------------------------------------------------------
    @property
    def detecting(self) -> bool:
        return self._gpu_jobs.busy

    def detect(self, timeout_s: float | None = None) -> None:
        """Look for this machine's GPUs (again); :attr:`gpusDetected` answers, whatever happens."""
        self._attempt += 1
        self._gpu_jobs.submit(DetectRequest(timeout_s or self.detect_timeout_s, self._attempt))

    def set_gpus(self, found: LocalGpus) -> None:
        """Take ``found`` as this machine's GPUs (a detection's answer; screenshots and tests)."""
        self.gpus = found
        self.detections += 1
        self.gpusDetected.emit(found)

    def _detected(self, _request: DetectRequest, found: LocalGpus) -> None:
        self.set_gpus(found)

    def _detect_failed(self, request: DetectRequest, error: BaseException) -> None:
        if not isinstance(error, JobFailed):
            raise error  # a bug in detection (which promises never to raise): to the crash handler
        self.set_gpus(LocalGpus((), (f"GPU detection {error}",), (), request.timeout_s))

    # ---- the Hugging Face cache ----------------------------------------------------
    @property
    def scanning(self) -> bool:
        return self._scan_jobs.busy

    def scan(self) -> None:
        """List the models in the cache (again), with progress; :attr:`scanned` answers."""
        self._attempt += 1
        self._scan_jobs.submit(ScanRequest(self.cache_root, self._attempt))
        self.scanStarted.emit()

    def cancel_scan(self) -> None:
        if self._scan_jobs.busy:
            self._scan_jobs.cancel()
            self.scanStopped.emit("")

    def set_cache(self, found: CacheScan) -> None:
        """Take ``found`` as what the cache holds (a scan's answer; screenshots and tests)."""
        self.cache = found
        self.scanned.emit(found)

    def _scanned(self, _request: ScanRequest, found: CacheScan) -> None:
        self.set_cache(found)

    def _scan_failed(self, _request: ScanRequest, error: BaseException) -> None:
        if not isinstance(error, JobFailed):
            raise error
        self.scanStopped.emit(f"The scan {error}.")

    # ---- one model -------------------------------------------------------------------
    @property
    def reading(self) -> bool:
        return self._model_jobs.busy

    def read(self, model: CachedModel) -> None:
        """Read a cached model's safetensors headers; :attr:`modelRead` answers."""
        self._model_jobs.submit(ModelRequest(cached=model))
        self.modelStarted.emit(f"Reading the safetensors headers of {model.repo_id}…")

    def resolve(self, hub_id: str) -> None:
        """The model a typed Hub id names (the cache, else the catalogue); :attr:`modelRead` answers."""
        self._model_jobs.submit(ModelRequest(hub_id=hub_id, root=self.cache_root))
        self.modelStarted.emit(f"Looking for {hub_id} in the Hugging Face cache…")

    def cancel_read(self) -> None:
        if self._model_jobs.busy:
            self._model_jobs.cancel()
            self.modelStopped.emit("")

    def _read_failed(self, _request: ModelRequest, error: BaseException) -> None:
        if not isinstance(error, JobFailed):
            raise error
        self.modelStopped.emit(f"Reading the model {error}.")

    def shutdown(self) -> None:
        for jobs in (self._gpu_jobs, self._scan_jobs, self._model_jobs):
            jobs.shutdown()

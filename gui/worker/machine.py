"""What the window asks of this machine, as jobs for the worker: its GPUs, the models in its
Hugging Face cache, and one cached model's safetensors headers.

GPU detection runs in a thread of the GUI's process (it waits on drivers and tools, holding
no lock; :func:`core.files.local_gpus.detect_local_gpus` stops a hung tool at its deadline).
The cache scan and header reads parse files (JSON, headers): pure Python that would hold the
interpreter lock, so they run in the worker process, reporting progress, stoppable between
and inside entries. Each job returns its outcome, never raises for what it found: an error
crosses back as text (the project's exceptions do not survive pickling).

This module runs in the worker process: no Qt (import-linter contract in pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import PlanError, PlanFileError
from core.files.hfcache import CachedModel, CacheScan, Skipped, read_weights, scan_cache
from core.files.importer import ImportedModel, import_model
from core.files.local_gpus import LocalGpus, detect_local_gpus
from core.files.model_source import NamedModel, cached_how, model_named
from gui.worker.process import report_progress


@dataclass(frozen=True)
class DetectRequest:
    timeout_s: float
    attempt: int  # a new number asks again (equal requests are one job)


def detect_gpus(request: DetectRequest) -> LocalGpus:
    return detect_local_gpus(request.timeout_s)


@dataclass(frozen=True)
class ScanRequest:
    root: str | None  # None: where huggingface_hub would look (HF_HUB_CACHE, HF_HOME/hub...)
    attempt: int


def scan(request: ScanRequest) -> CacheScan:
    """Every model of the cache, config.json only (the list needs no more), with progress."""
    return scan_cache(request.root, progress=report_progress)


@dataclass(frozen=True)
class ModelRequest:
    """A cached model chosen in the list (its headers to read) or a Hub id typed."""

    cached: CachedModel | None = None
    hub_id: str = ""
    root: str | None = None


@dataclass(frozen=True)
class ModelAnswer:
    request: ModelRequest
    model: NamedModel | None  # None: ``error`` says why
    error: str = ""


def read_model(request: ModelRequest) -> ModelAnswer:
    """The chosen model with its safetensors headers counted, or the model a typed Hub id names
    (:func:`core.files.model_source.model_named`: the cache, else the catalogue)."""
    if request.cached is not None:
        weighed = read_weights(request.cached, progress=report_progress)
        if isinstance(weighed, Skipped):
            return ModelAnswer(request, None, f"{weighed.name}: {weighed.reason}")
        notes = "; ".join(weighed.notes)
        return ModelAnswer(request, NamedModel(weighed.spec, "", weighed.repo_id, cached_how(weighed), notes, weighed))
    try:
        return ModelAnswer(request, model_named(request.hub_id, request.root))
    except (PlanError, PlanFileError) as error:
        return ModelAnswer(request, None, str(error))


def import_folder(path: str) -> ImportedModel:
    """A model folder's config.json and safetensors headers (Import model folder), with progress:
    shards read of shards in all."""
    return import_model(path, progress=report_progress)

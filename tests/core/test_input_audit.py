"""Core's part of the 100 ms promise (README, Robustness): what the window hands to core
crosses to the worker process intact, and no search is quadratic in what is typed."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from core.catalogue import load_gpus, search
from core.errors import PlanError, PlanFileError
from core.files.fileio import NotOurFileError

ROOT = Path(__file__).resolve().parents[2]


def test_the_project_errors_survive_the_trip_from_the_worker_process() -> None:
    """A file read in the worker process raises these; unpickling them in the window raised
    TypeError (missing arguments), so the reader's message was lost."""
    for error in (
        PlanFileError("a/plan.json", "is not valid JSON"),
        NotOurFileError("a/notes.txt", "was not written by VRAM Planner"),
        PlanError("workload.micro_batch", 0, "an integer from 1 to 1,000,000", "why"),
    ):
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.__dict__ == error.__dict__


def test_a_long_number_typed_into_the_gpu_search_is_linear() -> None:
    """The memory-size pattern was tried from every position of a run of digits: 1,000 digits
    took 48 ms per card (12 s over the GPU picker), 4,000 digits 0.65 s per card; 200,000 would
    take hours. Run apart, so that a regression ends at the limit rather than hanging the run."""
    code = (
        "from core.catalogue import load_gpus, search; search(tuple(load_gpus()[:5]), '9' * 200_000 + ' 1.5' * 50_000)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_memory_sizes_still_match_after_the_fix() -> None:
    gpus = tuple(load_gpus())
    found = search(gpus, "24 GB")
    assert found and all(abs((g.unified_memory_gb or g.memory_marketing_gb) - 24) < 0.5 for g in found)
    assert {g.id for g in search(gpus, "80gb")} == {g.id for g in search(gpus, "80 gib")}

"""The models already downloaded: the local Hugging Face cache, read offline.

Where the cache is (huggingface_hub ``constants.py``, v0.3x–1.x): ``HF_HUB_CACHE``, else the
legacy ``HUGGINGFACE_HUB_CACHE``, else ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub``. Its layout (huggingface_hub ``file_download.py``): one folder
per repository, ``models--{org}--{name}``, holding ``blobs/`` (the files, by hash; a download in
progress is ``<hash>.incomplete``), ``refs/main`` (the commit the branch points to) and
``snapshots/<commit>/`` (the repository's files as links into ``blobs/``, or copies where the
system has no links).

Each snapshot is read with the model importer (:func:`core.files.importer.import_model`):
``config.json`` and, for a model chosen (:func:`read_weights`, :func:`resolve_hub_id`) or when a
scan asks, the safetensors headers, within the importer's budgets; no code, no pickles. A scan
reads config.json only by default: the list needs the architecture, and 200 models' headers
(70,000 tensors to validate) take longer than the second a scan is allowed.
Nothing is followed outside the cache root: a link that leads out, a broken link, a link
loop, a partial download, an unreadable entry or a header the importer refuses is listed in
:attr:`CacheScan.skipped` or as a note on the model, with the reason.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from core.errors import ImportCancelled, PlanError, PlanFileError, one_line
from core.files.fileio import read_regular_file
from core.files.importer import Cancelled, Progress, import_model
from core.hub_names import catalogue_model_of_name
from core.model import MAX_NAME_CHARS, ModelSpec

MODEL_PREFIX: Final = "models--"
MAX_REPOS: Final = 10_000  # repository folders looked at in one scan
MAX_SNAPSHOT_ENTRIES: Final = 10_000  # files in one snapshot (the largest real models have a few hundred)
MAX_SNAPSHOTS: Final = 1_000
MAX_REF_BYTES: Final = 200  # refs/main holds one commit hash
MAX_INDEX_BYTES: Final = 20_000_000  # model.safetensors.index.json: ~100 kB for a 70B model
_HUB_ID: Final = re.compile(r"(?:[A-Za-z0-9][\w.\-]{0,95}/)?[A-Za-z0-9][\w.\-]{0,95}")
_REVISION: Final = re.compile(r"[\w.\-]{1,100}")


@dataclass(frozen=True)
class CachedModel:
    """One downloaded model: its Hub id, the snapshot read, and the model it describes."""

    repo_id: str  # "Qwen/Qwen3-8B"
    revision: str  # the snapshot's folder name (a commit hash)
    path: str  # the snapshot folder
    spec: ModelSpec
    checkpoint_params: int | None  # counted from the safetensors headers; None: config.json only
    size_bytes: int  # the repository's blobs on disk
    ref: str | None  # "main" when refs/main names this snapshot
    notes: tuple[str, ...] = ()

    @property
    def catalogue_id(self) -> str | None:
        """The catalogue model its Hub id means by the one rule for names (core.hub_names), None where none: what
        the cache's listing shows beside it. The plan reads the cached files, not that entry."""
        return _catalogue_id(self.repo_id)


@dataclass(frozen=True)
class Skipped:
    name: str  # the repository (or folder) as found
    reason: str


@dataclass(frozen=True)
class CacheScan:
    root: str
    exists: bool
    models: tuple[CachedModel, ...]
    skipped: tuple[Skipped, ...]
    elapsed_s: float

    def find(self, repo_id: str) -> CachedModel | None:
        wanted = repo_id.strip().lower()
        return next((m for m in self.models if m.repo_id.lower() == wanted), None)

    def search(self, text: str) -> list[CachedModel]:
        """Models whose Hub id or name contains every word of ``text``."""
        words = text.lower().split()
        return [m for m in self.models if all(w in f"{m.repo_id} {m.spec.name}".lower() for w in words)]


@dataclass(frozen=True)
class NotCached:
    """A Hub id the cache cannot answer for, offline."""

    hub_id: str
    reason: str
    suggestions: tuple[str, ...] = ()  # near Hub ids that are cached
    catalogue_id: str | None = None  # the catalogue model from that repository, when there is one


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache folder huggingface_hub would use, from the environment (``os.environ`` by default)."""
    env = os.environ if env is None else env

    def expand(path: str) -> str:
        return os.path.expandvars(os.path.expanduser(path))

    home = expand(env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"))
    chosen = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(expand(chosen))


def repo_id_of(folder: str) -> str | None:
    """``models--Qwen--Qwen3-8B`` -> ``Qwen/Qwen3-8B``; None for another kind of folder."""
    if not folder.startswith(MODEL_PREFIX):
        return None
    repo = folder[len(MODEL_PREFIX) :].replace("--", "/", 1)
    return repo if repo and _HUB_ID.fullmatch(repo) else None


def folder_of(repo_id: str) -> str:
    return MODEL_PREFIX + repo_id.replace("/", "--")


# ---- links stay inside the cache ---------------------------------------------------------------
def _inside(root: str, path: str) -> bool:
    try:
        return os.path.commonpath([root, path]) == root
    except ValueError:  # another drive (Windows)
        return False


def _resolved(root: str, path: str) -> tuple[str | None, str | None]:
    """``path`` with its links resolved, or why it cannot be used (outside, broken, a loop)."""
    real = os.path.realpath(path)
    if not _inside(root, real):
        return None, "links outside the cache"
    try:
        info = os.stat(real)
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", 40) or "loop" in str(exc).lower():
            return None, "is a link loop"
        return None, "is a broken link" if os.path.islink(path) else f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):  # a folder, a FIFO (whose open would wait), a device
        return None, "is not a regular file"
    return real, None


@dataclass
class _Snapshot:
    config: str | None = None
    shards: dict[str, str | None] = field(default_factory=dict)  # name -> problem (None: usable)
    index: str | None = None


def _list_snapshot(root: str, folder: str) -> tuple[_Snapshot, str | None]:
    """The snapshot's files that matter, each checked; a reason when the model must be skipped."""
    found = _Snapshot()
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_SNAPSHOT_ENTRIES:
                return found, f"the snapshot has more than {MAX_SNAPSHOT_ENTRIES:,} files"
            name = entry.name
            if name != "config.json" and name != "model.safetensors.index.json" and not name.endswith(".safetensors"):
                continue
            real, problem = _resolved(root, entry.path)
            if problem == "links outside the cache":
                return found, f"{one_line(name)} links outside the cache"
            if name.endswith(".safetensors"):
                found.shards[name] = problem
            elif problem is not None:
                return found, f"{name} {problem}" + (" (download incomplete?)" if "link" in problem else "")
            elif name == "config.json":
                found.config = real
            else:
                found.index = real
    if found.config is None:
        return found, "has no config.json (download incomplete?)"
    return found, None


def _expected_shards(index: str | None) -> set[str]:
    """Shard names ``model.safetensors.index.json`` lists (its ``weight_map`` values)."""
    if index is None:
        return set()
    try:
        document = json.loads(read_regular_file(index, MAX_INDEX_BYTES, "a safetensors index").decode("utf-8"))
    except (PlanFileError, ValueError, RecursionError):
        return set()
    weights = document.get("weight_map") if isinstance(document, dict) else None
    return {v for v in weights.values() if isinstance(v, str)} if isinstance(weights, dict) else set()


def _incomplete_blobs(repo: str) -> int:
    try:
        with os.scandir(os.path.join(repo, "blobs")) as entries:
            names = (e.name for _, e in zip(range(MAX_SNAPSHOT_ENTRIES), entries, strict=False))
            return sum(1 for name in names if name.endswith(".incomplete"))
    except OSError:
        return 0


def _blob_bytes(repo: str) -> int:
    total = 0
    try:
        with os.scandir(os.path.join(repo, "blobs")) as entries:
            for _, entry in zip(range(MAX_SNAPSHOT_ENTRIES), entries, strict=False):
                info = entry.stat(follow_symlinks=False)
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    except OSError:
        pass
    return total


# ---- one repository ------------------------------------------------------------------------
def _read_ref(root: str, repo: str, name: str = "main") -> str | None:
    path = os.path.join(repo, "refs", name)
    real, problem = _resolved(root, path)
    if real is None or problem is not None:
        return None
    try:
        text = read_regular_file(real, MAX_REF_BYTES, "a ref").decode("ascii").strip()
    except (PlanFileError, UnicodeDecodeError):
        return None
    return text if _REVISION.fullmatch(text) else None


def _choose_snapshot(root: str, repo: str, revision: str | None) -> tuple[str | None, str | None, list[str]]:
    """(snapshot folder name, the ref naming it, notes), or (None, reason, []) when there is none."""
    snapshots = os.path.join(repo, "snapshots")
    wanted = revision or "main"
    commit = _read_ref(root, repo, wanted) if _REVISION.fullmatch(wanted) else None
    names = []
    with os.scandir(snapshots) as entries:
        for _, entry in zip(range(MAX_SNAPSHOTS), entries, strict=False):
            names.append(entry.name)
    for candidate, ref in ((commit, wanted), (revision, None)):
        if candidate and candidate in names:
            return candidate, ref, []
    if revision is not None:
        return None, f"has no snapshot of revision {one_line(revision)[:100]}", []
    if not names:
        return None, "has no snapshot (download incomplete?)", []
    newest = max(names, key=lambda n: _mtime(os.path.join(snapshots, n)))
    return newest, None, ["refs/main names no snapshot here: the newest snapshot was read"]


def _mtime(path: str) -> float:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def read_repo(
    root: str,
    folder: str,
    *,
    revision: str | None = None,
    headers: bool = True,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> CachedModel | Skipped:
    """One ``models--org--name`` folder of the cache rooted at ``root`` (already resolved).

    ``progress(shards read, shards)`` and ``cancelled()`` reach the header reads."""
    repo_id = repo_id_of(folder) or one_line(folder)[:200]
    repo = os.path.join(root, folder)
    try:
        if not _inside(root, os.path.realpath(repo)):
            return Skipped(repo_id, "links outside the cache")
        snapshot, ref_or_reason, notes = _choose_snapshot(root, repo, revision)
        if snapshot is None:
            return Skipped(repo_id, ref_or_reason or "has no snapshot")
        path = os.path.join(repo, "snapshots", snapshot)
        if not _inside(root, os.path.realpath(path)):
            return Skipped(repo_id, "its snapshot links outside the cache")
        files, problem = _list_snapshot(root, path)
    except OSError as exc:
        return Skipped(repo_id, f"cannot be read ({exc.strerror or exc})")
    if problem is not None:
        return Skipped(repo_id, problem)
    return _import(repo, repo_id, snapshot, ref_or_reason, files, notes, headers, progress, cancelled)


def _weights_notes(repo: str, files: _Snapshot) -> list[str]:
    notes = []
    partial = _incomplete_blobs(repo)
    if partial:
        notes.append(f"{partial} file(s) still downloading")
    broken = sorted(n for n, p in files.shards.items() if p is not None)
    if broken:
        notes.append(f"{len(broken)} safetensors file(s) missing or broken ({one_line(broken[0])[:80]}...)")
    missing = _expected_shards(files.index) - set(files.shards)
    if missing:
        notes.append(f"{len(missing)} safetensors file(s) of the index not downloaded")
    return notes


def _import(
    repo: str,
    repo_id: str,
    snapshot: str,
    ref: str | None,
    files: _Snapshot,
    notes: list[str],
    headers: bool,
    progress: Progress | None,
    cancelled: Cancelled | None,
) -> CachedModel | Skipped:
    assert files.config is not None
    problems = _weights_notes(repo, files)
    path = os.path.join(repo, "snapshots", snapshot)
    whole = headers and not problems and any(p is None for p in files.shards.values())
    if problems:
        notes = [*notes, *problems, "parameters from config.json"]
    try:
        imported = import_model(path if whole else files.config, progress, cancelled)
        spec = replace(imported.spec, name=repo_id[:MAX_NAME_CHARS])
    except PlanFileError as exc:
        return Skipped(repo_id, one_line(exc.reason)[:300])
    except PlanError as exc:
        return Skipped(repo_id, one_line(str(exc))[:300])
    params = imported.checkpoint.params if imported.checkpoint is not None else None
    return CachedModel(repo_id, snapshot, path, spec, params, _blob_bytes(repo), ref, tuple(notes))


# ---- the whole cache -----------------------------------------------------------------------
def _repo_folders(root: str, skipped: list[Skipped]) -> list[str]:
    folders: list[str] = []
    with os.scandir(root) as entries:
        for entry in entries:
            if not entry.name.startswith(MODEL_PREFIX):
                continue  # datasets--, spaces--, .locks, version.txt: not models
            if len(folders) >= MAX_REPOS:
                skipped.append(Skipped(one_line(entry.name)[:200], f"past the first {MAX_REPOS:,} models"))
                break
            if repo_id_of(entry.name) is None:
                skipped.append(Skipped(one_line(entry.name)[:200], "is not a model folder name the Hub writes"))
                continue
            folders.append(entry.name)
    return sorted(folders, key=str.lower)


def scan_cache(
    root: str | os.PathLike[str] | None = None,
    *,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
    headers: bool = False,
) -> CacheScan:
    """Every model in the cache (``hub_cache_dir()`` unless ``root`` is given), each read offline.

    ``progress(done, total)`` is called before the first repository and after each;
    ``cancelled()`` is asked between repositories (and inside long header reads): when it turns
    true the scan stops with :class:`~core.errors.ImportCancelled`. ``headers=True`` reads the
    safetensors headers too (:func:`read_weights` does it for one model). Never raises for what
    is in the cache: each problem is a :class:`Skipped`.
    """
    started = time.monotonic()
    given = Path(root) if root is not None else hub_cache_dir()
    real = os.path.realpath(given)
    skipped: list[Skipped] = []
    folders: list[str] | None
    try:
        folders = _repo_folders(real, skipped) if os.path.isdir(real) else None
    except OSError as exc:
        skipped.append(Skipped(str(given), f"cannot be read ({exc.strerror or exc})"))
        folders = []
    if folders is None:
        return CacheScan(str(given), False, (), (), time.monotonic() - started)
    models: list[CachedModel] = []
    if progress is not None:
        progress(0, len(folders))
    for done, folder in enumerate(folders, start=1):
        if cancelled is not None and cancelled():
            raise ImportCancelled(str(given))
        found = read_repo(real, folder, headers=headers, cancelled=cancelled)
        if isinstance(found, CachedModel):
            models.append(found)
        else:
            skipped.append(found)
        if progress is not None:
            progress(done, len(folders))
    return CacheScan(str(given), True, tuple(models), tuple(skipped), time.monotonic() - started)


def read_weights(
    model: CachedModel, *, progress: Progress | None = None, cancelled: Cancelled | None = None
) -> CachedModel | Skipped:
    """``model`` again with its safetensors headers counted (``checkpoint_params``), as the
    importer reads a model folder: ``progress(shards read, shards)``, ``cancelled()`` between
    and inside shards (then :class:`~core.errors.ImportCancelled`)."""
    snapshot = Path(model.path)
    root = os.path.realpath(snapshot.parents[2])
    return read_repo(
        root, snapshot.parents[1].name, revision=model.revision, headers=True, progress=progress, cancelled=cancelled
    )


def _catalogue_id(hub_id: str) -> str | None:
    """The catalogue model of that repository, or of the base its name leads to (core.hub_names, the one rule)."""
    found = catalogue_model_of_name(hub_id)
    return found.entry.id if found is not None else None


def resolve_hub_id(
    hub_id: str, root: str | os.PathLike[str] | None = None, *, revision: str | None = None, headers: bool = True
) -> CachedModel | NotCached:
    """A Hub id (``Qwen/Qwen3-8B``) from the cache, offline; or why not, with near cached ids.

    ``revision`` is a branch in ``refs/`` or a commit (``Qwen/Qwen3-8B@main`` names one too); the default follows
    ``refs/main``.
    """
    text, at, named = hub_id.strip().partition("@")
    if at and named.strip() and revision is None:
        revision = named.strip()
    catalogue = _catalogue_id(text) if _HUB_ID.fullmatch(text) else None
    if not _HUB_ID.fullmatch(text):
        return NotCached(one_line(text)[:200], "is not a Hub id (organisation/name)")
    given = Path(root) if root is not None else hub_cache_dir()
    real = os.path.realpath(given)
    try:
        names = [e.name for e in os.scandir(real) if e.name.startswith(MODEL_PREFIX)] if os.path.isdir(real) else []
    except OSError as exc:
        return NotCached(text, f"cannot read the cache at {given} ({exc.strerror or exc})", catalogue_id=catalogue)
    wanted = folder_of(text).lower()
    folder = next((n for n in names if n == folder_of(text)), None) or next(
        (n for n in names if n.lower() == wanted), None
    )
    if folder is None:
        cached = {r.lower(): r for r in (repo_id_of(n) for n in names) if r}
        near = difflib.get_close_matches(text.lower(), list(cached), n=3, cutoff=0.5)
        return NotCached(
            text, f"is not in the Hugging Face cache at {given}", tuple(cached[k] for k in near), catalogue
        )
    found = read_repo(real, folder, revision=revision, headers=headers)
    if isinstance(found, Skipped):
        # "it has no snapshot", but not "it config.json is not a regular file" (said before 2026-12-04)
        lead = "it " if found.reason.startswith(("has ", "is ", "links ", "cannot ")) else ""
        return NotCached(text, f"is in the cache but cannot be used: {lead}{found.reason}", catalogue_id=catalogue)
    return found

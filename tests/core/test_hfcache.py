"""The local Hugging Face cache: synthetic caches laid out as huggingface_hub writes them
(``models--org--name/{blobs,refs,snapshots}``, snapshot files as relative links into
``blobs/``), including the hostile ones issue 27 names: broken links, partial downloads,
huge or lying headers, unreadable entries, link loops and links out of the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.errors import ImportCancelled
from core.files.hfcache import (
    CachedModel,
    NotCached,
    folder_of,
    hub_cache_dir,
    read_weights,
    repo_id_of,
    resolve_hub_id,
    scan_cache,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="links and modes as POSIX has them")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONFIG: dict[str, Any] = dict(find_model("smollm2-135m").config)


def safetensors(tensors: dict[str, tuple[int, ...]], *, claim: int | None = None) -> bytes:
    """A safetensors file of float32 tensors; ``claim`` overrides the header length written."""
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in tensors.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if claim is None else claim) + raw + b"\0" * offset


def add_model(root: Path, repo_id: str, files: dict[str, bytes] | None = None, *, commit: str = COMMIT) -> Path:
    """One repository as the Hub writes it; returns its snapshot folder."""
    if files is None:
        files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": safetensors({"w": (2, 3)})}
    repo = root / folder_of(repo_id)
    blobs, snapshot = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    for name, content in files.items():
        blob = blobs / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    root.mkdir()
    return root


def reasons(root: Path) -> dict[str, str]:
    return {s.name: s.reason for s in scan_cache(root, headers=True).skipped}


# ---- where the cache is ------------------------------------------------------------------------
def test_the_cache_folder_follows_huggingface_hub() -> None:
    home = os.path.expanduser("~")
    assert hub_cache_dir({}) == Path(home, ".cache", "huggingface", "hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_dir({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/h/hub")
    assert hub_cache_dir({"HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HOME": "/h"}) == Path("/legacy")
    assert hub_cache_dir({"HF_HUB_CACHE": "/new", "HUGGINGFACE_HUB_CACHE": "/legacy"}) == Path("/new")


def test_folder_names_and_hub_ids() -> None:
    assert repo_id_of("models--Qwen--Qwen3-8B") == "Qwen/Qwen3-8B"
    assert folder_of("Qwen/Qwen3-8B") == "models--Qwen--Qwen3-8B"
    assert repo_id_of("models--gpt2") == "gpt2"
    assert repo_id_of("datasets--x--y") is None and repo_id_of("models--") is None


# ---- a good cache --------------------------------------------------------------------------------
@posix_only
def test_cached_models_with_their_snapshot_and_headers(cache: Path) -> None:
    add_model(cache, "HuggingFaceTB/SmolLM2-135M")
    add_model(cache, "org/two-shards", {
        "config.json": json.dumps(CONFIG).encode(),
        "model-00001-of-00002.safetensors": safetensors({"a": (4, 4)}),
        "model-00002-of-00002.safetensors": safetensors({"b": (2, 8)}),
    })  # fmt: skip
    (cache / "datasets--someone--data").mkdir()  # not a model: not listed, not skipped
    (cache / "version.txt").write_text("1")
    scan = scan_cache(cache, headers=True)
    assert scan.exists and scan.skipped == ()
    assert [m.repo_id for m in scan.models] == ["HuggingFaceTB/SmolLM2-135M", "org/two-shards"]
    smol = scan.find("huggingfacetb/smollm2-135m")
    assert smol is not None and smol.revision == COMMIT and smol.ref == "main" and smol.notes == ()
    assert smol.checkpoint_params == 6 and smol.spec.params_override == 6 and smol.spec.name == smol.repo_id
    assert smol.spec.hidden_size == CONFIG["hidden_size"] and smol.size_bytes > 0
    assert scan.find("org/two-shards").checkpoint_params == 32  # type: ignore[union-attr]
    assert [m.repo_id for m in scan.search("two")] == ["org/two-shards"]


@posix_only
def test_a_scan_reads_config_only_and_headers_when_a_model_is_chosen(cache: Path) -> None:
    add_model(cache, "org/m")
    model = scan_cache(cache).models[0]
    assert model.checkpoint_params is None and model.spec.params_override is None
    seen: list[tuple[int, int]] = []
    weighed = read_weights(model, progress=lambda done, total: seen.append((done, total)))
    assert isinstance(weighed, CachedModel) and weighed.checkpoint_params == 6 and seen == [(0, 1), (1, 1)]
    with pytest.raises(ImportCancelled):
        read_weights(model, cancelled=lambda: True)


@posix_only
def test_progress_and_cancel_between_entries(cache: Path) -> None:
    for name in ("org/a", "org/b", "org/c"):
        add_model(cache, name)
    seen: list[tuple[int, int]] = []
    scan_cache(cache, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]
    seen.clear()
    with pytest.raises(ImportCancelled):  # asked before each repository: stops after the first
        scan_cache(cache, progress=lambda done, total: seen.append((done, total)), cancelled=lambda: len(seen) >= 2)
    assert seen == [(0, 3), (1, 3)]


def test_a_missing_cache_is_not_an_error(tmp_path: Path) -> None:
    scan = scan_cache(tmp_path / "nowhere")
    assert not scan.exists and scan.models == () and scan.skipped == ()


@posix_only
def test_a_cache_root_behind_a_link_is_read(cache: Path, tmp_path: Path) -> None:
    add_model(cache, "org/m")
    link = tmp_path / "linked-hub"
    link.symlink_to(cache)
    assert [m.repo_id for m in scan_cache(link).models] == ["org/m"]


# ---- hostile caches -----------------------------------------------------------------------------
@posix_only
def test_broken_and_missing_configs_are_skipped(cache: Path) -> None:
    snapshot = add_model(cache, "org/broken")
    os.unlink(os.path.realpath(snapshot / "config.json"))
    add_model(cache, "org/noconfig", {"model.safetensors": safetensors({"w": (1,)})})
    add_model(cache, "org/notjson", {"config.json": b"{nope"})
    found = reasons(cache)
    assert found["org/broken"] == "config.json is a broken link (download incomplete?)"
    assert found["org/noconfig"] == "has no config.json (download incomplete?)"
    assert found["org/notjson"].startswith("is not valid JSON")


@posix_only
def test_a_partial_download_lists_the_model_from_its_config(cache: Path) -> None:
    snapshot = add_model(cache, "org/partial")
    (snapshot.parent.parent / "blobs" / ("f" * 64 + ".incomplete")).write_bytes(b"\0" * 10)
    model = scan_cache(cache, headers=True).models[0]
    assert model.checkpoint_params is None
    assert model.notes == ("1 file(s) still downloading", "parameters from config.json")


@posix_only
def test_shards_the_index_lists_but_are_not_there(cache: Path) -> None:
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    add_model(cache, "org/half", {
        "config.json": json.dumps(CONFIG).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": safetensors({"a": (4, 4)}),
    })  # fmt: skip
    model = scan_cache(cache, headers=True).models[0]
    assert model.checkpoint_params is None and "1 safetensors file(s) of the index not downloaded" in model.notes


@posix_only
def test_links_out_of_the_cache_are_never_followed(cache: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(CONFIG))
    snapshot = add_model(cache, "org/escape", {"model.safetensors": safetensors({"w": (1,)})})
    (snapshot / "config.json").symlink_to(secret)
    shard_out = add_model(cache, "org/shard-out", {"config.json": json.dumps(CONFIG).encode()})
    (shard_out / "model.safetensors").symlink_to(secret)
    outside = tmp_path / "elsewhere"
    add_model(outside, "org/moved")
    (cache / folder_of("org/moved")).symlink_to(outside / folder_of("org/moved"))
    found = reasons(cache)
    assert found["org/escape"] == "config.json links outside the cache"
    assert found["org/shard-out"] == "model.safetensors links outside the cache"
    assert found["org/moved"] == "links outside the cache"
    assert scan_cache(cache).models == ()


@posix_only
def test_link_loops(cache: Path) -> None:
    snapshot = add_model(cache, "org/loop", {"model.safetensors": safetensors({"w": (1,)})})
    (snapshot / "config.json").symlink_to("config.json")
    shard_loop = add_model(cache, "org/shard-loop", {"config.json": json.dumps(CONFIG).encode()})
    (shard_loop / "a.safetensors").symlink_to("b.safetensors")
    (shard_loop / "b.safetensors").symlink_to("a.safetensors")
    scan = scan_cache(cache, headers=True)
    assert {s.name: s.reason for s in scan.skipped} == {"org/loop": "config.json is a link loop (download incomplete?)"}
    looped = scan.find("org/shard-loop")
    assert looped is not None and looped.checkpoint_params is None
    assert looped.notes[0].startswith("2 safetensors file(s) missing or broken")


@posix_only
@pytest.mark.parametrize(
    ("shard", "reason"),
    [
        (safetensors({"w": (2,)}, claim=10**12), "has a 1,000,000,000,000-byte header; the safetensors format allows"),
        (safetensors({"w": (2,)}, claim=5000), "claims a 5,000-byte header but the file has"),
        (b"\x01\x02", "is too short to be a safetensors file"),
        (struct.pack("<Q", 4) + b"[1] ", "has a header that is not a JSON object"),
    ],
)
def test_huge_or_lying_headers_skip_the_model(cache: Path, shard: bytes, reason: str) -> None:
    add_model(cache, "org/liar", {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": shard})
    assert reasons(cache)["org/liar"].startswith(reason)


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads every folder")
def test_unreadable_entries(cache: Path) -> None:
    snapshot = add_model(cache, "org/locked")
    snapshot.chmod(0)
    try:
        assert reasons(cache)["org/locked"] == "cannot be read (Permission denied)"
    finally:
        snapshot.chmod(0o755)


@posix_only
def test_a_folder_that_cannot_be_listed(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the chmod test above, where the tests run as root (which lists every folder)."""
    snapshot = add_model(cache, "org/locked")
    listing = os.scandir

    def refusing(path: Any = ".") -> Any:
        if Path(path) == snapshot:
            raise PermissionError(13, "Permission denied")
        return listing(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert reasons(cache)["org/locked"] == "cannot be read (Permission denied)"


@posix_only
def test_a_fifo_for_a_config_is_refused_unread(cache: Path) -> None:
    snapshot = add_model(cache, "org/fifo", {"model.safetensors": safetensors({"w": (1,)})})
    os.mkfifo(snapshot / "config.json")
    folder = add_model(cache, "org/folder", {"model.safetensors": safetensors({"w": (1,)})})
    (folder / "config.json").mkdir()
    found = reasons(cache)
    assert found["org/fifo"] == found["org/folder"] == "config.json is not a regular file"


@posix_only
def test_snapshots_without_refs(cache: Path) -> None:
    add_model(cache, "org/two-revs", commit="a" * 40)
    newest = add_model(cache, "org/two-revs", commit="b" * 40)
    os.utime(newest, (2_000_000_000, 2_000_000_000))
    (cache / folder_of("org/two-revs") / "refs" / "main").unlink()
    model = scan_cache(cache).models[0]
    assert model.revision == "b" * 40 and model.ref is None
    assert model.notes == ("refs/main names no snapshot here: the newest snapshot was read",)
    (cache / folder_of("org/empty") / "snapshots").mkdir(parents=True)
    assert reasons(cache)["org/empty"] == "has no snapshot (download incomplete?)"
    (cache / "models--").mkdir()
    assert reasons(cache)["models--"] == "is not a model folder name the Hub writes"


# ---- a Hub id, offline ---------------------------------------------------------------------------
@posix_only
def test_a_hub_id_resolves_from_the_cache(cache: Path) -> None:
    add_model(cache, "Qwen/Qwen3-4B")
    found = resolve_hub_id("Qwen/Qwen3-4B", cache)
    assert isinstance(found, CachedModel) and found.repo_id == "Qwen/Qwen3-4B"
    assert isinstance(resolve_hub_id("qwen/qwen3-4b", cache), CachedModel)  # the Hub's ids ignore case


@posix_only
def test_a_hub_id_not_cached_says_so_with_near_names(cache: Path) -> None:
    add_model(cache, "Qwen/Qwen3-4B")
    missing = resolve_hub_id("Qwen/Qwen3-8B", cache)
    assert isinstance(missing, NotCached)
    assert missing.reason == f"is not in the Hugging Face cache at {cache}"
    assert missing.suggestions == ("Qwen/Qwen3-4B",) and missing.catalogue_id == "qwen3-8b"
    refused = NotCached("../../etc/passwd", "is not a Hub id (organisation/name)")
    assert resolve_hub_id("../../etc/passwd", cache) == refused


@posix_only
def test_a_revision_and_a_broken_cached_model(cache: Path) -> None:
    add_model(cache, "org/m", commit="a" * 40)
    add_model(cache, "org/m", commit="b" * 40)
    old = resolve_hub_id("org/m", cache, revision="a" * 40)
    assert isinstance(old, CachedModel) and old.revision == "a" * 40 and old.ref is None
    assert isinstance(resolve_hub_id("org/m", cache, revision="main"), CachedModel)
    gone = resolve_hub_id("org/m", cache, revision="../x")
    assert isinstance(gone, NotCached) and "has no snapshot of revision ../x" in gone.reason
    add_model(cache, "org/bad", {"config.json": b"[]"})
    bad = resolve_hub_id("org/bad", cache)
    assert isinstance(bad, NotCached) and bad.reason.startswith("is in the cache but cannot be used: it ")
    add_model(cache, "org/nan", {"config.json": b'{"model_type": "llama", "hidden_size": NaN}'})
    nan = resolve_hub_id("org/nan", cache)  # a reason naming a field reads without "it" (2026-12-04)
    assert isinstance(nan, NotCached) and "cannot be used: config.hidden_size: nan is not allowed" in nan.reason

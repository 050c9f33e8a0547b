"""How long scanning a Hugging Face cache of 200 models takes (issue 27 target: at most 1 s).

Builds, in a temporary folder, a cache laid out as huggingface_hub writes it: 200
``models--org--name`` repositories, each with ``refs/main``, a snapshot whose files are
relative links into ``blobs/``, the ``config.json`` of a catalogue model (cycling through the
catalogue) and the safetensors shards of a real checkpoint's header shape: as many tensors as
the architecture has (one per weight, norm and bias), split over the shard count a model of
that size ships with; the tensors are one element each, so the headers are real-sized while
the files stay small. Then times :func:`core.files.hfcache.scan_cache` as the list of cached
models runs it (config.json of each model: the target) and with every safetensors header
too (what :func:`~core.files.hfcache.read_weights` does for the one model chosen), and prints
the median wall and CPU time of several runs (CPU time is this process's own: on a shared,
busy machine the wall time also counts the others)::

    python benchmarks/hfcache_scan.py [--models 200] [--runs 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import struct
import tempfile
import time
from pathlib import Path

from core.catalogue import load_models
from core.files.hfcache import folder_of, scan_cache

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHARD_PARAMS = 5_000_000_000  # about 5 GB of bf16 per shard, as transformers' save_pretrained splits


def tensor_names(config: dict[str, object]) -> list[str]:
    layers = int(config.get("num_hidden_layers") or config.get("n_layer") or 12)  # type: ignore[call-overload]
    per_layer = [
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
        "input_layernorm.weight", "post_attention_layernorm.weight",
    ]  # fmt: skip
    names = [f"model.layers.{i}.{n}" for i in range(layers) for n in per_layer]
    return ["model.embed_tokens.weight", *names, "model.norm.weight", "lm_head.weight"]


def shard(names: list[str]) -> bytes:
    header = {n: {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]} for i, n in enumerate(names)}
    header["__metadata__"] = {"format": "pt"}  # type: ignore[assignment]
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * (2 * len(names))


def add_repo(root: Path, repo_id: str, files: dict[str, bytes]) -> None:
    repo = root / folder_of(repo_id)
    blobs, snapshot = repo / "blobs", repo / "snapshots" / COMMIT
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    for name, content in files.items():
        blob = blobs / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        target = os.path.relpath(blob, snapshot)
        try:
            (snapshot / name).symlink_to(target)
        except OSError:  # no links on this system: huggingface_hub copies
            (snapshot / name).write_bytes(content)


def build_cache(root: Path, count: int) -> int:
    """``count`` repositories under ``root``; returns the number of shards written."""
    catalogue = load_models()
    shards = 0
    for index in range(count):
        entry = catalogue[index % len(catalogue)]
        config = dict(entry.config)
        names = tensor_names(config)
        parts = max(1, min(30, round(entry.published_params / SHARD_PARAMS)))
        files = {"config.json": json.dumps(config).encode()}
        for part in range(parts):
            chunk = names[part::parts]
            files[f"model-{part + 1:05d}-of-{parts:05d}.safetensors"] = shard(chunk)
        shards += parts
        add_repo(root, f"bench-org-{index}/{entry.id}", files)
    return shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "hub"
        shards = build_cache(root, args.models)
        scan = scan_cache(root, headers=True)  # warm: the catalogue and the file system's caches
        assert len(scan.models) == args.models and not scan.skipped, scan.skipped[:3]
        print(f"scan_cache: {args.models} cached models ({shards} safetensors headers), {args.runs} runs")
        for headers, what in ((False, "config.json (the list)"), (True, "config.json + every header")):
            wall, cpu = [], []
            for _ in range(args.runs):
                started, started_cpu = time.perf_counter(), time.process_time()
                scan_cache(root, headers=headers)
                wall.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            print(
                f"  {what:>27}: median {statistics.median(wall):.3f} s wall, "
                f"{statistics.median(cpu):.3f} s CPU (fastest {min(wall):.3f} s, slowest {max(wall):.3f} s)"
            )
    print("  target: the list of 200 cached models in at most 1 s")


if __name__ == "__main__":
    main()

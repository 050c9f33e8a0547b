"""Time and peak memory of importing hostile safetensors headers (issue 14 item 3).

Writes, in a temporary folder, model folders whose safetensors headers hold 1.67 million
zero-size tensors in just under 100 MB (the format's per-file cap): one shard, and three.
Each import runs in a fresh process so that its peak resident memory (``VmHWM``, Linux)
is its own. Run it from the repository root, or with PYTHONPATH at another checkout to
measure that one (the numbers in the README compare the commit before the budget)::

    python benchmarks/safetensors_budget.py
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TENSORS = 1_670_000  # the header: 1.67 M zero-size tensors
TARGET_BYTES = 99_990_000  # padded to 99.99 MB, under the format's 100 MB cap


def model_config() -> dict[str, object]:
    """A real architecture's config.json (the catalogue's Llama 3.2 1B): only the headers vary."""
    from core.catalogue import find_model

    return dict(find_model("llama-3.2-1b").config)


# Peak memory from VmHWM (Linux): getrusage's ru_maxrss survives exec and would report the
# parent's peak (it held the 100 MB header while writing it).
CHILD = """
import sys, time
from core.errors import PlanFileError
from core.files.importer import import_model
start = time.perf_counter()
try:
    import_model(sys.argv[1])
    outcome = "imported"
except PlanFileError as error:
    outcome = "refused: " + str(error).split(": ", 1)[1][:110]
elapsed = time.perf_counter() - start
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(f"{elapsed:.2f}\\t{peak / 1024:.0f}\\t{outcome}")
"""


def write_shard(path: Path, tensors: int = TENSORS) -> None:
    entry = '{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    body = ",".join(f'"t{i}":{entry}' for i in range(tensors))
    pad = TARGET_BYTES - len(body) - len('{,"__metadata__":{"p":""}}')
    raw = ("{" + body + ',"__metadata__":{"p":"' + " " * max(pad, 0) + '"}}').encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one = root / "one"
        one.mkdir()
        (one / "config.json").write_text(json.dumps(model_config()))
        write_shard(one / "model.safetensors")
        three = root / "three"
        three.mkdir()
        (three / "config.json").write_text(json.dumps(model_config()))
        for i in range(3):
            os.link(one / "model.safetensors", three / f"model-0000{i + 1}-of-00003.safetensors")
        # The most a model may list (core.files.importer.MAX_TOTAL_TENSORS is 500,000): accepted,
        # this is the longest an import can now take.
        at_budget = root / "at-budget"
        at_budget.mkdir()
        (at_budget / "config.json").write_text(json.dumps(model_config()))
        write_shard(at_budget / "model.safetensors", 499_999)
        size = (one / "model.safetensors").stat().st_size
        print(f"header {size - 8:,} bytes, {TENSORS:,} tensors per shard; python {sys.version.split()[0]}")
        print("case\tseconds\tpeak MiB\toutcome")
        for name, folder in (("1 shard", one), ("3 shards", three), ("499,999 tensors", at_budget)):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder)], capture_output=True, text=True, check=False
            )
            if done.returncode:
                print(f"{name}\tfailed after {time.perf_counter() - start:.1f} s\t{done.stderr[-300:]}")
                continue
            print(f"{name}\t{done.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

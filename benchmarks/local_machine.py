"""This machine at start-up (issue 27's targets): GPU detection within 1 s, off the GUI thread, and
a first paint that does not wait for it.

1. Detection: :func:`core.files.local_gpus.detect_local_gpus` as this machine answers, then with
   stub ``nvidia-smi`` and ``dmidecode`` alone on PATH that answer at once, and ones that both hang
   (the deadline must stop both at 1 s: the host's tool runs beside the GPUs', not after them).
   ``dmidecode`` is asked only where the SMBIOS records cannot be read as files (here: none).
   Wall time, median of the runs; the host's RAM and speed are printed with the cards.
2. First paint from source: ``gui.launcher`` with ``VRAMPLAN_EXIT_AFTER_PAINT=1`` (it prints the
   monotonic time of the first painted window and exits; gui/launcher.py), offscreen, a fresh
   settings folder each run, the hanging ``nvidia-smi`` first on PATH (the worst case: detection
   would spend its whole second beside the window). With ``--base DIR`` the same for another
   source tree, runs alternating (``git archive main | tar -x -C DIR`` gives the tree before
   this change). The frozen app's ratio is ``benchmarks/startup.py``'s (``make dist bench-startup``).

    python benchmarks/local_machine.py [--runs 7] [--base /tmp/vramplan-main]

Timings on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.files.local_gpus import detect_local_gpus  # noqa: E402

ANSWERS = "#!/bin/sh\nPATH=/usr/bin:/bin\necho 'NVIDIA GeForce RTX 4090, 24564, 4000, 20564, 550.54'\n"
HANGS = "#!/bin/sh\nPATH=/usr/bin:/bin\nexec sleep 30\n"
# Two DDR5-5600 modules in two channels, as dmidecode 3.x prints them.
DMIDECODE = "#!/bin/sh\nPATH=/usr/bin:/bin\n" + "".join(
    f"echo 'Memory Device'; echo '\tData Width: 64 bits'; echo '\tSize: 32 GB'; echo '\tBank Locator: P0 CHANNEL {c}';"
    " echo '\tType: DDR5'; echo '\tConfigured Memory Speed: 5600 MT/s'; echo\n"
    for c in "AB"
)
LAUNCH = "import sys; sys.path.insert(0, sys.argv[1]); from gui.launcher import main; sys.exit(main([]))"


def stub_folder(parent: Path, name: str, body: str, dmidecode: str) -> Path:
    folder = parent / name
    folder.mkdir()
    for tool, text in (("nvidia-smi", body), ("dmidecode", dmidecode)):
        script = folder / tool
        script.write_text(text)
        script.chmod(0o755)
    return folder


def detection_seconds(runs: int, path: str | None) -> tuple[float, str]:
    before = os.environ.get("PATH", "")
    times, summary = [], ""
    try:
        if path is not None:
            os.environ["PATH"] = path
        for _ in range(runs):
            started = time.monotonic()
            found = detect_local_gpus()
            times.append(time.monotonic() - started)
            summary = found.summary + "".join(f"; {note}" for note in found.notes)
            if found.host is not None:
                summary += f" | {found.host.label}" + "".join(f"; {note}" for note in found.host.notes)
    finally:
        os.environ["PATH"] = before
    return statistics.median(times), summary


def first_paint_seconds(tree: Path, stubs: Path) -> float:
    with tempfile.TemporaryDirectory() as settings:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", VRAMPLAN_EXIT_AFTER_PAINT="1")
        env["PATH"] = f"{stubs}{os.pathsep}{env.get('PATH', '')}"
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME"):
            env[name] = settings
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", LAUNCH, str(tree)], env=env, cwd=tree, capture_output=True, text=True, timeout=120
        )
    for line in done.stdout.splitlines():
        if line.startswith("first-paint "):
            return float(line.split()[1]) - started
    raise RuntimeError(f"{tree}: no first-paint line (exit {done.returncode}): {done.stderr.strip()[-400:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--base", type=Path, help="another source tree to compare the first paint with")
    args = parser.parse_args()
    runs = max(3, min(args.runs, 50))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as folder:
        answers = stub_folder(Path(folder), "answers", ANSWERS, DMIDECODE)
        hangs = stub_folder(Path(folder), "hangs", HANGS, HANGS)
        cases = (("this machine", None), ("stub that answers", str(answers)), ("stub that hangs", str(hangs)))
        for label, path in cases:
            median, summary = detection_seconds(runs if label != "stub that hangs" else 3, path)
            print(f"detection, {label:<18} median {median:6.3f} s   {summary}")
        trees = {"this tree": ROOT, **({"base": args.base.resolve()} if args.base else {})}
        for tree in trees.values():
            first_paint_seconds(tree, hangs)  # warm-up: page cache, font cache
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():
                times[name].append(first_paint_seconds(tree, hangs))
    for name, values in times.items():
        print(
            f"first paint from source, {name:<9} median {statistics.median(values):6.3f} s "
            f"(min {min(values):.3f}, max {max(values):.3f}, {runs} runs, hanging nvidia-smi on PATH)"
        )
    if args.base:
        ratio = statistics.median(times["this tree"]) / statistics.median(times["base"])
        print(f"ratio this tree / base: {ratio:.3f}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Start-up of two frozen builds and the bare window, run by run in turn (one round: each once).

    .venv-dist/bin/python benchmarks/startup_interleaved.py --other /path/to/older/dist/vramplan/vramplan [--rounds 25]

benchmarks/startup.py times this build against the bare window; on a VM whose speed drifts
within minutes, comparing two builds needs their runs interleaved: this script runs the
build in dist/, another build (``--other``, e.g. one made from an older commit in a worktree)
and the bare window in turn, each round after a discarded warm-up round, and reports each
one's median wall and CPU time to its first paint and its ratio to the bare window (of the
medians, and per round with the quartiles). Same probe as benchmarks/startup.py
(VRAMPLAN_EXIT_AFTER_PAINT=1, offscreen, a fresh settings folder per run).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import app_executable, ensure_bare  # noqa: E402


def first_paint(exe: Path) -> tuple[float, float]:
    """Wall and CPU seconds from the spawn to the first paint."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", VRAMPLAN_EXIT_AFTER_PAINT="1")
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA"):
            env[name] = folder
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=120, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stamps = [float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("first-paint ")]
    if not stamps:
        raise RuntimeError(f"{exe} printed no first-paint line (exit {done.returncode})")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return stamps[0] - started, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, required=True, help="another build's executable")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    exes = {"this": app_executable(), "other": args.other, "bare": ensure_bare(rebuild=False)}
    for name, exe in exes.items():
        if not exe.exists():
            print(f"no executable for {name}: {exe}", file=sys.stderr)
            return 2
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in exes}
    for round_ in range(args.rounds + 1):
        for name, exe in exes.items():
            measured = first_paint(exe)
            if round_:  # the first round warms the file cache
                runs[name].append(measured)
    median = statistics.median
    bare_wall, bare_cpu = median(w for w, _ in runs["bare"]), median(c for _, c in runs["bare"])
    print(f"{args.rounds} interleaved rounds, load average {os.getloadavg()[0]:.2f}")
    for name in exes:
        wall, cpu = median(w for w, _ in runs[name]), median(c for _, c in runs[name])
        line = f"  {name:6} wall {wall:.3f} s  CPU {cpu:.3f} s"
        if name != "bare":
            paired = [w / b for (w, _), (b, _) in zip(runs[name], runs["bare"], strict=True)]
            q1, _, q3 = statistics.quantiles(paired, n=4)
            line += f"  / bare: wall {wall / bare_wall:.2f} x, CPU {cpu / bare_cpu:.2f} x"
            line += f", per round {median(paired):.2f} x (quartiles {q1:.2f}-{q3:.2f})"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

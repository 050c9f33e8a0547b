"""Bundle size and start-up time of the frozen app, beside a bare PySide6 + pyqtgraph
window frozen the same way (packaging/bare_window.py, packaging/bare.spec).

    make dist bench-startup        # or: .venv-dist/bin/python benchmarks/startup.py [--runs 7]

Start-up is the time from spawning the process to its first painted window: each binary
runs with VRAMPLAN_EXIT_AFTER_PAINT=1, prints ``first-paint <time.monotonic()>`` after
its first paint pass and exits (gui/launcher.py, packaging/bare_window.py). Runs are
offscreen (QT_QPA_PLATFORM=offscreen) with a fresh settings folder, alternate between
the two binaries, start with one discarded warm-up each, and report the median.
Each run's CPU time (user + system, from the child's resource usage) is reported beside the
wall time: on a loaded machine the wall time measures the scheduler as much as the app, while
the CPU-time ratio stays steady (seen: wall 1.66 x, CPU 1.38 x at load 6.7 on 2 cores).
Targets (issue 25): start <= 1.5 x the bare window, the release download <= 65 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))
import bundle  # noqa: E402

DIST = ROOT / "dist"
DOWNLOAD_TARGET_MB = 65.0  # issue 25: the release archive a user downloads
RATIO_TARGET = 1.5


def executable(folder: Path, name: str) -> Path:
    return folder / (name + (".exe" if sys.platform == "win32" else ""))


def app_folder() -> Path:
    if sys.platform == "darwin":
        return DIST / f"{bundle.DISPLAY_NAME}.app" / "Contents"
    return DIST / bundle.project().name


def app_executable() -> Path:
    if sys.platform == "darwin":
        return app_folder() / "MacOS" / bundle.project().name
    return executable(app_folder(), bundle.project().name)


def ensure_bare(rebuild: bool) -> Path:
    exe = executable(DIST / "bare", "bare")
    sources = [ROOT / "packaging" / name for name in ("bare_window.py", "bare.spec", "bundle.py")]
    stale = not exe.exists() or any(s.stat().st_mtime > exe.stat().st_mtime for s in sources)
    if rebuild or stale:
        build = [sys.executable, str(ROOT / "packaging" / "build.py"), "--spec", str(ROOT / "packaging" / "bare.spec")]
        subprocess.run([*build, "--no-archive"], check=True, cwd=ROOT)
    return exe


def children_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def first_paint_seconds(exe: Path, settings: Path) -> tuple[float, float]:
    """Wall seconds to the first paint and the CPU seconds the process used by then."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", VRAMPLAN_EXIT_AFTER_PAINT="1")
    # No saved session, no autosave to offer: every run starts the same way.
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA"):
        env[name] = str(settings)
    cpu_before = children_cpu_seconds()
    started = time.monotonic()
    done = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=120, check=False)
    cpu = children_cpu_seconds() - cpu_before
    for line in done.stdout.splitlines():
        if line.startswith("first-paint "):
            return float(line.split()[1]) - started, cpu
    raise RuntimeError(f"{exe} printed no first-paint line (exit {done.returncode}): {done.stderr.strip()[:400]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="measured runs per binary (default 7, at least 5)")
    parser.add_argument("--rebuild-bare", action="store_true")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "bench" / "startup.json")
    args = parser.parse_args()
    runs = max(5, args.runs)

    app = app_executable()
    if not app.exists():
        print(f"no app bundle at {app.relative_to(ROOT)}: run `make dist` first", file=sys.stderr)
        return 2
    bare = ensure_bare(args.rebuild_bare)
    binaries = {"vramplan": app, "bare": bare}
    sizes_mb = {
        "vramplan": bundle.folder_size_bytes(app_folder()) / 1e6,
        "bare": bundle.folder_size_bytes(bare.parent) / 1e6,
    }
    times: dict[str, list[float]] = {name: [] for name in binaries}
    cpu: dict[str, list[float]] = {name: [] for name in binaries}
    with tempfile.TemporaryDirectory() as settings:
        for exe in binaries.values():  # warm-up: page cache, font cache
            first_paint_seconds(exe, Path(settings))
        for _ in range(runs):
            for name, exe in binaries.items():
                wall, used = first_paint_seconds(exe, Path(settings))
                times[name].append(wall)
                cpu[name].append(used)

    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["vramplan"] / medians["bare"]
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    cpu_ratio = cpu_medians["vramplan"] / cpu_medians["bare"]
    archives = sorted(DIST.glob(f"{bundle.project().name}-*-{bundle.platform_tag()}.*"))
    download_mb = archives[-1].stat().st_size / 1e6 if archives else None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"start-up to first paint, median of {runs} runs (offscreen, {bundle.platform_tag()}, {os.cpu_count()} CPUs)")
    print(f"  load average {load:.2f}")
    print(f"  {'':10} {'size MB':>8} {'median s':>9} {'min s':>7} {'max s':>7} {'CPU s':>7}")
    for name in binaries:
        values = times[name]
        print(
            f"  {name:10} {sizes_mb[name]:8.1f} {medians[name]:9.3f} {min(values):7.3f} {max(values):7.3f}"
            f" {cpu_medians[name]:7.3f}"
        )
    ratio_verdict = "ok" if ratio <= RATIO_TARGET else "OVER"
    cpu_verdict = "ok" if cpu_ratio <= RATIO_TARGET else "OVER"
    print(
        f"  ratio vramplan / bare: {ratio:.2f} wall (target <= {RATIO_TARGET}: {ratio_verdict}),"
        f" {cpu_ratio:.2f} CPU ({cpu_verdict})"
    )
    if download_mb is None:
        print("  download: no release archive in dist/ (make dist builds it)")
    else:
        verdict = "ok" if download_mb <= DOWNLOAD_TARGET_MB else "OVER"
        target = f"target <= {DOWNLOAD_TARGET_MB:.0f} MB: {verdict}"
        print(f"  download {archives[-1].name}: {download_mb:.1f} MB ({target})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "platform": bundle.platform_tag(),
                "runs": runs,
                "size_mb": sizes_mb,
                "first_paint_s": times,
                "median_s": medians,
                "ratio": ratio,
                "cpu_s": cpu,
                "cpu_ratio": cpu_ratio,
                "download_mb": download_mb,
                "load_average": load,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build the standalone binary for this OS, check it, and pack the release archive.

    python packaging/build.py              # one folder  (make dist)
    python packaging/build.py --onefile    # one file    (make dist-onefile)
    python packaging/build.py --spec packaging/bare.spec --no-archive   # the benchmark baseline

Outputs, under dist/:
  Linux    vramplan/ (one folder) and vramplan-<version>-linux-<arch>.tar.gz
  Windows  vramplan/ and vramplan-<version>-windows-<arch>.zip
  macOS    VRAM Planner.app and vramplan-<version>-macos-<arch>.zip
  --onefile: onefile/vramplan[.exe] (Linux, Windows; macOS apps are one folder)

Fails when the bundle holds anything packaging/bundle.py FORBIDDEN_IN_BUNDLE names, or
when core.__version__ disagrees with pyproject.toml.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bundle

ROOT = bundle.ROOT
DIST = ROOT / "dist"
WORK = ROOT / "build" / "pyinstaller"


def say(text: str) -> None:
    print(f"[dist] {text}", flush=True)


def check_versions(meta: bundle.Project) -> None:
    sys.path.insert(0, str(ROOT))
    from core import __version__

    if __version__ != meta.version:
        raise SystemExit(f"core.__version__ is {__version__} but pyproject.toml says {meta.version}")


def run_pyinstaller(spec: Path, onefile: bool) -> None:
    # The one-file build goes to its own folder: dist/vramplan is the one-folder build's.
    distpath = DIST / "onefile" if onefile else DIST
    workpath = WORK / (spec.stem + ("-onefile" if onefile else ""))
    command = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN"]
    command += ["--distpath", str(distpath), "--workpath", str(workpath), str(spec)]
    if onefile:
        command += ["--", "--onefile"]
    say(" ".join(command))
    subprocess.run(command, check=True, cwd=ROOT)


def output_folder(meta: bundle.Project, spec: Path) -> Path:
    """The one-folder build (inside the .app on macOS)."""
    name = meta.name if spec.stem == "vramplan" else spec.stem
    if sys.platform == "darwin" and spec.stem == "vramplan":
        return DIST / f"{bundle.DISPLAY_NAME}.app"
    return DIST / name


def linux_tarball(meta: bundle.Project, folder: Path) -> Path:
    top = f"{meta.name}-{meta.version}"
    target = DIST / f"{top}-{bundle.platform_tag()}.tar.gz"
    extras = {
        "vramplan.desktop": ROOT / "resources" / "vramplan.desktop",
        "vramplan.svg": ROOT / "resources" / "icons" / "app" / "vramplan.svg",
        "vramplan.png": ROOT / "resources" / "icons" / "app" / "vramplan-256.png",
        "install.sh": ROOT / "packaging" / "linux" / "install.sh",
    }
    # Level 9: 0.32 MB smaller than 6, written in 50 s instead of 14 s (2 shared cores, 2026-12-07).
    with tarfile.open(target, "w:gz", compresslevel=9) as archive:
        archive.add(folder, arcname=f"{top}/{meta.name}")
        for name, source in extras.items():
            archive.add(source, arcname=f"{top}/{name}")
    return target


def zip_archive(meta: bundle.Project, folder: Path) -> Path:
    target = DIST / f"{meta.name}-{meta.version}-{bundle.platform_tag()}.zip"
    target.unlink(missing_ok=True)
    if sys.platform == "darwin":
        # ditto keeps the symlinks and extended attributes an .app needs; zipfile does not.
        subprocess.run(["ditto", "-c", "-k", "--keepParent", str(folder), str(target)], check=True)
    else:
        shutil.make_archive(str(target.with_suffix("")), "zip", root_dir=folder.parent, base_dir=folder.name)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--onefile", action="store_true", help="one self-extracting executable")
    parser.add_argument("--spec", default=str(ROOT / "packaging" / "vramplan.spec"))
    parser.add_argument("--no-archive", action="store_true", help="skip the release archive")
    args = parser.parse_args()
    onefile = args.onefile or os.environ.get("VRAMPLAN_ONEFILE") == "1"
    spec = Path(args.spec).resolve()

    meta = bundle.project()
    check_versions(meta)
    started = time.monotonic()
    run_pyinstaller(spec, onefile)
    built = time.monotonic() - started

    if onefile:
        exe = DIST / "onefile" / (meta.name + (".exe" if sys.platform == "win32" else ""))
        say(f"{exe.relative_to(ROOT)}: {exe.stat().st_size / 1e6:.1f} MB, built in {built:.0f} s")
        return 0

    folder = output_folder(meta, spec)
    forbidden = bundle.forbidden_files(folder)
    if forbidden:
        for name in forbidden:
            say(f"must not be bundled: {name}")
        return 1
    leftovers = bundle.icu_leftovers(folder)
    if leftovers:
        say(f"ICU data no Qt call reads is still bundled ({len(leftovers)} items, e.g. {leftovers[0]}):")
        say("packaging/icudata.py rebuilds libicudata with the C compiler driver 'cc'; install one (gcc, clang)")
        return 1
    size_mb = bundle.folder_size_bytes(folder) / 1e6
    files = len(bundle.bundle_files(folder))
    say(f"{folder.relative_to(ROOT)}: {size_mb:.1f} MB in {files} files, built in {built:.0f} s")
    if args.no_archive:
        return 0
    archive = linux_tarball(meta, folder) if sys.platform.startswith("linux") else zip_archive(meta, folder)
    say(f"{archive.relative_to(ROOT)}: {archive.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

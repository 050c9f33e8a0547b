"""packaging/bundle.py's rules for what a built bundle must not hold, checked on the paths a
PyInstaller one-folder build really has (a Linux build of 2026-12-07: PySide6 6.11.3, numpy
2.4.6) and, where `make dist` has run, on the bundle itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import bundle  # noqa: E402

# Files the build of b825918d shipped and the app never loads (ls dist/vramplan/_internal).
LEFT_OUT = [
    "_internal/numpy/random/mtrand.cpython-311-x86_64-linux-gnu.so",
    "_internal/numpy/random/_generator.cpython-311-x86_64-linux-gnu.so",
    "_internal/numpy/fft/_pocketfft_umath.cpython-311-x86_64-linux-gnu.so",
    "_internal/numpy/_core/_multiarray_tests.cpython-311-x86_64-linux-gnu.so",
    "_internal/PySide6/Qt/translations/qtbase_de.qm",
    "_internal/PySide6/Qt/lib/libQt6Network.so.6",
]
# Files of the same build the app needs: the rules must leave them alone.
NEEDED = [
    "_internal/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
    "_internal/numpy/linalg/_umath_linalg.cpython-311-x86_64-linux-gnu.so",
    "_internal/numpy.libs/libscipy_openblas64_-32a4b2a6.so",
    "_internal/PySide6/Qt/lib/libicudata.so.73",
    "_internal/PySide6/Qt/lib/libQt6Core.so.6",
    "_internal/PySide6/Qt/plugins/platforms/libqxcb.so",
    "_internal/PySide6/Qt/plugins/platforms/libqoffscreen.so",
    "_internal/PySide6/Qt/plugins/imageformats/libqsvg.so",
]


def _plant(folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")


def test_what_was_left_out_is_caught_if_it_comes_back(tmp_path: Path) -> None:
    _plant(tmp_path, LEFT_OUT + NEEDED)
    assert bundle.forbidden_files(tmp_path) == sorted(LEFT_OUT)


def test_the_numpy_parts_left_out_are_excluded_modules_too() -> None:
    for module in ("numpy.random", "numpy.fft", "numpy._core._multiarray_tests"):
        assert module in bundle.EXCLUDED_MODULES


def test_the_last_built_bundle_holds_nothing_forbidden() -> None:
    folder = ROOT / "dist" / bundle.project().name
    if sys.platform == "darwin":
        folder = ROOT / "dist" / f"{bundle.DISPLAY_NAME}.app"
    if not folder.is_dir():
        pytest.skip("no bundle built here (make dist)")
    assert bundle.forbidden_files(folder) == []
    assert bundle.icu_leftovers(folder) == []

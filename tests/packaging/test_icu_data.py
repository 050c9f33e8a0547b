"""packaging/icudata.py: Qt's ICU data library rebuilt without the items no Qt call reads.

The package format is ICU's common data (icu4c/source/common/ucmndata.h at release-73-2);
the real library is the one PySide6's Linux wheel ships (PySide6/Qt/lib/libicudata.so.73
in PySide6 6.11), so these tests follow whatever PySide6 the venv holds.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import bundle  # noqa: E402
import icudata  # noqa: E402

PROBE = Path(__file__).with_name("icu_probe.py")


def _package(names: list[str]) -> icudata.Package:
    """A package like ICU's: a 32-byte header, items of odd sizes. The header's fields are
    MappedData {headerSize, magic 0xda 0x27} and UDataInfo {size 20, reserved, little-endian,
    ASCII, sizeof(UChar) 2, reserved, dataFormat 'CmnD', ...} (icu4c common/ucmndata.h and
    unicode/udata.h, release-73-2)."""
    header = struct.pack("<HBB", 32, 0xDA, 0x27) + struct.pack("<HHBBBB", 20, 0, 0, 0, 2, 0) + b"CmnD"
    header += bytes([1, 0, 0, 0, 73, 0, 0, 0]) + b"\xaa" * 8  # format 1.0, data version 73; padding
    items = {f"icudt73l/{name}": f"<{name}>".encode() * (i + 1) for i, name in enumerate(names)}
    return icudata.Package(header, items)


def test_a_written_package_reads_back_with_sorted_names_and_aligned_items() -> None:
    package = _package(["zone/de.res", "brkitr/word.brk", "coll/root.res", "unames.icu", "af.res"])
    blob = icudata.write_package(package)
    back = icudata.read_package(blob)
    assert back.header == package.header
    assert sorted(back.items) == sorted(package.items) == list(back.items)  # ICU's lookup is a binary search
    for name, data in package.items.items():
        assert back.items[name].rstrip(b"\xaa") == data  # each item padded to 16 bytes, as ICU pads
    count = struct.unpack_from("<I", blob, 32)[0]
    offsets = [struct.unpack_from("<II", blob, 32 + 4 + 8 * i)[1] for i in range(count)]
    assert all(offset % 16 == 0 for offset in offsets)  # ucmndata.h: items are 16-byte aligned


def test_only_the_named_items_are_dropped() -> None:
    package = _package(["brkitr/word.brk", "coll/root.res", "unames.icu", "zone/de.res", "ibm-37_P100-1995.cnv"])
    assert icudata.unused_items(package) == ["brkitr/word.brk", "unames.icu"]
    kept = icudata.without_unused(package)
    assert sorted(kept.items) == ["icudt73l/coll/root.res", "icudt73l/ibm-37_P100-1995.cnv", "icudt73l/zone/de.res"]
    assert all(kept.items[name] == package.items[name] for name in kept.items)


def test_something_else_is_refused() -> None:
    with pytest.raises(ValueError, match="not an ICU common data package"):
        icudata.read_package(b"\x20\x00PK" + bytes(40))


def _pyside_icudata() -> Path:
    if not sys.platform.startswith("linux"):
        pytest.skip("PySide6 bundles ICU on Linux only (Windows uses the system's, macOS none)")
    spec = importlib.util.find_spec("PySide6")
    if spec is None or spec.origin is None:
        pytest.skip("PySide6 is not installed")
    found = sorted((Path(spec.origin).parent / "Qt" / "lib").glob("libicudata.so.*"))
    if not found:
        pytest.skip("this PySide6 has no libicudata")
    return found[0]


def test_pyside_icu_data_reads_and_writes_back_byte_for_byte() -> None:
    library = _pyside_icudata()
    data = library.read_bytes()
    symbol, offset, size = icudata._elf_symbol(data, r"icudt\d+_dat")
    _name, package = icudata.package_from_library(library)
    # PySide6 6.11.3's ICU 73 package holds 3921 items (icupkg -l)
    assert symbol.startswith("icudt") and len(package.items) > 1000
    assert icudata.write_package(package) == data[offset : offset + size]


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    library = _pyside_icudata()
    if icudata.compiler() is None:
        pytest.skip("no C compiler driver to link the trimmed library")
    built = icudata.trimmed_library(library, tmp_path_factory.mktemp("icu"))
    assert built is not None
    return library, built


def test_the_trimmed_library_keeps_every_other_item_unchanged(trimmed: tuple[Path, Path]) -> None:
    library, built = trimmed
    symbol, full = icudata.package_from_library(library)
    built_symbol, kept = icudata.package_from_library(built)
    assert built_symbol == symbol and icudata.soname(built) == icudata.soname(library)
    assert icudata.unused_items(kept) == []
    assert set(kept.items) == set(full.items) - {full.prefix + n for n in icudata.unused_items(full)}
    assert all(kept.items[name] == full.items[name] for name in kept.items)
    # What it saves (PySide6 6.11, ICU 73: 32.0 MB -> 16.0 MB, measured by make dist on 2026-12-07)
    assert built.stat().st_size < 0.55 * library.stat().st_size
    assert bundle.icu_leftovers(built.parent) == []


def _probe(preload: Path | None) -> list[str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("LD_PRELOAD", None)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    done = subprocess.run(
        [sys.executable, str(PROBE)], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.splitlines()


def test_qt_gets_the_same_answers_from_the_trimmed_data(trimmed: tuple[Path, Path]) -> None:
    _library, built = trimmed
    full, cut = _probe(None), _probe(built)
    assert full == cut
    assert full[-1] == "('messages', [])"  # no collator failed to open
    assert any(line.startswith("('sv_SE'") for line in full)


def test_the_probe_notices_missing_data(tmp_path: Path, trimmed: tuple[Path, Path]) -> None:
    """The same probe against a library with no data at all: Qt warns and answers differ, so
    the equality above means something."""
    library, _built = trimmed
    symbol, full = icudata.package_from_library(library)
    stub = icudata.link_library(icudata.Package(full.header, {}), symbol, tmp_path / icudata.soname(library))
    lines = _probe(stub)
    assert lines != _probe(None)
    assert "Could not create collator" in lines[-1]


def test_without_a_compiler_the_library_is_kept_and_the_build_check_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = _pyside_icudata()
    monkeypatch.setattr(icudata, "compiler", lambda: None)
    toc = [(f"PySide6/Qt/lib/{library.name}", str(library), "BINARY")]
    assert bundle.trim_icu_data(toc, tmp_path) == toc  # the original, untouched
    (tmp_path / "_internal").mkdir()
    shutil.copy(library, tmp_path / "_internal" / library.name)
    leftovers = bundle.icu_leftovers(tmp_path)  # build.py then fails the build
    assert any(item.endswith("brkitr/word.brk") for item in leftovers)  # the word break rules, ICU 73's brkitr/

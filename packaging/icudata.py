"""Qt's ICU data library without the data no Qt call of ours can read (Linux).

PySide6's Qt6Core links ICU (libicuuc, libicui18n, libicudata). libicudata.so.NN is nothing
but one read-only symbol, ``icudtNN_dat``: ICU's whole data package, 32 MB for ICU 73 (PySide6
6.11), 12.4 MB of the 64.9 MB tar.gz. Qt6Core calls only four ICU services (its undefined ICU
symbols, ``nm -D --undefined-only libQt6Core.so.6``): ``ucol_*`` (QCollator), ``ucal_*``
(QTimeZone display names), ``ucnv_*`` (QStringConverter for non-Unicode encodings) and
``u_strToUpper`` / ``u_strToLower`` (QLocale::toUpper / toLower). No other Qt library of
the bundle links ICU. Items that serve ICU APIs none of those reach (ICU_UNUSED_ITEMS) are
dropped: the package is rewritten without them and linked into a new libicudata with the
same soname and symbol. Everything those four services read stays: collation, time-zone
names, locale data, calendars, numbering systems, every converter.

The package format (ICU's common data, icu4c/source/common/ucmndata.h at release-73-2):
a header (MappedData + UDataInfo, dataFormat "CmnD", headerSize bytes), then the table of
contents: uint32 count, count x {uint32 nameOffset, uint32 dataOffset} sorted by name
(ICU looks items up by binary search), the names, and the items, each 16-byte aligned;
offsets count from the start of the table of contents. Standard library only.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Items of the package ('brkitr/word.brk', 'unames.icu', ...: the name after the
# 'icudtNNl/' prefix) that only ICU APIs Qt never calls read.
ICU_UNUSED_ITEMS: tuple[str, ...] = (
    "brkitr/*",  # break iterators and their CJK / Thai dictionaries: ubrk_*, u_strToTitle
    "lang/*",  # language display names: uldn_* / LocaleDisplayNames
    "region/*",  # region display names: LocaleDisplayNames, and the time zones' generic location
    # names, a style Qt never asks for: its ucal_getTimeZoneDisplayName calls take UCAL_STANDARD,
    # UCAL_SHORT_STANDARD, UCAL_DST or UCAL_SHORT_DST only, specific names or the GMT format
    # (qtbase src/corelib/time/qtimezoneprivate_icu.cpp, ucalDisplayNameType)
    "curr/*", "currencyNumericCodes.res",  # currency names and codes: ucurr_*, currency formats
    "unit/*", "units.res",  # unit display names and conversion: MeasureFormat, unumf units
    "translit/*",  # transliterators: utrans_*
    "rbnf/*",  # spelled-out numbers: RuleBasedNumberFormat
    "unames.icu",  # Unicode character names: u_charName
    "*.spp",  # StringPrep profiles: usprep_*
    "uts46.nrm",  # IDNA mapping: uidna_* (Qt has its own IDNA, qurlidna.cpp)
    "confusables.cfu",  # spoof checks: uspoof_*
    "langInfo.res",  # locale matching distances: LocaleMatcher
)  # fmt: skip

_MAGIC = b"\xda\x27"
_ALIGN = 16
_PAD = b"\xaa"  # what ICU's own packager pads with: a package read and written back is byte-identical


@dataclass(frozen=True)
class Package:
    header: bytes  # the MappedData + UDataInfo header, copied as it is
    items: dict[str, bytes]  # full item name ('icudt73l/brkitr/word.brk') -> its bytes

    @property
    def prefix(self) -> str:
        """'icudt73l/': the package name every item's name starts with."""
        first = next(iter(self.items), "")
        return first.split("/", 1)[0] + "/"


def read_package(blob: bytes) -> Package:
    header_size = struct.unpack_from("<H", blob, 0)[0]
    if blob[2:4] != _MAGIC or blob[12:16] != b"CmnD":
        raise ValueError("not an ICU common data package (no 0xda27 magic / 'CmnD' format)")
    if blob[8] != 0:  # UDataInfo.isBigEndian
        raise ValueError("big-endian ICU data is not handled")
    toc = blob[header_size:]
    count = struct.unpack_from("<I", toc, 0)[0]
    entries = []
    for i in range(count):
        name_offset, data_offset = struct.unpack_from("<II", toc, 4 + 8 * i)
        name = toc[name_offset : toc.index(b"\0", name_offset)].decode("ascii")
        entries.append((name, data_offset))
    # An item runs to the next item's start (or the package's end); padding included.
    starts = sorted({offset for _name, offset in entries} | {len(toc)})
    ends = dict(itertools.pairwise(starts))
    items = {name: bytes(toc[offset : ends[offset]]) for name, offset in entries}
    return Package(header=bytes(blob[:header_size]), items=items)


def write_package(package: Package) -> bytes:
    names = sorted(package.items)  # byte order, as ICU's binary search expects
    name_bytes = [n.encode("ascii") + b"\0" for n in names]
    table_size = 4 + 8 * len(names)
    name_offsets = []
    position = table_size
    for encoded in name_bytes:
        name_offsets.append(position)
        position += len(encoded)
    position = -(-position // _ALIGN) * _ALIGN
    data_offsets = []
    for name in names:
        data_offsets.append(position)
        position += -(-len(package.items[name]) // _ALIGN) * _ALIGN
    out = bytearray(package.header)
    out += struct.pack("<I", len(names))
    for name_offset, data_offset in zip(name_offsets, data_offsets, strict=True):
        out += struct.pack("<II", name_offset, data_offset)
    for encoded in name_bytes:
        out += encoded
    for name, offset in zip(names, data_offsets, strict=True):
        out += _PAD * (len(package.header) + offset - len(out))
        out += package.items[name]
    out += _PAD * (-len(out) % _ALIGN)
    return bytes(out)


def unused_items(package: Package) -> list[str]:
    """Names (without the package prefix) of the items ICU_UNUSED_ITEMS names."""
    short = [name.removeprefix(package.prefix) for name in package.items]
    return [name for name in short if any(fnmatch.fnmatchcase(name, p) for p in ICU_UNUSED_ITEMS)]


def without_unused(package: Package) -> Package:
    drop = {package.prefix + name for name in unused_items(package)}
    return Package(package.header, {n: b for n, b in package.items.items() if n not in drop})


# ---- the shared library -----------------------------------------------------------------


def _elf_symbol(data: bytes, pattern: str) -> tuple[str, int, int]:
    """(name, file offset, size) of the one dynamic symbol whose name matches pattern
    (64-bit little-endian ELF: the only kind PySide6's Linux wheels ship)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 11:  # SHT_DYNSYM
            continue
        strtab = sections[link]
        for at in range(offset, offset + size, entsize):
            st_name, _st_info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, at)
            start = strtab[4] + st_name
            name = data[start : data.index(b"\0", start)].decode("ascii")
            if st_shndx and re.fullmatch(pattern, name):
                home = sections[st_shndx]  # addr -> file offset through the symbol's section
                return name, st_value - home[3] + home[4], st_size
    raise ValueError(f"no dynamic symbol matching {pattern}")


def package_from_library(library: Path) -> tuple[str, Package]:
    data = library.read_bytes()
    symbol, offset, size = _elf_symbol(data, r"icudt\d+_dat")
    return symbol, read_package(data[offset : offset + size])


def soname(library: Path) -> str:
    """'libicudata.so.73' from 'libicudata.so.73' or 'libicudata.so.73.2'."""
    match = re.match(r"(lib[^.]+\.so\.\d+)", library.name)
    return match.group(1) if match else library.name


_ASSEMBLY = """\
    .section .rodata
    .balign 16
    .globl {symbol}
    .type {symbol}, @object
{symbol}:
    .incbin "{package}"
    .size {symbol}, . - {symbol}
    .section .note.GNU-stack,"",@progbits
"""


def compiler() -> str | None:
    """The system's C compiler driver: it assembles and links the library; nothing is compiled."""
    return shutil.which("cc") or shutil.which("gcc")


def link_library(package: Package, symbol: str, target: Path) -> Path:
    """A shared library named and soname'd target.name whose one symbol is the package."""
    driver = compiler()
    if driver is None:
        raise FileNotFoundError("no C compiler driver (cc, gcc) to link a library with")
    target.parent.mkdir(parents=True, exist_ok=True)
    dat = target.with_name(symbol.removesuffix("_dat") + ".dat")  # icudt73.dat
    dat.write_bytes(write_package(package))
    assembly = dat.with_suffix(".S")
    assembly.write_text(_ASSEMBLY.format(symbol=symbol, package=dat.as_posix()), encoding="ascii")
    link = [driver, "-shared", "-nostdlib", f"-Wl,-soname,{target.name}", "-o", str(target), str(assembly)]
    subprocess.run(link, check=True)
    return target


def trimmed_library(library: Path, workdir: Path) -> Path | None:
    """libicudata without ICU_UNUSED_ITEMS, built under workdir/icu/. None where there is no
    C compiler driver: the caller keeps the original, and build.py's check fails the build."""
    if compiler() is None:
        return None
    symbol, package = package_from_library(library)
    return link_library(without_unused(package), symbol, workdir / "icu" / soname(library))

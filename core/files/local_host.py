"""This machine's host memory: how much RAM it has, and how fast its CPUs can read it.

The two figures a plan otherwise takes typed: ``parallel.host_ram_gb`` (what llama.cpp and the
offloads keep in host RAM is judged against it) and ``inference.host_bandwidth_gb_s`` (what
llama.cpp's decode reads the host-kept weights at, core/serving/speed.py).

Where each figure comes from:

- RAM: Linux's ``/proc/meminfo`` MemTotal (and MemAvailable, "free now"); macOS's ``sysctl -n
  hw.memsize`` (the query GPU detection already runs, core/files/local_gpus.py); Windows'
  ``GlobalMemoryStatusEx`` (kernel32, ullTotalPhys / ullAvailPhys), else the modules' capacities.
  What the operating system manages, a little under what is installed (firmware and the kernel
  keep some), is what a process can be given.
- Speed, Linux: the SMBIOS type-17 "Memory Device" records of the DMTF SMBIOS Reference
  Specification (DSP0134 3.7.0, section 7.18), read from ``/sys/firmware/dmi/entries/17-*/raw``
  (root only on most systems), else the copy udev's ``dmi_memory_id`` builtin (systemd 248+,
  rules.d/70-memory.rules) keeps world-readable in ``/run/udev/data/+dmi:id``
  (``MEMORY_DEVICE_<n>_CONFIGURED_SPEED_MTS`` ...), else ``dmidecode -t 17`` (root only too).
- Speed, Windows: ``Win32_PhysicalMemory`` through PowerShell's ``Get-CimInstance`` (the same
  SMBIOS records as the firmware gives them: ConfiguredClockSpeed in MT/s, DataWidth in bits).
- Speed, Apple silicon: Apple's published unified-memory bandwidth for the chip ``sysctl`` names:
  the GPU catalogue's Apple entries (resources/gpus.json, ``memory_bandwidth_gb_s``, one home)
  and :data:`APPLE_OTHER_GB_S` for the chips and variants the catalogue has no entry for.

The speed rule (the peak a CPU can stream, as JEDEC rates it): channels × data width / 8 ×
transfers per second. The controller runs every module at one speed, the slowest module's
configured one. A channel is what the slot labels name ("P0 CHANNEL A", "Controller0-ChannelA-
DIMM1", "DIMM_B2", "P0_Node0_Channel1_Dimm0") when every populated slot names one; else each
populated module is a channel of its own — right on the usual desktop (one module per channel)
and on a server with one module per channel, twice the truth for a board with two modules in
each channel whose labels name no channel. A DDR5 module is one 64-bit channel here (its two
32-bit subchannels together), as its record's data width says. Sockets add up, which is the
peak of the whole node; one process reading across sockets sees less.

Nothing here raises: an unreadable source is one note, and the typed figure stays.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

from core.catalogue import load_gpus
from core.errors import escape_controls
from core.plan import Plan
from core.units import GB

MEMINFO: Final = "/proc/meminfo"
DMI_ENTRIES: Final = "/sys/firmware/dmi/entries"
UDEV_DMI: Final = "/run/udev/data/+dmi:id"
DMIDECODE_QUERY: Final = ("dmidecode", "-t", "17")
POWERSHELL_QUERY: Final = (
    "powershell",
    "-NoProfile",
    "-NonInteractive",
    "-Command",
    "Get-CimInstance Win32_PhysicalMemory | Select-Object Capacity,ConfiguredClockSpeed,Speed,DataWidth,"
    "BankLabel,DeviceLocator,SMBIOSMemoryType | ConvertTo-Json -Compress",
)
MAX_MODULES: Final = 256  # more slots than an eight-socket server has: the rest of a hostile listing is ignored
MAX_TEXT_BYTES: Final = 1 << 20  # a type-17 listing of MAX_MODULES is well under 1 MiB
MAX_LABEL_CHARS: Final = 64
MAX_MT_S: Final = 20_000  # above any DDR5 / LPDDR5X rate (JEDEC tops out near 9,600 MT/s today)
MAX_WIDTH_BITS: Final = 1024
MAX_MODULE_BYTES: Final = 1 << 44  # 16 TiB: SMBIOS' extended size field's own limit is 2^31 MiB
# What the plan's fields take (core/inputs.py: inference.host_bandwidth_gb_s low 1, high 10,000 GB/s).
MIN_GB_S: Final = 1.0
MAX_GB_S: Final = 10_000.0
DIMM_WIDTH_BITS: Final = 64  # a DIMM's data bus (JEDEC), assumed where a record leaves it unknown
# SMBIOS 3.7.0 (DSP0134), 7.18.2 "Memory Device — Type" values; the rest are named "other".
SMBIOS_MEMORY_TYPES: Final = {
    0x12: "DDR",
    0x13: "DDR2",
    0x18: "DDR3",
    0x1A: "DDR4",
    0x1B: "LPDDR",
    0x1C: "LPDDR2",
    0x1D: "LPDDR3",
    0x1E: "LPDDR4",
    0x20: "HBM",
    0x21: "HBM2",
    0x22: "DDR5",
    0x23: "LPDDR5",
    0x24: "HBM3",
}
# Apple's published bandwidth for the chips and variants resources/gpus.json has no entry for.
# Where one chip name has two figures (its GPU variants), the lower: sysctl's chip name does not
# say which variant this is, and a figure too high would promise a decode faster than it runs.
APPLE_OTHER_GB_S: Final = {
    # Apple, "MacBook Pro (14-inch, M3 Pro or M3 Max, Nov 2023) - Tech Specs": M3 Pro 150GB/s
    "M3 Pro": 150.0,
    # Same page: M3 Max with the 30-core GPU 300GB/s (with the 40-core GPU 400GB/s, the catalogue's)
    "M3 Max": 300.0,
    # Apple, "MacBook Pro (14-inch, M4 Pro or M4 Max, 2024) - Tech Specs": M4 Max with the 14-core CPU and
    # 32-core GPU 410GB/s (with the 16-core CPU and 40-core GPU 546GB/s, the catalogue's)
    "M4 Max": 410.0,
    # M5 (153GB/s) and M5 Pro (307GB/s): the catalogue's apple-m5-* entries.
    # M5 Max with the 32-core GPU: 460GB/s (cputronic.com's "Apple M5 Max (32-core GPU)" page; three of the
    # 40-core GPU variant's four quarters of 614GB/s, as M4 Max's 410 is of 546). The lower, as for M3 / M4 Max.
    "M5 Max": 460.0,
}
APPLE_CHIP: Final = re.compile(r"\bApple (M\d{1,2})(?: (Pro|Max|Ultra))?\b", re.IGNORECASE)


# ---- what was found --------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryModule:
    """One populated slot (or soldered device) as its SMBIOS record describes it."""

    size_bytes: int
    mt_s: int | None  # the configured speed, else the rated one (``rated``); None: not reported
    width_bits: int | None  # data width; None: not reported
    kind: str = ""  # DDR4, DDR5, LPDDR5 ...; "" where not said
    locator: str = ""
    bank: str = ""
    rated: bool = False  # mt_s is the module's rated speed: its configured one was not reported

    @property
    def channel(self) -> str | None:
        """The channel its slot labels name, or None."""
        for text in (self.locator, self.bank):
            match = re.match(r".*?CHANNEL[\s_-]*[A-Z0-9]+", text, re.IGNORECASE)
            if match:
                return match.group(0).upper()
        match = re.fullmatch(r"(.*?DIMM)[\s_-]?([A-Z])\d{0,2}", self.locator.strip(), re.IGNORECASE)
        return f"{match.group(1)}_{match.group(2)}".upper() if match else None


@dataclass(frozen=True)
class LocalHost:
    """This machine's host memory; a figure not found is None and ``notes`` say why."""

    total_bytes: int | None = None
    available_bytes: int | None = None  # "free now" (Linux MemAvailable, Windows ullAvailPhys)
    total_source: str = ""
    bandwidth_gb_s: float | None = None
    bandwidth_source: str = ""  # "dmidecode: 2 × DDR5-5600", "Apple M2 Max: Apple's published figure"
    modules: tuple[MemoryModule, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ram_gb(self) -> float | None:
        """Host RAM per node for the plan: GB to 0.1, rounded down (never more than there is)."""
        if self.total_bytes is None or self.total_bytes < GB // 10:
            return None
        return int(self.total_bytes / GB * 10) / 10

    def plan_values(self) -> dict[str, float]:
        """The plan's inputs these figures fill (``Plan.with_input`` paths), those found only."""
        values: dict[str, float] = {}
        if self.ram_gb is not None:
            values["parallel.host_ram_gb"] = self.ram_gb
        if self.bandwidth_gb_s is not None:
            # One physical figure, two uses, both defined as the peak (channels x width x transfer rate):
            # llama.cpp's reads of host-kept weights, and the CPU optimizer step of an offloaded plan
            # (core/inputs.py, inference.host_bandwidth_gb_s and parallel.host_memory_gbs).
            values["inference.host_bandwidth_gb_s"] = self.bandwidth_gb_s
            values["parallel.host_memory_gbs"] = self.bandwidth_gb_s
        return values

    def applied(self, plan: Plan) -> bool:
        """Whether ``plan`` already holds every figure found."""
        return all(plan.input_value(path) == value for path, value in self.plan_values().items())

    def apply(self, plan: Plan) -> Plan:
        """``plan`` with the figures found: Host RAM per node, Host RAM speed and Host memory bandwidth."""
        for path, value in self.plan_values().items():
            plan = plan.with_input(path, value)
        return plan

    @property
    def label(self) -> str:
        """One line: "Host RAM 67.2 GB (41.0 GB free now), 89.6 GB/s (dmidecode: 2 × DDR5-5600)"."""
        if self.ram_gb is None:
            text = "Host RAM: size not found"
        else:
            text = f"Host RAM {self.ram_gb:,.1f} GB"
            if self.available_bytes is not None:
                text += f" ({self.available_bytes / GB:,.1f} GB free now)"
        if self.bandwidth_gb_s is None:
            return text + ", speed not found"
        return f"{text}, {self.bandwidth_gb_s:,.1f} GB/s ({self.bandwidth_source})"


@dataclass
class HostFound:
    """What the readers gather; :func:`host_from` makes it a :class:`LocalHost`."""

    total: tuple[int, int | None] | None = None
    total_source: str = ""
    modules: list[MemoryModule] = field(default_factory=list)
    modules_source: str = ""
    bandwidth: tuple[float, str] | None = None  # a published figure (Apple)
    records_readable: bool | None = None  # Linux's SMBIOS records: None absent, False there but not readable
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        text = escape_controls(text)[:300]
        if text not in self.notes:
            self.notes.append(text)


def _label(text: str) -> str:
    text = escape_controls(text.strip())[:MAX_LABEL_CHARS]
    return "" if text.lower() in {"not specified", "unknown", "none", "to be filled by o.e.m."} else text


def _module(
    size: int, configured: int | None, rated: int | None, width: int | None, kind: str, locator: str, bank: str
) -> MemoryModule | None:
    """A module from its record's figures (None or 0: not reported); None for an empty or absurd slot."""
    if not 0 < size <= MAX_MODULE_BYTES:
        return None
    speeds = [s if s is not None and 0 < s <= MAX_MT_S else None for s in (configured, rated)]
    mt_s = speeds[0] or speeds[1]
    known_width = width if width is not None and 0 < width <= MAX_WIDTH_BITS else None
    return MemoryModule(
        size, mt_s, known_width, _label(kind), _label(locator), _label(bank), rated=mt_s is not None and not speeds[0]
    )


def _add(found: HostFound, module: MemoryModule | None) -> None:
    if module is not None and len(found.modules) < MAX_MODULES:
        found.modules.append(module)


# ---- RAM ---------------------------------------------------------------------------------------
def read_meminfo(path: str = MEMINFO) -> tuple[int, int | None] | None:
    """Linux's MemTotal and MemAvailable in bytes, or None where the file is absent or unreadable."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            text = handle.read(64 * 1024)
    except OSError:
        return None
    fields = dict(re.findall(r"^(MemTotal|MemAvailable):\s+(\d{1,15})\s*kB", text, re.MULTILINE))
    if "MemTotal" not in fields or int(fields["MemTotal"]) <= 0:
        return None
    available = fields.get("MemAvailable")
    return int(fields["MemTotal"]) * 1024, None if available is None else int(available) * 1024


def read_windows_memory() -> tuple[int, int | None] | None:
    """Windows' total and available physical memory (GlobalMemoryStatusEx), or None elsewhere."""
    if sys.platform != "win32":
        return None
    import ctypes

    class MemoryStatus(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    status = MemoryStatus()
    status.dwLength = ctypes.sizeof(MemoryStatus)
    try:
        if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return None
    except OSError:
        return None
    return (int(status.ullTotalPhys), int(status.ullAvailPhys)) if status.ullTotalPhys > 0 else None


# ---- SMBIOS type 17, as bytes ----------------------------------------------------------------
def _smbios_strings(record: bytes, length: int) -> list[str]:
    """The string set after the formatted area (DSP0134 6.1.3): NUL-terminated, ended by a double NUL."""
    area = record[length:].split(b"\x00\x00", 1)[0]
    return [s.decode("ascii", "replace") for s in area.split(b"\x00")] if area else []


def parse_smbios_type17(record: bytes) -> MemoryModule | None:
    """One type-17 record as ``/sys/firmware/dmi/entries/17-N/raw`` holds it (SMBIOS 3.7.0, DSP0134
    7.18: Data Width WORD at 0x0A, Size WORD at 0x0C, Device Locator / Bank Locator strings at 0x10 /
    0x11, Memory Type BYTE at 0x12, Speed WORD at 0x15, Extended Size DWORD at 0x1C, Configured Memory
    Speed WORD at 0x20, Extended Speed / Extended Configured Memory Speed DWORDs at 0x54 / 0x58).
    None for an empty slot (Size 0), a record of another type or one too short to hold a size."""
    if len(record) < 0x15 or record[0] != 17:
        return None
    length = min(record[1], len(record))
    if length < 0x15:
        return None

    def word(offset: int) -> int | None:
        return struct.unpack_from("<H", record, offset)[0] if offset + 2 <= length else None

    def dword(offset: int) -> int | None:
        return struct.unpack_from("<I", record, offset)[0] if offset + 4 <= length else None

    strings = _smbios_strings(record, length)

    def string(offset: int) -> str:
        index = record[offset] if offset < length else 0
        return strings[index - 1] if 0 < index <= len(strings) else ""

    size_word = word(0x0C) or 0
    if size_word in (0, 0xFFFF):  # 0: no device installed; 0xFFFF: size unknown
        return None
    if size_word == 0x7FFF:  # 32 GiB or more: the Extended Size, in MiB (bits 30:0)
        size = ((dword(0x1C) or 0) & 0x7FFFFFFF) << 20
    else:  # bit 15: the unit, 0 MiB / 1 KiB
        size = (size_word & 0x7FFF) << (10 if size_word & 0x8000 else 20)

    def speed(offset: int, extended: int) -> int | None:
        value = word(offset)
        return dword(extended) if value == 0xFFFF else value  # 0xFFFF: the extended field says it

    width = word(0x0A)
    kind = SMBIOS_MEMORY_TYPES.get(record[0x12], "")
    return _module(
        size, speed(0x20, 0x58), speed(0x15, 0x54), None if width == 0xFFFF else width, kind, string(0x10),
        string(0x11),
    )  # fmt: skip


def read_dmi_entries(folder: str, found: HostFound) -> bool:
    """Every ``17-*/raw`` under ``folder``; True when they could be read (with modules or none)."""
    root = Path(folder)
    try:
        entries = sorted(root.glob("17-*"), key=lambda p: int(p.name[3:]) if p.name[3:].isdigit() else 0)
    except OSError:
        return False
    if not entries:
        return False
    found.records_readable = False
    read = 0
    for entry in entries[:MAX_MODULES]:
        try:
            with open(entry / "raw", "rb") as handle:
                record = handle.read(4096)
        except OSError:
            continue
        read += 1
        _add(found, parse_smbios_type17(record))
    if read:
        found.modules_source, found.records_readable = "SMBIOS", True
    return read > 0


# ---- the same records as text: udev, dmidecode, PowerShell -----------------------------------
def _int(text: object) -> int | None:
    value = str(text).strip() if text is not None and not isinstance(text, bool) else ""
    return int(value) if re.fullmatch(r"\d{1,20}", value) else None


# The names each text source gives size, configured speed, rated speed, data width, locator and bank.
UDEV_FIELDS: Final = ("SIZE", "CONFIGURED_SPEED_MTS", "SPEED_MTS", "DATA_WIDTH", "LOCATOR", "BANK_LOCATOR")
WINDOWS_FIELDS: Final = ("Capacity", "ConfiguredClockSpeed", "Speed", "DataWidth", "DeviceLocator", "BankLabel")


def _add_row(found: HostFound, row: Mapping[str, object], names: tuple[str, ...], kind: str) -> None:
    size, configured, rated, width, locator, bank = (row.get(name) for name in names)
    numbers = [_int(value) for value in (size, configured, rated, width)]
    texts = [str(value) if isinstance(value, str) else "" for value in (locator, bank)]
    _add(found, _module(numbers[0] or 0, numbers[1], numbers[2], numbers[3], kind, texts[0], texts[1]))


def parse_udev_memory(text: str, found: HostFound) -> None:
    """udev's ``dmi_memory_id`` properties (``E:MEMORY_DEVICE_0_SIZE=17179869184`` ...): SIZE in bytes,
    DATA_WIDTH in bits, CONFIGURED_SPEED_MTS / SPEED_MTS, TYPE, LOCATOR, BANK_LOCATOR, PRESENT=0 for an
    empty slot (systemd's src/udev/udev-builtin-dmi_memory_id.c)."""
    devices: dict[int, dict[str, str]] = {}
    for match in re.finditer(r"^(?:E:)?MEMORY_DEVICE_(\d{1,4})_([A-Z_]+)=(.*)$", text[:MAX_TEXT_BYTES], re.MULTILINE):
        index = int(match.group(1))
        if index in devices or len(devices) < MAX_MODULES:
            devices.setdefault(index, {})[match.group(2)] = match.group(3)
    for index in sorted(devices):
        device = devices[index]
        if device.get("PRESENT") != "0":
            _add_row(found, device, UDEV_FIELDS, device.get("TYPE", ""))


def _dmidecode_size(text: str) -> int:
    match = re.fullmatch(r"(\d{1,12})\s*(kB|KB|MB|GB|TB)", text.strip())
    if not match:
        return 0  # "No Module Installed", "Unknown"
    return int(match.group(1)) << {"kB": 10, "KB": 10, "MB": 20, "GB": 30, "TB": 40}[match.group(2)]


def _dmidecode_number(text: str | None) -> int | None:
    match = re.match(r"\s*(\d{1,9})\s*(?:MT/s|MHz|bits)", text or "")
    return int(match.group(1)) if match else None


def parse_dmidecode(text: str, found: HostFound) -> None:
    """``dmidecode -t 17``: one "Memory Device" block per slot, "Size: No Module Installed" for an empty
    one; "Configured Memory Speed" (dmidecode 3.x; "Configured Clock Speed" in 2.x, also in MT/s)."""
    blocks = re.split(r"^Memory Device\s*$", text[:MAX_TEXT_BYTES], flags=re.MULTILINE)[1:]
    for block in blocks[: MAX_MODULES * 2]:
        fields = dict(re.findall(r"^\s+([A-Za-z ]+):\s*(.*?)\s*$", block, re.MULTILINE))
        configured = fields.get("Configured Memory Speed", fields.get("Configured Clock Speed"))
        _add(
            found,
            _module(
                _dmidecode_size(fields.get("Size", "")),
                _dmidecode_number(configured),
                _dmidecode_number(fields.get("Speed")),
                _dmidecode_number(fields.get("Data Width")),
                fields.get("Type", ""),
                fields.get("Locator", ""),
                fields.get("Bank Locator", ""),
            ),
        )
    if found.modules:
        found.modules_source = "dmidecode"


def parse_windows_memory(text: str, found: HostFound) -> None:
    """PowerShell's ``ConvertTo-Json`` of Win32_PhysicalMemory: one object for one module, a list for
    more; Capacity in bytes, ConfiguredClockSpeed / Speed in MT/s, DataWidth in bits, SMBIOSMemoryType
    the SMBIOS type code."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    try:
        document = json.loads(text[start:MAX_TEXT_BYTES]) if start >= 0 else None
    except (ValueError, RecursionError):
        document = None
    rows = [document] if isinstance(document, dict) else document
    if not isinstance(rows, list):
        found.note("Win32_PhysicalMemory: PowerShell's output is not the JSON expected")
        return
    for row in rows[: MAX_MODULES * 2]:
        if not isinstance(row, dict):
            continue
        _add_row(found, row, WINDOWS_FIELDS, SMBIOS_MEMORY_TYPES.get(_int(row.get("SMBIOSMemoryType")) or 0, ""))
    if found.modules:
        found.modules_source = "Win32_PhysicalMemory"


# ---- from modules to a speed -------------------------------------------------------------------
def modules_bandwidth(modules: Iterable[MemoryModule], source: str) -> tuple[float | None, str]:
    """(GB/s, how it was worked out) from the populated modules, or (None, why not): channels ×
    data width / 8 × the slowest module's MT/s (the module docstring's rule and its limits)."""
    modules = list(modules)
    if not modules:
        return None, f"{source}: no populated memory module listed"
    speeds = [m.mt_s for m in modules if m.mt_s is not None]
    if not speeds:
        return None, f"{source}: no module reports its speed"
    mt_s = min(speeds)
    channels: dict[str, int] = {}
    named = [m.channel for m in modules]
    if all(named):
        for module, name in zip(modules, named, strict=True):
            channels[str(name)] = max(channels.get(str(name), 0), module.width_bits or DIMM_WIDTH_BITS)
    else:
        channels = {str(i): m.width_bits or DIMM_WIDTH_BITS for i, m in enumerate(modules)}
    gb_s = sum(channels.values()) / 8 * mt_s * 1e6 / GB
    kinds = sorted({m.kind for m in modules if m.kind})
    part = f"{'/'.join(kinds) or 'RAM'}-{mt_s}"
    text = f"{source}: {len(modules)} × {part}"
    if len(channels) != len(modules):
        text += f" in {len(channels)} channels"
    widths = set(channels.values())
    if widths != {DIMM_WIDTH_BITS}:
        text += ", " + "/".join(f"{w}" for w in sorted(widths)) + "-bit"
    if any(m.rated for m in modules if m.mt_s == mt_s):
        text += ", rated speed (configured not reported)"
    if not MIN_GB_S <= gb_s <= MAX_GB_S:
        return None, f"{text} gives {gb_s:,.1f} GB/s, outside {MIN_GB_S:g} to {MAX_GB_S:,.0f}: not used"
    return round(gb_s, 1), text


# ---- Apple silicon -----------------------------------------------------------------------------
@cache
def apple_bandwidths() -> dict[str, float]:
    """Each Apple chip ("M2 Max") with its published bandwidth: the catalogue's Apple entries and
    :data:`APPLE_OTHER_GB_S`, the lower where a chip has two."""
    chips: dict[str, float] = {}
    named = [(g.name, g.memory_bandwidth_gb_s) for g in load_gpus() if g.vendor == "apple"]
    for name, gb_s in [*named, *((f"Apple {chip}", gb_s) for chip, gb_s in APPLE_OTHER_GB_S.items())]:
        key = _apple_chip(name)
        if key is not None and gb_s:
            chips[key] = min(gb_s, chips.get(key, gb_s))
    return chips


def _apple_chip(name: str) -> str | None:
    match = APPLE_CHIP.search(name)
    if match is None:
        return None
    return match.group(1).upper() + (f" {match.group(2).title()}" if match.group(2) else "")


def apple_bandwidth(chip_name: str, found: HostFound) -> None:
    """The published bandwidth of the chip ``machdep.cpu.brand_string`` names ("Apple M2 Max")."""
    chip = _apple_chip(chip_name)
    gb_s = apple_bandwidths().get(chip) if chip is not None else None
    if chip is None or gb_s is None:
        found.note(f"{escape_controls(chip_name)[:60]}: no published memory bandwidth known for this chip")
        return
    found.bandwidth = (gb_s, f"Apple {chip}: Apple's published figure")


def parse_sysctl_host(output: str, found: HostFound) -> None:
    """``sysctl -n hw.memsize machdep.cpu.brand_string``: the RAM, and the chip's published bandwidth."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if lines and lines[0].isdigit() and len(lines[0]) <= 20 and int(lines[0]) > 0:
        found.total, found.total_source = (int(lines[0]), None), "sysctl hw.memsize"
    if len(lines) < 2:
        found.note("sysctl: the chip name was not reported")
    elif lines[1].lower().startswith("apple"):
        apple_bandwidth(lines[1], found)
    else:
        found.note(f"{escape_controls(lines[1])[:60]}: an Intel Mac's memory speed is not detected")


# ---- all of it --------------------------------------------------------------------------------
def host_from(found: HostFound) -> LocalHost:
    """The figures gathered, with the speed worked out from the modules where no published one is known."""
    total, available = found.total if found.total is not None else (None, None)
    if total is None and found.modules and found.modules_source == "Win32_PhysicalMemory":
        total, found.total_source = sum(m.size_bytes for m in found.modules), "Win32_PhysicalMemory"
    bandwidth, how = found.bandwidth if found.bandwidth is not None else (None, "")
    if bandwidth is None and found.modules_source:
        bandwidth, how = modules_bandwidth(found.modules, found.modules_source)
        if bandwidth is None:
            found.note(how)
    return LocalHost(
        total, available, found.total_source, bandwidth, how if bandwidth is not None else "",
        tuple(found.modules), tuple(found.notes),
    )  # fmt: skip


def linux_speed_files(found: HostFound, dmi_entries: str, udev_dmi: str) -> bool:
    """The memory records Linux lets this user read without a tool: True when found (else dmidecode)."""
    if read_dmi_entries(dmi_entries, found):
        return True
    try:
        with open(udev_dmi, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_TEXT_BYTES)
    except OSError:
        return False
    parse_udev_memory(text, found)
    if found.modules:
        found.modules_source = "udev"
    return bool(found.modules)


def unreadable_note(records_readable: bool | None, tool_said: str) -> str:
    """The one note of a Linux machine whose memory records were not read."""
    why = f" ({tool_said})" if tool_said else ""
    if records_readable is None:
        where = "this system shows no SMBIOS memory records (a container or a virtual machine may have none)"
    else:
        where = "its SMBIOS records need root (sudo dmidecode -t 17 shows them) and udev keeps no copy"
    return f"memory speed not found: {where}{why}; the typed Host RAM speed is kept"


def windows_total(found: HostFound, reader: Callable[[], tuple[int, int | None] | None]) -> None:
    memory = reader()
    if memory is not None:
        found.total, found.total_source = memory, "GlobalMemoryStatusEx"


def as_json(host: LocalHost) -> dict[str, Any]:
    """The figures for ``gpus --local --json``."""
    return {
        "total_bytes": host.total_bytes,
        "available_bytes": host.available_bytes,
        "total_source": host.total_source,
        "bandwidth_gb_s": host.bandwidth_gb_s,
        "bandwidth_source": host.bandwidth_source,
        "plan": host.plan_values(),
        "modules": [
            {
                "size_bytes": m.size_bytes,
                "mt_s": m.mt_s,
                "rated_speed": m.rated,
                "width_bits": m.width_bits,
                "type": m.kind,
                "locator": m.locator,
                "bank": m.bank,
                "channel": m.channel,
            }
            for m in host.modules
        ],
        "notes": list(host.notes),
    }

"""This machine's host memory (core/files/local_host.py): RAM and peak bandwidth from recorded
outputs, no real tool or firmware needed.

The recorded outputs follow each source's format: ``dmidecode -t 17`` prints one "Memory Device"
block per slot (dmidecode 3.x's dmi_memory_device layout; 2.x said "Configured Clock Speed"); the
SMBIOS records are built byte by byte from DSP0134 3.7.0 section 7.18's layout (the offsets the
module's docstring lists); udev's properties are those systemd's dmi_memory_id builtin writes;
PowerShell's ``ConvertTo-Json`` prints one object for one module and a list for more.

Expected bandwidths are the JEDEC arithmetic channels × 8 bytes × MT/s, the same figures the
input table's help text quotes (core/inputs.py, inference.host_bandwidth_gb_s): dual-channel
DDR4-3200 51.2 GB/s, dual-channel DDR5-5600 89.6 GB/s.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from core.files.local_gpus import HostSources, LocalGpus, detect_local_gpus
from core.files.local_host import (
    MAX_MODULES,
    HostFound,
    LocalHost,
    MemoryModule,
    apple_bandwidth,
    host_from,
    modules_bandwidth,
    parse_dmidecode,
    parse_smbios_type17,
    parse_sysctl_host,
    parse_udev_memory,
    parse_windows_memory,
    read_dmi_entries,
)
from core.units import GB, GiB
from tests.stub_tools import printing, stub

posix_only = pytest.mark.skipif(os.name != "posix", reason="stub tools are shell scripts")


def block(size: str, locator: str, bank: str, speed: str, configured: str, kind: str = "DDR5") -> str:
    """One slot as ``dmidecode -t 17`` prints it (fields a parser must skip included)."""
    return (
        "Handle 0x0040, DMI type 17, 92 bytes\nMemory Device\n"
        "\tArray Handle: 0x003F\n\tError Information Handle: Not Provided\n"
        f"\tTotal Width: 64 bits\n\tData Width: {'64 bits' if size[0].isdigit() else 'Unknown'}\n"
        f"\tSize: {size}\n\tForm Factor: DIMM\n\tSet: None\n\tLocator: {locator}\n\tBank Locator: {bank}\n"
        f"\tType: {kind if size[0].isdigit() else 'Unknown'}\n\tType Detail: Synchronous Unbuffered (Unregistered)\n"
        f"\tSpeed: {speed}\n\tManufacturer: Kingston\n\tPart Number: KF556C40-16\n\tRank: 1\n"
        f"\tConfigured Memory Speed: {configured}\n\tMinimum Voltage: 1.1 V\n\n"
    )


HEADER = "# dmidecode 3.3\nGetting SMBIOS data from sysfs.\nSMBIOS 3.5.0 present.\n\n"
EMPTY = "No Module Installed"


def dmidecode(text: str) -> LocalHost:
    found = HostFound()
    parse_dmidecode(text, found)
    found.modules_source = "dmidecode"
    return host_from(found)


# ---- dmidecode -t 17 ---------------------------------------------------------------------------
def test_two_ddr5_modules_of_four_slots_on_an_am5_board() -> None:
    # AM5 boards name the channel in the bank locator; the empty slots say "No Module Installed".
    text = HEADER + "".join(
        [
            block(EMPTY, "DIMM 0", "P0 CHANNEL A", "Unknown", "Unknown"),
            block("16 GB", "DIMM 1", "P0 CHANNEL A", "6000 MT/s", "5600 MT/s"),
            block(EMPTY, "DIMM 0", "P0 CHANNEL B", "Unknown", "Unknown"),
            block("16 GB", "DIMM 1", "P0 CHANNEL B", "6000 MT/s", "5600 MT/s"),
        ]
    )
    host = dmidecode(text)
    assert [m.channel for m in host.modules] == ["P0 CHANNEL A", "P0 CHANNEL B"]
    assert host.modules[0].size_bytes == 16 * GiB
    # Configured 5600 (EXPO off), not the rated 6000: 2 channels × 8 B × 5600 MT/s = 89.6 GB/s.
    assert host.bandwidth_gb_s == 89.6
    assert host.bandwidth_source == "dmidecode: 2 × DDR5-5600"
    assert host.notes == ()


def test_four_ddr4_modules_in_two_named_channels_count_two_channels() -> None:
    # Intel boards name controller and channel in the locator; two modules share each channel.
    text = HEADER + "".join(
        block("16 GB", f"Controller0-Channel{c}-DIMM{d}", f"BANK {d}", "3200 MT/s", "3200 MT/s", "DDR4")
        for c in "AB"
        for d in "01"
    )
    host = dmidecode(text)
    assert len(host.modules) == 4
    assert {m.channel for m in host.modules} == {"CONTROLLER0-CHANNELA", "CONTROLLER0-CHANNELB"}
    assert host.bandwidth_gb_s == 51.2  # dual-channel DDR4-3200, not four channels' 102.4
    assert host.bandwidth_source == "dmidecode: 4 × DDR4-3200 in 2 channels"


def test_four_modules_with_unnamed_channels_count_one_channel_each() -> None:
    # HPE servers' slots ("PROC 1 DIMM 1") name no channel: the per-module rule, one module per channel.
    text = HEADER + "".join(
        block("32 GB", f"PROC 1 DIMM {i}", "Not Specified", "3200 MT/s", "2933 MT/s", "DDR4") for i in (1, 3, 5, 7)
    )
    host = dmidecode(text)
    assert [m.channel for m in host.modules] == [None] * 4
    assert host.modules[0].bank == ""  # "Not Specified" is no label
    assert host.bandwidth_gb_s == 93.9  # 4 × 8 B × 2933 MT/s = 93.856 GB/s
    assert host.bandwidth_source == "dmidecode: 4 × DDR4-2933"


def test_asus_slot_letters_are_channels() -> None:
    text = HEADER + "".join(
        block("8 GB", f"DIMM_{slot}", f"BANK {i}", "2666 MT/s", "2666 MT/s", "DDR4")
        for i, slot in enumerate(("A1", "A2", "B1", "B2"))
    )
    host = dmidecode(text)
    assert {m.channel for m in host.modules} == {"DIMM_A", "DIMM_B"}
    assert host.bandwidth_gb_s == 42.7  # 2 × 8 B × 2666 MT/s = 42.656 GB/s


def test_an_unknown_configured_speed_takes_the_rated_one_and_says_so() -> None:
    text = HEADER + block("16 GB", "DIMM 1", "P0 CHANNEL A", "4800 MT/s", "Unknown")
    host = dmidecode(text)
    assert host.modules[0].rated and host.modules[0].mt_s == 4800
    assert host.bandwidth_gb_s == 38.4  # 1 × 8 B × 4800 MT/s
    assert host.bandwidth_source == "dmidecode: 1 × DDR5-4800, rated speed (configured not reported)"


def test_no_speed_at_all_keeps_the_typed_figure_with_a_note() -> None:
    host = dmidecode(HEADER + block("16 GB", "DIMM 1", "P0 CHANNEL A", "Unknown", "Unknown"))
    assert host.bandwidth_gb_s is None and host.plan_values() == {}
    assert host.notes == ("dmidecode: no module reports its speed",)
    assert host.label == "Host RAM: size not found, speed not found"


def test_only_empty_slots_is_a_note() -> None:
    host = dmidecode(HEADER + block(EMPTY, "DIMM 0", "BANK 0", "Unknown", "Unknown") * 2)
    assert host.modules == () and host.bandwidth_gb_s is None
    assert host.notes == ("dmidecode: no populated memory module listed",)


def test_dmidecode_2_s_configured_clock_speed_and_sizes_in_mb() -> None:
    text = (
        "# dmidecode 2.12\nMemory Device\n\tData Width: 64 bits\n\tSize: 8192 MB\n\tLocator: ChannelA-DIMM0\n"
        "\tType: DDR3\n\tSpeed: 1600 MHz\n\tConfigured Clock Speed: 1333 MHz\n\n"
        "Memory Device\n\tData Width: 64 bits\n\tSize: 8192 MB\n\tLocator: ChannelB-DIMM0\n"
        "\tType: DDR3\n\tSpeed: 1600 MHz\n\tConfigured Clock Speed: 1333 MHz\n"
    )
    host = dmidecode(text)
    assert [m.size_bytes for m in host.modules] == [8 * GiB, 8 * GiB]
    assert host.bandwidth_gb_s == 21.3  # 2 × 8 B × 1333 MT/s = 21.328 GB/s
    assert host.bandwidth_source == "dmidecode: 2 × DDR3-1333"


def test_hostile_dmidecode_output_is_bounded() -> None:
    many = HEADER + block("16 GB", "DIMM 1", "P0 CHANNEL A", "5600 MT/s", "5600 MT/s") * (MAX_MODULES * 10)
    assert len(dmidecode(many).modules) == MAX_MODULES
    absurd = block("99999999999 TB", "DIMM 1", "", "999999 MT/s", "999999 MT/s")
    absurd += block("16 GB", "DIMM\x1b[2J 2", "", "999999 MT/s", "999999 MT/s")
    host = dmidecode(HEADER + absurd + "garbage\x00\xff" * 100)
    assert len(host.modules) == 1 and host.modules[0].mt_s is None
    assert host.modules[0].locator == "DIMM\\x1b[2J 2"  # control characters escaped
    assert host.bandwidth_gb_s is None


def test_a_bandwidth_outside_the_input_s_range_is_not_used() -> None:
    # 256 slots of 1024-bit HBM-like records at 20,000 MT/s: 655,360 GB/s, past the 10,000 the field takes.
    modules = [MemoryModule(GiB, 20_000, 1024, "HBM3", f"slot {i}") for i in range(256)]
    gb_s, why = modules_bandwidth(modules, "dmidecode")
    assert gb_s is None and why.endswith("outside 1 to 10,000: not used")


# ---- SMBIOS type 17 as bytes ----------------------------------------------------------------------
def record(
    size: int, width: int = 64, speed: int = 0, configured: int = 0, kind: int = 0x22, *, length: int = 0x5C,
    extended_size: int = 0, extended_speed: int = 0, extended_configured: int = 0, strings: tuple[str, ...] = (),
) -> bytes:  # fmt: skip
    """A type-17 record laid out as DSP0134 3.7.0 7.18 says (little-endian; string numbers from 1)."""
    body = bytearray(0x5C)
    body[0], body[1] = 17, length
    struct.pack_into("<H", body, 0x02, 0x0040)  # handle
    struct.pack_into("<HHHH", body, 0x04, 0x003F, 0xFFFE, width, width)  # array, error, total, data width
    struct.pack_into("<H", body, 0x0C, size)
    body[0x0E] = 0x09  # form factor: DIMM
    body[0x10], body[0x11] = (1, 2) if len(strings) >= 2 else (0, 0)  # device and bank locator strings
    body[0x12] = kind
    struct.pack_into("<H", body, 0x15, speed)
    struct.pack_into("<I", body, 0x1C, extended_size)
    struct.pack_into("<H", body, 0x20, configured)
    struct.pack_into("<II", body, 0x54, extended_speed, extended_configured)
    tail = b"".join(s.encode() + b"\x00" for s in strings) + b"\x00" if strings else b"\x00\x00"
    return bytes(body[:length]) + tail


def test_smbios_records_give_size_speed_width_and_labels() -> None:
    module = parse_smbios_type17(record(16384, 64, 6000, 5600, strings=("DIMM 1", "P0 CHANNEL A")))
    assert module == MemoryModule(16 * GiB, 5600, 64, "DDR5", "DIMM 1", "P0 CHANNEL A")
    assert module.channel == "P0 CHANNEL A"


def test_smbios_size_units_and_the_extended_fields() -> None:
    module = parse_smbios_type17(record(0x8000 | 512, kind=0x1A))
    assert module is not None and module.size_bytes == 512 * 1024  # bit 15 set: the size is in KiB
    # 0x7FFF: the Extended Size in MiB (a 64 GiB module); 0xFFFF speeds: the extended DWORDs.
    big = parse_smbios_type17(record(0x7FFF, speed=0xFFFF, configured=0xFFFF, extended_size=65536,
                                     extended_speed=8800, extended_configured=8400))  # fmt: skip
    assert big is not None and (big.size_bytes, big.mt_s) == (64 * GiB, 8400)


def test_smbios_empty_unknown_short_and_foreign_records() -> None:
    assert parse_smbios_type17(record(0)) is None  # no device installed
    assert parse_smbios_type17(record(0xFFFF)) is None  # size unknown
    assert parse_smbios_type17(b"\x10\x17" + bytes(40)) is None  # a type-16 record
    assert parse_smbios_type17(record(8192)[:0x10]) is None  # cut short before the size's neighbours
    # An SMBIOS 2.3 record (27 bytes) has no Configured Memory Speed: the rated speed, said so.
    old = parse_smbios_type17(record(8192, speed=2400, kind=0x1A, length=0x1B))
    assert old is not None and (old.mt_s, old.rated, old.kind) == (2400, True, "DDR4")
    # Unknown data width (0xFFFF): the JEDEC DIMM's 64 bits are assumed by the bandwidth rule.
    unknown = parse_smbios_type17(record(8192, width=0xFFFF, configured=3200, kind=0x1A))
    assert unknown is not None and unknown.width_bits is None
    assert modules_bandwidth([unknown], "SMBIOS")[0] == 25.6  # 8 B × 3200 MT/s


def test_smbios_entries_folder_as_linux_has_it(tmp_path: Path) -> None:
    slots = [
        record(16384, 64, 5600, 5600, strings=("DIMM 1", "P0 CHANNEL A")),
        record(0, strings=("DIMM 0", "P0 CHANNEL B")),
        record(16384, 64, 5600, 5600, strings=("DIMM 1", "P0 CHANNEL B")),
    ]
    for index, raw in enumerate(slots):
        (tmp_path / f"17-{index}").mkdir()
        (tmp_path / f"17-{index}" / "raw").write_bytes(raw)
    (tmp_path / "16-0").mkdir()  # other types are not read
    found = HostFound()
    assert read_dmi_entries(str(tmp_path), found) and found.records_readable
    host = host_from(found)
    assert (host.bandwidth_gb_s, host.bandwidth_source) == (89.6, "SMBIOS: 2 × DDR5-5600")


def test_smbios_entries_that_cannot_be_read_say_so(tmp_path: Path) -> None:
    (tmp_path / "17-0" / "raw").mkdir(parents=True)  # opening a folder fails as a root-only file does
    found = HostFound()
    assert not read_dmi_entries(str(tmp_path), found) and found.records_readable is False
    assert not read_dmi_entries(str(tmp_path / "absent"), HostFound())


# ---- udev's copy -------------------------------------------------------------------------------
def test_udev_memory_properties() -> None:
    text = "\n".join(
        [
            "I:1234",
            "E:MEMORY_ARRAY_LOCATION=System Board Or Motherboard",
            "E:MEMORY_DEVICE_0_PRESENT=0",
            "E:MEMORY_DEVICE_0_LOCATOR=ChannelA-DIMM0",
            *(
                line
                for i, channel in ((1, "A"), (3, "B"))
                for line in (
                    f"E:MEMORY_DEVICE_{i}_DATA_WIDTH=64",
                    f"E:MEMORY_DEVICE_{i}_SIZE=17179869184",
                    f"E:MEMORY_DEVICE_{i}_TYPE=DDR4",
                    f"E:MEMORY_DEVICE_{i}_SPEED_MTS=3600",
                    f"E:MEMORY_DEVICE_{i}_CONFIGURED_SPEED_MTS=3200",
                    f"E:MEMORY_DEVICE_{i}_LOCATOR=Channel{channel}-DIMM1",
                    f"E:MEMORY_DEVICE_{i}_BANK_LOCATOR=BANK {i}",
                )
            ),
        ]
    )
    found = HostFound()
    parse_udev_memory(text, found)
    found.modules_source = "udev"
    host = host_from(found)
    assert (host.bandwidth_gb_s, host.bandwidth_source) == (51.2, "udev: 2 × DDR4-3200")


# ---- Windows -----------------------------------------------------------------------------------
WINDOWS_ONE = (
    '{"Capacity":34359738368,"ConfiguredClockSpeed":5600,"Speed":6000,"DataWidth":64,'
    '"BankLabel":"P0 CHANNEL A","DeviceLocator":"DIMM 1","SMBIOSMemoryType":34}'
)


def windows(text: str) -> LocalHost:
    found = HostFound()
    parse_windows_memory(text, found)
    return host_from(found)


def test_windows_one_module_is_one_object() -> None:
    host = windows(WINDOWS_ONE)
    assert host.total_bytes == 32 * GiB and host.total_source == "Win32_PhysicalMemory"
    assert (host.bandwidth_gb_s, host.bandwidth_source) == (44.8, "Win32_PhysicalMemory: 1 × DDR5-5600")


def test_windows_modules_are_a_list() -> None:
    rows = [
        {"Capacity": "17179869184", "ConfiguredClockSpeed": 3200, "Speed": 3200, "DataWidth": 64,
         "BankLabel": "BANK 0", "DeviceLocator": f"Controller0-Channel{c}-DIMM0", "SMBIOSMemoryType": 26}
        for c in "AB"
    ]  # fmt: skip
    host = windows("\ufeff" + json.dumps(rows))  # a byte-order mark before the JSON
    assert host.total_bytes == 32 * GiB
    assert (host.bandwidth_gb_s, host.bandwidth_source) == (51.2, "Win32_PhysicalMemory: 2 × DDR4-3200")


@pytest.mark.parametrize("text", ["", "not json", "[1, 2, 3]", '"text"', "[" * 100_000, '{"Capacity": true}'])
def test_windows_garbage_is_a_note_or_nothing(text: str) -> None:
    host = windows(text)
    assert host.bandwidth_gb_s is None and host.total_bytes is None


def test_thousands_of_devices_from_udev_or_windows_are_bounded() -> None:
    udev = "\n".join(f"E:MEMORY_DEVICE_{i}_SIZE=17179869184\nE:MEMORY_DEVICE_{i}_SPEED_MTS=3200" for i in range(5000))
    found = HostFound()
    parse_udev_memory(udev, found)
    assert len(found.modules) == MAX_MODULES
    rows = [{"Capacity": 2**34, "Speed": 3200, "DataWidth": 64, "DeviceLocator": "x" * 100}] * 5000
    host = windows(json.dumps(rows))
    assert len(host.modules) == MAX_MODULES and len(host.modules[0].locator) == 64  # labels cut to 64 characters
    huge = windows(json.dumps(rows * 10))  # past the 1 MiB read: not JSON any more, one note
    assert huge.modules == () and huge.notes == ("Win32_PhysicalMemory: PowerShell's output is not the JSON expected",)


# ---- Apple silicon -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("chip", "gb_s"),
    [
        ("Apple M1", 68.25),  # resources/gpus.json apple-m1-16gb
        ("Apple M2 Max", 400.0),  # resources/gpus.json apple-m2-max-96gb
        ("Apple M3 Pro", 150.0),  # APPLE_OTHER_GB_S: the catalogue has no M3 Pro
        ("Apple M3 Max", 300.0),  # the lower of Apple's 300 / 400 (30- / 40-core GPU)
        ("Apple M4 Max", 410.0),  # the lower of Apple's 410 / 546
        ("Apple M3 Ultra", 819.0),  # resources/gpus.json apple-m3-ultra-*
        ("Apple M5", 153.0),  # resources/gpus.json apple-m5-* (Apple's M5 press release: 153GB/s)
        ("Apple M5 Pro", 307.0),  # resources/gpus.json apple-m5-pro-64gb (Apple Newsroom 2026-03-03: 307GB/s)
        ("Apple M5 Max", 460.0),  # the lower of 460 / 614 (32- / 40-core GPU)
    ],
)
def test_apple_chips_take_apple_s_published_bandwidth(chip: str, gb_s: float) -> None:
    found = HostFound()
    apple_bandwidth(chip, found)
    host = host_from(found)
    assert host.bandwidth_gb_s == gb_s and host.bandwidth_source.startswith(chip)
    assert found.notes == []


@pytest.mark.parametrize("chip", ["Apple M9 Ultra", "Apple Silicon", "Apple"])
def test_an_apple_chip_without_a_published_figure_is_a_note(chip: str) -> None:
    found = HostFound()
    apple_bandwidth(chip, found)
    assert host_from(found).bandwidth_gb_s is None
    assert found.notes == [f"{chip}: no published memory bandwidth known for this chip"]


def test_sysctl_gives_the_mac_s_ram_and_an_intel_mac_is_a_note() -> None:
    found = HostFound()
    parse_sysctl_host("68719476736\nApple M2 Max\n", found)
    host = host_from(found)
    assert host.total_bytes == 64 * GiB and host.ram_gb == 68.7  # 64 GiB = 68.72 GB, rounded down
    assert host.plan_values() == {"parallel.host_ram_gb": 68.7, "inference.host_bandwidth_gb_s": 400.0,
                                  "parallel.host_memory_gbs": 400.0}
    intel = HostFound()
    parse_sysctl_host("17179869184\nIntel(R) Core(TM) i7-9750H CPU @ 2.60GHz\n", intel)
    assert host_from(intel).bandwidth_gb_s is None and "an Intel Mac's memory speed" in intel.notes[0]


def test_the_label_says_where_each_figure_came_from() -> None:
    host = LocalHost(64 * GB, 41 * GB, "/proc/meminfo", 89.6, "dmidecode: 2 × DDR5-5600")
    assert host.label == "Host RAM 64.0 GB (41.0 GB free now), 89.6 GB/s (dmidecode: 2 × DDR5-5600)"


# ---- through detect_local_gpus, with stub tools --------------------------------------------------
def detect(tmp_path: Path, **kwargs: Any) -> LocalGpus:
    kwargs.setdefault("nvml_loader", lambda: None)
    kwargs.setdefault("system", "Linux")
    kwargs.setdefault("meminfo", lambda: (64 * GiB, 40 * GiB))
    sources = HostSources(str(tmp_path / "no-entries"), str(tmp_path / "no-udev"), lambda: (32 * GiB, 20 * GiB))
    return detect_local_gpus(host_sources=sources, **kwargs)


@posix_only
def test_linux_dmidecode_fills_the_speed_and_meminfo_the_size(tools: Path, tmp_path: Path) -> None:
    text = HEADER + block("32 GB", "DIMM 1", "P0 CHANNEL A", "5600 MT/s", "5600 MT/s") * 1
    text += block("32 GB", "DIMM 1", "P0 CHANNEL B", "5600 MT/s", "5600 MT/s")
    printing(tools, "dmidecode", text)
    found = detect(tmp_path)
    assert found.host is not None and found.host.notes == ()
    assert found.host.label == "Host RAM 68.7 GB (42.9 GB free now), 89.6 GB/s (dmidecode: 2 × DDR5-5600)"
    assert found.notes == ()  # the host's notes are its own


@posix_only
def test_linux_without_root_is_one_note(tools: Path, tmp_path: Path) -> None:
    # dmidecode 3.3 as a user: the sysfs table is root-only (its own error line on stderr).
    printing(tools, "dmidecode", "/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\n", status=1)
    (tmp_path / "no-entries" / "17-0" / "raw").mkdir(parents=True)
    host = detect(tmp_path).host
    assert host is not None and host.bandwidth_gb_s is None and host.ram_gb == 68.7
    assert len(host.notes) == 1 and host.notes[0].startswith("memory speed not found: its SMBIOS records need root")
    assert "Permission denied" in host.notes[0] and host.notes[0].endswith("the typed Host RAM speed is kept")


@posix_only
def test_a_hung_host_tool_is_stopped_at_the_deadline(tools: Path, tmp_path: Path) -> None:
    stub(tools, "dmidecode", "sleep 30")
    stub(tools, "powershell", "sleep 30")
    for system in ("Linux", "Windows"):
        started = time.monotonic()
        found = detect(tmp_path, timeout_s=0.5, system=system)
        assert time.monotonic() - started < 3  # killed at 0.5 s, not waited for
        assert found.host is not None and found.host.ram_gb is not None  # the size needs no tool
        tool = "dmidecode" if system == "Linux" else "powershell"
        assert (
            len(found.host.notes) == 1 and f"{tool} did not answer within 0.5 s and was stopped" in found.host.notes[0]
        )


@posix_only
def test_the_host_tool_runs_beside_a_slow_gpu_tool(tools: Path, tmp_path: Path) -> None:
    # Each tool takes 0.6 s: one after the other they would pass the 1 s deadline, side by side they do not.
    stub(tools, "nvidia-smi", "sleep 0.6; echo 'NVIDIA GeForce RTX 4090, 24564, 0, 24564, 550.54'")
    printing(tools, "powershell.out.json", WINDOWS_ONE)
    stub(tools, "powershell", f'sleep 0.6; cat "{tools / "powershell.out.json.out"}"')
    found = detect(tmp_path, timeout_s=1.0, system="Windows")
    assert found.found and found.notes == ()
    assert found.host is not None and found.host.notes == ()
    # The total from GlobalMemoryStatusEx (the stand-in: 32 GiB, 20 GiB available), the speed from the module.
    assert found.host.label == "Host RAM 34.3 GB (21.5 GB free now), 44.8 GB/s (Win32_PhysicalMemory: 1 × DDR5-5600)"


@posix_only
def test_a_mac_s_sysctl_answers_for_the_gpu_and_the_host(tools: Path, tmp_path: Path) -> None:
    printing(tools, "sysctl", "68719476736\nApple M2 Max\n")
    found = detect(tmp_path, system="Darwin")
    assert [gpu.vendor for gpu in found.gpus] == ["apple"]
    assert found.host is not None
    assert found.host.label == "Host RAM 68.7 GB, 400.0 GB/s (Apple M2 Max: Apple's published figure)"

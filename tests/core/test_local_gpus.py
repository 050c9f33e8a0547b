"""This machine's GPUs: stub ``nvidia-smi`` / ``rocm-smi`` / ``sysctl`` executables on PATH and a
stand-in ``pynvml`` module; no GPU is needed.

The canned outputs are the tools' formats: ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``
prints one comma-separated line per card in MiB; ``rocm-smi --json`` prints ``cardN`` objects
with byte counts as strings; ``sysctl -n`` prints one value per line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.catalogue import find_gpu, load_gpus
from core.files.gpu_match import match_catalogue, name_words
from core.files.local_gpus import LocalGpu, LocalGpus, detect_local_gpus, read_meminfo
from core.units import GiB, MiB
from tests.stub_tools import printing, stub

posix_only = pytest.mark.skipif(os.name != "posix", reason="stub tools are shell scripts")


def no_nvml() -> None:
    return None


def detect(**kwargs: Any) -> LocalGpus:
    kwargs.setdefault("nvml_loader", no_nvml)
    kwargs.setdefault("system", "Linux")
    return detect_local_gpus(**kwargs)


# ---- matching driver names to the catalogue -------------------------------------------------
@pytest.mark.parametrize(
    ("name", "mib", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", 81920, "a100-80gb-sxm"),
        ("NVIDIA A100 80GB PCIe", 81920, "a100-80gb-pcie"),
        ("NVIDIA A100-SXM4-40GB", 40960, "a100-40gb-sxm"),
        ("NVIDIA H100 80GB HBM3", 81559, "h100-sxm"),
        ("NVIDIA H100 PCIe", 81559, "h100-pcie"),
        ("NVIDIA H100 NVL", 95830, "h100-nvl"),
        ("NVIDIA H200", 143771, "h200-sxm"),
        ("NVIDIA B200", 183359, "b200"),
        ("NVIDIA GeForce RTX 4090", 24564, "rtx-4090"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16376, "rtx-4090-laptop"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", 16376, "rtx-4070-ti-super"),
        ("NVIDIA GeForce RTX 4070 Ti", 12282, "rtx-4070-ti"),
        ("NVIDIA GeForce RTX 4070", 12282, "rtx-4070"),
        ("NVIDIA GeForce RTX 3060", 12288, "rtx-3060-12gb"),
        ("Tesla T4", 15360, "t4"),
        ("Tesla V100-SXM2-32GB", 32768, "v100-sxm2-32gb"),
        ("NVIDIA RTX A6000", 46068, "rtx-a6000"),  # ECC on: 1/16 less than the catalogue's ECC-off figure
        ("NVIDIA RTX 6000 Ada Generation", 49140, "rtx-6000-ada"),
        ("NVIDIA L40S", 46068, "l40s"),
        ("NVIDIA A10", 23028, "a10"),
        # Both RTX PRO 5000 boards, as public nvidia-smi captures name them (48,935 and 73,415 MiB):
        # one chip, told apart by memory alone.
        ("NVIDIA RTX PRO 5000 Blackwell", 48935, "rtx-pro-5000-blackwell"),
        ("NVIDIA RTX PRO 5000 72GB Blackwell", 73415, "rtx-pro-5000-blackwell-72gb"),
    ],
)
def test_nvidia_driver_names_match_their_catalogue_entry(name: str, mib: int, expected: str) -> None:
    found = match_catalogue(name, "nvidia", mib * MiB)
    assert found is not None and found.id == expected


@pytest.mark.parametrize(
    ("name", "mib"),
    [
        ("NVIDIA GeForce RTX 3060", 8192),  # the 8 GB RTX 3060 is not in the catalogue
        ("NVIDIA H200 NVL", 143771),  # a variant word the catalogue's H200 lacks
        ("NVIDIA Future GPU 9000", 100_000),
        ("", 81920),
    ],
)
def test_cards_the_catalogue_lacks_match_nothing(name: str, mib: int) -> None:
    assert match_catalogue(name, "nvidia", mib * MiB) is None


def test_amd_and_apple_names_match() -> None:
    mi300x = match_catalogue("AMD Instinct MI300X OAM", "amd", 205_822_885_888)
    assert mi300x is not None and mi300x.id == "mi300x"
    m2_pro = match_catalogue("Apple M2 Pro", "apple", 21845 * MiB, unified_bytes=32 * GiB)
    assert m2_pro is not None and m2_pro.id == "apple-m2-pro-32gb"
    assert match_catalogue("Apple M2 Pro", "apple", 12288 * MiB, unified_bytes=18 * GiB) is None


def test_every_catalogue_name_matches_itself() -> None:
    """A driver that printed the catalogue's own name with its memory finds that entry."""
    for gpu in load_gpus():
        unified = None if gpu.unified_memory_gb is None else int(gpu.unified_memory_gb * GiB)
        found = match_catalogue(gpu.name, gpu.vendor, gpu.memory_bytes, unified)
        assert found is not None, gpu.id
        assert found.memory_bytes == gpu.memory_bytes and name_words(found.name) == name_words(gpu.name), gpu.id


# ---- nvidia-smi ---------------------------------------------------------------------------------
@posix_only
def test_nvidia_smi_cards_with_what_other_processes_hold(tools: Path) -> None:
    printing(
        tools,
        "nvidia-smi",
        "NVIDIA A100-SXM4-80GB, 81920, 1536, 80384, 550.54.15\nNVIDIA A100-SXM4-80GB, 81920, 0, 81920, 550.54.15\n",
    )
    result = detect()
    assert result.found and len(result.gpus) == 2 and result.notes == ()
    first = result.gpus[0]
    assert first.spec.id == "a100-80gb-sxm" and first.source == "nvidia-smi" and first.driver == "550.54.15"
    assert (first.total_bytes, first.used_bytes, first.free_bytes) == (81920 * MiB, 1536 * MiB, 80384 * MiB)
    assert first.held_fraction == pytest.approx(1536 / 81920)
    # What the plan's held_by_others takes to judge against what is free now: the driver's "used".
    assert first.held_now_bytes == 1536 * MiB and result.gpus[1].held_now_bytes == 0
    assert first.hardware_changes() == {"gpu": "a100-80gb-sxm"}
    assert result.summary == "2 × NVIDIA A100 80GB SXM" and result.same_cards() == 2
    assert "80,384 MiB free now" in first.label


@posix_only
def test_a_card_the_catalogue_lacks_is_custom_with_its_reported_memory(tools: Path) -> None:
    printing(tools, "nvidia-smi", "NVIDIA GeForce RTX 3060, 8192, [N/A], [N/A], 535.104.05\n")
    gpu = detect().gpus[0]
    assert gpu.catalogue is None and gpu.used_bytes is None and gpu.free_bytes is None and gpu.held_fraction is None
    assert gpu.held_now_bytes == 0  # nothing known held: the card as the plan has it
    assert gpu.spec.id == "custom" and gpu.spec.memory_bytes == pytest.approx(8192 * MiB, rel=1e-6)
    assert gpu.hardware_changes() == {"gpu": "custom", "custom_memory_gb": round(8192 * MiB / 1e9, 3)}


@posix_only
def test_a_broken_driver_is_one_quiet_note(tools: Path) -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    printing(tools, "nvidia-smi", message + "\n", status=9)
    result = detect()
    assert not result.found and result.notes == (f"nvidia-smi failed: {message}",)
    assert result.summary == "No GPU found on this machine (looked for nvidia-smi, rocm-smi)"


@posix_only
def test_a_hung_nvidia_smi_is_stopped_at_the_deadline(tools: Path) -> None:
    stub(tools, "nvidia-smi", "sleep 10")
    stub(tools, "rocm-smi", "sleep 10")
    started = time.monotonic()
    result = detect(timeout_s=0.5)
    assert time.monotonic() - started < 2.0
    assert not result.found
    assert result.notes[0] == "nvidia-smi did not answer within 0.5 s and was stopped"
    assert "rocm-smi was not run: the 0.5 s given to GPU detection was spent" in result.notes


@posix_only
def test_hostile_output_is_capped_and_escaped(tools: Path) -> None:
    line = "NVIDIA \x1b[31mA100-SXM4-80GB\x07, 81920, 0, 81920, 1\n"
    printing(tools, "nvidia-smi", line * 500 + "garbage line\n")
    result = detect()
    assert len(result.gpus) == 64
    assert "\x1b" not in result.gpus[0].name and "\\x1b" in result.gpus[0].name


@posix_only
def test_nothing_found_says_so_with_no_notes(tools: Path) -> None:
    result = detect()
    assert not result.found and result.notes == () and result.same_cards() == 0
    assert result.summary.startswith("No GPU found")


# ---- NVML -----------------------------------------------------------------------------------------
class FakeNvml:
    """The pynvml calls the detector makes, answering like nvidia-ml-py 12."""

    def __init__(self, cards: list[tuple[str, int, int]], error: Exception | None = None, hang_s: float = 0) -> None:
        self.cards, self.error, self.hang_s = cards, error, hang_s
        self.shut = False

    def nvmlInit(self) -> None:
        if self.hang_s:
            time.sleep(self.hang_s)
        if self.error is not None:
            raise self.error

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.cards[handle][0].encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        _, total, used = self.cards[handle]
        return SimpleNamespace(total=total, used=used, free=total - used)


class NVMLError_LibraryNotFound(Exception):
    pass


@posix_only
def test_nvml_reads_cards_without_running_nvidia_smi(tools: Path) -> None:
    marker = tools / "ran"
    stub(tools, "nvidia-smi", f'touch "{marker}"')
    nvml = FakeNvml([("NVIDIA H100 80GB HBM3", 81559 * MiB, 4 * GiB)])
    result = detect(nvml_loader=lambda: nvml)
    gpu = result.gpus[0]
    assert (gpu.source, gpu.spec.id, gpu.driver, gpu.used_bytes) == ("nvml", "h100-sxm", "570.86.15", 4 * GiB)
    assert nvml.shut and not marker.exists() and result.tried[0] == "NVML"


@posix_only
def test_an_nvml_driver_mismatch_is_reported_once(tools: Path) -> None:
    marker = tools / "ran"
    stub(
        tools,
        "nvidia-smi",
        f'touch "{marker}"; echo "Failed to initialize NVML: Driver/library version mismatch"; exit 18',
    )
    nvml = FakeNvml([], error=RuntimeError("Driver/library version mismatch"))
    result = detect(nvml_loader=lambda: nvml)
    assert result.notes == ("NVML: Driver/library version mismatch",) and not marker.exists()


@posix_only
def test_nvml_without_a_driver_falls_back_to_nvidia_smi_quietly(tools: Path) -> None:
    printing(tools, "nvidia-smi", "Tesla T4, 15360, 0, 15360, 535.1\n")
    nvml = FakeNvml([], error=NVMLError_LibraryNotFound())
    result = detect(nvml_loader=lambda: nvml)
    assert [g.spec.id for g in result.gpus] == ["t4"] and result.notes == ()
    assert result.tried[:2] == ("NVML", "nvidia-smi")


@posix_only
def test_a_hung_nvml_call_does_not_hold_the_caller(tools: Path) -> None:
    nvml = FakeNvml([], hang_s=3.0)
    started = time.monotonic()
    result = detect(timeout_s=0.3, nvml_loader=lambda: nvml)
    assert time.monotonic() - started < 1.5
    assert result.notes[0] == "NVML did not answer within 0.3 s"


def test_a_loader_that_raises_is_a_note_not_an_exception() -> None:
    def broken() -> None:
        raise OSError("libnvidia-ml.so: cannot open shared object file")

    result = detect_local_gpus(nvml_loader=broken, system="Linux")
    assert not result.found and result.notes[-1].startswith("GPU detection stopped: OSError")


# ---- AMD ------------------------------------------------------------------------------------------
ROCM_JSON = """WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status

{"card0": {"Card Series": "AMD Instinct MI300X OAM", "Card Model": "0x74a1",
  "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
  "VRAM Total Memory (B)": "205822885888", "VRAM Total Used Memory (B)": "297304064"},
 "card1": {"Card Series": "AMD Instinct MI300X OAM",
  "VRAM Total Memory (B)": "205822885888", "VRAM Total Used Memory (B)": "0"},
 "system": {"Driver version": "6.8.5"}}
"""


@posix_only
def test_rocm_smi_json_with_a_warning_before_it(tools: Path) -> None:
    printing(tools, "rocm-smi", ROCM_JSON)
    result = detect()
    assert [g.spec.id for g in result.gpus] == ["mi300x", "mi300x"]
    first = result.gpus[0]
    assert (first.used_bytes, first.free_bytes, first.driver) == (297304064, 205822885888 - 297304064, "6.8.5")


@posix_only
@pytest.mark.parametrize(
    "output", ["not json at all", '{"card0": "x"}', '{"card0": {"VRAM Total Memory (B)": "-5"}}', "[1]"]
)
def test_odd_rocm_smi_output_is_a_note(tools: Path, output: str) -> None:
    printing(tools, "rocm-smi", output)
    result = detect()
    assert not result.found
    assert all(n.startswith("rocm-smi") for n in result.notes)


# ---- Apple silicon -------------------------------------------------------------------------------
@posix_only
def test_apple_silicon_takes_the_default_gpu_share(tools: Path) -> None:
    printing(tools, "sysctl", f"{16 * GiB}\nApple M1\n")
    gpu = detect(system="Darwin").gpus[0]
    assert gpu.spec.id == "apple-m1-16gb" and gpu.total_bytes == find_gpu("apple-m1-16gb").memory_bytes
    assert gpu.unified_memory_bytes == 16 * GiB and gpu.free_bytes is None


@posix_only
def test_an_apple_machine_the_catalogue_lacks_is_custom(tools: Path) -> None:
    printing(tools, "sysctl", f"{18 * GiB}\nApple M3 Pro\n")
    gpu = detect(system="Darwin").gpus[0]
    assert gpu.catalogue is None and gpu.total_bytes == 12288 * MiB  # 2/3 of 18 GiB
    printing(tools, "sysctl", f"{64 * GiB}\nApple M4 Max\n")
    assert detect(system="Darwin").gpus[0].total_bytes == 48 * GiB  # 3/4 above 36 GB


@posix_only
def test_an_m5_mac_is_found_by_sysctls_chip_name_and_its_ram(tools: Path) -> None:
    # sysctl machdep.cpu.brand_string names the chip as Apple does ("Apple M5 Pro"); hw.memsize the RAM: a 64 GB
    # M5 Pro is the catalogue's apple-m5-pro-64gb (Apple Newsroom 2026-03-03: up to 64 GB), its GPU 3/4 of it.
    printing(tools, "sysctl", f"{64 * GiB}\nApple M5 Pro\n")
    gpu = detect(system="Darwin").gpus[0]
    assert gpu.spec.id == "apple-m5-pro-64gb" and gpu.total_bytes == 48 * GiB


@posix_only
def test_an_intel_mac_is_a_note(tools: Path) -> None:
    printing(tools, "sysctl", f"{32 * GiB}\nIntel(R) Core(TM) i9-9880H CPU @ 2.30GHz\n")
    result = detect(system="Darwin")
    assert not result.found and "Intel Mac" in result.notes[0]
    assert detect(system="Linux").notes == ()  # sysctl is asked only on macOS


def test_judging_against_free_memory_holds_what_others_hold_in_the_plan() -> None:
    # 23 of an A10's 24 GiB held (a made-up busy card): the plan holds all 23 GiB, not a headroom capped at 90 %.
    busy = LocalGpu(0, "NVIDIA A10", "nvidia", 24 * GiB, 23 * GiB, 1 * GiB, "nvidia-smi")
    assert busy.held_now_bytes == 23 * GiB and busy.held_fraction == pytest.approx(23 / 24)


# ---- a unified-memory NVIDIA chip: GB10 (DGX Spark) -------------------------------------------------
# GB10 reports no memory: nvidia-smi prints "[N/A]" for memory.total (unslothai/unsloth PR #10703) and NVML
# answers Not Supported; CUDA allocates from the RAM the Linux kernel manages, which PyTorch reports as
# 122,572 MiB (resources/gpus.json dgx-spark-gb10, memory_reported). The stand-in /proc/meminfo gives that.
GB10_RAM = 122572 * MiB
GB10_AVAILABLE = 100 * GiB


def gb10_meminfo() -> tuple[int, int | None]:
    return GB10_RAM, GB10_AVAILABLE


class NVMLError_NotSupported(Exception):
    pass


class FakeGb10Nvml(FakeNvml):
    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        if self.cards[handle][0] == "NVIDIA GB10":
            raise NVMLError_NotSupported()
        return super().nvmlDeviceGetMemoryInfo(handle)


@posix_only
def test_gb10_through_nvidia_smi_is_the_dgx_spark_with_the_ram_it_allocates_from(tools: Path) -> None:
    printing(tools, "nvidia-smi", "NVIDIA GB10, [N/A], [N/A], [N/A], 580.95.05\n")
    result = detect(meminfo=gb10_meminfo)
    assert result.notes == () and len(result.gpus) == 1
    gpu = result.gpus[0]
    assert gpu.spec.id == "dgx-spark-gb10" and gpu.source == "nvidia-smi + /proc/meminfo"
    assert (gpu.total_bytes, gpu.free_bytes, gpu.used_bytes) == (GB10_RAM, GB10_AVAILABLE, GB10_RAM - GB10_AVAILABLE)
    assert gpu.driver == "580.95.05" and gpu.hardware_changes() == {"gpu": "dgx-spark-gb10"}


@posix_only
def test_gb10_through_nvml_is_read_the_same_way(tools: Path) -> None:
    nvml = FakeGb10Nvml([("NVIDIA GB10", 0, 0)])
    result = detect(nvml_loader=lambda: nvml, meminfo=gb10_meminfo)
    assert [(g.spec.id, g.source) for g in result.gpus] == [("dgx-spark-gb10", "nvml + /proc/meminfo")]


@posix_only
def test_a_card_without_a_memory_total_is_still_skipped_unless_it_is_unified(tools: Path) -> None:
    # A discrete card printing [N/A] is not given the machine's RAM; nor is GB10 where /proc/meminfo is unread.
    printing(tools, "nvidia-smi", "NVIDIA GeForce RTX 3060, [N/A], [N/A], [N/A], 535.1\n")
    assert detect(meminfo=gb10_meminfo).gpus == ()
    printing(tools, "nvidia-smi", "NVIDIA GB10, [N/A], [N/A], [N/A], 580.95.05\n")
    result = detect(meminfo=lambda: None)
    assert result.gpus == () and "skipped" in result.notes[0]
    nvml = FakeGb10Nvml([("NVIDIA GB10", 0, 0)])
    assert "reports no memory total" in detect(nvml_loader=lambda: nvml, meminfo=lambda: None).notes[0]


def test_meminfo_is_read_from_linux_s_file(tmp_path: Path) -> None:
    # /proc/meminfo's format (Linux Documentation/filesystems/proc.rst): "MemTotal:  <n> kB".
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       125513728 kB\nMemFree:        1000 kB\nMemAvailable:   104857600 kB\n")
    assert read_meminfo(str(meminfo)) == (125513728 * 1024, 104857600 * 1024)
    meminfo.write_text("garbage\n")
    assert read_meminfo(str(meminfo)) is None
    assert read_meminfo(str(tmp_path / "absent")) is None

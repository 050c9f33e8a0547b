"""The laptop and workstation cards of 2025–2026 (docs/CATALOGUES.md, branch h75cards): Apple's M5 family, the
GeForce RTX 50 Laptop GPUs and the RTX PRO Blackwell workstation cards. Each figure a test names is the one the
entry's sources cite; the driver strings are the ones public captures show."""

from __future__ import annotations

import pytest

from core.catalogue import Generation, GpuGroup, find_gpu, generation
from core.cli.app import main
from core.files.gpu_match import match_catalogue
from core.files.local_host import APPLE_OTHER_GB_S, apple_bandwidths
from core.units import GiB, MiB

APPLE = ("apple-m5-16gb", "apple-m5-24gb", "apple-m5-32gb", "apple-m5-pro-64gb", "apple-m5-max-128gb")
LAPTOPS = ("rtx-5090-laptop", "rtx-5080-laptop", "rtx-5070-laptop", "rtx-5060-laptop")
WORKSTATIONS = ("rtx-pro-4000-blackwell", "rtx-pro-4500-blackwell", "rtx-pro-5000-blackwell")
NEW = APPLE + LAPTOPS + WORKSTATIONS  # each planned on every engine: tests/core/test_gpus_2026.py


def test_apple_m5_family_as_apple_publishes_it() -> None:
    # Apple's M5 press release (2025-10-15): 153 GB/s, up to 32 GB (16, 24 or 32 GB: Ars Technica); Apple
    # Newsroom 2026-03-03: M5 Pro up to 64 GB at 307 GB/s, M5 Max up to 128 GB at 614 GB/s with the 40-core GPU.
    figures = {gpu: (find_gpu(gpu).memory_bandwidth_gb_s, find_gpu(gpu).unified_memory_gb) for gpu in APPLE}
    assert figures == {
        "apple-m5-16gb": (153, 16),
        "apple-m5-24gb": (153, 24),
        "apple-m5-32gb": (153, 32),
        "apple-m5-pro-64gb": (307, 64),
        "apple-m5-max-128gb": (614, 128),
    }
    for gpu in APPLE:
        card = find_gpu(gpu)
        assert card.group is GpuGroup.APPLE and generation(gpu) is Generation.OTHER
        # Apple gives the per-core Neural Accelerators no matmul rate: no tensor figure is invented.
        assert card.tflops_dense["fp16"] is None and "Neural Accelerator" in card.notes
    # fp32 = shaders x 2 x 1.74 GHz (hmc-tech's 10-core M5: 4.45 TFLOPS), 128 shaders a core.
    assert find_gpu("apple-m5-16gb").peak_tflops("fp32") == pytest.approx(4.45, abs=0.01)
    assert find_gpu("apple-m5-max-128gb").peak_tflops("fp32") == pytest.approx(40 * 128 * 2 * 1.74e-3, abs=0.01)


def test_the_host_bandwidth_table_keeps_only_what_the_catalogue_lacks() -> None:
    # M5 and M5 Pro now come from the catalogue (one home); the 32-core M5 Max's 460 GB/s (cputronic.com) has no
    # entry, so the table keeps it, and the lower of 460 / 614 is what sysctl's "Apple M5 Max" gets.
    assert "M5" not in APPLE_OTHER_GB_S and "M5 Pro" not in APPLE_OTHER_GB_S
    assert APPLE_OTHER_GB_S["M5 Max"] == 460.0
    chips = apple_bandwidths()
    assert (chips["M5"], chips["M5 Pro"], chips["M5 Max"]) == (153.0, 307.0, 460.0)


def test_rtx_50_laptop_gpus_as_nvidia_lists_them() -> None:
    # NVIDIA's CES 2025 laptop table (Neowin 2025-01-07): 24 GB 256-bit, 16 GB 256-bit, 8 GB 128-bit GDDR7; 28 Gbps on
    # 256 bits = 896 GB/s (hmc-tech, RTX 5090 Laptop); purepc.pl: the 5060 / 5070 Laptop's 24 Gbps x 128-bit = 384 GB/s.
    # Memory as nvidia-smi reports it (public captures): 24,463 / 16,303 / 8,151 / 8,151 MiB.
    figures = {gpu: (find_gpu(gpu).memory_bytes // MiB, find_gpu(gpu).memory_bandwidth_gb_s) for gpu in LAPTOPS}
    assert figures == {
        "rtx-5090-laptop": (24_463, 896),
        "rtx-5080-laptop": (16_303, 896),
        "rtx-5070-laptop": (8_151, 384),
        "rtx-5060-laptop": (8_151, 384),
    }
    for gpu in LAPTOPS:
        assert find_gpu(gpu).group is GpuGroup.LAPTOP and generation(gpu) is Generation.BLACKWELL
    # Not the desktop card of the same name: the RTX 5090 Laptop GPU is a GB203 with 24 GB, not 32 GB.
    assert find_gpu("rtx-5090-laptop").memory_bytes < find_gpu("rtx-5090").memory_bytes
    # fp32 = CUDA cores x 2 x the 150 W board's clock (hmc-tech: 10,496 x 2 x 2.16 GHz = 45.34 TFLOPS).
    assert find_gpu("rtx-5090-laptop").peak_tflops("fp32") == pytest.approx(45.34)


def test_rtx_pro_blackwell_workstation_cards_as_their_datasheets_give_them() -> None:
    # RTX PRO 4000: 24 GB GDDR7 192-bit = 672 GB/s, 140 W; RTX PRO 4500: 32 GB 256-bit = 896 GB/s, 200 W (hmc-tech,
    # technical.city); RTX PRO 5000: 48 GB up to 1,344 GB/s, 300 W, 2,064 AI TOPS (NVIDIA's page). Memory as nvidia-smi
    # reports it with ECC off: 24,467 / 32,623 / 48,935 MiB (public captures).
    figures = {
        gpu: (find_gpu(gpu).memory_bytes // MiB, find_gpu(gpu).memory_bandwidth_gb_s, find_gpu(gpu).board_power_w)
        for gpu in WORKSTATIONS
    }
    assert figures == {
        "rtx-pro-4000-blackwell": (24_467, 672, 140),
        "rtx-pro-4500-blackwell": (32_623, 896, 200),
        "rtx-pro-5000-blackwell": (48_935, 1344, 300),
    }
    for gpu in WORKSTATIONS:
        assert generation(gpu) is Generation.BLACKWELL, gpu
    assert find_gpu("rtx-pro-5000-blackwell").peak_tflops("fp8") == 2064 / 4
    # hmc-tech's dense FP8 (FP32 accumulate) for the RTX PRO 4500: 439.5 TFLOPS = 82 SMs x 2,048 x 2.617 GHz.
    assert find_gpu("rtx-pro-4500-blackwell").peak_tflops("fp8") == pytest.approx(439.5)


def test_this_machines_card_is_found_by_what_its_driver_reports() -> None:
    # nvidia-smi "name, memory.total" as public captures show them (GitHub code search via find_string, the entries'
    # sources); macOS names the chip and gives the RAM (system_profiler, sysctl hw.memsize).
    reported = {
        ("NVIDIA GeForce RTX 5090 Laptop GPU", 24_463 * MiB): "rtx-5090-laptop",
        ("NVIDIA GeForce RTX 5080 Laptop GPU", 16_303 * MiB): "rtx-5080-laptop",
        ("NVIDIA GeForce RTX 5070 Laptop GPU", 8_151 * MiB): "rtx-5070-laptop",
        ("NVIDIA GeForce RTX 5060 Laptop GPU", 8_151 * MiB): "rtx-5060-laptop",
        ("NVIDIA RTX PRO 4000 Blackwell", 24_467 * MiB): "rtx-pro-4000-blackwell",
        ("NVIDIA RTX PRO 4500 Blackwell", 32_623 * MiB): "rtx-pro-4500-blackwell",
        ("NVIDIA RTX PRO 5000 Blackwell", 48_935 * MiB): "rtx-pro-5000-blackwell",
    }
    for (name, total), gpu in reported.items():
        found = match_catalogue(name, "nvidia", total)
        assert found is not None and found.id == gpu, name
    # The desktop cards are not taken for the laptop ones, nor the other way round.
    desktop = match_catalogue("NVIDIA GeForce RTX 5080", "nvidia", 16_303 * MiB)
    assert desktop is not None and desktop.id == "rtx-5080"
    for ram, gpu in ((16, "apple-m5-16gb"), (24, "apple-m5-24gb"), (32, "apple-m5-32gb")):
        share = find_gpu(gpu).memory_bytes
        found = match_catalogue("Apple M5", "apple", share, unified_bytes=ram * GiB)
        assert found is not None and found.id == gpu
    found = match_catalogue("Apple M5 Max", "apple", 96 * GiB, unified_bytes=128 * GiB)
    assert found is not None and found.id == "apple-m5-max-128gb"
    assert match_catalogue("Apple M5 Max", "apple", 27 * GiB, unified_bytes=36 * GiB) is None  # the 32-core M5 Max


def test_vramplan_gpus_lists_them_and_a_plan_takes_them_by_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus"]) == 0
    listing = capsys.readouterr().out
    for gpu in NEW:
        assert gpu in listing, gpu
    for gpu in ("rtx-5090-laptop", "apple-m5-max-128gb", "rtx-pro-5000-blackwell"):
        assert main(["estimate", "--json", "--model", "qwen2.5-0.5b", "--gpu", gpu]) == 0
        assert gpu in capsys.readouterr().out

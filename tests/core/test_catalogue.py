"""The GPU catalogue: driver-reported memory, dense peaks, sources."""

from __future__ import annotations

from core.catalogue import find_gpu, load_gpus
from core.units import GB, MiB


def test_at_least_fifteen_cards_each_with_a_source() -> None:
    gpus = load_gpus()
    assert len(gpus) >= 15
    assert len({g.id for g in gpus}) == len(gpus)
    for gpu in gpus:
        assert gpu.sources, gpu.id
        assert (gpu.memory_bytes > 0 and gpu.peak_tflops("bf16") > 0) or gpu.peak_tflops("fp16") > 0


def test_driver_reported_capacities() -> None:
    # nvidia-smi: A100 80GB shows 81,920 MiB (about 85.9 decimal GB); H100 80GB 81,559 MiB.
    a100 = find_gpu("a100-80gb-sxm")
    assert a100.memory_bytes == 81_920 * MiB
    assert round(a100.memory_bytes / GB, 1) == 85.9
    assert find_gpu("h100-sxm").memory_bytes == 81_559 * MiB


def test_dense_peaks_from_datasheets() -> None:
    # NVIDIA A100 datasheet: 312 TFLOP/s BF16 dense, 19.5 FP32; H100 SXM: 989.4 BF16 dense.
    assert find_gpu("a100-80gb-sxm").peak_tflops("bf16") == 312
    assert find_gpu("a100-80gb-sxm").peak_tflops("fp32") == 19.5
    assert find_gpu("h100-sxm").peak_tflops("bf16") == 989.4
    # T4 has no bf16 units: bf16 falls back to its fp16 rate (65 TFLOP/s, T4 datasheet).
    assert find_gpu("t4").peak_tflops("bf16") == 65

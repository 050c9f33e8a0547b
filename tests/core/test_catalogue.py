"""The GPU catalogue: every entry's figures agree with each other and name their sources."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from core.catalogue import DTYPES, GROUP_LABELS, GpuGroup, GpuSpec, find_gpu, load_gpus, search, share_rule
from core.units import GB, GiB, MiB

GPUS = load_gpus()
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Fields an entry may list in checked_two_sources.
CHECKABLE = {
    "memory_bytes",
    "memory_marketing_gb",
    "tflops_dense",
    "memory_bandwidth_gb_s",
    "board_power_w",
    "price_per_hour_usd",
    "price_purchase_usd",
} | {f"tflops_dense.{dtype}" for dtype in DTYPES}


def test_catalogue_covers_the_cards_people_own() -> None:
    assert len(GPUS) >= 60
    assert len({g.id for g in GPUS}) == len(GPUS)
    groups = {group: [g for g in GPUS if g.group is group] for group in GpuGroup}
    assert len(groups[GpuGroup.LAPTOP]) >= 5
    assert len(groups[GpuGroup.DESKTOP]) >= 20
    assert len(groups[GpuGroup.DATACENTRE]) >= 15
    assert len(groups[GpuGroup.APPLE]) >= 8
    assert not groups[GpuGroup.CUSTOM], "every catalogue card belongs to a named group"
    assert {g.vendor for g in GPUS} == {"nvidia", "amd", "apple"}


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.id)
def test_every_entry_names_sources_and_dates_its_price(gpu: GpuSpec) -> None:
    assert gpu.sources, "each card names where its figures come from"
    assert gpu.price_source, "a price, or a note that none was found"
    priced = gpu.price_per_hour_usd is not None or gpu.price_purchase_usd is not None
    if priced:
        assert gpu.price_date is not None and DATE.match(gpu.price_date), gpu.price_date
        assert "no dated public price" not in gpu.price_source
    else:
        assert gpu.price_date is None
    assert set(gpu.checked_two_sources) <= CHECKABLE
    for field in gpu.checked_two_sources:  # a figure marked as checked is there to check
        if field.startswith("tflops_dense."):
            assert gpu.tflops_dense[field.removeprefix("tflops_dense.")] is not None, field


@pytest.mark.parametrize("gpu", [g for g in GPUS if g.unified_memory_gb is None], ids=lambda g: g.id)
def test_reported_memory_is_a_little_under_the_marketing_size(gpu: GpuSpec) -> None:
    # Cards carry binary GiB of DRAM; the driver keeps a slice back (nvidia-smi shows 81,559 MiB
    # of an H100's 80 GiB, 46,068 MiB of an A40's 48 GiB with ECC on: about 1/16 lost to ECC).
    nominal = gpu.memory_marketing_gb * GiB
    assert 0.93 * nominal <= gpu.memory_bytes <= nominal, gpu.memory_reported
    mib = gpu.memory_bytes / MiB
    shown = (f"{mib:.0f} MiB", f"{gpu.memory_bytes:,} bytes", "not verified")
    assert any(text in gpu.memory_reported for text in shown), gpu.memory_reported


@pytest.mark.parametrize("gpu", [g for g in GPUS if g.group is GpuGroup.APPLE], ids=lambda g: g.id)
def test_apple_memory_is_the_default_gpu_share_of_unified_memory(gpu: GpuSpec) -> None:
    # Public reports of the iogpu.wired_limit_mb default: about 2/3 of RAM up to 36 GB, 3/4 above.
    assert gpu.unified_memory_gb is not None and gpu.gpu_share is not None
    share = 2 / 3 if gpu.unified_memory_gb <= 36 else 3 / 4
    assert gpu.gpu_share == pytest.approx(share, abs=1e-4)
    assert gpu.memory_bytes == math.floor(gpu.unified_memory_gb * 1024 * share) * MiB
    assert "sudo sysctl iogpu.wired_limit_mb=" in gpu.notes, "tells the user how to raise the limit"


def test_every_unified_memory_machine_names_its_share_and_how_to_raise_it() -> None:
    # A GPU that shares the machine's RAM gives that RAM, the part the GPU may use by default as memory_bytes,
    # and (outside Apple, whose rule the test above checks) the rule in share_rule; a discrete card neither.
    for gpu in GPUS:
        unified = gpu.group in (GpuGroup.APPLE, GpuGroup.UNIFIED)
        assert (gpu.unified_memory_gb is not None) is unified, gpu.id
        assert bool(share_rule(gpu.id)) is (gpu.group is GpuGroup.UNIFIED), gpu.id
        if unified:
            assert gpu.memory_bytes < gpu.unified_memory_gb * GiB, gpu.id


def test_dgx_spark_gives_the_gpu_what_cuda_reports_of_the_systems_memory() -> None:
    # GuigsEvt/dgx_spark_config issue #1 (torch 2.9 on GB10): "Total mem : 119.70 GB" (GiB, as torch prints it),
    # "SM count : 48", "Compute cap : 12.1"; a PyTorch OOM message on a Spark: "total capacity of 119.70 GiB".
    spark = find_gpu("dgx-spark-gb10")
    assert round(spark.memory_bytes / GiB, 2) == 119.70
    assert spark.unified_memory_gb == 128 and spark.gpu_share is None  # no share rule: the OS's memory, all of it
    assert spark.sm_count == 48 and spark.vendor == "nvidia"
    assert "nvidia-smi" in share_rule(spark.id)


def test_strix_halo_gives_the_gpu_linuxs_default_gtt_limit() -> None:
    # antirez/ds4 issue #475 (a 128 GB Ryzen AI Max+ 395 under Linux): "amdgpu ... 63968M of GTT memory ready";
    # Linux's TTM limits GTT to half of system RAM by default (ttm_device.c ttm_global_init: num_pages / 2).
    halo = find_gpu("ryzen-ai-max-395-128gb")
    assert halo.memory_bytes == 63_968 * MiB
    assert halo.gpu_share == 0.5 and halo.unified_memory_gb == 128
    assert halo.memory_bytes <= halo.gpu_share * halo.unified_memory_gb * GiB
    assert "ttm.pages_limit" in share_rule(halo.id) and "ttm.pages_limit" in halo.notes


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.id)
def test_dtype_support_agrees_with_the_tflops_entries(gpu: GpuSpec) -> None:
    rates = gpu.tflops_dense
    assert set(rates) == set(DTYPES)
    assert set(gpu.unsupported_dtypes) <= set(DTYPES)
    for dtype, reason in gpu.unsupported_dtypes.items():
        assert rates[dtype] is None, f"{dtype} is unsupported yet has a rate"
        assert reason.strip()
    unexplained = [d for d in DTYPES if rates[d] is None and d not in gpu.unsupported_dtypes]
    if unexplained:  # a rate left out for want of a source says so
        said = ("null" in gpu.notes, "not published" in gpu.notes, "no TFLOPS published" in gpu.sources[0])
        assert any(said), unexplained
    # Dense tensor rates: bf16 and fp16 run at one rate; fp8 doubles it; tf32 is at most half of it.
    if rates["bf16"] and rates["fp16"]:
        assert rates["bf16"] == rates["fp16"]
    if rates["fp8"] and rates["fp16"]:
        # 2 % slack: the L40S datasheet itself prints 362.05 (bf16) beside 183 (tf32) and 733 (fp8).
        assert rates["fp8"] == pytest.approx(2 * rates["fp16"], rel=0.02)
    if rates["tf32"] and rates["bf16"]:
        assert rates["tf32"] <= rates["bf16"] / 2 * 1.02
    if rates["fp16"] and rates["fp32"]:
        assert rates["fp16"] >= rates["fp32"]


def test_no_bf16_on_turing_and_volta() -> None:
    # Turing (T4, RTX 20xx) and Volta (V100) have no bf16 units: null, not the fp16 figure.
    for gpu_id in ("t4", "rtx-2080-ti", "rtx-2060", "v100-sxm2-16gb", "v100-sxm2-32gb"):
        gpu = find_gpu(gpu_id)
        assert gpu.tflops_dense["bf16"] is None
        assert "bf16" in (gpu.dtype_problem("bf16") or "")
    assert find_gpu("a100-80gb-sxm").dtype_problem("bf16") is None


def test_laptop_cards_differ_from_the_desktop_card_of_the_same_name() -> None:
    # NVIDIA's spec pages: the RTX 4090 Laptop GPU is an AD103 with 16 GB at up to 150 W;
    # the desktop RTX 4090 an AD102 with 24 GB at 450 W.
    laptop, desktop = find_gpu("rtx-4090-laptop"), find_gpu("rtx-4090")
    assert laptop.group is GpuGroup.LAPTOP and desktop.group is GpuGroup.DESKTOP
    assert laptop.memory_marketing_gb == 16 and desktop.memory_marketing_gb == 24
    assert laptop.board_power_w < desktop.board_power_w


def test_driver_reported_capacities() -> None:
    # nvidia-smi: A100 80GB shows 81,920 MiB (about 85.9 decimal GB); H100 80GB 81,559 MiB;
    # H100 NVL 95,830 MiB; RTX 2080 Ti 11,264 MiB (public nvidia-smi captures).
    a100 = find_gpu("a100-80gb-sxm")
    assert a100.memory_bytes == 81_920 * MiB
    assert round(a100.memory_bytes / GB, 1) == 85.9
    assert find_gpu("h100-sxm").memory_bytes == 81_559 * MiB
    assert find_gpu("h100-nvl").memory_bytes == 95_830 * MiB
    assert find_gpu("rtx-2080-ti").memory_bytes == 11_264 * MiB


def test_dense_peaks_from_datasheets() -> None:
    # NVIDIA A100 datasheet: 312 TFLOP/s BF16 dense, 19.5 FP32; H100 SXM: 989.4 BF16 dense;
    # V100 datasheet: 125 TFLOP/s tensor (fp16), 15.7 FP32.
    assert find_gpu("a100-80gb-sxm").peak_tflops("bf16") == 312
    assert find_gpu("a100-80gb-sxm").peak_tflops("fp32") == 19.5
    assert find_gpu("h100-sxm").peak_tflops("bf16") == 989.4
    assert find_gpu("v100-sxm2-32gb").peak_tflops("fp16") == 125
    # With no bf16 units the estimate falls back to the fp16 rate; the plan is flagged instead
    # (T4 datasheet: 65 TFLOP/s mixed fp16).
    assert find_gpu("t4").peak_tflops("bf16") == 65


def test_search_by_name_memory_vendor_and_group() -> None:
    def ids(text: str) -> set[str]:
        return {g.id for g in search(GPUS, text)}

    assert {"rtx-4090", "rtx-4090-laptop"} <= ids("4090")
    assert ids("24 GB") == ids("24gb") == {g.id for g in GPUS if (g.unified_memory_gb or g.memory_marketing_gb) == 24}
    assert "rtx-3090" in ids("24 GB") and "a10" in ids("24 GB") and "rtx-4090-laptop" not in ids("24 GB")
    assert ids("amd") == {g.id for g in GPUS if g.vendor == "amd"}
    assert ids("laptop") == {g.id for g in GPUS if g.group is GpuGroup.LAPTOP}
    apple_128 = {"apple-m1-ultra-128gb", "apple-m3-max-128gb", "apple-m4-max-128gb", "apple-m5-max-128gb"}
    assert ids("apple 128 GB") == apple_128
    assert ids("h100 80gb") == {"h100-pcie", "h100-sxm"}
    assert ids("no such card") == set()


def test_readme_states_the_catalogue_as_it_is() -> None:
    # The catalogue page (docs/CATALOGUES.md, linked from the README) is written from the catalogue; it must not drift.
    readme = (Path(__file__).parents[2] / "docs" / "CATALOGUES.md").read_text("utf-8")
    figures = sum(len(g.figure_fields()) for g in GPUS)
    checked = sum(len(set(g.figure_fields()) & set(g.checked_two_sources)) for g in GPUS)
    assert f"**{checked} of {figures}** figures" in readme
    assert f"`resources/gpus.json`, {len(GPUS)} cards" in readme
    for group in GpuGroup:
        if group is not GpuGroup.CUSTOM:
            assert f"| {GROUP_LABELS[group]} ({sum(g.group is group for g in GPUS)}) |" in readme


def test_the_estimate_carries_the_cards_dtype_problem() -> None:
    from core.estimate import estimate
    from core.plan import Precision
    from core.presets import default_plan

    on_t4 = default_plan().with_changes(precision=Precision.BF16_MIXED).with_hardware(gpu="t4")
    compute = estimate(on_t4).compute
    assert compute.dtype == "bf16" and compute.dtype_problem == find_gpu("t4").unsupported_dtypes["bf16"]
    assert estimate(on_t4.with_changes(precision=Precision.FP16_MIXED)).compute.dtype_problem is None
    assert estimate(on_t4.with_hardware(gpu="a100-80gb-sxm")).compute.dtype_problem is None


def test_a_card_without_fp8_runs_fp8_at_its_16_bit_rate_not_its_int8_rate() -> None:
    # Issue 24: peak_tflops("fp8") fell back to the int8 rate, so an A100 (no FP8 tensor cores:
    # NVIDIA A100 datasheet; 624 dense INT8 TOPS, 312 BF16 TFLOP/s) ran fp8 at 624 TFLOP/s.
    a100 = find_gpu("a100-80gb-sxm")
    assert a100.peak_tflops("fp8") == 312.0
    assert find_gpu("h100-sxm").peak_tflops("fp8") == 1978.9  # H100 SXM datasheet, dense


def test_rtx_4000_ada_has_the_130_w_cards_tensor_rate_not_the_sffs() -> None:
    # The entry is the 130 W single-slot card (NVIDIA RTX 4000 Ada datasheet: 48 SMs of 4 tensor
    # cores, FP32 26.7 TFLOPS = 6144 x 2 x 2.175 GHz). Its tensor figure was 306.8 TFLOPS sparse FP8,
    # the 70 W RTX 4000 SFF Ada's (Hetzner's GEX44 listing: "RTX 4000 SFF Ada Generation ... 306.8
    # TFLOPS"; 48 x 4096 x the SFF's 1.56 GHz): dense FP16 76.7. By the rule that gives the RTX 5000
    # and 6000 Ada entries their datasheet figures (SMs x 1024 FLOP a clock x boost clock), the card
    # runs 48 x 1024 x 2.175 GHz = 106.9 TFLOP/s. Null rates before that made every estimate fall
    # back to the 26.7 FP32 CUDA-core rate. XiongjieDai's llama-bench on this card (cell 1's
    # nvidia-smi: 130 W cap) measured pp512 of Llama 3 8B at 3,121.67 t/s in F16, 0.164 s
    # (benchmarks/realgpu/serving_speed.json "xd-4000-ada-x1-8b-f16-pp512"); at the SFF's rate the
    # estimate was 0.272 s, past x 1.5.
    from core.estimate import estimate
    from core.presets import plan_for_model

    card = find_gpu("rtx-4000-ada")
    assert card.peak_tflops("fp16") == pytest.approx(48 * 1024 * 2.175e9 / 1e12, abs=0.05)
    assert card.peak_tflops("fp8") == pytest.approx(2 * card.peak_tflops("fp16"))
    per_sm_clock = find_gpu("rtx-5000-ada").peak_tflops("fp16") / (100 * 2.55)  # its datasheet figure
    assert card.peak_tflops("fp16") == pytest.approx(per_sm_clock * 48 * 2.175, abs=0.05)
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4000-ada")
    plan = plan.with_inference(
        engine="llamacpp", gguf_quant="F16", context=512, new_tokens=1, cache_type="f16", flash_attention=False
    )
    prefill = estimate(plan).inference.speed.ttft_alone_s
    assert 0.164 / 1.5 < prefill < 0.164 * 1.5


def test_a_card_is_found_by_its_id_or_its_name_in_any_case_first_in_catalogue_order() -> None:
    from core.errors import PlanError

    # find_gpu reads an index of the catalogue: the card a scan in catalogue order would stop at.
    def scanned(wanted: str) -> GpuSpec:
        key = wanted.strip().lower()
        return next(g for g in GPUS if g.id == key or g.name.lower() == key)

    for gpu in GPUS:
        for typed in (gpu.id, gpu.name, f"  {gpu.name.upper()} ", gpu.id.upper()):
            assert find_gpu(typed) is scanned(typed)
    with pytest.raises(PlanError, match="a GPU id from `vramplan gpus`"):
        find_gpu("no-such-card")

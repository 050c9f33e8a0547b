"""The cards added for 2026 (docs/CATALOGUES.md): each is planned, its architecture and LLVM target read as
the libraries read them, and a serving engine that does not list the card says so."""

from __future__ import annotations

import pytest

from core.catalogue import Generation, GpuGroup, amd_target, find_gpu, find_model, generation
from core.checks import card_serving_warnings
from core.estimate import estimate
from core.inputs import Engine
from core.plan import Plan, default_plan_on
from core.runtime import cublas_workspace
from core.verdict import Mode

NEW = (
    "dgx-spark-gb10",
    "ryzen-ai-max-395-128gb",
    "rx-7900-xtx",
    "rx-7900-xt",
    "rx-9070-xt",
    "mi355x",
    "mi350x",
    "h800-sxm",
    "a800-80gb-sxm",
    "b300-sxm",
    "gb200",
    "gb300",
    "rtx-pro-6000-blackwell-max-q",
    "rtx-5060",
    "rtx-5050",
    "apple-m4-pro-24gb",
    "apple-m4-pro-48gb",
    "apple-m3-ultra-96gb",
    "apple-m3-ultra-256gb",
    "apple-m3-ultra-512gb",
    # Laptops and lab workstations of 2025-2026 (branch h75cards; their figures: test_gpus_laptops_workstations.py).
    "apple-m5-16gb",
    "apple-m5-24gb",
    "apple-m5-32gb",
    "apple-m5-pro-64gb",
    "apple-m5-max-128gb",
    "rtx-5090-laptop",
    "rtx-5080-laptop",
    "rtx-5070-laptop",
    "rtx-5060-laptop",
    "rtx-pro-4000-blackwell",
    "rtx-pro-4500-blackwell",
    "rtx-pro-5000-blackwell",
)


def _plan(gpu: str, engine: Engine = Engine.HF) -> Plan:
    model = find_model("qwen2.5-0.5b")
    return default_plan_on(model.spec, model.id).with_input("hardware.gpu", gpu).with_input("inference.engine", engine)


@pytest.mark.parametrize("gpu", NEW)
def test_every_new_card_is_planned_for_training_and_serving_on_every_engine(gpu: str) -> None:
    for engine in Engine:
        est = estimate(_plan(gpu, engine))
        for mode in Mode:
            assert est.judgement(mode) is not None
        assert est.inference.total_bytes > 0
        assert est.compute.step_seconds > 0


def test_architectures_as_the_drivers_report_them() -> None:
    # Compute capability 12.1 (GB10: dgx_spark_config issue #1), 10.3 (B300: nvidia-smi captures), 10.0 (GB200);
    # the H800 is the H100's die and the A800 the A100's (NVIDIA's product briefs).
    for gpu in ("dgx-spark-gb10", "b300-sxm", "gb200", "gb300", "rtx-5060", "rtx-pro-6000-blackwell-max-q"):
        assert generation(gpu) is Generation.BLACKWELL, gpu
    assert generation("h800-sxm") is Generation.HOPPER
    assert generation("a800-80gb-sxm") is Generation.AMPERE
    assert generation("rx-7900-xtx") is Generation.OTHER  # AMD: the Ampere coefficients (core.training.efficiency)
    # The H800's matmuls take cuBLAS's sm90 workspace (32 MiB) as the H100's do.
    assert cublas_workspace("h800-sxm") == cublas_workspace("h100-sxm")


def test_amd_targets_from_rocms_table() -> None:
    # rocm.docs.amd.com gpu-arch-specs: MI350X / MI355X gfx950, RX 7900 XTX / XT gfx1100, RX 9070 XT gfx1201;
    # rocminfo names the Radeon 8060S gfx1151 (antirez/ds4 issue #475).
    assert {gpu: amd_target(gpu) for gpu in ("mi355x", "mi350x", "rx-7900-xtx", "rx-9070-xt")} == {
        "mi355x": "gfx950",
        "mi350x": "gfx950",
        "rx-7900-xtx": "gfx1100",
        "rx-9070-xt": "gfx1201",
    }
    assert amd_target("ryzen-ai-max-395-128gb") == "gfx1151"
    # hipBLASLt is the preferred backend on gfx950 as on gfx942 (core.runtime): the MI355X holds its workspace.
    assert cublas_workspace("mi355x").library == "hipBLASLt"
    assert cublas_workspace("rx-7900-xtx").library == "cuBLAS" and not cublas_workspace("rx-7900-xtx").known


def test_an_engine_that_does_not_list_the_card_says_so() -> None:
    # vLLM's ROCm requirements list gfx1100 and gfx1201 but not gfx1151; SGLang's AMD build targets Instinct.
    assert not card_serving_warnings(_plan("rx-7900-xtx", Engine.VLLM))
    assert not card_serving_warnings(_plan("rx-9070-xt", Engine.VLLM))
    (halo,) = [w for w in card_serving_warnings(_plan("ryzen-ai-max-395-128gb", Engine.VLLM)) if "gfx1151" in w]
    assert "vLLM" in halo
    assert any("Instinct" in w for w in card_serving_warnings(_plan("rx-7900-xtx", Engine.SGLANG)))
    for gpu in ("mi355x", "mi300x", "mi250x-gcd", "h100-sxm", "rtx-4090"):  # cards the engines list: nothing new
        for engine in Engine:
            assert not card_serving_warnings(_plan(gpu, engine)), (gpu, engine)
    for engine in (Engine.HF, Engine.LLAMACPP):  # llama.cpp and transformers run on every new card
        for gpu in NEW:
            assert not card_serving_warnings(_plan(gpu, engine)), (gpu, engine)


def test_a_unified_memory_pcs_engine_pool_is_shared_with_the_os() -> None:
    spark = find_gpu("dgx-spark-gb10")
    assert spark.group is GpuGroup.UNIFIED
    for engine in (Engine.VLLM, Engine.SGLANG):
        warnings = card_serving_warnings(_plan(spark.id, engine))
        assert len(warnings) == 1 and "shares its 128 GB of RAM" in warnings[0]
    est = estimate(_plan(spark.id, Engine.VLLM))
    assert any("shares its 128 GB" in w for w in est.warnings_for(Mode.INFERENCE))


def test_this_machines_card_is_found_by_what_its_driver_reports() -> None:
    from core.files.gpu_match import match_catalogue
    from core.units import MiB

    # (name, vendor, total) as public captures show them: rocm-smi "Card Series" and "VRAM Total Memory (B)",
    # nvidia-smi "name, memory.total" (GitHub code search via find_string, the entries' sources).
    reported = {
        ("AMD Radeon RX 7900 XTX", "amd", 25_753_026_560): "rx-7900-xtx",
        ("Radeon RX 7900 XT", "amd", 21_458_059_264): "rx-7900-xt",
        ("NVIDIA GeForce RTX 5060", "nvidia", 8151 * MiB): "rtx-5060",
        ("NVIDIA B300 SXM6 AC", "nvidia", 275_040 * MiB): "b300-sxm",
        ("NVIDIA GB200", "nvidia", 189_471 * MiB): "gb200",
        ("NVIDIA GB300", "nvidia", 284_208 * MiB): "gb300",
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "nvidia", 97_887 * MiB): (
            "rtx-pro-6000-blackwell-max-q"
        ),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "nvidia", 97_887 * MiB): "rtx-pro-6000-blackwell",
    }
    for (name, vendor, total), gpu in reported.items():
        found = match_catalogue(name, vendor, total)
        assert found is not None and found.id == gpu, name


def test_offloading_on_a_unified_memory_pc_is_told_it_shares_the_machines_ram() -> None:
    from core.inputs import Offload, Strategy
    from core.plan import Method

    # Llama 3.1 70B full fine-tuning keeps 16 B x 70.6e9 parameters (Meta's model card count) of float32 master and
    # moments on the host under ZeRO-Offload: far past the 128 GB a DGX Spark or a Ryzen AI Max has in all, which
    # its GPU's step shares. Linux, not macOS, is what swaps there.
    model = find_model("llama-3.1-70b")
    plan = (
        default_plan_on(model.spec, model.id)
        .with_method(Method.FULL)
        .with_layout(strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER)
    )
    for gpu in ("dgx-spark-gb10", "ryzen-ai-max-395-128gb"):
        texts = estimate(plan.with_hardware(gpu=gpu)).warnings_for(Mode.TRAINING)
        (shared,) = [t for t in texts if "share 128 GB of RAM" in t]
        assert "Linux swaps" in shared and "macOS" not in shared
    # A discrete card's host RAM is its own: no such warning.
    assert not any("share" in t and "GB of RAM" in t for t in estimate(plan).warnings_for(Mode.TRAINING))


def test_the_diagnosis_offers_offloading_where_it_frees_the_gpus_part_only() -> None:
    from core.advice.remedies import _offload_optimizer
    from core.plan import Method

    # DGX Spark: CUDA allocates from all the RAM the OS manages (119.70 GiB of 128 GB, the entry's sources): the
    # state on the CPU stays in the same memory. A Ryzen AI Max's GPU is held to half of the RAM (Linux's TTM
    # limit): there the state leaves the GPU's part.
    model = find_model("llama-3.1-8b")
    plan = default_plan_on(model.spec, model.id).with_method(Method.FULL)
    assert _offload_optimizer(plan.with_hardware(gpu="dgx-spark-gb10")) is None
    assert _offload_optimizer(plan.with_hardware(gpu="ryzen-ai-max-395-128gb")) is not None
    assert _offload_optimizer(plan.with_hardware(gpu="rtx-4090")) is not None

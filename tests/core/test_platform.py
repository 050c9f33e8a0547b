"""The operating system CUDA runs under (``hardware.platform``, core.platform_rules): what the driver reports as
the card's total under WSL2 and native Windows, vLLM's pinned memory under WSL2, where the setting is read from (the
plan file, the command line, a launch command, this machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import find_gpu
from core.cli.app import main
from core.cli.catalogues import render_local_gpus
from core.estimate import estimate
from core.files import planfile
from core.files.launch.serve_command import read_command
from core.files.local_gpus import LocalGpu, LocalGpus, read_platform
from core.inputs import Offload
from core.plan import Engine, Plan, Platform
from core.platform_rules import driver_total_bytes, platform_serving_warning, platform_training_warning
from core.presets import default_plan, plan_for_model
from core.serving.engines import rank_layout, vllm_pool
from core.serving.fit import DEFAULT_FIT
from core.serving.vllm_rules import vllm_total_memory
from core.units import GiB, MiB
from core.verdict import Mode


def _on(gpu: str, platform: Platform, model: str = "qwen2.5-1.5b", **inference: object) -> Plan:
    plan = plan_for_model(model).with_hardware(gpu=gpu, platform=platform)
    return plan.with_inference(**inference)


# ---- the total the driver reports -----------------------------------------------------------------------
def test_under_wsl2_vllm_reads_the_whole_card_as_its_total() -> None:
    # vLLM 0.29.0 under Docker on WSL2, RTX 5060 Ti 16GB (16,311 MiB in nvidia-smi, the run's README):
    # "Free memory on device (14.8/15.9 GiB)" (Freshair129/Private-Runtime-Platform@f52b9b9,
    # docs/evidence/wp24/WP24-2026-09-20-run1/B/EV02/vllm-startup-success.log); vLLM 0.29.0 under WSL2 on an RTX 4050
    # Laptop (6,141 MiB): "Free memory on device (4.95/6.0 GiB)" (Tegdam/pickr_ai@54ed83a,
    # bench/docs/p0b-engine-verification.md). Both are the whole card to vLLM's two decimals.
    for card, printed in (("rtx-5060-ti-16gb", 15.9), ("rtx-4050-laptop", 6.0)):
        gpu = find_gpu(card)
        assert round(vllm_total_memory(gpu, DEFAULT_FIT, Platform.WSL2) / GiB, 1) == printed
        # Native Linux keeps the driver's reserve out of the total (0.42 GiB on these classes, core.serving.fit).
        assert vllm_total_memory(gpu, DEFAULT_FIT) == pytest.approx(gpu.memory_bytes - 0.42 * GiB, abs=MiB)


def test_native_linux_is_the_default_and_keeps_its_total() -> None:
    # vLLM issue #10517: "total_memory=23.58GiB" on an RTX 3090 (24,576 MiB) on native Linux.
    assert default_plan().hardware.platform is Platform.LINUX
    assert vllm_total_memory(find_gpu("rtx-3090")) / GiB == pytest.approx(23.58, abs=0.005)
    assert vllm_total_memory(find_gpu("rtx-3090"), DEFAULT_FIT, Platform.LINUX) / GiB == pytest.approx(23.58, abs=0.005)


def test_native_windows_reports_the_whole_card_too() -> None:
    # PyTorch on Windows 10 (WDDM): "12.00 GiB total capacity" on an RTX 3060 12 GB (ToTheBeginning/PuLID issue 13),
    # 24.00 GiB on an RTX 3090 (Lightricks/LTX-Video issue 64): 12,288 and 24,576 MiB, the whole cards.
    assert vllm_total_memory(find_gpu("rtx-3060-12gb"), DEFAULT_FIT, Platform.WINDOWS) / GiB == 12.0
    assert vllm_total_memory(find_gpu("rtx-3090"), DEFAULT_FIT, Platform.WINDOWS) / GiB == 24.0
    assert driver_total_bytes(8 * GiB, 0.42 * GiB, Platform.WINDOWS) == 8 * GiB
    assert driver_total_bytes(8 * GiB, 0.42 * GiB, Platform.LINUX) == pytest.approx(7.58 * GiB)


def test_vllms_pool_under_wsl2_grows_by_its_share_of_the_drivers_reserve() -> None:
    # GIO443/statecraft-serving@992a95b (results/phase1-1.5b/20261003T001956Z/eager/env.json): vLLM 0.30.0
    # --enforce-eager, Qwen2.5-1.5B-Instruct bf16 at 0.8 and 16,384 tokens on an RTX 4070 Laptop GPU (8,188 MiB) under
    # WSL2 printed 112,704 tokens; the planner gave 103,520 as native Linux (-8.1 %) and 116,096 under WSL2 (+3.0 %):
    # the pool requested is 0.8 x the total, and the total is the whole card (docs/SERVING.md, h92wsl).
    settings = dict(engine=Engine.VLLM, vllm_version="0.30", context=16384, gpu_memory_utilization=0.8)
    linux = _on("rtx-4070-laptop", Platform.LINUX, cuda_graphs=False, **settings)
    wsl2 = linux.with_hardware(platform=Platform.WSL2)
    gpu = find_gpu("rtx-4070-laptop")
    before = vllm_pool(linux, gpu, rank_layout(linux), DEFAULT_FIT)
    after = vllm_pool(wsl2, gpu, rank_layout(wsl2), DEFAULT_FIT)
    assert after.pool_bytes - before.pool_bytes == pytest.approx(0.8 * 0.42 * GiB, abs=MiB)
    # The benchmark's leave-one-source-out figures are pinned in test_realgpu_serving.py (FIFTH_ROUND_TOKENS); here
    # the plan's own: under WSL2 within 5 % of the printed 112,704 tokens, as native Linux not.
    printed = 112_704
    assert abs(estimate(wsl2).inference.kv_cache_tokens / printed - 1) < 0.05
    assert abs(estimate(linux).inference.kv_cache_tokens / printed - 1) > 0.05
    # What the verdict judges against stays the card less what others hold: the platform moves vLLM's share only.
    assert estimate(wsl2).serving_capacity_bytes == estimate(linux).serving_capacity_bytes


def test_training_capacity_is_the_card_on_every_platform() -> None:
    # PyTorch's out-of-memory limit is the card's memory already (core.runtime.pytorch_limit_bytes): the platform
    # moves no training figure.
    linux = default_plan()
    for platform in (Platform.WSL2, Platform.WINDOWS):
        other = linux.with_hardware(platform=platform)
        assert estimate(other).total_bytes == estimate(linux).total_bytes
        assert estimate(other).capacity_bytes == estimate(linux).capacity_bytes


# ---- pinned memory and what does not run ------------------------------------------------------------------
def test_a_cpu_offload_under_wsl2_is_warned_of_its_pinned_memory() -> None:
    # NVIDIA's CUDA on WSL guide, "Known Limitations for Linux CUDA Applications": "Pinned system memory ...
    # availability for applications is limited"; DeepSpeed's offload pins its host copies (core/files/launch/
    # deepspeed.py: "pin_memory": True).
    offload = default_plan().with_parallel(offload=Offload.OPTIMIZER)
    assert platform_training_warning(offload) == ""
    wsl2 = offload.with_hardware(platform=Platform.WSL2)
    assert "pinned host memory is limited" in platform_training_warning(wsl2)
    assert platform_training_warning(default_plan().with_hardware(platform=Platform.WSL2)) == ""
    assert any("pinned host memory is limited" in w for w in estimate(wsl2).warnings_for(Mode.TRAINING))


def test_vllm_and_sglang_do_not_run_on_native_windows() -> None:
    # vLLM's installation page: no native Windows, run it under WSL. Under WSL2 vLLM pins no host memory
    # (vllm/platforms/interface.py is_pin_memory_available at vllm-project/vllm@005e818), but a plan holds no vLLM
    # host buffer, so nothing is said there.
    vllm = default_plan().with_inference(engine=Engine.VLLM)
    assert platform_serving_warning(vllm) == ""
    assert platform_serving_warning(vllm.with_hardware(platform=Platform.WSL2)) == ""
    windows = vllm.with_hardware(platform=Platform.WINDOWS)
    assert "vLLM does not run on native Windows" in platform_serving_warning(windows)
    sglang = vllm.with_inference(engine=Engine.SGLANG).with_hardware(platform=Platform.WINDOWS)
    assert "SGLang does not run on native Windows" in platform_serving_warning(sglang)
    llamacpp = vllm.with_inference(engine=Engine.LLAMACPP).with_hardware(platform=Platform.WINDOWS)
    assert platform_serving_warning(llamacpp) == ""


# ---- where the setting comes from --------------------------------------------------------------------------
def test_plan_file_round_trip_and_an_older_file_reads_as_native_linux() -> None:
    plan = default_plan().with_hardware(platform=Platform.WSL2)
    assert planfile.loads(planfile.dumps(plan)) == plan
    doc = json.loads(planfile.dumps(default_plan()))
    assert doc["plan"]["hardware"]["platform"] == "linux"
    del doc["plan"]["hardware"]["platform"]
    assert planfile.plan_from_dict(doc).hardware.platform is Platform.LINUX


def test_the_command_line_takes_the_platform_and_refuses_another(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "qwen2.5-1.5b", "--gpu", "rtx-4070-laptop", "--mode", "inference", "--engine"]
    argv += ["vllm", "--vllm-version", "0.30", "--context", "16384", "--gpu-memory-utilization", "0.8"]
    assert main([*argv, "--platform", "wsl2"]) == 0
    wsl2 = capsys.readouterr().out
    assert "8.00 GiB × 0.8" in wsl2  # the whole 8,188 MiB card (7.58 GiB as native Linux)
    assert main(argv) == 0
    assert "7.58 GiB × 0.8" in capsys.readouterr().out
    # One line, no traceback, and a usage error's status.
    assert main([*argv, "--platform", "macos"]) != 0
    err = capsys.readouterr().err
    assert "invalid choice: 'macos' (choose from 'linux', 'wsl2', 'windows')" in err and "Traceback" not in err


def test_a_launch_command_that_sets_wsl2s_pin_memory_variable_is_read_as_wsl2() -> None:
    # vLLM reads VLLM_WSL2_ENABLE_PIN_MEMORY only under WSL2 (vllm-project/vllm PR 41496; docs.vllm.ai
    # configuration/env_vars): a line that sets it is written for WSL2.
    read = read_command("VLLM_WSL2_ENABLE_PIN_MEMORY=1 vllm serve Qwen/Qwen2.5-1.5B-Instruct")
    assert read.fields["hardware.platform"] is Platform.WSL2
    assert "hardware.platform" not in read_command("vllm serve Qwen/Qwen2.5-1.5B-Instruct").fields


# A WSL2 kernel's /proc/version names Microsoft's build ("5.15.153.1-microsoft-standard-WSL2": microsoft/
# WSL2-Linux-Kernel's release linux-msft-wsl-5.15.153.1; vLLM's in_wsl looks for "microsoft" in uname(), after
# microsoft/WSL issue 4071); a native kernel's does not (Ubuntu 24.04's 6.8.0-45-generic).
WSL2_VERSION = "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc (GCC) 11.2.0) #1 SMP\n"
NATIVE_VERSION = "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115) (x86_64-linux-gnu-gcc-13) #45-Ubuntu SMP\n"


def test_this_machines_platform_is_read_from_its_kernel(tmp_path: Path) -> None:
    wsl2, native = tmp_path / "wsl2", tmp_path / "native"
    wsl2.write_text(WSL2_VERSION)
    native.write_text(NATIVE_VERSION)
    assert read_platform("Linux", str(wsl2)) is Platform.WSL2
    assert read_platform("Linux", str(native)) is Platform.LINUX
    assert read_platform("Linux", str(tmp_path / "absent")) is None  # unreadable: not said
    assert read_platform("Windows", str(native)) is Platform.WINDOWS
    assert read_platform("Darwin", str(native)) is None  # a Mac: Metal, no platform to name


def test_using_this_machines_card_under_wsl2_plans_on_wsl2() -> None:
    # An RTX 4070 Laptop as nvidia-smi reports it under WSL2 (8,188 MiB, 805 used: GIO443's env.json).
    card = LocalGpu(0, "NVIDIA GeForce RTX 4070 Laptop GPU", "nvidia", 8188 * MiB, 805 * MiB, 7383 * MiB, "nvidia-smi")
    card = LocalGpu(**{**card.__dict__, "catalogue": find_gpu("rtx-4070-laptop")})
    found = LocalGpus((card,), (), ("nvidia-smi",), 0.05, platform=Platform.WSL2)
    changes = found.hardware_changes(card)
    assert changes == {"gpu": "rtx-4070-laptop", "platform": Platform.WSL2}
    assert default_plan().with_hardware(**changes).hardware.platform is Platform.WSL2
    assert "--gpu rtx-4070-laptop --platform wsl2" in render_local_gpus(found)
    # Native Linux, the default, is not named; an unknown platform (a Mac) is not set.
    assert "--platform" not in render_local_gpus(LocalGpus((card,), (), ("nvidia-smi",), 0.05, platform=Platform.LINUX))
    assert "platform" not in LocalGpus((card,), (), ("nvidia-smi",), 0.05).hardware_changes(card)

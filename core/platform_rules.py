"""What the operating system CUDA runs under changes in a plan (``hardware.platform``): its one home.

Read by vLLM's and SGLang's total (core.serving.vllm_rules.vllm_total_memory, which every share of the card
they take starts from) and by the plan's warnings (core.checks). docs/SERVING.md "Windows' WSL2 as a
platform (h92wsl)" has the evidence and the corpus' WSL2 logs scored with and without it.

- **The total the driver reports.** On native Linux ``cudaMemGetInfo``'s total is the card less what the
  driver keeps (vLLM 0.19.0 "total_memory=79.19GiB" on an 80 GB H100; core.serving.fit's
  ``driver_reserved_bytes``). Under WSL2 the GPU is paravirtualised through Windows' WDDM (dxgkrnl, NVIDIA's
  "CUDA on WSL User Guide" section 2) and the total is the whole card: vLLM 0.29.0 prints "Free memory on
  device (14.8/15.9 GiB)" on a 16,311 MiB RTX 5060 Ti (Freshair129/Private-Runtime-Platform@f52b9b9) and
  "(4.95/6.0 GiB)" on a 6,141 MiB RTX 4050 Laptop (Tegdam/pickr_ai@54ed83a), where Linux's totals of those
  cards are 0.42 GiB lower. Native Windows (WDDM) reports the whole card to PyTorch too: 12.00 GiB on an
  RTX 3060 12 GB (ToTheBeginning/PuLID issue 13), 24.00 on an RTX 3090 (Lightricks/LTX-Video issue 64).
  What Windows' desktop holds of the card is memory other processes hold (``hardware.held_by_others``).
- **Pinned host memory.** NVIDIA's guide, "Known Limitations for Linux CUDA Applications": "Pinned system
  memory ... availability for applications is limited". vLLM turns it off under WSL
  (``Platform.is_pin_memory_available``, vllm/platforms/interface.py at vllm-project/vllm@005e818: "Using
  'pin_memory=False' as WSL is detected. This may slow down the performance."; first in PR 312, 2023-06,
  ``in_wsl``: "microsoft" in ``uname()``); from PR 41496 (2026-05) ``VLLM_WSL2_ENABLE_PIN_MEMORY=1`` opts in.
  Pageable memory changes no size the planner counts, only how fast a host copy runs: a warning where the plan
  has a host copy that pins (a training CPU offload); a vLLM plan holds no host buffer, so none there.
- **Training's capacity** is the card's memory on every platform already (core.runtime.pytorch_limit_bytes:
  the figure PyTorch's out-of-memory message reads); what the desktop holds is, again, held by others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from core.inputs import ENGINE_LABELS, Engine, Offload, Platform

if TYPE_CHECKING:
    from core.plan import Plan

# The platforms whose driver reports the whole card as cudaMemGetInfo's total (above).
WHOLE_CARD_TOTAL: Final = frozenset({Platform.WSL2, Platform.WINDOWS})
# The engines that start on Linux only: vLLM's installation page ("vLLM does not support Windows
# natively. To run vLLM on Windows, you can use the Windows Subsystem for Linux (WSL)"), SGLang's likewise
# (its CUDA wheels are Linux-only).
LINUX_ONLY_ENGINES: Final = frozenset({Engine.VLLM, Engine.SGLANG})


def reports_whole_card(platform: Platform) -> bool:
    """Whether the driver's total on ``platform`` is the whole card (WSL2, native Windows) rather than the card
    less what the driver keeps (native Linux)."""
    return platform in WHOLE_CARD_TOTAL


def driver_total_bytes(card_bytes: float, reserved_bytes: float, platform: Platform) -> float:
    """``cudaMemGetInfo``'s total on ``platform``: the whole ``card_bytes`` where the driver reports it whole,
    else the card less ``reserved_bytes``, never below 0."""
    if reports_whole_card(platform):
        return float(card_bytes)
    return max(0.0, card_bytes - reserved_bytes)


def platform_training_warning(plan: Plan) -> str:
    """The training warning the platform brings, "" when none: a CPU offload under WSL2, whose pinned host
    memory NVIDIA limits (DeepSpeed's and FSDP2's offloads pin their host copies)."""
    offloads = plan.parallel.offload is not Offload.NONE or plan.activation_offload
    if plan.hardware.platform is not Platform.WSL2 or not offloads:
        return ""
    # Reports of the cap: PyTorch's pin_memory "CUDA error: out of memory" under WSL2 (microsoft/WSL issue 8447);
    # pinned allocations over 500 MB failing in Docker on WSL2 where native Windows took 4 GB (microsoft/WSL issue
    # 14078); a 0.75-1.0 GiB cumulative pin wall on an RTX 3090 (FlashML-org/FreeToken PR 233). No one figure:
    # a warning, not a limit.
    return (
        "Under WSL2 pinned host memory is limited (NVIDIA's CUDA on WSL guide, known limitations; pinned "
        "allocations of 0.5 - 1 GiB have failed there with 'CUDA error: out of memory'): the CPU offload's "
        "pinned buffers may fail to allocate, or run pageable and slower than the estimate; the memory figures "
        "are the same."
    )


def platform_serving_warning(plan: Plan) -> str:
    """The serving warning the platform brings, "" when none: vLLM or SGLang on native Windows, which they do
    not support (run them under WSL2). vLLM's pageable host memory under WSL2 is not warned of: a plan holds no
    vLLM host buffer (--cpu-offload-gb, V0's swap space are not modelled), so it changes nothing planned."""
    platform, engine = plan.hardware.platform, plan.inference.engine
    if platform is Platform.WINDOWS and engine in LINUX_ONLY_ENGINES:
        return (
            f"{ENGINE_LABELS[engine]} does not run on native Windows: run it under WSL2 (Platform: Windows, WSL2), "
            "where the driver also reports the whole card."
        )
    return ""

"""flash-attn 2 on datacenter Blackwell (sm_100 / sm_103) runs Ampere's mma.sync, not tcgen05: timed at the H100's
FlashAttention-2 rate per SM and clock (core.training.efficiency.FLASH_SM80; docs/TRAINING_TIME.md, "flash-attn 2 on
datacenter Blackwell").

- Dao-AILab/flash-attention v2.8.3 (060c9188) csrc/flash_attn/src/kernel_traits.h L29-33: MMA_Atom<SM80_16x8x16_...> for
  every __CUDA_ARCH__ >= 800; setup.py L187-188 builds sm_100 with it from CUDA 12.8.
- NVIDIA/cudnn-frontend@21258cf5 benchmark/dsa/benchmark_single_dsa.py ``_FLOPS_PER_CLOCK_PER_SM``: 4,096 dense 16-bit
  FLOPs per SM per clock on compute capability 9, 8,192 on 10, 1,024 on 12.
- Dao-AILab/flash-attention issue 1589 (B200, flash-attn 2.7.4.post1) and assets/flash2_h100_fwd_bwd_benchmark.png
  (H100 SXM5): benchmarks/benchmark_flash_attention.py's forward + backward TFLOP/s, head dim 64, no causal mask.
"""

from __future__ import annotations

import statistics

import pytest

from core.catalogue import find_gpu, tcgen05
from core.cli.render import render_estimate
from core.estimate import estimate
from core.params import param_counts
from core.plan import Attention, Plan, Stack
from core.presets import plan_for_model
from core.training.compute import FLASH_SM80_NOTE, SDPA_CUDNN_NOTE
from core.training.efficiency import FITTED, TCGEN05_OVER_MMA_SYNC, coefficient
from core.training.speed import attention_kernel, step_work


def _plan(gpu: str, attention: Attention = Attention.FLASH, stack: Stack = Stack.EAGER) -> Plan:
    plan = plan_for_model("qwen3-4b").with_workload(micro_batch=1, seq_len=16384).with_hardware(gpu=gpu)
    return plan.with_changes(attention=attention, stack=stack, checkpointing=True)


def test_only_the_datacenter_blackwell_cards_drive_their_tensor_cores_with_tcgen05() -> None:
    # B200 / GB200 are compute capability 10.0, B300 / GB300 10.3; RTX 50, RTX PRO Blackwell 12.0, GB10 12.1.
    for gpu in ("b200", "gb200", "b300-sxm", "gb300"):
        assert tcgen05(gpu), gpu
    for gpu in ("rtx-5090", "rtx-5060", "rtx-pro-6000-blackwell", "rtx-pro-4000-blackwell", "dgx-spark-gb10"):
        assert not tcgen05(gpu), gpu
    for gpu in ("h100-sxm", "gh200-96gb", "a100-80gb-sxm", "custom"):
        assert not tcgen05(gpu), gpu


def test_flash_attn_on_a_b200_is_timed_at_hopper_s_rate_per_sm_and_clock() -> None:
    # 8,192 / 4,096 dense FLOPs per SM per clock (cudnn-frontend's table): twice the H100's coefficient.
    assert TCGEN05_OVER_MMA_SYNC == 2.0
    plan = _plan("b200")
    assert attention_kernel(plan, "b200") == "flash-sm80"
    work = step_work(plan, param_counts(plan), find_gpu("b200"))
    assert "attention:blackwell/flash-sm80" in work.features and "attention:blackwell/flash" not in work.features
    assert coefficient("attention:blackwell/flash-sm80") == pytest.approx(2 * FITTED["attention:hopper/flash"])
    # So its absolute rate is the H100's x (148 SMs x 1.855 GHz) / (132 x 1.830 GHz): the datasheets' 2,250 and
    # 989.4 dense bf16 TFLOP/s divided by their 8,192 and 4,096 FLOPs per SM per clock.
    b200, h100 = find_gpu("b200"), find_gpu("h100-sxm")
    rate = b200.peak_tflops("bf16") / coefficient("attention:blackwell/flash-sm80")
    h100_rate = h100.peak_tflops("bf16") / coefficient("attention:hopper/flash")
    assert rate / h100_rate == pytest.approx(2250 / 989.4 / 2, rel=1e-9)
    # Measured by the same script, forward + backward, head dim 64, no causal mask, 512 to 16k tokens: B200 (issue
    # 1589) against H100 SXM5 (the png's panel a). The modelled 1.137 sits inside the measured 1.09-1.20.
    measured_b200 = (258.71, 299.37, 320.70, 312.45, 332.97, 345.80)
    measured_h100 = (215, 254, 274, 288, 294, 296)
    ratios = [b / h for b, h in zip(measured_b200, measured_h100, strict=True)]
    assert min(ratios) < rate / h100_rate < max(ratios)
    assert statistics.median(ratios) == pytest.approx(rate / h100_rate, rel=0.03)


def test_the_consumer_blackwell_cards_sdpa_and_megatron_keep_their_rates() -> None:
    # sm_120: mma.sync is the card's tensor-core path, its peak the rate flash-attn 2 issues at.
    for gpu in ("rtx-5090", "rtx-pro-6000-blackwell", "dgx-spark-gb10"):
        assert attention_kernel(_plan(gpu), gpu) == "flash"
    # SDPA picks its kernel by release: cuDNN first from PyTorch 2.14 (the plan's default), its own FlashAttention-2
    # before (tests/core/test_sdpa_backend_by_release.py; docs/TRAINING_TIME.md, "Which backend PyTorch's SDPA runs").
    assert attention_kernel(_plan("b200", Attention.SDPA), "b200") == "sdpa-cudnn"
    # Megatron runs Transformer Engine's fused (cuDNN) attention, which has tcgen05 kernels.
    assert attention_kernel(_plan("b200", stack=Stack.MEGATRON), "b200") == "fused"


def test_the_b200_plan_says_why_its_attention_is_slower() -> None:
    slow, sdpa = estimate(_plan("b200")), estimate(_plan("b200", Attention.SDPA))
    assert slow.compute.attention_note == FLASH_SM80_NOTE and sdpa.compute.attention_note == SDPA_CUDNN_NOTE
    assert any("mma.sync" in p.label for p in slow.compute.compute_parts)
    assert f"  note     {FLASH_SM80_NOTE}" in render_estimate(slow)
    assert not estimate(_plan("rtx-pro-6000-blackwell")).compute.attention_note
    # The same plan under SDPA runs cuDNN (above) at Transformer Engine's fused rate: flash-attn 2's step is slower.
    assert slow.compute.tokens_per_second < sdpa.compute.tokens_per_second

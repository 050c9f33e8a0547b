"""Which backend PyTorch's SDPA runs, by release and card (docs/TRAINING_TIME.md, "Which backend PyTorch's SDPA runs,
by release and card"): on a datacenter Blackwell card (sm_100 / sm_103) cuDNN's fused attention from PyTorch 2.14, the
vendored FlashAttention-2 (Ampere's mma.sync) before; on Hopper SDPA's flash backend, as fitted.

- pytorch/pytorch PR 138522 ("[SDPA-CUDNN] Make CuDNN Attention Opt in", cherry-picked onto release/2.5): cuDNN last
  from 2.5.1. PR 145602 (2025-01-24): sm_100 and sm_120 join flash's range. PR 162073 ("Enable cuDNN SDPA by default
  for SM 9.0, SM 10.0", for 2.9); issue 165801: the 2.9 wheels were built against cuDNN 9.8 and never preferred it.
- From 2.10 ``check_prefer_cudnn_attention`` asks for a runtime cuDNN > 9.15.0 on sm_90 / sm_100 / sm_103
  (huggingface/transformers PR 48163 quoting pytorch@70d99e99 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
  L78-L99); the torch 2.14.1 wheel pins nvidia-cudnn-cu13==9.24.0.43 (its METADATA) and its libtorch_cuda.so carries
  the TORCH_CUDNN_SDPA_DEPRIORITIZED switch.
- sdp_utils.cpp check_cudnn_tensor_shapes: head dim a multiple of 8 and at most 128 off sm_90.
- torchtitan's ScaledDotProductAttention sets ``sdpa_kernel([FLASH, EFFICIENT, MATH], set_priority=True)`` on Hopper
  (cuDNN first only at compute capability 10.0 or more), which no plan field names: Hopper stays on flash.
"""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu
from core.cli.render import render_estimate
from core.estimate import estimate
from core.params import param_counts
from core.plan import Attention, Plan, Stack, TorchVersion
from core.presets import plan_for_model
from core.training.attention import CUDNN_SDPA_MAX_HEAD_DIM, sdpa_runs_cudnn
from core.training.compute import FLASH_SM80_NOTE, SDPA_CUDNN_NOTE
from core.training.efficiency import FITTED, coefficient
from core.training.speed import attention_kernel, step_work

_OLDER = (TorchVersion.V2_5_TO_2_7, TorchVersion.V2_8)


def _plan(gpu: str, torch: TorchVersion, model: str = "qwen3-4b", stack: Stack = Stack.EAGER) -> Plan:
    plan = plan_for_model(model).with_workload(micro_batch=1, seq_len=4096).with_hardware(gpu=gpu)
    return plan.with_changes(attention=Attention.SDPA, stack=stack).with_hardware(torch_version=torch)


@pytest.mark.parametrize("gpu", ["b200", "gb200", "b300-sxm", "gb300"])
def test_sdpa_on_datacenter_blackwell_runs_cudnn_from_2_14_and_flash_2_before(gpu: str) -> None:
    # Qwen3-4B: head dim 128, grouped-query heads (cuDNN takes them: enable_gqa in its dense constraints).
    assert _plan(gpu, TorchVersion.V2_14).model.head_dim == 128
    assert attention_kernel(_plan(gpu, TorchVersion.V2_14), gpu) == "sdpa-cudnn"
    for torch in _OLDER:  # 2.7-2.10 ran the vendored FlashAttention-2 there; the range is timed so
        assert attention_kernel(_plan(gpu, torch), gpu) == "flash-sm80", torch


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm", "a100-80gb-sxm", "rtx-5090", "rtx-pro-6000-blackwell"])
@pytest.mark.parametrize("torch", [*_OLDER, TorchVersion.V2_14])
def test_sdpa_elsewhere_keeps_the_flash_backend(gpu: str, torch: TorchVersion) -> None:
    # Hopper: not adopted (timing the fitted H100 / H200 rows at cuDNN's rate made the fit worse: median 6.6 -> 7.0 %,
    # worst beyond 8k 53.7 -> 111.2 %); sm_80 and sm_120 are not in check_prefer_cudnn_attention's list.
    assert attention_kernel(_plan(gpu, torch), gpu) == "flash"
    assert not sdpa_runs_cudnn(_plan(gpu, torch), gpu)


def test_cudnn_s_head_dim_limit_sends_wider_heads_to_flash() -> None:
    # Gemma 3 1B: head dim 256 > check_cudnn_tensor_shapes' 128 off sm_90 -> SDPA's flash backend (<= 256).
    plan = _plan("b200", TorchVersion.V2_14, model="gemma-3-1b")
    assert plan.model.head_dim > CUDNN_SDPA_MAX_HEAD_DIM == 128
    assert attention_kernel(plan, "b200") == "flash-sm80"


def test_megatron_keeps_transformer_engine_s_fused_attention() -> None:
    assert attention_kernel(_plan("b200", TorchVersion.V2_14, stack=Stack.MEGATRON), "b200") == "fused"


def test_sdpa_s_cudnn_is_timed_at_transformer_engine_s_fused_rate_and_said() -> None:
    plan = _plan("b200", TorchVersion.V2_14)
    work = step_work(plan, param_counts(plan), find_gpu("b200"))
    assert "attention:blackwell/sdpa-cudnn" in work.features and "attention:blackwell/flash" not in work.features
    # Not fitted: a fixed multiple (1) of the fused coefficient, Megatron-Bridge's B200 rows' (tied to Hopper's).
    assert "attention:blackwell/sdpa-cudnn" not in FITTED
    assert coefficient("attention:blackwell/sdpa-cudnn") == coefficient("attention:blackwell/fused")
    est = estimate(plan)
    assert est.compute.attention_note == SDPA_CUDNN_NOTE
    assert f"note     {SDPA_CUDNN_NOTE}" in render_estimate(est)
    older = estimate(_plan("b200", TorchVersion.V2_8))
    assert older.compute.attention_note == FLASH_SM80_NOTE
    # cuDNN's rate (1 / 1.81 of the peak) against FlashAttention-2's mma.sync (1 / 6.39): the same step is faster.
    assert est.compute.step_seconds < older.compute.step_seconds

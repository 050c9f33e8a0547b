"""Compute and time beyond the lesson's two figures: the FLOP rules and how time, cost,
energy and steps follow from them.

Sources: training costs about 6·P FLOPs per token (forward 2·P, backward 4·P) and a forward
pass 2·P (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361,
section 2.1; the lesson states both rules). With a frozen base the weight gradients of the
frozen part are skipped (2·P of the backward), and checkpointing runs the forward again.
"""

from __future__ import annotations

import math

import pytest

from core.catalogue import find_gpu, find_model
from core.dtypes import Autocast, Dtype
from core.estimate import estimate
from core.params import param_counts
from core.plan import Hardware, Method, Parallelism, Plan, Precision, Workload
from core.presets import plan_for_model
from core.training.compute import compute_dtype, compute_estimate, flops_per_token


def _plan(model: str = "llama-3.2-1b", **changes: object) -> Plan:
    return plan_for_model(model, **changes)


def test_full_training_is_six_p_per_token() -> None:
    plan = _plan(method=Method.FULL)
    counts = param_counts(plan)
    per_token, how = flops_per_token(plan, counts)
    assert per_token == 6 * counts.active and how == "6 · P"


def test_checkpointing_adds_one_forward_of_two_p() -> None:
    for method in (Method.FULL, Method.LORA):
        plain = _plan(method=method)
        counts = param_counts(plain)
        without, _ = flops_per_token(plain, counts)
        with_ckpt, how = flops_per_token(plain.with_changes(checkpointing=True), counts)
        assert with_ckpt - without == 2 * counts.active  # the forward's 2·P, once more
        assert "recomputed forward" in how


def test_a_frozen_base_skips_its_weight_gradients() -> None:
    plan = _plan(method=Method.LORA)
    counts = param_counts(plan)
    per_token, _ = flops_per_token(plan, counts)
    # Forward 2·P + input gradients 2·P + weight gradients of the adapters only, 2·T.
    assert per_token == 4 * counts.active + 2 * counts.trainable
    assert per_token < 6 * counts.active


def test_a_mixture_of_experts_pays_for_its_active_parameters() -> None:
    plan = _plan("mixtral-8x7b-v0.1", method=Method.FULL)
    counts = param_counts(plan)
    assert counts.active < counts.total  # two of eight experts per token (Mixtral's config.json)
    assert flops_per_token(plan, counts)[0] == 6 * counts.active


def test_time_cost_energy_and_steps_follow_from_the_flops() -> None:
    plan = _plan(
        method=Method.FULL,
        workload=Workload(micro_batch=4, seq_len=2048, grad_accum=8, tokens=50_000_000),
        hardware=Hardware(gpu="h100-sxm", utilisation=0.5, price_per_gpu_hour=3.0),
        parallel=Parallelism(gpus_per_node=1),
    )
    gpu = find_gpu("h100-sxm")
    counts = param_counts(plan)
    c = compute_estimate(plan, counts, gpu)
    assert c.flops == c.flops_per_token * plan.workload.tokens
    peak = gpu.peak_tflops(compute_dtype(plan))
    assert c.peak_tflops == peak
    # One GPU: the single-GPU rule exactly, nothing exchanged, no bubble.
    assert c.seconds == c.flops / (peak * 1e12 * 0.5)
    assert c.comm_terms == () and c.exposed_comm_seconds_per_step == 0 and c.bubble_fraction == 0
    assert c.step_seconds == c.compute_seconds_per_step
    assert c.hours == pytest.approx(c.seconds / 3600)
    assert c.cost == pytest.approx(c.hours * 3.0)
    assert c.energy_kwh == pytest.approx(c.hours * gpu.board_power_w / 1000)
    assert c.steps == math.ceil(50_000_000 / (4 * 8 * 2048))
    # Two GPUs (DDP): the compute halves and the gradient all-reduce the backward cannot
    # hide is added per step: time = compute × step ÷ step compute.
    two = compute_estimate(plan.with_parallel(gpus_per_node=2), counts, gpu)
    assert two.compute_seconds_per_step == pytest.approx(c.compute_seconds_per_step)  # twice the tokens per step
    assert two.exposed_comm_seconds_per_step > 0
    assert two.step_seconds == two.compute_seconds_per_step + two.exposed_comm_seconds_per_step
    compute_only = two.flops / (peak * 1e12 * 0.5 * 2)
    assert two.seconds == pytest.approx(compute_only * two.step_seconds / two.compute_seconds_per_step)
    assert two.cost == pytest.approx(two.hours * 2 * 3.0)
    assert two.tokens_per_second == pytest.approx(plan.workload.tokens / two.seconds)


def test_the_precision_picks_the_peak_and_an_override_wins() -> None:
    gpu = find_gpu("a100-80gb-sxm")
    fp32 = _plan(method=Method.FULL, precision=Precision.FP32)
    counts = param_counts(fp32)
    assert compute_estimate(fp32, counts, gpu).peak_tflops == gpu.peak_tflops("fp32")
    bf16 = fp32.with_changes(precision=Precision.BF16)
    assert compute_estimate(bf16, counts, gpu).peak_tflops == gpu.peak_tflops("bf16")
    typed = bf16.with_hardware(peak_tflops_override=123.0)
    assert compute_estimate(typed, counts, gpu).peak_tflops == 123.0


def test_no_tokens_no_time() -> None:
    plan = Plan(model=find_model("llama-3.2-1b").spec, workload=Workload(tokens=0))
    c = compute_estimate(plan, param_counts(plan), find_gpu("a100-80gb-sxm"))
    assert c.flops == 0 and c.hours == 0 and c.steps == 0


def test_time_runs_at_the_memory_models_compute_dtype() -> None:
    # Issue 26, item 1: LoRA on a bf16 base with float32 weights and no autocast (PEFT without
    # Trainer(bf16=True)) computes in bf16; it was timed at the H100's float32 rate (66.9 TFLOP/s,
    # 6.7 h) instead of its bf16 rate (989.4 TFLOP/s, NVIDIA H100 datasheet, dense).
    plan = _plan("llama-3.1-8b", method=Method.LORA, hardware=Hardware(gpu="h100-sxm"))
    plan = plan.with_changes(base_dtype=Dtype.BF16, weight_dtype=Dtype.FP32, autocast=Autocast.NONE)
    comp = estimate(plan).compute
    assert comp.dtype == "bf16" and comp.peak_tflops == 989.4
    assert comp.hours < 1.0

"""What one optimizer step costs beyond its micro-batches (issue 24: optimum-benchmark's small-batch rows):
torch.optim's passes over memory per implementation, clip_grad_norm_ and a GradScaler's unscale
(core.training.speed.step_pass_bytes), the kernels the host issues for them (step_host_kernels), and the
embedding / head / loss kernels of each micro-batch (eager_outside_kernels). Counts from
tools/measure/kernel_count.py --step (torch 2.13.0, transformers 5.25.0)."""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu, find_model
from core.estimate import estimate
from core.format import duration
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import Attention, Method, Optimizer, OptimizerImpl, Plan, Preset
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.efficiency import coefficient
from core.training.optimizer import trainable_tensors
from core.training.speed import (
    EAGER_KERNEL_HOST_S,
    multi_tensor_launches,
    optimizer_step_bytes,
    step_host_kernels,
    step_pass_bytes,
    step_work,
)

A100 = "a100-80gb-sxm"
ALL_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _full_7b(batch: int, impl: OptimizerImpl = OptimizerImpl.FOREACH) -> Plan:
    """optimum-benchmark's A100 Trainer row as the throughput corpus plans it (benchmarks/realgpu/throughput.py
    _SOURCE_PLAN): Llama-2 7B full fine-tuning in pure 16 bits, adamw_torch (foreach), max_grad_norm 1.0, eager
    attention, no checkpointing, batch × 256 tokens."""
    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        attention=Attention.EAGER,
        optimizer=Optimizer.ADAMW,
        optimizer_impl=impl,
        grad_clip=True,
        preset=Preset.PURE_BF16,
        checkpointing=False,
    )
    return plan.with_workload(micro_batch=batch, seq_len=256, grad_accum=1).with_hardware(gpu=A100)


def _step_bytes(plan: Plan) -> tuple[float, float]:
    counts = param_counts(plan)
    stage = layout(plan).stages[0]
    return optimizer_step_bytes(plan, counts, stage), step_pass_bytes(plan, counts, stage)


def test_foreach_adamw_with_clipping_moves_three_times_the_fused_bytes() -> None:
    plan = _full_7b(1)
    fused, extra = _step_bytes(plan)
    t, grad = param_counts(plan).trainable, dtypes_for(plan).grad
    # kernel_count.py --step: foreach AdamW 18 passes per element (72 B in float32), fused 7 (28 B): 11 more, one of
    # them over the gradient; clip_grad_norm_ 3 gradient passes (12 B).
    assert extra == pytest.approx(t * (11 + 3) * grad)
    # Pure 16 bits: parameter, gradient and state elements all 2 B, so 7 + 14 passes against the fused 7.
    assert (fused + extra) / fused == pytest.approx(21 / 7)
    # The fused implementation adds only the clipping's passes.
    _, fused_extra = _step_bytes(_full_7b(1, OptimizerImpl.FUSED))
    assert fused_extra == pytest.approx(t * 3 * grad)


def test_batch_one_7b_full_step_has_the_optimizer_pass_in_its_time() -> None:
    plan = _full_7b(1)
    counts = param_counts(plan)
    gpu = find_gpu(A100)
    work = step_work(plan, counts, gpu)
    fused, extra = _step_bytes(plan)
    bandwidth = gpu.memory_bandwidth_gb_s * 1e9
    assert work.features["optimizer"] == pytest.approx((fused + extra) / bandwidth)
    c = estimate(plan).compute
    assert c.optimizer_seconds_per_step == pytest.approx((fused + extra) / bandwidth * coefficient("optimizer"))
    # 6.7e9 parameters × 42 B over the A100's 2,039 GB/s (NVIDIA A100 datasheet): over 0.13 s of the step.
    assert c.optimizer_seconds_per_step > 0.13
    assert c.optimizer_seconds_per_step < c.step_seconds


def test_the_optimizer_share_falls_with_the_batch() -> None:
    shares = []
    for batch in (1, 2, 4, 8, 16):
        c = estimate(_full_7b(batch)).compute
        shares.append(c.optimizer_seconds_per_step / c.step_seconds)
    assert shares == sorted(shares, reverse=True)
    assert shares[0] > 0.4 and shares[-1] < 0.15


def test_fused_launches_fewer_kernels_than_foreach_and_foreach_fewer_than_for_loop() -> None:
    lora = _full_7b(1).with_changes(method=Method.LORA, attention=Attention.SDPA).with_lora(targets=ALL_LINEARS)
    counts = param_counts(lora)
    stage = layout(lora).stages[0]
    kernels = {impl: step_host_kernels(lora.with_changes(optimizer_impl=impl), counts, stage) for impl in OptimizerImpl}
    assert kernels[OptimizerImpl.FUSED] < kernels[OptimizerImpl.FOREACH] < kernels[OptimizerImpl.FORLOOP]
    tensors = trainable_tensors(lora)
    assert tensors == 32 * 7 * 2  # lora_A and lora_B on 7 linears of 32 blocks
    launches = multi_tensor_launches(counts.trainable, tensors)
    clip = 2 * launches + 6  # _foreach_norm and _foreach_mul_, and 6 small ops (kernel_count.py --step)
    # for-loop: 7 ops a tensor (lerp_, mul_, addcmul_, sqrt, div, add_, addcdiv_); foreach: the 7 as foreach ops.
    assert kernels[OptimizerImpl.FORLOOP] == 7 * tensors + clip
    assert kernels[OptimizerImpl.FOREACH] == 7 * launches + clip
    assert kernels[OptimizerImpl.FUSED] == 2 * launches + clip


def test_multi_tensor_apply_launches_follow_its_chunk_and_tensor_limits() -> None:
    # MultiTensorApply.cuh (pytorch/pytorch@008356ca): 65,536-element chunks, 2,240 blocks or 336 tensors a launch.
    assert multi_tensor_launches(0, 0) == 0
    assert multi_tensor_launches(1000, 10) == 1
    # Two tensors of 3 × 2,240 chunks less one: 6,720 chunks, each tensor's last counted half full.
    assert multi_tensor_launches(65536 * (2240 * 3 - 1), 2) == 3
    assert multi_tensor_launches(10 * 700, 700) == 3  # 700 small tensors: ceil(700 / 336)


def test_a_for_loop_step_over_many_small_tensors_is_paced_by_the_host() -> None:
    plan = (
        default_plan()
        .with_changes(model=find_model("qwen2.5-0.5b").spec, model_id="qwen2.5-0.5b", attention=Attention.SDPA)
        .with_lora(targets=ALL_LINEARS)
        .with_changes(optimizer=Optimizer.ADAMW, optimizer_impl=OptimizerImpl.FORLOOP)
        .with_workload(micro_batch=1, seq_len=256, grad_accum=1)
    )
    work = step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu))
    tensors = trainable_tensors(plan)
    assert work.optimizer_kernels == 7 * tensors + (2 * 1 + 6 if plan.grad_clip else 0)
    c = estimate(plan).compute
    # The device's pass over 4 million adapter parameters is microseconds; the host's 7 × 336 launches are not.
    assert c.optimizer_seconds_per_step == pytest.approx(work.optimizer_kernels * EAGER_KERNEL_HOST_S)


def test_each_micro_batch_issues_the_embedding_head_and_loss_kernels() -> None:
    # kernel_count.py --step: outside the blocks 32 forward, 27 backward with them trained; 8 backward frozen.
    full = _full_7b(1).with_changes(attention=Attention.SDPA)
    counts = param_counts(full)
    gpu = find_gpu(A100)
    assert step_work(full, counts, gpu).host_kernels == 32 * (45 + 73) + 32 + 27
    two = full.with_workload(micro_batch=1, seq_len=256, grad_accum=2)
    assert step_work(two, counts, gpu).host_kernels == 2 * (32 * (45 + 73) + 32 + 27)


def test_the_fixed_part_is_said_where_it_is_a_visible_share_of_the_step() -> None:
    c = estimate(_full_7b(1)).compute
    share = c.optimizer_seconds_per_step / c.step_seconds
    # h55ux: the share leads, the time reads in ms (it read "the optimizer step, 0.0987 s once a step whatever
    # the batch (its passes ...), is 54% of the step": the figure people look for came last).
    assert c.fixed_step.startswith(f"the optimizer step is {share:.0%} of the step: ")
    assert f": {duration(c.optimizer_seconds_per_step)} once a step, whatever the batch" in c.fixed_step
    assert " ms once a step" in c.fixed_step and "(" not in c.fixed_step
    assert "passes over the trainable parameters" in c.fixed_step
    assert f"({c.fixed_step})" in c.formula  # the Compute & time arithmetic (window) reads the formula
    # A long-sequence 8B step: the optimizer step is under a tenth of it (FIXED_SHARE_SHOWN), nothing said.
    long = default_plan().with_workload(micro_batch=4, seq_len=4096, grad_accum=4)
    assert estimate(long).compute.fixed_step == ""


def test_the_cli_prints_the_fixed_part(capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    args = "estimate --model llama-2-7b --method full --precision bf16 --optimizer adamw --optimizer-impl foreach"
    args += " --grad-clip --attention eager --no-checkpointing --micro-batch 1 --seq 256 --gpu a100-80gb-sxm"
    assert main(args.split()) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("  fixed    "))
    assert "the optimizer step is " in line and "once a step, whatever the batch" in line


def test_the_steps_parts_read_in_units_of_their_size() -> None:
    """h55ux: the window's "Compute per step" read "attention scores and values 0.000287 s; ... optimizer
    step 0.0987 s" (Llama-2 7B full, 1 × 256 tokens on an A100): each part now reads in ms or µs, from core."""
    c = estimate(_full_7b(1)).compute
    assert c.compute_parts
    sentence = c.parts_sentence
    for part in c.compute_parts:
        assert f"{part.label} {duration(part.seconds)}" in sentence
    assert "0.000" not in sentence and " ms" in sentence
    steps = c.formula.rsplit("; ", 1)[-1]
    # 20,000,000 tokens ÷ 256 a step (default_plan's budget, _full_7b's batch) = 78,125 steps: whole, no ".0".
    assert steps.startswith("78,125 steps = ")

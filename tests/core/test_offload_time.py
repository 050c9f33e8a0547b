"""The time of CPU-offload plans: the optimizer step on the host, and the PCIe copies overlapped
only where the frameworks' code overlaps them.

Sources, read where the numbers are used:
- torch's CPU fused AdamW (pytorch/pytorch aten/src/ATen/native/cpu/FusedAdamKernel.cpp
  ``adam_fused_step_impl``): one pass reading the parameter, its gradient and both moments and
  writing the parameter and both moments, all in the parameter's dtype;
- FSDP2 ``CPUOffloadPolicy`` (pytorch/pytorch@010ae4a8 torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py ``foreach_reduce``; ``FSDPParam.all_gather_inputs``): shards copied to the
  GPU inside the all-gather's copy-in, gradients copied to pinned host memory without blocking
  unless accumulated;
- DeepSpeed ZeRO-Offload (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/stage_1_and_2.py):
  float32 gradients copied ``non_blocking=True`` in the backward; ``step`` runs CPU Adam, computes
  the norm of the float32 host gradients, fills the 16-bit staging buffer and copies it back;
- one thread per rank by default: torchrun sets OMP_NUM_THREADS=1 for each of several processes
  unless the user set it (pytorch/pytorch torch/distributed/run.py ``config_from_args``); one
  server thread streams 12-20 GB/s (AnandTech 2017, "Memory Subsystem: Bandwidth": Skylake-SP
  12 GB/s, Broadwell-EP ~50 % more; McCalpin, Intel forum: 19.9 GB/s on Haswell-EP), 18 GB/s used;
- the host DRAM default: two AMD EPYC 7742 of a DGX A100, 8 channels of DDR4-3200 each
  (NVIDIA DGX A100 datasheet; AMD's EPYC 7742 page: 204.8 GB/s per socket); the STREAM share
  250 / 307.2 (AnandTech's 2017 EPYC 7601 review: AMD's STREAM Triad binary, 250 GB/s of 307).
"""

from __future__ import annotations

import pytest

from core.cli.render import compute_to_json, render_estimate
from core.estimate import estimate
from core.format import duration
from core.inputs import Preset
from core.params import param_counts
from core.plan import Hardware, Method, Offload, Plan, Strategy, Workload
from core.presets import plan_for_model
from core.training.host import (
    HOST_STREAM_SHARE,
    HOST_THREAD_STREAM_GBS,
    ZERO_OFFLOAD_EXTRA_BYTES,
    host_step,
    host_threads_per_rank,
)

DGX_A100_HOST_GBS = 2 * 8 * 3200e6 * 8 / 1e9  # 409.6 GB/s: 2 sockets × 8 channels × 3200 MT/s × 8 B


def _offloaded(strategy: Strategy, offload: Offload, grad_accum: int = 1, threads: int = 16) -> Plan:
    """An offloaded Llama 3.1 8B on a DGX A100; ``threads`` per rank (16 by default: enough that the
    node's DRAM, not its threads, bounds the host step, which the byte counts below are checked at)."""
    plan = plan_for_model(
        "llama-3.1-8b",
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        workload=Workload(micro_batch=1, seq_len=2048, grad_accum=grad_accum, tokens=10**9),
        hardware=Hardware(gpu="a100-80gb-sxm"),
    )
    return plan.on_gpus(8, strategy).with_parallel(offload=offload, host_threads_per_rank=threads)


def test_the_default_host_bandwidth_is_a_dgx_a100s() -> None:
    assert plan_for_model("llama-3.1-8b").parallel.host_memory_gbs == pytest.approx(DGX_A100_HOST_GBS)


def test_fsdp2_cpu_offload_waits_for_the_fused_adamw_pass_on_the_host() -> None:
    plan = _offloaded(Strategy.FSDP, Offload.PARAMS)
    c = estimate(plan).compute
    trainable = param_counts(plan).trainable
    # bf16 everywhere: read p, g, m, v and write p, m, v, 2 bytes each = 14 B a parameter; the
    # node's 8 ranks each step their eighth at once, sharing its DRAM.
    expected = 14 * trainable / (DGX_A100_HOST_GBS * 1e9 * HOST_STREAM_SHARE)
    assert c.host_step_seconds_per_step == pytest.approx(expected, rel=1e-4)  # + the one-element step counters
    # Nothing overlaps it: half the bandwidth adds the same again to the step, nothing else moves.
    slower = estimate(plan.with_parallel(host_memory_gbs=DGX_A100_HOST_GBS / 2)).compute
    assert slower.step_seconds - c.step_seconds == pytest.approx(c.host_step_seconds_per_step, rel=1e-9)
    assert "optimizer step on the host" in c.formula


def test_under_torchrun_each_rank_steps_on_one_thread() -> None:
    # torchrun's default OMP_NUM_THREADS=1: the node's 8 ranks stream 8 × 18 GB/s = 144 GB/s, under
    # the 333 GB/s its DRAM reaches, so the pass takes 333 / 144 = 2.3 times what DRAM allows.
    assert plan_for_model("llama-3.1-8b").parallel.host_threads_per_rank == 0  # the launcher's default
    plan = _offloaded(Strategy.FSDP, Offload.PARAMS, threads=0)
    assert host_threads_per_rank(plan) == 1  # torchrun's, with 8 ranks on the node
    one = estimate(plan).compute
    trainable = param_counts(plan).trainable
    assert one.host_step_seconds_per_step == pytest.approx(
        14 * trainable / (8 * HOST_THREAD_STREAM_GBS * 1e9), rel=1e-4
    )
    step = host_step(plan, param_counts(plan))
    assert step is not None and "8 threads (8 ranks × 1)" in step.formula
    # Two threads a rank halve it; past the DRAM's share more threads change nothing.
    two = estimate(plan.with_parallel(host_threads_per_rank=2)).compute
    assert two.host_step_seconds_per_step == pytest.approx(one.host_step_seconds_per_step / 2, rel=1e-9)
    many = [estimate(plan.with_parallel(host_threads_per_rank=n)).compute.host_step_seconds_per_step for n in (8, 32)]
    dram = 14 * trainable / (DGX_A100_HOST_GBS * 1e9 * HOST_STREAM_SHARE)
    assert many == pytest.approx([dram, dram], rel=1e-4)


def test_a_thread_bound_host_step_says_how_many_threads_would_let_dram_bound_it() -> None:
    # torchrun's one thread a rank: 8 × 18 GB/s under the DGX A100's 409.6 × 250 / 307.2 = 333 GB/s.
    # ceil(333 / (8 × 18)) = 3 threads a rank reach the DRAM's bound, and the step then takes what
    # DRAM allows; the advice travels to the CLI's step lines and its JSON.
    plan = _offloaded(Strategy.FSDP, Offload.PARAMS, threads=0)
    est = estimate(plan)
    c = est.compute
    assert "3 threads a rank (Host threads per rank, OMP_NUM_THREADS=3: 24 cores on the node)" in c.host_step_advice
    dram = estimate(plan.with_parallel(host_threads_per_rank=3)).compute
    # each time in core.format.duration's form ("337 ms instead of 781 ms")
    assert f"{duration(dram.host_step_seconds_per_step)} instead of {duration(c.host_step_seconds_per_step)}" in (
        c.host_step_advice
    )
    assert dram.host_step_advice == ""  # DRAM bounds it: nothing to advise
    assert estimate(_offloaded(Strategy.FSDP, Offload.PARAMS)).compute.host_step_advice == ""  # 16 threads
    assert c.host_step_advice in render_estimate(est)
    assert compute_to_json(est)["host_step_advice"] == c.host_step_advice


def test_one_process_a_node_keeps_every_core() -> None:
    # torchrun sets OMP_NUM_THREADS=1 only when it starts more than one process (nproc_per_node > 1):
    # a single offloaded GPU's optimizer step keeps OpenMP's default, so the DRAM bounds it.
    plan = plan_for_model(
        "llama-3.1-8b",
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        workload=Workload(micro_batch=1, seq_len=2048, tokens=10**9),
        hardware=Hardware(gpu="a100-80gb-sxm"),
    ).with_parallel(offload=Offload.OPTIMIZER)
    assert host_threads_per_rank(plan) == 0
    step = host_step(plan, param_counts(plan))
    assert step is not None and "STREAM share" in step.formula
    typed = host_step(plan.with_parallel(host_threads_per_rank=1), param_counts(plan))
    assert typed is not None and typed.seconds > step.seconds  # one typed thread: 18 GB/s, not 333


def test_plans_without_offload_have_no_host_step() -> None:
    c = estimate(_offloaded(Strategy.FSDP, Offload.NONE)).compute
    assert c.host_step_seconds_per_step == 0.0
    same = estimate(_offloaded(Strategy.FSDP, Offload.NONE).with_parallel(host_memory_gbs=1.0)).compute
    assert same.step_seconds == c.step_seconds


def test_fsdp2_offload_copies_run_on_side_streams_and_nothing_comes_back() -> None:
    c = estimate(_offloaded(Strategy.FSDP, Offload.PARAMS)).compute
    offload = {t.label: t for t in c.comm_terms if "host" in t.label or "GPU before" in t.label}
    assert set(offload) == {
        "shards copied to the GPU before each all-gather",
        "gradients copied to the host after each reduce-scatter",
    }
    assert all(t.overlapped for t in offload.values())


def test_fsdp2_offload_blocks_and_adds_on_the_cpu_when_accumulating() -> None:
    one = estimate(_offloaded(Strategy.FSDP, Offload.PARAMS)).compute
    four = estimate(_offloaded(Strategy.FSDP, Offload.PARAMS, grad_accum=4)).compute
    blocking = [t for t in four.comm_terms if "accumulated gradients" in t.label]
    assert len(blocking) == 1 and not blocking[0].overlapped
    trainable = param_counts(_offloaded(Strategy.FSDP, Offload.PARAMS)).trainable
    assert blocking[0].bytes == pytest.approx(trainable / 8 * 2 * 3)  # 3 later micro-batches, bf16
    # The host adds each later micro-batch's gradient: read two, write one, 2 B each, on 8 ranks.
    added = 3 * 3 * 2 * trainable / (DGX_A100_HOST_GBS * 1e9 * HOST_STREAM_SHARE)
    assert four.host_step_seconds_per_step - one.host_step_seconds_per_step == pytest.approx(added, rel=1e-9)


def test_zero_offload_copies_16_bit_parameters_back_after_the_step() -> None:
    plan = _offloaded(Strategy.ZERO2, Offload.OPTIMIZER)
    c = estimate(plan).compute
    trainable = param_counts(plan).trainable / 8
    terms = {t.label: t for t in c.comm_terms}
    down, up = terms["gradients to the host"], terms["updated parameters back to the GPU"]
    assert (down.bytes, down.overlapped) == (pytest.approx(trainable * 4), True)  # float32, in the backward
    assert (up.bytes, up.overlapped) == (pytest.approx(trainable * 2), False)  # 16-bit, after the step
    # DeepSpeed's norm of the host gradients and its 16-bit staging copy come on top of CPU Adam.
    fsdp = estimate(_offloaded(Strategy.FSDP, Offload.PARAMS)).compute
    extra = ZERO_OFFLOAD_EXTRA_BYTES * trainable * 8 / (DGX_A100_HOST_GBS * 1e9 * HOST_STREAM_SHARE)
    assert c.host_step_seconds_per_step - fsdp.host_step_seconds_per_step == pytest.approx(extra, rel=1e-6)

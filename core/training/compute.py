"""Compute and time: FLOPs ≈ 6·P·D, time = FLOPs ÷ (peak × utilisation × GPUs), plus what
several GPUs add: the communication the compute cannot hide and the pipeline bubble.

One optimizer step takes compute × (1 + bubble) + exposed communication, where compute is
the step's FLOPs ÷ (GPUs × peak × utilisation); on one GPU without offload both additions
are zero and the time is the single-GPU rule exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core import roles
from core.catalogue import GpuSpec
from core.format import hours as format_hours
from core.format import sci
from core.parallel.comm import CommTerm, step_communication
from core.params import ParamCounts
from core.plan import Accounting, Method, Plan
from core.training.activations import recomputed_share


@dataclass(frozen=True)
class Compute:
    flops_per_token: float
    flops: float
    peak_tflops: float  # dense peak of one GPU for the plan's compute dtype
    seconds: float
    hours: float
    tokens_per_second: float
    cost: float  # hours × GPUs × price per GPU-hour; NaN when the price is unknown
    energy_kwh: float  # hours × GPUs × board power
    steps: int  # optimizer steps for the token budget
    formula: str
    dtype: str = "bf16"  # the dtype the matmuls run in (what peak_tflops is for)
    price_per_gpu_hour: float = math.nan  # the price the cost is at (NaN: unknown)
    price_source: str = ""  # "the plan", the catalogue's source, or why there is none
    # Why the card cannot run ``dtype`` natively (no bf16 on a T4 or V100), or None.
    dtype_problem: str | None = None
    # Several GPUs (core.parallel.comm): per optimizer step.
    compute_seconds_per_step: float = 0.0  # FLOPs of a step ÷ (GPUs × peak × utilisation)
    comm_seconds_per_step: float = 0.0  # every collective and host transfer of the step
    exposed_comm_seconds_per_step: float = 0.0  # the part the step waits for
    bubble_fraction: float = 0.0  # pipeline idle time over ideal compute (Narayanan et al. 2021)
    step_seconds: float = 0.0  # compute × (1 + bubble) + exposed communication
    comm_terms: tuple[CommTerm, ...] = ()
    assumptions: tuple[str, ...] = ()


def compute_dtype(plan: Plan) -> str:
    """The card rate the step runs at: the memory model's compute dtype (:func:`core.roles.compute_dtype`,
    the autocast dtype when autocast runs, else the dtype the model is loaded in)."""
    return roles.compute_dtype(plan).value


def flops_per_token(plan: Plan, counts: ParamCounts) -> tuple[float, str]:
    """Training FLOPs per token and how they were counted.

    Forward 2·P; backward 2·P for the gradients flowing to the layer inputs plus 2·T for
    the weight gradients (Kaplan et al. 2020, arXiv:2001.08361): 6·P for full training,
    about 4·P with a frozen base (the lesson's LoRA figure). Checkpointing recomputes the
    forward: +2·P.
    """
    p = counts.active
    if plan.accounting is Accounting.LESSON:
        if plan.method is Method.FULL:
            return 6.0 * p, "6 · P"
        if plan.adapter_based:
            return 4.0 * p, "4 · P (frozen base)"
    # Trainable parameters a token passes through (MoE: routed experts only).
    trainable_active = min(counts.trainable, p) if plan.method is not Method.FULL else p
    per_token = 4.0 * p + 2.0 * trainable_active
    how = "6 · P" if plan.method is Method.FULL else "4 · P + 2 · T"
    share = recomputed_share(plan)
    if share == 1.0:
        per_token += 2.0 * p
        how += " + 2 · P (recomputed forward)"
    elif share > 0.0:
        per_token += 2.0 * p * share
        how += f" + 2 · P × {share:.2f} (the part of the forward recomputed)"
    return per_token, how


def gpu_hour_price(plan: Plan, gpu: GpuSpec) -> tuple[float, str]:
    """The price per GPU-hour the cost is at, and where it comes from: the plan's own when it
    gives one (hardware.price_per_gpu_hour > 0), else the catalogue's typical cloud price for
    the card, else unknown (NaN) — never a made-up figure."""
    if plan.hardware.price_per_gpu_hour > 0:
        return plan.hardware.price_per_gpu_hour, "the plan"
    listed = gpu.hourly_price()
    if listed is not None:
        return listed
    return math.nan, f"no price for the {gpu.name}: type one (Price per GPU-hour, --price)"


def compute_estimate(plan: Plan, counts: ParamCounts, gpu: GpuSpec) -> Compute:
    per_token, how = flops_per_token(plan, counts)
    price, price_source = gpu_hour_price(plan, gpu)
    tokens = plan.workload.tokens
    flops = per_token * tokens
    override = plan.hardware.peak_tflops_override
    dtype = compute_dtype(plan)
    peak = override if override > 0 else gpu.peak_tflops(dtype)
    gpus = plan.world_size
    achieved = peak * 1e12 * plan.hardware.utilisation * gpus
    compute_seconds = flops / achieved if achieved > 0 else float("inf")
    tokens_per_step = plan.effective_batch * plan.workload.seq_len
    steps = -(-tokens // tokens_per_step) if tokens_per_step else 0
    step_compute = per_token * tokens_per_step / achieved if achieved > 0 else float("inf")
    # The forward's share of the FLOPs (2·P of them): what FSDP's forward gathers hide under.
    forward_share = 2.0 * counts.active / per_token if per_token > 0 else 1.0 / 3.0
    comm = step_communication(plan, counts, step_compute, forward_share)
    step = step_compute * (1.0 + comm.bubble_fraction) + comm.exposed_seconds
    # How much longer than the compute alone: exactly 1.0 when nothing is added.
    slowdown = step / step_compute if step_compute > 0 and math.isfinite(step) else 1.0
    seconds = compute_seconds * slowdown
    hours = seconds / 3600
    tokens_per_second = achieved / per_token / slowdown if per_token > 0 else 0.0
    formula = (
        f"FLOPs = {how} · D = {sci(per_token)} × {sci(tokens)} = {flops:.1e}; "
        f"time = {flops:.1e} ÷ ({peak:g} TFLOP/s × {plan.hardware.utilisation:.0%} × {gpus}) = "
        f"{format_hours(compute_seconds / 3600)}"
    )
    if slowdown != 1.0:
        formula += (
            f"; per step {step_compute:.3g} s compute × (1 + {comm.bubble_fraction:.3g} bubble) + "
            f"{comm.exposed_seconds:.3g} s exposed communication = {step:.3g} s, "
            f"so {format_hours(compute_seconds / 3600)} × {slowdown:.3f} = {format_hours(hours)}"
        )
    return Compute(
        flops_per_token=per_token,
        flops=flops,
        peak_tflops=peak,
        seconds=seconds,
        hours=hours,
        tokens_per_second=tokens_per_second,
        cost=hours * gpus * price,
        energy_kwh=hours * gpus * gpu.board_power_w / 1000.0,
        steps=steps,
        formula=formula,
        dtype=dtype,
        price_per_gpu_hour=price,
        price_source=price_source,
        dtype_problem=gpu.dtype_problem(dtype),
        compute_seconds_per_step=step_compute,
        comm_seconds_per_step=comm.comm_seconds,
        exposed_comm_seconds_per_step=comm.exposed_seconds,
        bubble_fraction=comm.bubble_fraction,
        step_seconds=step,
        comm_terms=comm.terms,
        assumptions=comm.assumptions,
    )

"""Compute and time: the FLOPs of every term (:mod:`core.training.flops`), the step's compute
at the utilisation the card, the matmul sizes and the stack reach (:mod:`core.training.speed`),
and what several GPUs add: the communication the compute cannot hide and the pipeline bubble.

One optimizer step takes compute × (1 + bubble) + the optimizer step + exposed communication
(+ the host optimizer step of an offloaded plan: :func:`core.training.host.host_step`). A
modelled step is no shorter than the host's time to issue it where that is counted (eager
PyTorch's kernels, a Megatron-Core mixture of experts: :func:`host_floor_step`).
The compute is modelled (0 in the utilisation input), or the FLOPs ÷ (peak × a typed
utilisation), or the modelled one scaled by a calibration: the factor a measured run gave, or
the one solved here from a measurement of this very plan (:func:`_solve_calibration`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from operator import attrgetter
from typing import Final

from core import roles
from core.catalogue import GpuSpec
from core.errors import PlanError
from core.format import duration, sci, scientific, tokens_per_s
from core.format import hours as format_hours
from core.memo import Once, fills_fields
from core.parallel.comm import CommTerm, StepComm, communicates, step_communication
from core.params import ParamCounts
from core.plan import Accounting, Float8, Optimizer, Plan, as_run
from core.training.efficiency import FLASH_SM80, SDPA_CUDNN, coefficient
from core.training.flops import METHOD_SOURCE, FlopTerm, MethodWork, method_work, token_flops
from core.training.host import HostStep, host_step
from core.training.speed import EAGER_KERNEL_HOST_S, Work, mxfp8_unsupported, step_work

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_DETAILED: Final = Accounting.DETAILED
_ACCOUNTING_LESSON: Final = Accounting.LESSON
_FLOAT8_NONE: Final = Float8.NONE
_OPTIMIZER_AO_ADAMW_FP8: Final = Optimizer.AO_ADAMW_FP8

# What the MFU figure counts, as the window and the command line say it. torchtitan counts every query against
# every key (pytorch/torchtitan b5bcd76c torchtitan/models/utils.py get_dense_model_nparams_and_flops, L443-457:
# "6 * nparams_for_matmul + 6 * n_layers * n_heads * head_dims * seq_len", head_dims the sum of the qk and v head
# dimensions, "we follow the convention and do not account for sparsity in causal attention"); Megatron-LM's
# num_floating_point_operations counts the causal half since core_r0.12.0 (NVIDIA/Megatron-LM 8873b55d, 2025-03-06:
# "Only half of the attention matrix is non-zero"; d98e8a64 megatron/training/training.py L1163-1169 "/ 2  # causal
# mask"), the count our causal MFU is at. Neither counts the recompute.
MFU_CONVENTION = (
    "MFU as torchtitan reports it: 6·N + 12·l·s·H·hd FLOPs per token (N the matmul "
    "weights a token meets, the input embedding not counted; every query against every key; no "
    "recompute) × tokens/s per GPU ÷ the card's dense peak for the matmuls' dtype; beside it the same at "
    "Megatron-LM's count (core 0.12 on: the causal half of the scores, no recompute) and the hardware's "
    "utilisation (the FLOPs the kernels run: causal attention, the recompute), which cannot pass 100%"
)


class UtilisationSource(StrEnum):
    MODELLED = "modelled"  # the card, the matmul sizes and the stack (core.training.speed)
    TYPED = "typed"  # hardware.utilisation
    CALIBRATED = "calibrated"  # hardware.calibration: a factor a measured run gave
    MEASURED = "measured"  # solved from hardware.measured_tokens_per_s / measured_step_s


@fills_fields
@dataclass(frozen=True)
class ComputePart:
    """One kind of work of the step's compute: its seconds per optimizer step and how (:attr:`formula`)."""

    label: str
    seconds: float
    # What :attr:`formula` is written from when first read (_part_formula's arguments: the feature's seconds at
    # the ideal rate, its coefficient, its name and the method's work): ~8 parts an estimate, whose text only
    # the window and the reports read.
    _how: tuple[float, float, str, MethodWork | None] = field(default=(0.0, 1.0, "", None), compare=False, repr=False)

    @Once
    def formula(self) -> str:
        """Its seconds at the ideal rate × the coefficient, and the feature it times."""
        return _part_formula(*self._how)


@fills_fields
@dataclass(frozen=True)
class Compute:
    flops_per_token: float  # what the kernels run per token (causal attention, recompute)
    flops: float
    peak_tflops: float  # dense peak of one GPU for the plan's compute dtype
    seconds: float
    hours: float
    tokens_per_second: float  # over all GPUs
    cost: float  # hours × GPUs × price per GPU-hour; NaN when the price is unknown
    energy_kwh: float  # hours × GPUs × board power
    steps: int  # optimizer steps for the token budget
    dtype: str = "bf16"  # the dtype the matmuls run in (what peak_tflops is for)
    price_per_gpu_hour: float = math.nan  # the price the cost is at (NaN: unknown)
    price_source: str = ""  # PRICE_FROM_PLAN, the catalogue's source, or why there is none
    # Why the card cannot run ``dtype`` natively (no bf16 on a T4 or V100), or None.
    dtype_problem: str | None = None
    # Several GPUs (core.parallel.comm): per optimizer step.
    compute_seconds_per_step: float = 0.0  # the step's compute on the rank that sets its pace
    comm_seconds_per_step: float = 0.0  # every collective and host transfer of the step
    exposed_comm_seconds_per_step: float = 0.0  # the part the step waits for
    bubble_fraction: float = 0.0  # pipeline idle time over ideal compute (Narayanan et al. 2021)
    step_seconds: float = 0.0  # (compute − optimizer) × (1 + bubble) + optimizer + exposed communication
    optimizer_seconds_per_step: float = 0.0  # the optimizer step's part of the compute (not under the bubble)
    # Offload: the optimizer step on the node's CPUs (core.training.host.host_step), which the GPUs wait for.
    host_step_seconds_per_step: float = 0.0
    host_step_formula: str = ""
    host_step_advice: str = ""  # how many host threads would let DRAM bound the step (when threads bound it)
    # Where the host's time to issue the step's kernels paces it (host_floor_step binds), how: "paced by the
    # host: N kernels × t µs = X s a step, the device's work Y s"; "" where the device's work is longer.
    host_pace: str = ""
    # The step's part paid once whatever the batch (the optimizer step: fixed_part), in words where it is a
    # visible share of the step (FIXED_SHARE_SHOWN); "" elsewhere.
    fixed_step: str = ""
    comm_terms: tuple[CommTerm, ...] = ()
    assumptions: tuple[str, ...] = ()
    # Issue 24: the FLOPs term by term, the utilisation and where it comes from, MFU.
    flop_terms: tuple[FlopTerm, ...] = ()
    model_flops_per_token: float = 0.0  # the MFU convention (Megatron / Narayanan, no recompute)
    causal_flops_per_token: float = 0.0  # the same with the causal attention count
    gemm_peak_tflops: float = 0.0  # the linears' peak (the fp8 rate for float8 linears)
    utilisation: float = 0.0  # hardware FLOPs ÷ (peak × compute time) of the step's compute
    modelled_utilisation: float = 0.0  # what the model gives, whatever was typed
    utilisation_source: UtilisationSource = UtilisationSource.MODELLED
    calibration_factor: float = 1.0  # compute speed ÷ modelled compute speed
    mfu: float = 0.0  # see MFU_CONVENTION
    tokens_per_second_per_gpu: float = 0.0
    compute_parts: tuple[ComputePart, ...] = ()
    float8_problem: str | None = None  # float8 linears or torchao's FP8 AdamW on a card without FP8 tensor cores
    # The arithmetic's one line of text (:attr:`formula`), written when first read: a partial of _formula (so a
    # Compute still pickles), ~15 µs of an estimate that no figure needs (the window, the reports read it).
    _formula_of: Callable[[], str] | None = field(default=None, compare=False, repr=False)

    @Once
    def formula(self) -> str:
        """The arithmetic as one line of text: FLOPs, then the step, then the time (_formula)."""
        if self._formula_of is None:
            raise ValueError("this Compute was built without its formula")
        return self._formula_of()

    @property
    def hfu(self) -> float:
        """The hardware's utilisation over the whole step: the FLOPs the kernels run per token (causal attention,
        the recompute) × tokens/s per GPU ÷ the linears' peak; under 100% where the step's compute is."""
        peak = self.gemm_peak_tflops * 1e12
        return self.flops_per_token * self.tokens_per_second_per_gpu / peak if peak else 0.0

    @property
    def causal_mfu(self) -> float:
        """The MFU at Megatron-LM's count (core 0.12 on): the causal half of the scores, no recompute."""
        model = self.model_flops_per_token
        return self.mfu * self.causal_flops_per_token / model if model else 0.0

    @property
    def mfu_text(self) -> str:
        """The MFU as every view words it (the window's MFU row, the command line, the reports): torchtitan's,
        Megatron-LM's and the hardware's, and why the first can pass 100 % (issue 24; h88fix)."""
        text = (
            f"{self.mfu:.1%} at torchtitan's count · {self.causal_mfu:.1%} at Megatron-LM's (causal) · "
            f"hardware {self.hfu:.1%} (the FLOPs the kernels run)"
        )
        if self.mfu > 1:
            ratio = self.model_flops_per_token / self.flops_per_token if self.flops_per_token else math.inf
            text += (
                f"; torchtitan's MFU passes 100% here because its count takes every query against every key, "
                f"{ratio:.2f} × the FLOPs the causal kernels run: it is no utilisation of the card"
            )
        return text

    @property
    def parts_sentence(self) -> str:
        """The step's compute part by part, each in the unit of its size (core.format.duration):
        "matmuls at the peak, in whole tiles and waves 49.9 ms; ...; optimizer step 98.7 ms"."""
        return "; ".join(f"{p.label} {duration(p.seconds)}" for p in self.compute_parts)

    @property
    def attention_note(self) -> str:
        """Which kernel the attention is timed as where that is not the one asked for by name (flash-attn 2 or SDPA's
        flash backend on a tcgen05 card; SDPA's cuDNN backend there), or ""."""
        labels = {p.label for p in self.compute_parts}
        if _FLASH_SM80_LABEL in labels:
            return FLASH_SM80_NOTE
        return SDPA_CUDNN_NOTE if _SDPA_CUDNN_LABEL in labels else ""

    @property
    def currency(self) -> str:
        """The sign the cost and its price show: the catalogue's prices are US dollars (resources/gpus.json:
        each card's hourly price cites a US list price); a typed one is the user's own (no sign), an unknown
        one has none."""
        return "" if self.price_source == PRICE_FROM_PLAN or not math.isfinite(self.price_per_gpu_hour) else "$"


def compute_dtype(plan: Plan) -> str:
    """The card rate the step runs at: the memory model's compute dtype (:func:`core.roles.compute_dtype`,
    the autocast dtype when autocast runs, else the dtype the model is loaded in)."""
    return roles.compute_dtype(plan).value


def flops_per_token(plan: Plan, counts: ParamCounts) -> tuple[float, str]:
    """Training FLOPs per token the step runs, and how they were counted (the terms joined)."""
    flops = token_flops(plan)
    return flops.hardware, " + ".join(t.label for t in flops.terms)


# Where a price typed into the plan comes from (hardware.price_per_gpu_hour, --price): in the user's own
# currency, which the program does not know.
PRICE_FROM_PLAN: Final = "the plan"


def gpu_hour_price(plan: Plan, gpu: GpuSpec) -> tuple[float, str]:
    """The price per GPU-hour the cost is at, and where it comes from: the plan's own when it
    gives one (hardware.price_per_gpu_hour > 0), else the catalogue's typical cloud price for
    the card, else unknown (NaN) — never a made-up figure."""
    if plan.hardware.price_per_gpu_hour > 0:
        return plan.hardware.price_per_gpu_hour, PRICE_FROM_PLAN
    listed = gpu.hourly_price()
    if listed is not None:
        return listed
    return math.nan, f"no price for the {gpu.name}: type one (Price per GPU-hour, --price)"


def _rated_card(plan: Plan, gpu: GpuSpec) -> GpuSpec:
    """The card at the plan's peak override (0: its datasheet): the compute dtype's rate is
    replaced, and the fp8 rate keeps its ratio to it."""
    override = plan.hardware.peak_tflops_override
    if override <= 0:
        return gpu
    dtype = compute_dtype(plan)
    rates = dict(gpu.tflops_dense)
    base = gpu.peak_tflops(dtype)
    fp8 = rates.get("fp8")
    rates[dtype] = override
    if fp8 and base:
        rates["fp8"] = override * fp8 / base
    return replace(gpu, tflops_dense=rates)


# Each kind of modelled work by its feature name's prefix (up to and including ":" where the name has one).
_PART_LABELS: Final = {
    "gemm:": "matmuls at the peak, in whole tiles and waves",
    "gemm_bytes": "matmul operands to and from memory",
    "attention:": "attention scores and values",
    "elementwise:": "elementwise ops (norms, rotary, activation, loss)",
    "optimizer": "optimizer step",
    "optimizer_gemm:": "optimizer step",  # Muon's Newton-Schulz matmuls, once a step
    "optimizer_svd": "optimizer step (GaLore's SVD, spread over update_proj_gap steps)",
    "ring_merge": "ring attention's merges and copies (context parallel)",
    "te_casts": "Transformer Engine's float8 casts",
    "moe_permute": "MoE token permutes (to the experts' rows and back)",
    "grad_accum": "gradient accumulation across micro-batches (unfused)",
    "adapter_fp32:": "the PEFT method's float32 matmuls (weight builds, adapter matmuls in float32)",
    "adapter_bytes:": "the PEFT method's memory-bound passes (weight builds, norms, casts, scalings)",
}
# flash-attn 2 on a datacenter Blackwell card (core.training.efficiency.FLASH_SM80): its part, and why it is slow.
_FLASH_SM80_LABEL: Final = "attention scores and values (flash-attn 2: Ampere's mma.sync on this card)"
FLASH_SM80_NOTE: Final = (
    "flash-attn 2 issues Ampere's mma.sync on this card, not Blackwell's tcgen05 (its SM80 MMA atom on every card): "
    "its attention is timed at the H100's FlashAttention-2 rate per SM and clock, half the share of the peak it "
    "reaches on an H100; cuDNN's attention (Transformer Engine) and FlashAttention-4 use tcgen05"
)


# SDPA on cuDNN's fused attention (core.training.efficiency.SDPA_CUDNN): its part, and why.
_SDPA_CUDNN_LABEL: Final = "attention scores and values (SDPA's cuDNN backend)"
SDPA_CUDNN_NOTE: Final = (
    "PyTorch 2.14's SDPA runs cuDNN's fused attention first on this card (its cuDNN is newer than 9.15.0): timed at "
    "Transformer Engine's fused-attention rate; earlier releases ran its FlashAttention-2 backend (Ampere's mma.sync)"
)


@functools.lru_cache(maxsize=256)  # a pure function of a feature name; a few names, read each estimate
def _part_label(name: str) -> str:
    if name.endswith(FLASH_SM80):
        return _FLASH_SM80_LABEL
    if name.endswith(SDPA_CUDNN):
        return _SDPA_CUDNN_LABEL
    head, colon, _ = name.partition(":")
    label = _PART_LABELS.get(head + colon) if colon else None
    return label or next(text for key, text in _PART_LABELS.items() if name.startswith(key))


def _parts(work: Work, plan: Plan) -> tuple[ComputePart, ...]:
    """The modelled compute by kind of work: each feature's seconds × its coefficient; a PEFT method's parts say what
    its step runs and where that was read and counted (core.training.flops.method_work)."""
    parts = []
    method = method_work(plan)
    for name, seconds in work.features.items():
        k = coefficient(name)
        parts.append(ComputePart(_part_label(name), seconds * k, (seconds, k, name, method)))
    return tuple(parts)


def _part_formula(seconds: float, k: float, name: str, method: MethodWork | None) -> str:
    """A compute part's arithmetic: ``seconds`` of feature ``name`` at the ideal rate × its coefficient ``k``; a PEFT
    method's parts say what its step runs and where that was read and counted (core.training.flops.method_work)."""
    formula = f"{duration(seconds)} at the ideal rate × {k:.3g} ({name})"
    if method is not None and name.startswith("adapter_bytes:"):
        formula += (
            f": {method.label}, {method.bytes_forward:.3g} B forward + {method.bytes_backward:.3g} B backward a "
            f"block ({method.formula}); {METHOD_SOURCE}"
        )
    elif method is not None and name.startswith("adapter_fp32:"):
        formula += (
            f": the adapter matmuls in float32 and the weight builds, {sci(method.build_forward)} forward + "
            f"{sci(method.build_backward)} backward FLOPs a block; {METHOD_SOURCE}"
        )
    return formula


@fills_fields
@dataclass(frozen=True)
class _Timing:
    """The step's compute as the plan has it, and the modelled one."""

    compute: float  # seconds per step, on the pacing rank
    optimizer: float  # of which the optimizer step (not under the bubble, no overlap)
    modelled: float
    source: UtilisationSource
    factor: float  # compute speed ÷ modelled


def _attention_share(work: Work) -> float:
    """Attention's part of the modelled compute but the optimizer (what the ring attention's K/V
    all-gather can hide under: core.parallel.comm)."""
    parts = [(name, seconds * coefficient(name)) for name, seconds in work.features.items() if name != "optimizer"]
    total = sum(seconds for _, seconds in parts)
    return sum(seconds for name, seconds in parts if name.startswith("attention:")) / total if total else 0.0


def _step(
    plan: Plan, counts: ParamCounts, timing: _Timing, work: Work, host: HostStep | None = None
) -> tuple[float, StepComm]:
    """Seconds per optimizer step for ``timing``'s compute, and the communication it sees; an
    offloaded plan's host optimizer step (``host``) adds whole: nothing overlaps it."""
    overlappable = timing.compute - timing.optimizer
    comm = step_communication(
        plan,
        counts,
        overlappable,
        work.forward_share,
        coefficient("tp_overlap"),
        coefficient("dp_contention"),
        _attention_share(work) if communicates(plan) else None,  # read only where something moves
    )
    step = overlappable * (1.0 + comm.bubble_fraction) + timing.optimizer + comm.exposed_seconds
    if timing.source is UtilisationSource.MODELLED:
        step = max(step, host_floor_step(work, comm.bubble_fraction, timing.optimizer))
    return step + (host.seconds if host else 0.0), comm


def host_floor_step(work: Work, bubble: float, optimizer: float) -> float:
    """The step at the host's pace: the micro-batches' eager kernels and MoE layers as fast as the host
    issues them (:func:`core.training.speed.eager_host_kernels`, :func:`core.training.speed.moe_host_floor`;
    the host runs ahead of the device, so the slower of the two paces the step), through the same
    pipeline bubble, then the optimizer step. The device's compute and the communication run
    meanwhile; a step whose device work is longer is not paced by the host (0: nothing counted)."""
    return work.host_floor * (1.0 + bubble) + optimizer if work.host_floor > 0 else 0.0


def host_pace(work: Work, timing: _Timing, bubble: float, step: float) -> tuple[str, str]:
    """The host's pace in words where it sets the step (``step``: the step without a host optimizer
    step), else ("", ""): only a modelled compute is held to it. Two forms: the sum with its total
    ("… + the optimizer step = X a step", Compute.host_pace, said on its own) and the sum alone, for the
    formula, which gives the step's total itself (it said the step twice: "= 24.5 ms a step = 24.5 ms")."""
    if timing.source is not UtilisationSource.MODELLED:
        return "", ""
    floor = host_floor_step(work, bubble, timing.optimizer)
    if floor <= 0 or floor < step:
        return "", ""
    bubbled = f" × (1 + {bubble:.3g} bubble)" if bubble else ""
    summed = f"paced by the host: {_host_words(work)}{bubbled} + the optimizer step"
    return f"{summed} = {duration(floor)} a step", summed


# The step's fixed part is said where it is at least a tenth of the step: below that the micro-batches' work
# dominates and a smaller batch would not change the step much.
FIXED_SHARE_SHOWN: Final = 0.10


def fixed_part(work: Work, timing: _Timing, step: float) -> str:
    """The optimizer step — clipping and a GradScaler's unscale included — as the share of the step it takes
    once whatever the micro-batch, and what sets it (its passes over memory, or the host issuing its kernels),
    where it is at least FIXED_SHARE_SHOWN of the step; else ""."""
    if timing.optimizer <= 0 or step <= 0 or not math.isfinite(step) or timing.optimizer / step < FIXED_SHARE_SHOWN:
        return ""
    host = work.optimizer_host_seconds
    if host > 0 and host >= timing.optimizer * (1 - 1e-9):
        how = f"the host issuing its {work.optimizer_kernels:,.0f} kernels × {EAGER_KERNEL_HOST_S * 1e6:.1f} µs"
    else:
        how = "its passes over the trainable parameters, their gradients and the optimizer state"
    if any(name.startswith("optimizer_gemm:") for name in work.features):
        how = f"Muon's Newton-Schulz matmuls (five iterations a weight matrix, in bf16) and {how.removeprefix('its ')}"
    if "optimizer_svd" in work.features:
        how = f"GaLore's float32 SVDs (every update_proj_gap steps, spread over them) and {how.removeprefix('its ')}"
    return (
        f"the optimizer step is {timing.optimizer / step:.0%} of the step: {duration(timing.optimizer)} once a "
        f"step, whatever the batch, for {how}"
    )


def _host_words(work: Work) -> str:
    """What the host issues per step, as the formula says it: the eager kernels (N × t) and the
    Megatron-Core MoE layers' measured time."""
    eager = work.host_kernels * EAGER_KERNEL_HOST_S
    parts = []
    if work.host_kernels:
        parts.append(f"{work.host_kernels:,.0f} kernels × {EAGER_KERNEL_HOST_S * 1e6:.1f} µs")
    if work.host_floor - eager > 1e-12:
        parts.append(f"{duration(work.host_floor - eager)} to issue the MoE layers")
    return " + ".join(parts) + (f" = {duration(work.host_floor)}" if len(parts) > 1 or work.host_kernels else "")


_SECONDS: Final = attrgetter("seconds")  # ComputePart.seconds, read in C by map() (_timing)


def _timing(
    plan: Plan, counts: ParamCounts, work: Work, step_flops: float, peak: float, parts: tuple[ComputePart, ...]
) -> _Timing:
    """The compute per step (``parts``: the modelled work's, ``_parts``): typed utilisation, a
    measured run, a calibration factor, or the model."""
    modelled = sum(map(_SECONDS, parts))  # summed in C: the same order, the same float
    optimizer = sum(p.seconds for p in parts if p.label == "optimizer step")
    hw = plan.hardware
    measured = hw.measured_tokens_per_s > 0 or hw.measured_step_s > 0
    if measured and plan.accounting is _ACCOUNTING_DETAILED:
        base = _Timing(modelled, optimizer, modelled, UtilisationSource.MEASURED, 1.0)
        factor = _solve_calibration(plan, counts, base, work, peak, step_flops, host_step(plan, counts))
        return replace(base, compute=modelled / factor, optimizer=optimizer / factor, factor=factor)
    if hw.utilisation > 0:
        typed = step_flops / (peak * 1e12 * hw.utilisation) if peak > 0 else math.inf
        return _Timing(typed, 0.0, modelled, UtilisationSource.TYPED, modelled / typed if typed else 1.0)
    if hw.calibration > 0 and plan.accounting is _ACCOUNTING_DETAILED:
        factor = hw.calibration
        _check_utilisation(plan, step_flops / (peak * 1e12 * modelled / factor), "hardware.calibration", factor)
        return _Timing(modelled / factor, optimizer / factor, modelled, UtilisationSource.CALIBRATED, factor)
    if plan.accounting is _ACCOUNTING_LESSON:
        # The lesson's FLOPs at the modelled utilisation of the same run (its own FLOPs' rate).
        util = work.hardware_flops / (peak * 1e12 * modelled) if modelled > 0 else 0.0
        lesson = step_flops / (peak * 1e12 * util) if util > 0 else math.inf
        return _Timing(lesson, 0.0, modelled, UtilisationSource.MODELLED, 1.0)
    # The optimizer step takes no less than the host's time to issue its kernels (the device's pass
    # over the parameters, gradients and state is the ``optimizer`` part; the slower of the two paces it).
    slower = max(0.0, work.optimizer_host_seconds - optimizer)
    return _Timing(modelled + slower, optimizer + slower, modelled + slower, UtilisationSource.MODELLED, 1.0)


def _check_utilisation(plan: Plan, utilisation: float, field: str, value: float) -> None:
    """A calibration may not ask more than the card's peak of the compute."""
    if not 0 < utilisation <= 1.0:
        raise PlanError(
            field,
            value,
            "a calibration that keeps the utilisation within 100 % of the peak",
            f"it implies {utilisation:.0%} of the card's peak",
        )


def _target_step(plan: Plan) -> tuple[float, str, float]:
    """The measured seconds per step, the input it came from and its value."""
    hw = plan.hardware
    if hw.measured_tokens_per_s > 0:
        tokens = plan.effective_batch * plan.workload.seq_len
        return (
            tokens / (hw.measured_tokens_per_s * plan.world_size),
            "hardware.measured_tokens_per_s",
            hw.measured_tokens_per_s,
        )
    return hw.measured_step_s, "hardware.measured_step_s", hw.measured_step_s


def _solve_calibration(
    plan: Plan, counts: ParamCounts, base: _Timing, work: Work, peak: float, step_flops: float, host: HostStep | None
) -> float:
    """The factor on the modelled compute speed that makes the step take what the run
    measured: the step time falls as the factor grows (bisection on its logarithm), up to
    the factor at which the compute runs at 100 % of the peak. A measurement faster than
    that, or than the communication alone allows, is refused."""
    target, field, value = _target_step(plan)
    top = base.modelled * peak * 1e12 / step_flops if step_flops else 1.0  # utilisation 1

    def step_at(factor: float) -> float:
        timing = replace(base, compute=base.modelled / factor, optimizer=base.optimizer / factor)
        return _step(plan, counts, timing, work, host)[0]

    fastest = step_at(top)
    if target < fastest * (1 - 1e-9):
        per_gpu = plan.effective_batch * plan.workload.seq_len / (fastest * plan.world_size)
        raise PlanError(
            field,
            value,
            f"a speed the card can reach (at most {tokens_per_s(per_gpu)} per GPU, {duration(fastest)} per step)",
            "faster than 100 % of the card's peak with this plan's communication",
        )
    low, high = math.log(1e-6), math.log(top)
    for _ in range(60):
        mid = (low + high) / 2
        if step_at(math.exp(mid)) > target:
            low = mid
        else:
            high = mid
    return math.exp(high)


def compute_estimate(plan: Plan, counts: ParamCounts, gpu: GpuSpec) -> Compute:
    # Prompt learning runs the model on seq + virtual tokens (core.plan.as_run): the step's work is the
    # run's, the tokens it trains on are the data's, so the FLOPs per data token grow by that ratio.
    run = as_run(plan)
    flops = token_flops(run)
    per_token = flops.hardware * run.workload.seq_len / plan.workload.seq_len
    card = _rated_card(plan, gpu)
    work = step_work(run, counts, card)
    dtype = compute_dtype(plan)
    peak = card.peak_tflops(dtype)
    gemm_peak = work.gemm_peak_tflops
    gpus = plan.world_size
    tokens = plan.workload.tokens
    tokens_per_step = plan.effective_batch * plan.workload.seq_len
    steps = -(-tokens // tokens_per_step) if tokens_per_step else 0
    step_flops = per_token * tokens_per_step / gpus  # one GPU's share of the step's FLOPs
    parts = _parts(work, run)
    timing = _timing(run, counts, work, step_flops, gemm_peak, parts)
    host = host_step(plan, counts)
    step, comm = _step(run, counts, timing, work, host)
    tokens_per_second = tokens_per_step / step if step > 0 and math.isfinite(step) else 0.0
    # A step with no work to time (no FLOPs, no traffic: e.g. a one-parameter override) takes no time;
    # only a step that cannot finish makes the run's time infinite.
    idle = step == 0 or tokens == 0
    seconds = tokens / tokens_per_second if tokens_per_second > 0 else (0.0 if idle else math.inf)
    hours = seconds / 3600
    price, price_source = gpu_hour_price(plan, gpu)
    per_gpu = tokens_per_second / gpus
    utilisation = step_flops / (gemm_peak * 1e12 * timing.compute) if timing.compute > 0 and gemm_peak else 0.0
    modelled_util = step_flops / (gemm_peak * 1e12 * timing.modelled) if timing.modelled and gemm_peak else 0.0
    pace, summed = host_pace(work, timing, comm.bubble_fraction, step - (host.seconds if host else 0.0))
    fixed = fixed_part(work, timing, step)
    text = (plan, flops.terms, per_token, tokens, timing, step, comm, utilisation, gemm_peak, host, (summed, fixed))
    return Compute(
        flops_per_token=per_token,
        flops=per_token * tokens,
        peak_tflops=peak,
        seconds=seconds,
        hours=hours,
        tokens_per_second=tokens_per_second,
        cost=hours * gpus * price,
        energy_kwh=hours * gpus * gpu.board_power_w / 1000.0,
        steps=steps,
        dtype=dtype,
        price_per_gpu_hour=price,
        price_source=price_source,
        dtype_problem=gpu.dtype_problem(dtype),
        compute_seconds_per_step=timing.compute,
        optimizer_seconds_per_step=timing.optimizer,
        host_step_seconds_per_step=host.seconds if host else 0.0,
        host_step_formula=host.formula if host else "",
        host_step_advice=host.advice if host else "",
        host_pace=pace,
        fixed_step=fixed,
        comm_seconds_per_step=comm.comm_seconds,
        exposed_comm_seconds_per_step=comm.exposed_seconds,
        bubble_fraction=comm.bubble_fraction,
        step_seconds=step,
        comm_terms=comm.terms,
        assumptions=comm.assumptions,
        flop_terms=flops.terms,
        model_flops_per_token=flops.model,
        causal_flops_per_token=flops.model_causal,
        gemm_peak_tflops=gemm_peak,
        utilisation=utilisation,
        modelled_utilisation=modelled_util,
        utilisation_source=timing.source,
        calibration_factor=timing.factor,
        mfu=flops.model * per_gpu / (gemm_peak * 1e12) if gemm_peak else 0.0,
        tokens_per_second_per_gpu=per_gpu,
        compute_parts=parts if timing.source is not UtilisationSource.TYPED else (),
        float8_problem=_float8_problem(plan, gpu),
        _formula_of=functools.partial(_formula, *text),
    )


def _float8_problem(plan: Plan, gpu: GpuSpec) -> str | None:
    linears = _float8_linears_problem(plan, gpu)
    if plan.optimizer is not _OPTIMIZER_AO_ADAMW_FP8 or gpu.tflops_dense.get("fp8"):
        return linears
    # pytorch/ao 36027d82 torchao/optim/README.md: "For FP8 optimizers on CUDA, PyTorch >= 2.4 and CUDA compute
    # capability >= 8.9 are required" (the cards with FP8 tensor cores: Ada, Hopper, Blackwell); "We only test on
    # CPU and CUDA".
    optimizer = (
        f"torchao's AdamWFp8 needs an fp8 card (CUDA compute capability 8.9 or above: Ada, Hopper, Blackwell); "
        f"the {gpu.name} has none, so this optimizer will not run there; torchao's AdamW8bit (ao-adamw-8bit) keeps "
        "about the same bytes"
    )
    return f"{linears}; {optimizer}" if linears else optimizer


def _float8_linears_problem(plan: Plan, gpu: GpuSpec) -> str | None:
    if plan.float8 is Float8.MXFP8 and mxfp8_unsupported(plan, gpu):
        # torchtitan's MX converter: assert has_cuda_capability(10, 0), "MXFP8 is only supported on SM100 or
        # architectures" (pytorch/torchtitan 6fc499f6 torchtitan/components/quantization/mx.py)
        return (
            f"torchao's MX training needs Blackwell's block-scaled fp8 GEMMs (torchtitan refuses other cards); the "
            f"{gpu.name} has none, so this run will not start there; the linears are timed at the 16-bit rate"
        )
    if gpu.tflops_dense.get("fp8") and mxfp8_unsupported(plan, gpu):
        return (
            f"Transformer Engine's MXFP8 recipe needs Blackwell's block-scaled fp8 GEMMs; the {gpu.name} has "
            "none (TE refuses it there), so the linears are timed as its per-tensor fp8 recipe"
        )
    if plan.float8 is _FLOAT8_NONE or gpu.tflops_dense.get("fp8"):
        return None
    return (
        f"float8 training needs FP8 tensor cores (Ada, Hopper, Blackwell); the {gpu.name} has none, so the "
        "linears are timed at the 16-bit rate (torchao's float8 matmul, torch._scaled_mm, refuses such cards)"
    )


def _source_words(timing: _Timing) -> str:
    """Where the step's compute came from, as the formula says it (only the one said is formatted)."""
    if timing.source is UtilisationSource.CALIBRATED:
        return f"calibrated × {timing.factor:.3g}"
    if timing.source is UtilisationSource.MEASURED:
        return f"solved from your run, × {timing.factor:.3g}"
    return "typed" if timing.source is UtilisationSource.TYPED else "modelled"


def _formula(
    plan: Plan,
    terms: tuple[FlopTerm, ...],
    per_token: float,
    tokens: int,
    timing: _Timing,
    step: float,
    comm: StepComm,
    utilisation: float,
    peak: float,
    host: HostStep | None = None,
    said: tuple[str, str] = ("", ""),
) -> str:
    """The arithmetic as one line of text: FLOPs, then the step, then the time; ``said``: the host's pace (its sum
    without the total, which the formula's " = step" gives) and the step's fixed part (host_pace, fixed_part),
    worked out once."""
    # Each term in the one form FLOPs take everywhere (core.format.scientific, as the window's per-token row);
    # lesson accounting's one term keeps the lesson's own formula.
    how = " + ".join(f"{scientific(t.per_token)} ({t.label})" for t in terms) if len(terms) > 1 else terms[0].formula
    flops = per_token * tokens
    # the token budget in full, as the Workload form and the window's other token counts give it ("× 1e9 tokens"
    # stood beside "20,000,000 tokens": docs/GUI.md, 2026-12-07, left 2)
    text = f"FLOPs = [{how}] per token × {tokens:,.0f} tokens = {scientific(flops)}"
    text += (
        f"; per step {duration(timing.compute)} compute ({utilisation:.1%} of {peak:g} TFLOP/s per GPU, "
        f"{_source_words(timing)})"
    )
    if comm.bubble_fraction or comm.exposed_seconds:
        text += f" × (1 + {comm.bubble_fraction:.3g} bubble) + {duration(comm.exposed_seconds)} exposed communication"
    pace, fixed = said
    if pace:
        text += f", but {pace}"
    if host:
        text += f" + {duration(host.seconds)} optimizer step on the host"
    steps = tokens / (plan.effective_batch * plan.workload.seq_len) if plan.effective_batch else 0.0
    text += f" = {duration(step)}" + (f" ({fixed})" if fixed else "")
    whole = steps == int(steps)  # 78,125 steps, not 78,125.0; a budget that ends mid-step keeps its tenth
    text += f"; {steps:,.0f} steps" if whole else f"; {steps:,.1f} steps"
    text += f" = {format_hours(steps * step / 3600)}"
    return text

"""OOM diagnosis: why a plan will not fit, where it fails, and what to change.

Everything here is produced by estimating modified plans with the same
:func:`core.estimate.estimate`; no remedy carries arithmetic of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from core.breakdown import BUCKET_LABELS, BucketKey
from core.catalogue import GpuSpec, load_gpus, load_models
from core.detailed import layer_activations, loss_memory
from core.estimate import Estimate, Verdict, estimate
from core.plan import Accounting, Attention, LoraSettings, Method, Optimizer, Plan, Quant, Sharding


class Failure(StrEnum):
    """Where a run that does not fit fails first: the rows of the lesson's symptom table."""

    NONE = "none"
    FIRST_STEP = "first-step"  # weights + gradients + optimizer state
    LONG_BATCHES = "long-batches"  # activations
    EVALUATION = "evaluation"  # a large eval batch, logits of long sequences
    SERVING = "serving"  # KV cache


@dataclass(frozen=True)
class Symptom:
    failure: Failure
    symptom: str
    cause: str
    remedies: str


# The lesson's "Reading an out-of-memory error" table, in our words.
SYMPTOMS: Final = (
    Symptom(
        Failure.FIRST_STEP,
        "Out of memory at the first step, right after the model loads",
        "Weights, gradients and optimizer state together exceed the card",
        "LoRA, a smaller model, a quantised base, an 8-bit optimizer, sharding",
    ),
    Symptom(
        Failure.LONG_BATCHES,
        "Out of memory after some steps, or only on long batches",
        "Activations: the micro-batch or the sequence length is too large",
        "Smaller micro-batch with accumulation, checkpointing, shorter sequences, fused attention",
    ),
    Symptom(
        Failure.EVALUATION,
        "Out of memory only during evaluation",
        "A large evaluation batch, or the logits of long sequences",
        "A smaller evaluation batch; compute the loss in chunks",
    ),
    Symptom(
        Failure.SERVING,
        "Out of memory when serving many users",
        "The KV cache of many long concurrent requests",
        "Shorter contexts, fewer concurrent requests, a quantised KV cache",
    ),
)
SYMPTOM_BY_FAILURE: Final = {s.failure: s for s in SYMPTOMS}


@dataclass(frozen=True)
class Remedy:
    key: str
    title: str
    plan: Plan
    estimate: Estimate
    cost_rank: int  # 0 = free; higher = costs more time, money or quality
    cost: str  # what it costs, in words, with the compute model's figure where one exists
    addresses: frozenset[Failure]

    @property
    def fits(self) -> bool:
        if self.serving:
            return self.estimate.inference.fits
        return self.estimate.verdict is Verdict.FITS

    @property
    def serving(self) -> bool:
        return self.addresses == {Failure.SERVING}

    @property
    def total_bytes(self) -> float:
        """The figure ``fits`` judges: the serving total for serving remedies."""
        return self.estimate.inference.total_bytes if self.serving else self.estimate.total_bytes


@dataclass(frozen=True)
class Combination:
    remedies: tuple[Remedy, ...]
    plan: Plan
    estimate: Estimate

    @property
    def title(self) -> str:
        return " + ".join(r.title for r in self.remedies)


@dataclass(frozen=True)
class Diagnosis:
    estimate: Estimate
    verdict: Verdict
    margin_bytes: float
    usable_bytes: float
    dominant: BucketKey
    failure: Failure
    symptom: Symptom | None
    state_bytes: float  # weights + gradients + optimizer state + overhead (the first step's floor)
    eval_bytes: float  # peak of an evaluation forward with the plan's eval batch
    remedies: tuple[Remedy, ...]
    combination: Combination | None  # when no single remedy fits

    @property
    def explanation(self) -> str:
        dom = BUCKET_LABELS[self.dominant].lower()
        if self.failure is Failure.NONE:
            return f"Fits with {self.margin_bytes / 1e9:.1f} GB to spare; the largest bucket is {dom}."
        symptom = SYMPTOM_BY_FAILURE[self.failure]
        return f"{symptom.cause}. The largest bucket is {dom}."


# ---- building blocks --------------------------------------------------------------
def _state_bytes(est: Estimate) -> float:
    """What exists before any activation: the optimizer-step phase less its activations."""
    step = est.phases[-1]
    held = sum(b.bytes for b in step.buckets if b.key is not BucketKey.ACTIVATIONS)
    return held + est.bucket(BucketKey.OVERHEAD).bytes


def _eval_bytes(plan: Plan) -> float:
    """Evaluation forward with the eval batch: nothing is kept for a backward pass, so
    the weights and optimizer state stay while only one block's tensors and the logits
    with their loss are alive at a time."""
    batch = plan.workload.eval_batch or plan.workload.micro_batch
    eval_plan = plan.with_workload(micro_batch=batch)
    est = estimate(eval_plan)
    forward = est.phases[0]
    held = forward.bucket(BucketKey.WEIGHTS).bytes + forward.bucket(BucketKey.OPTIMIZER).bytes
    if plan.accounting is Accounting.LESSON:
        working = forward.bucket(BucketKey.ACTIVATIONS).bytes  # the typed allowance
    else:
        working = sum(t.bytes for t in loss_memory(eval_plan).forward)
        working += layer_activations(eval_plan, trainable_block=True).bytes
    return held + working + est.bucket(BucketKey.OVERHEAD).bytes


def _failure(est: Estimate, eval_bytes: float) -> Failure:
    usable = est.usable_bytes
    if est.total_bytes > usable:
        return Failure.FIRST_STEP if _state_bytes(est) > usable else Failure.LONG_BATCHES
    if eval_bytes > usable:
        return Failure.EVALUATION
    if est.inference.total_bytes > usable:
        return Failure.SERVING
    return Failure.NONE


def _dominant(est: Estimate) -> BucketKey:
    return max(est.buckets, key=lambda b: b.bytes).key


# ---- solvers ------------------------------------------------------------------------
def largest_fitting(fits: Callable[[int], bool], high: int) -> int:
    """Largest n in [1, high] with fits(n) for a monotone fits(); 0 when even 1 fails."""
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= high and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, high + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _fits(plan: Plan) -> bool:
    return estimate(plan).verdict is Verdict.FITS


def max_micro_batch(plan: Plan, high: int = 65_536) -> int:
    return largest_fitting(lambda b: _fits(plan.with_workload(micro_batch=b)), high)


def max_sequence(plan: Plan, high: int = 1_048_576) -> int:
    return largest_fitting(lambda s: _fits(plan.with_workload(seq_len=s)), high)


def max_concurrent(plan: Plan) -> int:
    return estimate(plan).inference.max_concurrent


def max_context(plan: Plan) -> int:
    return estimate(plan).inference.max_context


@dataclass(frozen=True)
class Curve:
    """Memory against one workload dimension, with the card's limits."""

    axis: str  # "micro_batch" or "seq_len"
    values: tuple[int, ...]
    total_bytes: tuple[float, ...]
    usable_bytes: float
    capacity_bytes: float
    crossing: int  # the largest value that fits (0: none)


def memory_curve(plan: Plan, axis: str, points: int = 24) -> Curve:
    if axis not in ("micro_batch", "seq_len"):
        raise ValueError(f"unknown axis {axis!r}")
    current = getattr(plan.workload, axis)
    crossing = max_micro_batch(plan) if axis == "micro_batch" else max_sequence(plan)
    top = max(current, crossing, 1) * 2
    if axis == "seq_len":
        values = sorted({max(1, round(top * (i + 1) / points)) for i in range(points)} | {current})
    else:
        values = sorted({max(1, round(top * (i + 1) / points)) for i in range(points)} | {current, 1})
    totals = tuple(estimate(plan.with_workload(**{axis: v})).total_bytes for v in values)
    est = estimate(plan)
    return Curve(axis, tuple(values), totals, est.usable_bytes, est.capacity_bytes, crossing)


# ---- remedies -----------------------------------------------------------------------
Transform = Callable[[Plan], "tuple[Plan, str] | None"]


def _lora(plan: Plan) -> tuple[Plan, str] | None:
    if plan.method in (Method.LORA, Method.QLORA):
        return None
    lora = LoraSettings(rank=16, alpha=32, targets=("all-linear",))
    return replace(plan, method=Method.LORA, lora=lora, frozen_layers=0), "LoRA (rank 16, all linear layers)"


def _qlora(quant: Quant) -> Transform:
    def apply(plan: Plan) -> tuple[Plan, str] | None:
        if plan.method is Method.QLORA and plan.quant is quant:
            return None
        lora = plan.lora if plan.adapter_based else LoraSettings(rank=16, alpha=32, targets=("all-linear",))
        label = "4-bit NF4 base (QLoRA)" if quant is Quant.NF4 else "8-bit base (LLM.int8 + LoRA)"
        return replace(plan, method=Method.QLORA, quant=quant, lora=lora, frozen_layers=0), label

    return apply


def _optimizer(target: Optimizer, label: str) -> Transform:
    def apply(plan: Plan) -> tuple[Plan, str] | None:
        if plan.optimizer in (target, Optimizer.SGD) or plan.optimizer is Optimizer.PAGED_ADAMW_8BIT:
            return None
        return replace(plan, optimizer=target), label

    return apply


def _checkpointing(plan: Plan) -> tuple[Plan, str] | None:
    return None if plan.checkpointing else (replace(plan, checkpointing=True), "Gradient checkpointing")


def _fused_attention(plan: Plan) -> tuple[Plan, str] | None:
    if plan.attention is not Attention.EAGER:
        return None
    return replace(plan, attention=Attention.SDPA), "Fused attention (SDPA / FlashAttention)"


def _chunked_loss(plan: Plan) -> tuple[Plan, str] | None:
    return None if plan.chunked_loss else (replace(plan, chunked_loss=True), "Loss computed in chunks")


def _smaller_micro_batch(plan: Plan) -> tuple[Plan, str] | None:
    wl = plan.workload
    if wl.micro_batch == 1:
        return None
    effective = wl.micro_batch * wl.grad_accum
    best = max_micro_batch(plan.with_workload(grad_accum=1), high=wl.micro_batch - 1) or 1
    accum = -(-effective // best)
    new = plan.with_workload(micro_batch=best, grad_accum=accum)
    return new, f"Micro-batch {best} × {accum} accumulation steps (same effective batch)"


def _shorter_sequence(plan: Plan) -> tuple[Plan, str] | None:
    seq = plan.workload.seq_len
    best = max_sequence(plan, high=seq - 1) if seq > 1 else 0
    if best < 1:
        return None
    return plan.with_workload(seq_len=best), f"Sequence length {best:,} (was {seq:,})"


def _sharding(plan: Plan) -> tuple[Plan, str] | None:
    hw = plan.hardware
    for count in (2, 4, 8, 16, 32, 64):
        if count <= hw.gpu_count and hw.sharding is Sharding.ZERO3:
            continue
        candidate = plan.with_hardware(gpu_count=max(count, hw.gpu_count), sharding=Sharding.ZERO3)
        if _fits(candidate) or count == 64:
            return candidate, f"Shard over {candidate.hardware.gpu_count} GPUs (ZeRO-3 / FSDP)"
    return None


def _smaller_model(plan: Plan) -> tuple[Plan, str] | None:
    current = plan.model.total_params()
    same_family = [m for m in load_models() if m.spec.family == plan.model.family and m.spec.total_params() < current]
    for entry in sorted(same_family, key=lambda m: -m.spec.total_params()):
        candidate = replace(plan, model=entry.spec, model_id=entry.id, frozen_layers=0)
        if plan.method is Method.FROZEN:
            candidate = replace(candidate, frozen_layers=min(plan.frozen_layers, entry.spec.num_layers))
        if _fits(candidate):
            return candidate, f"Smaller model: {entry.name}"
    return None


def _bigger_card(plan: Plan) -> tuple[Plan, str] | None:
    capacity = estimate(plan).capacity_bytes
    cards: list[GpuSpec] = sorted(
        (g for g in load_gpus() if g.memory_bytes > capacity), key=lambda g: (g.memory_bytes, g.id)
    )
    for gpu in cards:
        candidate = plan.with_hardware(gpu=gpu.id)
        if _fits(candidate):
            return candidate, f"A bigger card: {gpu.name} ({gpu.memory_bytes / 1e9:.0f} GB)"
    return None


@dataclass(frozen=True)
class _Kind:
    key: str
    transform: Transform
    cost_rank: int
    addresses: frozenset[Failure]
    cost_note: str
    combinable: bool = True


FIRST = frozenset({Failure.FIRST_STEP})
ACTS = frozenset({Failure.LONG_BATCHES})
EVAL = frozenset({Failure.EVALUATION, Failure.LONG_BATCHES})
ALL = frozenset({Failure.FIRST_STEP, Failure.LONG_BATCHES, Failure.EVALUATION})

KINDS: Final = (
    _Kind("fused-attention", _fused_attention, 0, ACTS, "no cost: the same result, usually faster"),
    _Kind("chunked-loss", _chunked_loss, 0, EVAL, "no cost in quality; a little slower loss"),
    _Kind(
        "optimizer-8bit",
        _optimizer(Optimizer.ADAMW_8BIT, "8-bit AdamW"),
        1,
        FIRST,
        "little or no quality loss (Dettmers et al. 2022)",
    ),
    _Kind("micro-batch", _smaller_micro_batch, 1, ACTS, "same effective batch; smaller kernels run less efficiently"),
    _Kind("checkpointing", _checkpointing, 2, ACTS, "recomputes the forward"),
    _Kind("lora", _lora, 2, FIRST, "trains an adapter instead of every weight; quality usually close"),
    _Kind(
        "qlora-nf4",
        _qlora(Quant.NF4),
        3,
        FIRST,
        "dequantising costs some speed; quality close to 16-bit LoRA (QLoRA paper)",
    ),
    _Kind("qlora-int8", _qlora(Quant.INT8), 3, FIRST, "int8 matmuls are slower; quality close to 16-bit"),
    _Kind(
        "paged-optimizer",
        _optimizer(Optimizer.PAGED_ADAMW_8BIT, "Paged 8-bit AdamW"),
        3,
        FIRST,
        "pages state to CPU memory under pressure: slower when it does",
    ),
    _Kind("sharding", _sharding, 4, ALL, "more GPUs", combinable=False),
    _Kind("shorter-sequence", _shorter_sequence, 5, ACTS, "the model sees shorter contexts", combinable=False),
    _Kind("smaller-model", _smaller_model, 6, ALL, "a smaller model is usually less capable", combinable=False),
    _Kind("bigger-card", _bigger_card, 6, ALL, "a different, larger GPU", combinable=False),
)


def _cost_text(kind: _Kind, base: Estimate, new: Estimate) -> str:
    hours, new_hours = base.compute.hours, new.compute.hours
    parts = [kind.cost_note]
    if hours and new_hours and abs(new_hours / hours - 1) > 0.005:
        parts.append(f"time {new_hours / hours - 1:+.0%} ({new_hours:.1f} h)")
    if base.compute.cost and new.compute.cost and abs(new.compute.cost / base.compute.cost - 1) > 0.005:
        parts.append(f"cost {new.compute.cost / base.compute.cost - 1:+.0%}")
    return "; ".join(parts)


def remedies_for(plan: Plan, base: Estimate | None = None) -> tuple[Remedy, ...]:
    base = base or estimate(plan)
    found: list[Remedy] = []
    for kind in KINDS:
        result = kind.transform(plan)
        if result is None:
            continue
        new_plan, title = result
        if new_plan == plan:
            continue
        new = estimate(new_plan)
        if new.total_bytes >= base.total_bytes and kind.key not in ("bigger-card", "sharding"):
            continue  # it would not help
        found.append(
            Remedy(kind.key, title, new_plan, new, kind.cost_rank, _cost_text(kind, base, new), kind.addresses)
        )
    return tuple(sorted(found, key=lambda r: (not r.fits, r.cost_rank, r.total_bytes)))


def _combine(plan: Plan, remedies: Iterable[Remedy], max_size: int = 3) -> Combination | None:
    """The smallest set of combinable changes that fits, cheapest first."""
    by_key = {k.key: k for k in KINDS}
    pool = [r for r in remedies if by_key[r.key].combinable]
    for size in range(2, max_size + 1):
        best: Combination | None = None
        best_score: tuple[int, float] = (1 << 30, 0.0)
        for group in itertools.combinations(pool, size):
            keys = {r.key for r in group}
            if {"lora", "qlora-nf4"} <= keys or {"lora", "qlora-int8"} <= keys or {"qlora-nf4", "qlora-int8"} <= keys:
                continue
            if {"optimizer-8bit", "paged-optimizer"} <= keys:
                continue
            current = plan
            applied: list[Remedy] = []
            for remedy in sorted(group, key=lambda r: r.cost_rank):
                result = by_key[remedy.key].transform(current)
                if result is None:
                    break
                current = result[0]
                applied.append(remedy)
            else:
                est = estimate(current)
                if est.verdict is Verdict.FITS:
                    score = (sum(r.cost_rank for r in applied), est.total_bytes)
                    if score < best_score:
                        best, best_score = Combination(tuple(applied), current, est), score
        if best is not None:
            return best
    return None


def diagnose(plan: Plan) -> Diagnosis:
    est = estimate(plan)
    eval_bytes = _eval_bytes(plan)
    failure = _failure(est, eval_bytes)
    remedies = remedies_for(plan, est) if est.verdict is not Verdict.FITS else ()
    combination = None
    if remedies and not any(r.fits for r in remedies):
        combination = _combine(plan, remedies)
    return Diagnosis(
        estimate=est,
        verdict=est.verdict,
        margin_bytes=est.margin_bytes,
        usable_bytes=est.usable_bytes,
        dominant=_dominant(est),
        failure=failure,
        symptom=SYMPTOM_BY_FAILURE.get(failure),
        state_bytes=_state_bytes(est),
        eval_bytes=eval_bytes,
        remedies=remedies,
        combination=combination,
    )


def remedies_for_symptom(
    plan: Plan, failure: Failure, remedies: tuple[Remedy, ...] | None = None
) -> tuple[Symptom, tuple[Remedy, ...]]:
    """Start from what the user saw: the likely cause and the remedies for that failure.

    ``remedies`` may pass the training remedies a :func:`diagnose` of the same plan found.
    """
    symptom = SYMPTOM_BY_FAILURE.get(failure)
    if symptom is None:
        raise ValueError(f"no symptom for {failure!r}")
    if failure is Failure.SERVING:
        return symptom, _serving_remedies(plan)
    found = remedies if remedies is not None else remedies_for(plan)
    relevant = tuple(r for r in found if failure in r.addresses)
    return symptom, relevant


def _serving_remedies(plan: Plan) -> tuple[Remedy, ...]:
    base = estimate(plan)
    options: list[tuple[str, str, Plan, int, str]] = []
    inf = plan.inference
    if inf.kv_dtype in ("bf16", "fp16", "fp32"):
        options.append(("kv-fp8", "8-bit KV cache", plan.with_inference(kv_dtype="fp8"), 1, "small quality cost"))
    if base.inference.max_concurrent >= 1 and base.inference.max_concurrent < inf.concurrent:
        n = base.inference.max_concurrent
        options.append(
            ("fewer-requests", f"{n} concurrent requests", plan.with_inference(concurrent=n), 2, "lower throughput")
        )
    if base.inference.max_context >= 1 and base.inference.max_context < inf.context:
        n = base.inference.max_context
        options.append(
            (
                "shorter-context",
                f"Context of {n:,} tokens",
                plan.with_inference(context=n),
                3,
                "shorter prompts and answers",
            )
        )
    if inf.weight_dtype in ("bf16", "fp16", "fp32"):
        options.append(
            ("weights-nf4", "4-bit weights", plan.with_inference(weight_dtype="nf4"), 2, "some quality and speed cost")
        )
    out = []
    for key, title, new_plan, rank, note in options:
        new = estimate(new_plan)
        out.append(Remedy(key, title, new_plan, new, rank, note, frozenset({Failure.SERVING})))
    return tuple(sorted(out, key=lambda r: (not r.estimate.inference.fits, r.cost_rank)))

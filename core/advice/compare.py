"""Compare up to four plans: one row per input and figure, the differences, the cheapest that fits.

Every figure is the plan's own :func:`core.estimate.estimate`; rows carry raw numbers with
their kind, and views format them. A comparison on disk is :mod:`core.files.comparison`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.breakdown import BUCKET_LABELS, BUCKET_ORDER, SERVING_BUCKET_ORDER
from core.dtypes import AUTOCAST_LABELS, DTYPE_LABELS, WEIGHT_LABELS
from core.errors import PlanError
from core.estimate import JUDGED_FIGURE, Estimate, Mode, Verdict, estimate
from core.inputs import COMPILE_CACHE_LABELS, OFFLOAD_LABELS, input_at
from core.model import MAX_NAME_CHARS, spelled_targets
from core.plan import (
    ATTENTION_LABELS,
    ENGINE_LABELS,
    METHOD_LABELS,
    OPTIMIZER_IMPL_LABELS,
    OPTIMIZER_LABELS,
    PRESET_LABELS,
    QUANT_LABELS,
    STRATEGY_LABELS,
    Plan,
    check_trainable,
)
from core.verdict import cheapest_fit_words

MAX_PLANS: Final = 4
TOTAL: Final = "nvidia-smi (judged)"  # the judged group's name where every card is a CUDA card


def judged_label(ests: Iterable[Estimate]) -> str:
    """The judged figure's row name for these estimates: each card's figure (nvidia-smi, MPS driver) once."""
    names = dict.fromkeys(e.judged_figure for e in ests)
    return f"{' / '.join(names) or JUDGED_FIGURE} (judged)"


SERVING: Final = "serving"  # the one chart group of a serving comparison
# Two figures closer than this (relative) are the same figure printed twice, not a difference.
SAME_WITHIN: Final = 5e-4


class RowKind(StrEnum):
    TEXT = "text"
    COUNT = "count"
    BYTES = "bytes"
    HOURS = "hours"
    MONEY = "money"
    RATE = "rate"  # tokens per second


@dataclass(frozen=True)
class ComparedPlan:
    name: str
    estimate: Estimate

    @property
    def plan(self) -> Plan:
        return self.estimate.plan


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    kind: RowKind
    values: tuple[float | str, ...]
    section: str  # "inputs" | "memory" | "result"

    @property
    def differs(self) -> bool:
        first = self.values[0]
        if isinstance(first, str):
            return any(v != first for v in self.values)
        numbers = [float(v) for v in self.values]
        top = max(abs(n) for n in numbers)
        return top > 0 and (max(numbers) - min(numbers)) > SAME_WITHIN * top


def _adapter(plan: Plan) -> str:
    """The method's own settings, each where core.inputs says it matters (the window shows those rows
    and no others): a rank for IA3 or prompt tuning, or an alpha for VeRA or OFT, would describe a
    setting the method does not have."""
    lora = plan.lora
    parts: list[str] = []
    if input_at("lora.oft_block_size").matters(plan) and lora.oft_block_size > 0:
        parts.append(f"blocks of {lora.oft_block_size}")
    if input_at("lora.rank").matters(plan):
        parts.append(f"r={lora.rank} blocks" if plan.oft else f"n={lora.rank}" if plan.fourierft else f"r={lora.rank}")
    if input_at("lora.alpha").matters(plan):
        parts.append(f"α={lora.alpha:g}")
    if input_at("lora.dropout").matters(plan) and lora.dropout > 0:
        parts.append(f"dropout {lora.dropout:g}")
    if input_at("lora.lokr_factor").matters(plan):
        parts.append(f"factor {lora.lokr_factor}")
    if input_at("lora.road_variant").matters(plan):
        parts.append(lora.road_variant.value)
    if input_at("lora.virtual_tokens").matters(plan):
        parts.append(f"{lora.virtual_tokens} virtual tokens")
    if input_at("lora.adapter_prompt_length").matters(plan):
        parts.append(f"prompt {lora.adapter_prompt_length} from block {lora.adapter_start_layer}")
    if input_at("lora.targets").matters(plan):
        parts.append(", ".join(spelled_targets(lora.targets)))
    if input_at("lora.ia3_feedforward").matters(plan):
        parts.append(f"feedforward {', '.join(lora.ia3_feedforward) or '—'}")
    return ", ".join(parts) or "—"


def _base_storage(plan: Plan) -> str:
    """The bitsandbytes base wherever there is one (QLoRA, LitGPT's adapters under --quantize bnb.*), with
    its double quantisation where the window shows that switch."""
    if not input_at("quant").matters(plan):
        return "—"
    double = input_at("double_quant").matters(plan) and plan.double_quant
    return QUANT_LABELS[plan.quant] + (", double quantisation" if double else "")


def _dtypes(plan: Plan) -> str:
    return " / ".join(DTYPE_LABELS[d] for d in (plan.weight_dtype, plan.base_dtype, plan.adapter_dtype))


# (key, label, kind, value of a plan) for the input rows.
INPUT_ROWS: Final[tuple[tuple[str, str, RowKind, Callable[[Plan], float | str]], ...]] = (
    ("model", "Model", RowKind.TEXT, lambda p: p.model.name),
    ("method", "Method", RowKind.TEXT, lambda p: METHOD_LABELS[p.method]),
    ("lora", "Adapter", RowKind.TEXT, _adapter),
    ("quant", "Base storage", RowKind.TEXT, _base_storage),
    ("precision", "Precision", RowKind.TEXT, lambda p: PRESET_LABELS[p.preset]),
    ("dtypes", "Weights / base / adapters", RowKind.TEXT, _dtypes),
    ("autocast", "Autocast", RowKind.TEXT, lambda p: AUTOCAST_LABELS[p.autocast]),
    ("optimizer", "Optimizer", RowKind.TEXT, lambda p: OPTIMIZER_LABELS[p.optimizer]),
    ("optimizer_impl", "Optimizer code path", RowKind.TEXT, lambda p: OPTIMIZER_IMPL_LABELS[p.optimizer_impl]),
    ("checkpointing", "Checkpointing", RowKind.TEXT, lambda p: p.checkpointing_text),
    ("attention", "Attention", RowKind.TEXT, lambda p: ATTENTION_LABELS[p.attention]),
    ("micro_batch", "Micro-batch", RowKind.COUNT, lambda p: p.workload.micro_batch),
    ("seq_len", "Sequence", RowKind.COUNT, lambda p: p.workload.seq_len),
    ("grad_accum", "Accumulation", RowKind.COUNT, lambda p: p.workload.grad_accum),
    ("tokens", "Token budget", RowKind.COUNT, lambda p: p.workload.tokens),
    ("gpu_count", "GPUs", RowKind.COUNT, lambda p: p.world_size),
    ("strategy", "Strategy", RowKind.TEXT, lambda p: STRATEGY_LABELS[p.parallel.strategy]),
    # h55ux: a plan and its CPU-offload or tensor-parallel remedy differed in no input row.
    (
        "model_parallel",
        "Tensor / pipeline / context",
        RowKind.TEXT,
        lambda p: f"{p.parallel.tensor_parallel} / {p.parallel.pipeline_parallel} / {p.parallel.context_parallel}",
    ),
    ("offload", "CPU offload", RowKind.TEXT, lambda p: OFFLOAD_LABELS[p.parallel.offload]),
    ("price", "Price per GPU-hour", RowKind.MONEY, lambda p: p.hardware.price_per_gpu_hour),
    ("accounting", "Accounting", RowKind.TEXT, lambda p: p.accounting.value),
)


def _compile_cache(plan: Plan) -> str:
    """vLLM's compile cache (h94cold) where the form offers it, a V1 line with CUDA graphs; "—" elsewhere."""
    if not input_at("inference.compile_cache").matters(plan):
        return "—"
    return COMPILE_CACHE_LABELS[plan.inference.compile_cache]


# Serving rows shown only where some plan's input applies (the rest read "—"): the key and when it applies.
SERVING_ROWS_WHERE: Final[dict[str, str]] = {"compile_cache": "inference.compile_cache"}
# Serving's inputs: what the window's Serving form and the CLI's --mode inference take.
SERVING_INPUT_ROWS: Final[tuple[tuple[str, str, RowKind, Callable[[Plan], float | str]], ...]] = (
    ("model", "Model", RowKind.TEXT, lambda p: p.model.name),
    ("engine", "Engine", RowKind.TEXT, lambda p: ENGINE_LABELS.get(p.inference.engine, p.inference.engine.value)),
    ("weights", "Weights", RowKind.TEXT, lambda p: WEIGHT_LABELS.get(p.inference.weight_dtype, "?")),
    ("kv_dtype", "KV cache", RowKind.TEXT, lambda p: p.inference.kv_dtype.value),
    ("compile_cache", "Compile cache (vLLM)", RowKind.TEXT, _compile_cache),
    ("concurrent", "Requests", RowKind.COUNT, lambda p: p.inference.concurrent),
    ("context", "Context per request", RowKind.COUNT, lambda p: p.inference.context),
    ("tensor_parallel", "Tensor parallel", RowKind.COUNT, lambda p: p.inference.tensor_parallel),
    ("replicas", "Replicas", RowKind.COUNT, lambda p: p.inference.replicas),
    ("price", "Price per GPU-hour", RowKind.MONEY, lambda p: p.hardware.price_per_gpu_hour),
)


@dataclass(frozen=True)
class Comparison:
    """``mode``: what the plans are compared for, a training step or serving (each plan judged
    as the window, the command line and reports judge it in that mode)."""

    plans: tuple[ComparedPlan, ...]
    mode: Mode = Mode.TRAINING

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.plans)

    def rows(self) -> tuple[Row, ...]:
        ests = [p.estimate for p in self.plans]
        inputs = SERVING_INPUT_ROWS if self.mode is Mode.INFERENCE else INPUT_ROWS
        rows = [
            Row(key, label, kind, tuple(value(e.plan) for e in ests), "inputs")
            for key, label, kind, value in inputs
            if key not in SERVING_ROWS_WHERE or any(input_at(SERVING_ROWS_WHERE[key]).matters(e.plan) for e in ests)
        ]
        # The price the cost is at (core.training.compute.gpu_hour_price: the typed one, else the
        # catalogue's), not the Price field: left at 0 it read "0.00" beside a catalogue-priced cost.
        at = next(i for i, row in enumerate(rows) if row.key == "price")
        prices = tuple(e.compute.price_per_gpu_hour for e in ests)
        rows[at] = Row("price", rows[at].label, RowKind.MONEY, prices, "inputs")
        at = next(i for i, row in enumerate(rows) if row.key in ("gpu_count", "price"))
        rows.insert(at, Row("gpu", "GPU", RowKind.TEXT, tuple(e.gpu.name for e in ests), "inputs"))
        if self.mode is Mode.INFERENCE:
            return (*rows, *_serving_rows(ests))
        return (*rows, *_training_rows(ests))

    @property
    def total_name(self) -> str:
        """The judged figure's group: "nvidia-smi (judged)", on Macs "MPS driver (judged)", both names
        where the plans' cards differ."""
        return judged_label(compared.estimate for compared in self.plans)

    def phase_names(self) -> tuple[str, ...]:
        """Phase groups of the chart: every plan's phases in order of first appearance, then the
        total; serving has one group, what each plan needs at once."""
        if self.mode is Mode.INFERENCE:
            return (SERVING,)
        names: list[str] = []
        for compared in self.plans:
            for phase in compared.estimate.phases:
                if phase.name not in names:
                    names.append(phase.name)
        return (*names, self.total_name)

    def phase_bytes(self) -> tuple[tuple[float | None, ...], ...]:
        """[phase][plan] bytes; None where a plan has no such phase (lesson accounting)."""
        table = []
        for name in self.phase_names():
            row: list[float | None] = []
            for compared in self.plans:
                est = compared.estimate
                if name == SERVING:
                    row.append(est.inference.total_bytes)
                elif name == self.total_name:
                    row.append(est.total_bytes)
                else:
                    row.append(next((p.allocated_bytes for p in est.phases if p.name == name), None))
            table.append(tuple(row))
        return tuple(table)

    def cheapest_fit(self) -> int | None:
        """Index of the cheapest plan that fits with margin (fewer hours on a tie); where none does, of the
        cheapest that fits narrowly (core.verdict.fit_rank; :meth:`fit_answer` words it), or None."""
        fitting = [i for i, p in enumerate(self.plans) if p.estimate.judgement(self.mode).verdict is Verdict.FITS]
        if not fitting:
            return None
        priced = [i for i in fitting if math.isfinite(self.plans[i].estimate.compute.cost)]
        if not priced:
            return None
        return min(
            priced,
            key=lambda i: (
                self.plans[i].estimate.judgement(self.mode).fit_rank,
                self.plans[i].estimate.compute.cost,
                self.plans[i].estimate.compute.hours,
            ),
        )

    def cheapest_fits_narrowly(self) -> bool:
        """The cheapest fit is a narrow one (none fits with margin, core.verdict); False where none fits."""
        best = self.cheapest_fit()
        return best is not None and self.plans[best].estimate.judgement(self.mode).fits_narrowly

    def fit_answer(self, name: str) -> str:
        """The cheapest fit in words under ``name``, a narrow one said so (core.verdict.cheapest_fit_words)."""
        return cheapest_fit_words(name, self.cheapest_fits_narrowly())


def _training_rows(ests: Sequence[Estimate]) -> list[Row]:
    judged = [e.judgement(Mode.TRAINING) for e in ests]
    rows = [
        Row(
            f"bucket.{key.value}",
            BUCKET_LABELS[key],
            RowKind.BYTES,
            tuple(_bucket_bytes(e, key.value) for e in ests),
            "memory",
        )
        for key in BUCKET_ORDER
    ]
    return [
        *rows,
        Row("peak", "Peak (allocated)", RowKind.BYTES, tuple(e.peak_bytes for e in ests), "memory"),
        Row("reserved", "Reserved", RowKind.BYTES, tuple(e.reserved_bytes for e in ests), "memory"),
        Row("total", judged_label(ests), RowKind.BYTES, tuple(e.total_bytes for e in ests), "memory"),
        Row("range.low", "Range from", RowKind.BYTES, tuple(e.range_bytes[0] for e in ests), "memory"),
        Row("range.high", "Range to", RowKind.BYTES, tuple(e.range_bytes[1] for e in ests), "memory"),
        Row("capacity", "Card capacity", RowKind.BYTES, tuple(e.capacity_bytes for e in ests), "memory"),
        # The usable memory and the margin the verdict reads, as the window's headline and estimate state them.
        Row("usable", "Usable (headroom kept)", RowKind.BYTES, tuple(j.usable_bytes for j in judged), "memory"),
        Row("verdict", "Verdict", RowKind.TEXT, tuple(j.label for j in judged), "result"),
        Row("margin", "Margin", RowKind.BYTES, tuple(j.margin_bytes for j in judged), "result"),
        Row("hours", "Time", RowKind.HOURS, tuple(e.compute.hours for e in ests), "result"),
        Row("cost", "Cost", RowKind.MONEY, tuple(e.compute.cost for e in ests), "result"),
        Row("tokens_per_second", "Tokens/s", RowKind.RATE, tuple(e.compute.tokens_per_second for e in ests), "result"),
    ]


def _serving_rows(ests: Sequence[Estimate]) -> list[Row]:
    """Serving's figures: the buckets the serving chart draws, their sum (the figure judged), the
    card, the usable memory, the verdict in inference mode with its margin, and the speed."""
    judged = [e.judgement(Mode.INFERENCE) for e in ests]
    rows = [
        Row(
            f"bucket.{key.value}",
            BUCKET_LABELS[key],
            RowKind.BYTES,
            tuple(next((b.bytes for b in e.inference.buckets if b.key is key), 0.0) for e in ests),
            "memory",
        )
        for key in SERVING_BUCKET_ORDER
    ]
    return [
        *rows,
        Row("total", "Needed at once", RowKind.BYTES, tuple(j.total_bytes for j in judged), "memory"),
        Row("capacity", "Card capacity", RowKind.BYTES, tuple(j.capacity_bytes for j in judged), "memory"),
        # As a training comparison states them (_training_rows): the same words, the judgement's own figures.
        Row("usable", "Usable (headroom kept)", RowKind.BYTES, tuple(j.usable_bytes for j in judged), "memory"),
        Row("verdict", "Verdict", RowKind.TEXT, tuple(j.label for j in judged), "result"),
        Row("margin", "Margin", RowKind.BYTES, tuple(j.margin_bytes for j in judged), "result"),
        Row(
            "max_concurrent",
            "Requests at once",
            RowKind.COUNT,
            tuple(e.inference.max_concurrent for e in ests),
            "result",
        ),
        Row("max_context", "Longest context", RowKind.COUNT, tuple(e.inference.max_context for e in ests), "result"),
        Row(
            "tokens_per_second",
            "Output tokens/s",
            RowKind.RATE,
            tuple(e.inference.decode_tokens_per_s for e in ests),
            "result",
        ),
    ]


def _bucket_bytes(est: Estimate, key: str) -> float:
    return next((b.bytes for b in est.buckets if b.key.value == key), 0.0)


def check_name(name: object, index: int) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise PlanError(f"plans[{index}].name", name, f"a name of 1 to {MAX_NAME_CHARS:,} characters")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        # "\ud800" in a comparison file: no report or saved comparison could hold it, as
        # core.model.check_text refuses it in a model's name.
        raise PlanError(
            f"plans[{index}].name", name, "text without lone surrogates", "cannot be saved as UTF-8"
        ) from None
    return name.strip()


def compare(named: Sequence[tuple[str, Plan]], mode: Mode = Mode.TRAINING) -> Comparison:
    """Estimate each plan, for a training step or for serving; 1 to 4 of them (a PlanError otherwise)."""
    if not 1 <= len(named) <= MAX_PLANS:
        raise PlanError("plans", len(named), f"1 to {MAX_PLANS} plans")
    for name, plan in named:  # a plan whose training step is not estimated (core.plan.training_refusal)
        if mode is Mode.TRAINING:
            check_trainable(plan, f"inference for {name}")
    return Comparison(tuple(ComparedPlan(check_name(n, i), estimate(p)) for i, (n, p) in enumerate(named)), mode)

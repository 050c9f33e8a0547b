"""What the memory chart draws, worked out without Qt: the bars, how they stack, their labels,
the y range and the caption.

Every height is a figure the Estimate carries (bytes, shown in GB or GiB); stacking offsets,
the axis top and where a label sits are drawing geometry, not figures. The widget
(:mod:`gui.chart.widget`) hands these to pyqtgraph's items; tests read them with no display.
Nothing here imports Qt or pyqtgraph (import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from core.breakdown import BUCKET_LABELS, BUCKET_ORDER, BucketKey
from core.estimate import Estimate
from core.plan import ENGINE_LABELS, METHOD_LABELS, training_refusal
from core.verdict import Mode as Judged
from gui.colours import OKABE_ITO
from gui.format import Unit, memory

if TYPE_CHECKING:
    from core.files.measurement import Measurement

Mode = Literal["training", "inference"]

# Overhead gets a neutral grey so the model's own buckets stand out.
SERIES_COLOURS: dict[str, str] = {
    BucketKey.WEIGHTS.value: OKABE_ITO["blue"],
    BucketKey.GRADIENTS.value: OKABE_ITO["orange"],
    BucketKey.OPTIMIZER.value: OKABE_ITO["green"],
    BucketKey.ACTIVATIONS.value: OKABE_ITO["purple"],
    BucketKey.OVERHEAD.value: OKABE_ITO["grey"],
    "kv_cache": OKABE_ITO["sky"],
    "measured": "#555555",
}
TRAINING_SERIES = tuple(k.value for k in BUCKET_ORDER)
INFERENCE_SERIES = ("weights", "kv_cache", "activations", "overhead")
SERIES_LABELS: dict[str, str] = {k.value: v for k, v in BUCKET_LABELS.items()} | {
    "kv_cache": "KV cache",
    "measured": "Measured peak",
}
ALL_SERIES = (*TRAINING_SERIES, "kv_cache", "measured")
MAX_BARS = 6  # three phases, the peak, a measurement, and a spare
BAR_WIDTH = 0.62
# White on the dark Okabe-Ito colours, black on the light ones: both legible.
DARK_TEXT_SERIES = frozenset({"gradients", "kv_cache", "overhead", "activations"})

# Room above the tallest bar (or the capacity line) for its total and the legend: a new axis
# top is 1.2 × the tallest, and it is kept while the tallest stays between these fractions of
# it. Redrawing the axes is the costly part of a chart update, and a still axis reads better.
TOP_ROOM = 1.2
KEEP_TOP = (1 / 1.45, 1 / 1.15)
LABEL_ROOM = 0.035  # a segment thinner than this share of the axis (about a line of text) gets no label
TOTAL_LIFT = 0.005  # a bar's total sits this share of the axis above the bar
MEASURED_MARK_OVERHANG = 0.08  # the measured peak's mark reaches this far past the bar's sides
LABEL_INSET = 2.0  # pixels kept clear between a value label's text and its bar's side


@dataclass(frozen=True)
class BarSpec:
    """One bar: its label, bytes per series, and its total (printed on top)."""

    label: str
    parts: dict[str, float]
    total_bytes: float


# (bottoms, heights) of one series across the bars, in the display unit; plain tuples because
# they are compared at every edit, where numpy's per-call cost was most of the work.
Segments = tuple[tuple[float, ...], tuple[float, ...]]


def training_bars(estimate: Estimate, measurement: Measurement | None, rank: int | None = None) -> list[BarSpec]:
    """The phases and the peak of one rank (the worst by default), then a measurement; none for a model
    whose training step the core does not estimate (a hybrid recurrent one, Llama 4: core.plan.training_refusal)."""
    if training_refusal(estimate.plan) is not None:
        return []
    source = estimate.for_rank(rank)
    bars: list[BarSpec] = []
    if len(source.phases) > 1:
        for phase in source.phases:
            bars.append(BarSpec(phase.name, {b.key.value: b.bytes for b in phase.buckets}, phase.allocated_bytes))
    peak_label = estimate.judged_figure if len(source.phases) > 1 else source.peak_phase
    bars.append(BarSpec(peak_label, {b.key.value: b.bytes for b in source.buckets}, source.total_bytes))
    if measurement is not None:
        bars.append(
            BarSpec("measured", {"measured": measurement.peak_allocated_bytes}, measurement.peak_allocated_bytes)
        )
    return bars


def inference_bars(estimate: Estimate, measurement: Measurement | None) -> list[BarSpec]:
    """One bar: what serving needs at once, the figure the verdict judges (core's serving
    buckets: weights, the running requests' KV cache, working memory, overhead)."""
    inf = estimate.inference
    plan = estimate.plan.inference
    running = min(plan.concurrent, inf.max_concurrent) if inf.engine != "hf" else plan.concurrent
    label = f"{max(running, 1):,} × {plan.context:,} tokens at once"
    return [BarSpec(label, {b.key.value: b.bytes for b in inf.buckets}, inf.total_bytes)]


def bars_for(estimate: Estimate, mode: Mode, measurement: Measurement | None, rank: int | None) -> list[BarSpec]:
    """The bars the chart shows for ``mode``, at most :data:`MAX_BARS` of them."""
    if mode == "training":
        return training_bars(estimate, measurement, rank)[:MAX_BARS]
    return inference_bars(estimate, measurement)[:MAX_BARS]


def series_for(mode: Mode) -> tuple[str, ...]:
    """The series a mode draws, bottom to top."""
    return (*TRAINING_SERIES, "measured") if mode == "training" else INFERENCE_SERIES


def stack(bars: list[BarSpec], names: tuple[str, ...], scale: float) -> dict[str, Segments]:
    """Each drawn series' segments, stacked in the order of :data:`ALL_SERIES`."""
    base: tuple[float, ...] = (0.0,) * len(bars)
    stacked: dict[str, Segments] = {}
    for key in ALL_SERIES:
        if key not in names:
            continue
        heights = tuple(spec.parts.get(key, 0.0) / scale for spec in bars)
        stacked[key] = (base, heights)
        base = tuple(b + h for b, h in zip(base, heights, strict=True))
    return stacked


def nice_ceiling(value: float) -> float:
    """``value`` rounded up to a twentieth of its power of ten (103 → 105, 82.3 → 82.5): an axis
    top that stays put under small edits. Drawing geometry, not a figure."""
    if value <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(value)) / 20
    return math.ceil(value / step) * step


def axis_top(tallest: float, current: float) -> float:
    """The y-axis top for bars up to ``tallest``: ``current`` while it still fits them well."""
    if current > 0 and KEEP_TOP[0] * current <= tallest <= KEEP_TOP[1] * current:
        return current
    return nice_ceiling(tallest * TOP_ROOM)


def tallest(bars: list[BarSpec], capacity: float, scale: float) -> float:
    """The highest thing drawn, in the display unit: a bar's total or the card's capacity."""
    return max([capacity] + [spec.total_bytes / scale for spec in bars])


def y_top(highest: float, kept: float, legend_share: float) -> float:
    """The axis top: ``kept`` while it fits, and never so low that the legend (the top
    ``legend_share`` of the plot) covers the highest bar or line."""
    return max(axis_top(highest, kept), nice_ceiling(highest / (1 - legend_share)))


def segment_labels(
    bars: list[BarSpec], stacked: dict[str, Segments], top: float, unit: Unit
) -> dict[tuple[str, int], tuple[str, float]]:
    """(series, bar index) -> (text, height of its middle) for each segment tall enough to label."""
    room = top * LABEL_ROOM
    placed: dict[tuple[str, int], tuple[str, float]] = {}
    for key, (y0, heights) in stacked.items():
        for index, spec in enumerate(bars):
            if heights[index] >= room:
                placed[(key, index)] = (memory(spec.parts[key], unit), float(y0[index] + heights[index] / 2))
    return placed


def total_labels(bars: list[BarSpec], top: float, unit: Unit, scale: float) -> list[tuple[str, float]]:
    """Each bar's total and the height its label stands at, just above the bar."""
    return [(memory(spec.total_bytes, unit), spec.total_bytes / scale + top * TOTAL_LIFT) for spec in bars]


def bar_pixels(view_width: float, count: int) -> tuple[float, float]:
    """(a bar's width, its slot's width) in pixels: the view spans ``count`` slots and 0.2 of a
    slot of margins (x from -0.6 to count - 0.4), a bar :data:`BAR_WIDTH` of its slot."""
    slot = view_width / (max(1, count) + 0.2)
    return slot * BAR_WIDTH, slot


def fitted_text(text: str, unit: Unit, room: float, width_of: Callable[[str], float]) -> str:
    """``text`` in a form that fits ``room`` pixels (less :data:`LABEL_INSET` each side): whole
    ("16.1 GB"), else the number alone when it is in the axis's unit ("16.1": the axis names
    it), else "" (no label). Never a cut number: a label wider than its bar lost its first digit
    off the bar's edge, white on the plot or the headroom band ("47.2" read "7.2")."""
    room -= 2 * LABEL_INSET
    suffix = f" {unit}"
    forms = (text, text.removesuffix(suffix)) if text.endswith(suffix) else (text,)
    return next((form for form in forms if width_of(form) <= room), "")


def peak_index(bars: list[BarSpec], peak_phase: str) -> int:
    """The bar of the peak phase (a measurement is drawn against it); else the one before last."""
    return next((i for i, spec in enumerate(bars) if spec.label == peak_phase), len(bars) - 2)


def measured_mark(
    bars: list[BarSpec], peak_phase: str, measured_bytes: float, scale: float
) -> tuple[float, float, float]:
    """(left, right, height): a level across the peak bar at the measured peak."""
    index = peak_index(bars, peak_phase)
    half = BAR_WIDTH / 2 + MEASURED_MARK_OVERHANG
    return index - half, index + half, measured_bytes / scale


def bar_names(bars: list[BarSpec], peak_phase: str) -> list[str]:
    """The bars' names under the axis, the peak phase's marked "(peak)" when there are several."""
    labels = [spec.label for spec in bars]
    if peak_phase in labels and len(labels) > 1:
        index = labels.index(peak_phase)
        labels[index] = f"{labels[index]} (peak)"
    return labels


def two_lines(label: str) -> str:
    """``label`` broken at the space nearest its middle ("backward\n(peak)"), or, with no space,
    after the hyphen nearest it ("nvidia-\nsmi": the judged bar's name in a narrow slot)."""
    spaces = [i for i, char in enumerate(label) if char == " "]
    if spaces:
        middle = min(spaces, key=lambda i: abs(i - len(label) / 2))
        return f"{label[:middle]}\n{label[middle + 1 :]}"
    hyphens = [i for i, char in enumerate(label) if char == "-" and 0 < i < len(label) - 1]
    if not hyphens:
        return label
    middle = min(hyphens, key=lambda i: abs(i - len(label) / 2))
    return f"{label[: middle + 1]}\n{label[middle + 1 :]}"


def segment_at(stacked: dict[str, Segments], count: int, x: float, y: float) -> str:
    """The series key of the segment at (x, y) in data coordinates, or "" (between bars, above them)."""
    index = round(x)
    if not 0 <= index < count or abs(x - index) > BAR_WIDTH / 2:
        return ""
    for key, (y0, heights) in stacked.items():
        if heights[index] > 0 and y0[index] <= y <= y0[index] + heights[index]:
            return key
    return ""


def judged_limits(estimate: Estimate, mode: Mode) -> tuple[float, float]:
    """The capacity and usable bytes the mode's verdict is decided on (core.estimate.Estimate.judgement): the
    training step's card limit, or the serving engine's (on an Apple GPU Metal's working set for llama.cpp, vLLM and
    SGLang, not PyTorch's MPS limit), so that the chart's lines are the verdict's."""
    judged = estimate.judgement(Judged.INFERENCE if mode == "inference" else Judged.TRAINING)
    return judged.capacity_bytes, judged.usable_bytes


def caption_lines(estimate: Estimate, mode: Mode, unit: Unit, rank: int | None = None) -> list[str]:
    """Model, method, card, workload and verdict, for an exported chart to stand on its own."""
    plan = estimate.plan
    cards = f"{plan.world_size} × {estimate.gpu.name}" if plan.world_size > 1 else estimate.gpu.name
    w = plan.workload
    lines = [
        f"{plan.model.name} · {METHOD_LABELS[plan.method]} · {cards}",
        f"micro-batch {w.micro_batch} × {w.seq_len:,} tokens, gradient accumulation {w.grad_accum}, "
        f"{plan.accounting.value} accounting",
    ]
    judged = estimate.judgement(Judged.INFERENCE if mode == "inference" else Judged.TRAINING)
    if mode == "inference":  # what is served, not how it would be trained (issue 26, item 11)
        inf = plan.inference
        served = f"{inf.gpus} × {estimate.gpu.name}" if inf.gpus > 1 else estimate.gpu.name
        lines[0] = (
            f"{plan.model.name} · served by {ENGINE_LABELS[inf.engine]} · {inf.weight_dtype.value} weights · {served}"
        )
        lines[1] = f"serving {inf.concurrent:,} × {inf.context:,} tokens, KV cache {inf.kv_dtype.value}"
    lines.append(
        f"{judged.label}: {memory(judged.total_bytes, unit)} of "
        f"{memory(judged.capacity_bytes, unit)} per GPU "
        f"(usable with {plan.hardware.headroom:.0%} headroom: {memory(judged.usable_bytes, unit)})"
    )
    if mode == "training" and len(estimate.ranks) > 1:
        shown = estimate.worst_rank if rank is None else rank
        lines.append(f"bars: {estimate.ranks[shown].label}; the verdict is the worst rank's ({estimate.worst.label})")
    return lines

"""Reports of a plan or a comparison: self-contained HTML, Markdown and CSV.

A report holds the inputs, the chart (inline SVG drawn from the estimate's phases), every
bucket with its worked arithmetic, the verdict, the diagnosis and the tool's version. Every
string that came from outside (model names, plan names) is HTML-escaped in HTML and has
its table separators escaped in Markdown. Figures are the estimator's; nothing is derived
here beyond scaling bytes to a unit or to pixels.

Just past 400 lines: the HTML, Markdown and CSV writers walk the same report structure.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape as html_escape
from typing import Final

from core import __version__, colours
from core.advice.compare import SERVING, Comparison, Row, RowKind, compare
from core.advice.diagnosis import Diagnosis, diagnose
from core.breakdown import BUCKET_LABELS, BUCKET_ORDER, SERVING_BUCKET_ORDER, Bucket, BucketKey
from core.estimate import Estimate, Mode, Verdict
from core.format import counted, duration, hours, latency, memory, money, tokens_per_s
from core.plan import ENGINE_LABELS, METHOD_LABELS, Plan
from core.serving.text_only import tower_line
from core.units import GB, GiB
from core.verdict import NARROW_LABEL, Judgement

# Characters XML 1.0 does not allow (section 2.2, Char): tab, LF and CR are the only C0 allowed.
_XML_INVALID: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def escape(text: str) -> str:
    """Text for HTML and SVG: markup escaped, and each control character XML forbids written as
    a visible ``\\x01`` escape. A \\x01 in a plan's name made the chart invalid XML: the Compare
    tab's chart went blank and the exported SVG would not open (issue 28 item 23)."""
    return html_escape(_visible(text))


def _visible(text: str) -> str:
    """The text as the chart shows it: each control character XML forbids as its ``\\x01`` escape."""
    return _XML_INVALID.sub(lambda m: repr(m.group())[1:-1], text)


# What the report colours (core.colours holds every value).
BUCKET_COLOURS: Final = colours.BUCKET_COLOURS
VERDICT_COLOURS: Final = {
    Verdict.FITS: colours.FITS,
    Verdict.OVER_HEADROOM: colours.CAUTION,
    Verdict.BORDERLINE: colours.UNCERTAIN,
    Verdict.OOM: colours.PROBLEM,
    Verdict.WONT_START: colours.PROBLEM,
}


def verdict_colour(judged: Judgement) -> str:
    """A verdict's colour; a narrow fit (core.verdict) takes borderline's yellow, never the green of a fit."""
    return colours.UNCERTAIN if judged.fits_narrowly else VERDICT_COLOURS[judged.verdict]


@dataclass(frozen=True)
class ReportPlan:
    name: str
    estimate: Estimate
    diagnosis: Diagnosis


@dataclass(frozen=True)
class Report:
    title: str
    comparison: Comparison
    plans: tuple[ReportPlan, ...]
    generated: str  # UTC time, ISO 8601
    unit: str = "GB"

    @property
    def is_comparison(self) -> bool:
        return len(self.plans) > 1

    @property
    def mode(self) -> Mode:
        """A training step or serving: what every figure, verdict and diagnosis is for."""
        return self.comparison.mode


def build_report(
    named: Sequence[tuple[str, Plan]],
    title: str = "",
    *,
    unit: str = "GB",
    generated: str | None = None,
    mode: Mode = Mode.TRAINING,
) -> Report:
    """Estimate and diagnose each plan (1 to 4) for ``mode``: the contents every format renders."""
    comparison = compare(named, mode)
    plans = tuple(ReportPlan(p.name, p.estimate, diagnose(p.plan, mode)) for p in comparison.plans)
    when = generated or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    default_title = "Plan comparison" if len(plans) > 1 else f"Plan: {plans[0].name}"
    return Report(title or default_title, comparison, plans, when, "GiB" if unit == "GiB" else "GB")


def report_for_comparison(comparison: Comparison, title: str = "", **kwargs: str) -> Report:
    return build_report([(p.name, p.plan) for p in comparison.plans], title, mode=comparison.mode, **kwargs)


# ---- shared text ---------------------------------------------------------------------
def _size(n_bytes: float, unit: str) -> str:
    return memory(n_bytes, unit)


def value_text(row: Row, value: float | str, unit: str, currency: str = "") -> str:
    """A table cell; an amount of money after its plan's currency sign where it is known (the Compute tab's "$3.70",
    the table's bare "3.70" before: ``Compute.currency``)."""
    if isinstance(value, str):
        return value
    if row.kind is RowKind.BYTES:
        return _size(value, unit)
    if row.kind is RowKind.HOURS:
        return hours(value)
    if row.kind is RowKind.MONEY:
        return money(value, currency)
    if row.kind is RowKind.RATE:
        return f"{value:,.0f}"
    return f"{value:,.0f}"


def caption(est: Estimate, mode: Mode = Mode.TRAINING) -> str:
    """One line for a chart: model, method (or engine and weights when serving), card and verdict."""
    plan = est.plan
    judged = est.judgement(mode)
    if mode is Mode.INFERENCE:
        inf = plan.inference
        engine = ENGINE_LABELS.get(inf.engine, inf.engine.value)
        what = f"served by {engine} · {inf.weight_dtype.value} weights · {est.gpu.name} × {inf.gpus}"
    else:
        # The method's label, as the window and the table above name it ("lora" read as a typo under a chart).
        what = f"{METHOD_LABELS.get(plan.method, plan.method.value)} · {est.gpu.name} × {plan.world_size}"
    return (
        f"{plan.model.name} · {what} · "
        f"{judged.label} ({judged.total_bytes / GB:.1f} of {judged.capacity_bytes / GB:.1f} GB)"
    )


def _verdict_line(est: Estimate, unit: str, mode: Mode = Mode.TRAINING) -> str:
    """The verdict with the figures it was decided on, as the window and the CLI state it."""
    plan = est.plan
    judged = est.judgement(mode)
    where = (
        f"{counted(plan.inference.concurrent, 'request')} × {plan.inference.context:,} tokens, "
        f"{est.inference.limits_sentence(plan)}"
        if mode is Mode.INFERENCE
        else f"peak at the {est.peak_phase}"
    )
    after = f"; {judged.after_margin}" if judged.after_margin else ""  # as the command line's verdict line says it
    return (
        f"{judged.label}: {_size(judged.total_bytes, unit)} of {_size(judged.capacity_bytes, unit)} "
        f"({_size(judged.usable_bytes, unit)} usable with {plan.hardware.headroom:.0%} headroom), "
        f"margin {_size(judged.margin_bytes, unit)}{after}; {where}"
    )


def _tower(est: Estimate, mode: Mode) -> str:
    """When serving, an image-text checkpoint's vision tower and whether images are taken, in the words the window's
    model summary and the command line give (core.serving.text_only.tower_line); "" otherwise."""
    if mode is not Mode.INFERENCE:
        return ""
    return tower_line(est.plan.model, est.plan.inference)


def _buckets(est: Estimate, mode: Mode) -> tuple[Bucket, ...]:
    """The buckets that add up to the figure judged in ``mode``."""
    return est.inference.buckets if mode is Mode.INFERENCE else est.buckets


def _summary(est: Estimate, mode: Mode) -> str:
    return est.inference.summary_formula if mode is Mode.INFERENCE else est.summary_formula


def _speed_line(est: Estimate) -> str:
    speed = est.inference.speed
    return f"time to first token {latency(speed.ttft_s)}, {speed.rates_sentence}"


def _explanation(d: Diagnosis) -> str:
    """The diagnosis' cause, and for a training step that does not fit the phase it fails in: the
    phase the verdict line names as the peak's unless the weights do not load (core.advice.diagnosis); for a
    training step that fits beside a serving that does not fit or would not start, serving's own verdict in the
    Diagnosis tab's sentence (Diagnosis.outcome; h91diag: the tab said serving fits where it would not start)."""
    if d.phase:
        return f"{d.explanation} Where it fails: {d.when}."
    return f"{d.explanation} {d.outcome.sentence}" if d.serving_after_step else d.explanation


def _remedy_lines(d: Diagnosis, unit: str) -> list[str]:
    lines = []
    for remedy in d.remedies[:8]:
        state = "fits" if remedy.fits else "still too big"
        if remedy.fits_narrowly:  # core.verdict's word, a more-GPUs count short of margin included
            state = NARROW_LABEL.lower()
        lines.append(f"{remedy.title}: {_size(remedy.total_bytes, unit)}, {state}; {remedy.cost}")
    if d.combination is not None:
        lines.append(
            f"Together: {d.combination.title}: {_size(d.combination.estimate.total_bytes, unit)}, "
            f"{d.combination.estimate.judgement(d.mode).label.lower()}"
        )
    return lines


# ---- the chart (inline SVG) ------------------------------------------------------------
CHART_WIDTH: Final = 760
CHART_HEIGHT: Final = 320  # with one legend row; each further row adds LEGEND_ROW
# px: the narrowest chart. Docked at its least width (the Details dock's 270 px, gui.main_window.DETAILS_MIN_WIDTH)
# the Compare tab leaves it 256 px beside its vertical scroll bar; at 360 px it scrolled sideways by 104 px. At
# 240 px six phase groups of four plans keep bars 5.7 px wide, their numbers at 8 px (_number_px), the phase
# names read upwards (_layout).
CHART_MIN_WIDTH: Final = 240
CHART_MIN_HEIGHT: Final = 240  # px with one legend row: a plot 166 px high under _Frame.head and _BOTTOM
FONT_PX: Final = 11  # the SVG's font-size
LEGEND_ROW: Final = 16  # px from one legend row to the next: 10 px swatches, 11 px text
_BOTTOM: Final = 46  # px under the plot: the phase names, then one legend row
_NAMES_H: Final = _BOTTOM - LEGEND_ROW  # px from the plot's foot to the legend's first row: names on one line
_NAME_LINE: Final = 13  # px from a phase name's first line to its second (11 px text: 12.8 px from top to bottom)
_NAME_GAP: Final = 8  # px kept between two phase names
_ACROSS_LINES: Final = 3  # a phase name's lines across its group at most; more read upwards ("nvidia-" / "smi" / …)
_UPRIGHT_TOP: Final = 6  # px from the plot's foot to where a name read upwards ends
_UPRIGHT_GAP: Final = 6  # px from where a name read upwards starts to the legend's first row
# The text's height above and below its baseline, as fractions of the font size: DejaVu Sans's ascender 1901 and
# descender 483 of 2048 units (its hhea table; Qt's QFontMetricsF: 10.20 and 2.59 px at 11 px).
_ASCENT_EM: Final = 0.93
_DESCENT_EM: Final = 0.24
_NUMBER_MIN_PX: Final = 8  # the plans' numbers over bars narrower than an 11 px digit shrink to this at least
_PLAN_LINES: Final = 3  # rows a plan's name in the legend wraps onto, the last cut at a word with an ellipsis
_SWATCH: Final = 14  # a swatch (10 px) and the space before its text
_ENTRY_GAP: Final = 16  # px between one legend entry and the next


@dataclass(frozen=True)
class ChartInk:
    """The colours of the chart's text and gridlines; the bars, the capacity dashes and the swatches keep theirs
    (Okabe-Ito, legible on a light and a dark base). A report's chart is printed on white: text in the SVG's
    default black, gridlines colours.GRIDLINE. The Compare tab passes its palette's, so the chart follows a dark
    theme (it was black text on a white block there: docs/GUI.md, 2026-12-07)."""

    text: str = ""  # "": the SVG's default fill, black
    gridline: str = colours.GRIDLINE


REPORT_INK: Final = ChartInk()


@dataclass(frozen=True)
class Extent:
    """Where a piece of the chart's text lies, in px from the chart's top left, by the generous width estimate
    the chart is laid out with (:func:`_text_px`): ``kind`` is "tick", "title", "number", "name" or "legend"."""

    kind: str
    text: str
    left: float
    top: float
    right: float
    bottom: float


# One bar: (bucket key, bytes) from the bottom up.
_Stack = list[tuple[str, float]]


def chart_svg(
    comparison: Comparison,
    unit: str = "GB",
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
    ink: ChartInk = REPORT_INK,
) -> str:
    """Grouped bars: one group per phase, one stacked bar per plan, on one axis. The legend wraps into
    as many rows as its entries need, a phase name wider than its group into lines, or read upwards where a
    word is wider than its group, and the SVG grows by those rows and lines (:func:`chart_size`). ``ink``: the
    text's and gridlines' colours (a report's by default)."""
    frame, layout, stacks = _drawn(comparison, unit, width, height)
    fill = f' fill="{escape(ink.text)}"' if ink.text else ""  # every shape sets its own fill: this colours the text
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{frame.height}" '
        f'viewBox="0 0 {width} {frame.height}" role="img" aria-label="Memory by phase and plan" '
        f'font-family="sans-serif" font-size="{FONT_PX}"{fill}>',
        *_value_axis(frame, ink.gridline),
    ]
    for g, (name, row) in enumerate(zip(comparison.phase_names(), stacks, strict=True)):
        parts += _phase_group(frame, comparison, g, name, row)
        parts += [mark.svg() for mark in _name_marks(frame, layout, g)]
    parts += _legend(frame, layout.legend)
    parts.append("</svg>")
    return "".join(parts)


def chart_extents(
    comparison: Comparison, width: int = CHART_WIDTH, height: int = CHART_HEIGHT, unit: str = "GB"
) -> tuple[Extent, ...]:
    """Where :func:`chart_svg` with these arguments puts each piece of text: the value axis's numbers and title,
    the plans' numbers over the bars, the phase names and the legend's entries. Drawn from the same marks."""
    frame, layout, stacks = _drawn(comparison, unit, width, height)
    extents = [mark.extent("tick") for _, mark in _tick_marks(frame)]
    extents.append(_axis_title(frame).extent("title"))
    for g, row in enumerate(stacks):
        extents += [mark.extent("number") for mark in _number_marks(frame, comparison, g, row)]
        extents += [mark.extent("name") for mark in _name_marks(frame, layout, g)]
    rows = _legend_rows(layout.legend)
    extents += [_legend_extent(frame, entry, rows) for entry in layout.legend]
    return tuple(extents)


def chart_svg_sized(
    comparison: Comparison, unit: str, width: int, height: int, ink: ChartInk = REPORT_INK
) -> str:
    """The chart drawn for a box of ``width`` × ``height`` px (the Compare tab's), legend rows included, so a
    viewer shows it at its own size: its text stays FONT_PX where the 760 × 320 chart scaled into a 1366 × 768
    window's dock read ~6 px (docs/GUI.md, 2026-12-07, left 1). Never smaller than CHART_MIN_WIDTH ×
    :func:`chart_least_height`: a viewer keeps its box at least that big (the Compare tab scrolls)."""
    width = max(CHART_MIN_WIDTH, width)
    extra = _chart_layout(comparison, width).extra  # the legend's rows past the first, the phase names' lines
    return chart_svg(comparison, unit, width, max(CHART_MIN_HEIGHT, height - extra), ink)


def chart_least_height(comparison: Comparison, width: int) -> int:
    """The least height in px :func:`chart_svg_sized` draws for a box ``width`` px wide: CHART_MIN_HEIGHT and the
    legend's rows and phase names' lines that width wraps into."""
    return CHART_MIN_HEIGHT + _chart_layout(comparison, max(CHART_MIN_WIDTH, width)).extra


def chart_size(comparison: Comparison, width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> tuple[int, int]:
    """The chart's width and height in px: ``height`` plus a row for each legend row past the first and the
    phase names' lines past one."""
    return width, height + _chart_layout(comparison, width).extra


@dataclass(frozen=True)
class _Layout:
    """What a width decides under the plot: the legend's entries in rows, and each phase's name in lines."""

    legend: tuple[_LegendEntry, ...]
    names: tuple[tuple[str, ...], ...]
    upright: bool  # the names read upwards, each line across its group: a word of one is wider than its group
    names_h: int  # px from the plot's foot to the legend's first row

    @property
    def extra(self) -> int:
        """The px the legend's rows past the first and the names' lines past one add under the plot."""
        return (_legend_rows(self.legend) - 1) * LEGEND_ROW + self.names_h - _NAMES_H


# _chart_layout's last answer: (the comparison, the width, its layout), replaced whole.
_LAST_LAYOUT: list[tuple[Comparison, int, _Layout] | None] = [None]


def _chart_layout(comparison: Comparison, width: int) -> _Layout:
    """:func:`_layout`, kept for the last comparison (by identity: it is frozen, and the Compare tab makes a new
    one for each change) and width. One redraw of the Compare tab asks it three times, for the same box:
    its least height (:func:`chart_least_height`), the sized chart and the chart itself; each laid the legend
    out again."""
    kept = _LAST_LAYOUT[0]
    if kept is not None and kept[0] is comparison and kept[1] == width:
        return kept[2]
    layout = _layout(comparison, width)
    _LAST_LAYOUT[0] = (comparison, width, layout)
    return layout


def _layout(comparison: Comparison, width: int) -> _Layout:
    """The legend's entries, and each phase's name in lines: across its group, wrapped at spaces and after
    hyphens, where every word fits the group; else read upwards, in as many lines as the group holds side by
    side (at 360 px "backward" and "nvidia-smi" were cut to "backw…" and "nvidia-…")."""
    legend = tuple(_legend_entries(comparison, width))
    phases = comparison.phase_names()
    room = (width - _Frame.left - _Frame.right) / len(phases) - _NAME_GAP
    across = [_name_lines(name, room) for name in phases]
    if all(lines is not None for lines in across):
        names = tuple(lines for lines in across if lines is not None)
        return _Layout(legend, names, False, _NAMES_H + (max(map(len, names)) - 1) * _NAME_LINE)
    side_by_side = max(1, int(room // _NAME_LINE))
    names = tuple(_balanced(_pieces(name), side_by_side) for name in phases)
    longest = max(_text_px(line) for lines in names for line in lines)
    return _Layout(legend, names, True, max(_NAMES_H, _UPRIGHT_TOP + math.ceil(longest) + _UPRIGHT_GAP))


# A place a line may break: after a hyphen inside a word ("nvidia-|smi", "16-|bit"), or at spaces.
_BREAK: Final = re.compile(r"[^\s-]+-(?=\S)|\S+")
# A text's pieces between the places it may break, each with what follows it: " " (a space) or "" (a hyphen's).
_Pieces = list[tuple[str, str]]


def _pieces(text: str) -> _Pieces:
    found = list(_BREAK.finditer(text))
    return [(m.group(), " " if i + 1 < len(found) and text[m.end()].isspace() else "") for i, m in enumerate(found)]


def _joined(pieces: _Pieces) -> str:
    return "".join(piece + after for piece, after in pieces).rstrip()


def _balanced(pieces: _Pieces, most: int) -> tuple[str, ...]:
    """``pieces`` in at most ``most`` lines, broken where the longest line is shortest, in the fewest lines that
    shortest allows ("forward" / "+ loss", not "forward" / "+" / "loss"); a phase name has a few words: every
    way is tried."""
    if not pieces:
        return ("",)
    best: tuple[str, ...] = ()
    best_px = math.inf
    for count in range(1, min(most, len(pieces)) + 1):
        for cuts in itertools.combinations(range(1, len(pieces)), count - 1):
            bounds = (0, *cuts, len(pieces))
            lines = tuple(_joined(pieces[a:b]) for a, b in itertools.pairwise(bounds))
            px = max(map(_text_px, lines))
            if px < best_px:
                best, best_px = lines, px
    return best


def _name_lines(name: str, room: float) -> tuple[str, ...] | None:
    """A phase's name across its group in as few lines as fit ``room`` px, the longest as short as can be
    ("nvidia-smi (judged)" touched "optimizer step" at 480 px); None where _ACROSS_LINES lines do not fit."""
    pieces = _pieces(name)
    if any(_text_px(piece) > room for piece, _ in pieces):
        return None  # a word wider than its group: no lines across fit
    for most in range(1, _ACROSS_LINES + 1):
        lines = _balanced(pieces, most)
        if max(map(_text_px, lines)) <= room:
            return lines
    return None


def _wrapped(text: str, room: float, most: int) -> tuple[str, ...]:
    """``text`` wrapped at its breaks into lines of ``room`` px, at most ``most``, the last cut at a word with
    an ellipsis where more is left; a word wider than a whole line is the only thing cut inside."""
    pieces = _pieces(text)
    starts, line = [0], ""
    for i, (piece, after) in enumerate(pieces):
        if line and _text_px(line + piece) > room:
            starts.append(i)
            line = ""
        line += piece + after
    bounds = [*starts[:most], len(pieces)]  # the lines past ``most`` stay on the last, to be cut
    return tuple(_clipped(_joined(pieces[a:b]), room) for a, b in itertools.pairwise(bounds)) or ("",)


def _bar_stacks(comparison: Comparison, phases: tuple[str, ...]) -> list[list[_Stack]]:
    """What each bar stacks: [phase][plan] → (bucket, bytes); the total is the peak's buckets."""
    stacks = []
    for name in phases:
        row = []
        for compared in comparison.plans:
            est = compared.estimate
            if name == SERVING:
                row.append([(b.key.value, b.bytes) for b in est.inference.buckets])
            elif name == comparison.total_name:
                row.append([(b.key.value, b.bytes) for b in est.buckets])
            else:
                phase = next((p for p in est.phases if p.name == name), None)
                row.append([(b.key.value, b.bytes) for b in phase.buckets] if phase else [])
        stacks.append(row)
    return stacks


@dataclass(frozen=True)
class _Frame:
    """Where the chart draws: its size, margins, groups and bars, and the value axis's scale."""

    unit: str
    scale: float  # bytes per unit
    step: float  # bytes between gridlines
    top: float  # bytes at the top of the plot
    width: int
    height: int
    groups: int
    plans: int
    left: int = 56
    bottom: int = 46  # _BOTTOM: the phase names and one legend row
    right: int = 12
    head: int = 28

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.bottom - self.head

    @property
    def foot(self) -> int:
        """The plot's foot: the phase names are under it."""
        return self.height - self.bottom

    @property
    def group_w(self) -> float:
        return self.plot_w / self.groups

    @property
    def bar_w(self) -> float:
        return min(48.0, self.group_w * 0.8 / self.plans)

    def y(self, n_bytes: float) -> float:
        return self.head + self.plot_h * (1 - n_bytes / self.top)


def _drawn(comparison: Comparison, unit: str, width: int, height: int) -> tuple[_Frame, _Layout, list[list[_Stack]]]:
    """The chart's frame (``height`` grown by the layout's rows and lines), layout and bars for ``width``."""
    stacks = _bar_stacks(comparison, comparison.phase_names())
    layout = _chart_layout(comparison, width)
    return _frame(comparison, stacks, unit, width, height + layout.extra, layout.extra), layout, stacks


def _frame(
    comparison: Comparison, stacks: list[list[_Stack]], unit: str, width: int, height: int, legend_extra: int = 0
) -> _Frame:
    """The value axis reaches past the tallest bar and every card's capacity, in round steps."""
    scale = GiB if unit == "GiB" else GB
    plans = comparison.plans
    highest = max(
        [sum(v for _, v in bar) for row in stacks for bar in row]
        + [p.estimate.judgement(comparison.mode).capacity_bytes for p in plans]
    )
    step = _tick_step(highest / scale) * scale
    top = step * (int(highest * 1.04 / step) + 1)
    return _Frame(unit, scale, step, top, width, height, len(stacks), len(plans), bottom=_BOTTOM + legend_extra)


@dataclass(frozen=True)
class _Mark:
    """A piece of the chart's text: where it is anchored, its size, and whether it reads upwards (turned -90°
    about its anchor). The SVG and :func:`chart_extents` are both drawn from it."""

    text: str
    x: float
    y: float  # the baseline's anchor
    anchor: str = "middle"  # the SVG's text-anchor
    px: int = FONT_PX
    upright: bool = False

    def svg(self) -> str:
        anchor = f' text-anchor="{self.anchor}"' if self.anchor != "start" else ""
        size = f' font-size="{self.px}"' if self.px != FONT_PX else ""
        turn = f' transform="rotate(-90 {self.x:.1f} {self.y:.1f})"' if self.upright else ""
        return f'<text x="{self.x:.1f}" y="{self.y:.1f}"{anchor}{size}{turn}>{escape(self.text)}</text>'

    def extent(self, kind: str) -> Extent:
        length = _text_px(self.text) * self.px / FONT_PX
        before = {"start": 0.0, "middle": length / 2, "end": length}[self.anchor]  # px of text before the anchor
        ascent, descent = _ASCENT_EM * self.px, _DESCENT_EM * self.px
        if self.upright:  # the text runs upwards: its start lies below the anchor, its ascent left of it
            bottom = self.y + before
            return Extent(kind, self.text, self.x - ascent, bottom - length, self.x + descent, bottom)
        start = self.x - before
        return Extent(kind, self.text, start, self.y - ascent, start + length, self.y + descent)


def _tick_marks(f: _Frame) -> list[tuple[float, _Mark]]:
    """Each gridline's height and its value."""
    marks = []
    for i in range(round(f.top / f.step) + 1):
        value = f.step * i
        marks.append((f.y(value), _Mark(f"{value / f.scale:,.0f}", f.left - 4, f.y(value) + 4, "end")))
    return marks


def _axis_title(f: _Frame) -> _Mark:
    return _Mark(f"{f.unit} per GPU", 12, round(f.head + f.plot_h / 2), upright=True)


def _value_axis(f: _Frame, gridline: str) -> list[str]:
    """Gridlines (in ``gridline``) with their values, and the axis title."""
    parts = [
        f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{escape(gridline)}"/>'
        + mark.svg()
        for y, mark in _tick_marks(f)
    ]
    parts.append(_axis_title(f).svg())
    return parts


_NUMBER_GAP = 3  # px from a bar's top to its plan number's baseline


def _number_px(f: _Frame) -> int:
    """The plans' numbers' font size: FONT_PX where the widest fits its bar, else as large as fits, not under
    _NUMBER_MIN_PX (four plans in six groups at CHART_MIN_WIDTH: 5.7 px bars, 8 px numbers)."""
    em = _text_px(str(f.plans)) / FONT_PX
    return max(_NUMBER_MIN_PX, min(FONT_PX, int(f.bar_w / em)))


def _number_y(top: float, capacity: float, px: int = FONT_PX) -> float:
    """The baseline of a bar's plan number: just above the bar, or above the card's capacity dash
    where the number would sit on it (docs/GUI.md, 2026-12-04: "1", "2", "4" were struck through)."""
    baseline = top - _NUMBER_GAP
    if baseline - px - 2 <= capacity <= baseline + 2:
        return capacity - _NUMBER_GAP
    return baseline


def _bar_x(f: _Frame, g: int, k: int) -> float:
    """The left of plan ``k``'s bar in phase group ``g``: the group's bars centred in it."""
    return f.left + g * f.group_w + (f.group_w - f.bar_w * f.plans) / 2 + k * f.bar_w


def _number_marks(f: _Frame, comparison: Comparison, g: int, row: list[_Stack]) -> list[_Mark]:
    """Each bar's plan number over it, where several plans are compared."""
    if len(comparison.plans) < 2:
        return []
    px, marks = _number_px(f), []
    for k, bar in enumerate(row):
        capacity = comparison.plans[k].estimate.judgement(comparison.mode).capacity_bytes
        level = sum(n_bytes for _, n_bytes in bar if n_bytes > 0)
        y = _number_y(f.y(level), f.y(capacity), px)
        marks.append(_Mark(str(k + 1), _bar_x(f, g, k) + f.bar_w / 2, y, px=px))
    return marks


def _name_marks(f: _Frame, layout: _Layout, g: int) -> list[_Mark]:
    """Phase ``g``'s name under its group: its lines one under another, centred; or read upwards, side by
    side across the group, each ending _UPRIGHT_TOP under the plot."""
    lines, middle = layout.names[g], f.left + (g + 0.5) * f.group_w
    if not layout.upright:
        return [_Mark(line, middle, f.foot + 16 + i * _NAME_LINE) for i, line in enumerate(lines)]
    first = middle - len(lines) * _NAME_LINE / 2  # each line's slot, _NAME_LINE px wide, its ascent on the left
    return [
        _Mark(line, first + i * _NAME_LINE + _ASCENT_EM * FONT_PX, f.foot + _UPRIGHT_TOP, "end", upright=True)
        for i, line in enumerate(lines)
    ]


def _phase_group(f: _Frame, comparison: Comparison, g: int, name: str, row: list[_Stack]) -> list[str]:
    """One phase: a stacked bar per plan with its card's capacity across it and its number over it."""
    plans = comparison.plans
    parts = []
    for k, bar in enumerate(row):
        x = _bar_x(f, g, k)
        level = 0.0
        for key, n_bytes in bar:
            if n_bytes <= 0:
                continue
            parts.append(
                f'<rect x="{x + 1:.1f}" y="{f.y(level + n_bytes):.1f}" width="{f.bar_w - 2:.1f}" '
                f'height="{f.y(level) - f.y(level + n_bytes):.1f}" fill="{BUCKET_COLOURS[key]}">'
                f"<title>{escape(plans[k].name)} · {escape(name)} · {BUCKET_LABELS[_bucket(key)]}: "
                f"{_size(n_bytes, f.unit)}</title></rect>"
            )
            level += n_bytes
        capacity = plans[k].estimate.judgement(comparison.mode).capacity_bytes  # the verdict's card, per mode
        parts.append(
            f'<line x1="{x:.1f}" x2="{x + f.bar_w:.1f}" y1="{f.y(capacity):.1f}" y2="{f.y(capacity):.1f}" '
            f'stroke="{colours.PROBLEM}" stroke-width="2" stroke-dasharray="4 2"/>'
        )
    parts += [mark.svg() for mark in _number_marks(f, comparison, g, row)]
    return parts


# Text widths without a font at hand, as fractions of the font size: DejaVu Sans (the sans-serif of a bare
# Linux) advances 0.5-0.7 em for most lowercase letters and digits, up to 1.0 em for M and W, and fallback
# fonts (Liberation Sans, Arial) are narrower; tests/gui/test_report_legend.py measures the entries with
# Qt's own metrics for the font the window paints the chart in.
_NARROW: Final = frozenset("iljtfr.,:;'|!()-/ ")
_WIDE: Final = frozenset("mwMW@%")


def _char_em(c: str) -> float:
    return 0.4 if c in _NARROW else 1.0 if c in _WIDE else 0.82 if c.isupper() else 0.66


def _text_px(text: str, bold: bool = False) -> float:
    """A generous width of ``text`` at FONT_PX in a sans-serif font."""
    return sum(map(_char_em, text)) * FONT_PX * (1.08 if bold else 1.0)


def _clipped(text: str, room: float) -> str:
    """``text`` cut with an ellipsis to fit ``room`` px (a 1,000-character plan name fits one row): after its
    last word that fits, or inside its first where that alone is too wide."""
    if _text_px(text) <= room:
        return text
    ellipsis, kept, line = _text_px("…"), "", ""
    for piece, after in _pieces(text):
        line += piece
        if _text_px(line) + ellipsis > room:
            break
        kept, line = line, line + after
    if kept:
        return kept.rstrip() + "…"
    used = ellipsis
    for end, c in enumerate(text):
        used += _char_em(c) * FONT_PX
        if used > room:
            return text[:end].rstrip() + "…"
    return text


@dataclass(frozen=True)
class _LegendEntry:
    """One legend entry: a plan's number and name (its name's further lines: "more"), a bucket's swatch, or
    the capacity dash; where it sits."""

    kind: str  # "plan", "more", "bucket" or "capacity"
    text: str  # visible text, not yet escaped
    key: str = ""  # the bucket's key, or the plan's number
    x: float = 0.0
    row: int = 0

    @property
    def width(self) -> float:
        if self.kind == "plan":
            return _text_px(self.key + " ", bold=True) + _text_px(self.text)
        if self.kind == "more":
            return _text_px(self.text)
        return _SWATCH + (6 if self.kind == "capacity" else 0) + _text_px(self.text)


def _legend_entries(comparison: Comparison, width: int) -> list[_LegendEntry]:
    """The legend's entries flowed into rows across the plot's width: with several plans each plan's
    number and name (the numbers over the bars), a name too long for a row wrapped onto rows of its own under
    its first, indented past the number; then on a row of their own the buckets of the mode and the capacity
    dash."""
    left, room = _Frame.left, width - _Frame.left - _Frame.right
    plans: list[list[_LegendEntry]] = []
    if len(comparison.plans) > 1:
        for k, compared in enumerate(comparison.plans):
            number = str(k + 1)
            indent = _text_px(number + " ", bold=True)
            head, *tail = _wrapped(_visible(compared.name), room - indent, _PLAN_LINES)
            plans.append(
                [
                    _LegendEntry("plan", head, number),
                    *(_LegendEntry("more", text, number, x=left + indent) for text in tail),
                ]
            )
    order = SERVING_BUCKET_ORDER if comparison.mode is Mode.INFERENCE else BUCKET_ORDER
    keys = [[_LegendEntry("bucket", BUCKET_LABELS[key], key.value)] for key in order]
    keys.append([_LegendEntry("capacity", "card capacity")])
    placed: list[_LegendEntry] = []
    row, x = 0, float(left)
    for group in (plans, keys):
        if placed and group:  # the buckets start a row of their own
            row, x = row + 1, float(left)
        for first, *more in group:
            if x > left and (more or x + first.width > left + room):
                row, x = row + 1, float(left)
            placed.append(dataclasses.replace(first, x=x, row=row))
            x += first.width + _ENTRY_GAP
            for line in more:  # a wrapped name's further rows: the next entry starts a row under them
                row += 1
                placed.append(dataclasses.replace(line, row=row))
                x = left + room
    return placed


def _legend_rows(entries: Sequence[_LegendEntry]) -> int:
    return max((e.row for e in entries), default=0) + 1


def _legend_top(f: _Frame, entry: _LegendEntry, rows: int) -> int:
    """The top of ``entry``'s swatch: each row LEGEND_ROW px under the one before, the last at the foot; its
    text's baseline is 9 px lower."""
    return f.height - 16 - (rows - 1 - entry.row) * LEGEND_ROW


def _legend_extent(f: _Frame, entry: _LegendEntry, rows: int) -> Extent:
    """The entry's whole extent: its swatch or dash, number and text."""
    baseline = _legend_top(f, entry, rows) + 9
    return Extent(
        "legend",
        entry.text,
        entry.x,
        baseline - _ASCENT_EM * FONT_PX,
        entry.x + entry.width,
        baseline + _DESCENT_EM * FONT_PX,
    )


def _legend(f: _Frame, entries: Sequence[_LegendEntry]) -> list[str]:
    """The legend's entries, each row LEGEND_ROW px under the one before, the last at the foot."""
    rows = _legend_rows(entries)
    parts = ['<g class="legend">']
    for e in entries:
        box = _legend_top(f, e, rows)  # the swatch's top; the text's baseline is 9 px lower
        if e.kind == "plan":
            parts.append(
                f'<text x="{e.x:.1f}" y="{box + 9}"><tspan font-weight="bold">{e.key}</tspan> {escape(e.text)}</text>'
            )
        elif e.kind == "more":
            parts.append(f'<text x="{e.x:.1f}" y="{box + 9}">{escape(e.text)}</text>')
        elif e.kind == "bucket":
            parts.append(
                f'<rect x="{e.x:.1f}" y="{box}" width="10" height="10" fill="{BUCKET_COLOURS[e.key]}"/>'
                f'<text x="{e.x + _SWATCH:.1f}" y="{box + 9}">{escape(e.text)}</text>'
            )
        else:
            parts.append(
                f'<line x1="{e.x:.1f}" x2="{e.x + 16:.1f}" y1="{box + 5}" y2="{box + 5}" stroke="{colours.PROBLEM}" '
                f'stroke-width="2" stroke-dasharray="4 2"/>'
                f'<text x="{e.x + 20:.1f}" y="{box + 9}">{escape(e.text)}</text>'
            )
    parts.append("</g>")
    return parts


def _tick_step(span: float) -> float:
    """A round step (1, 2 or 5 × 10ⁿ) giving at most six intervals over ``span``."""
    if span <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(span / 6))
    return next(m * magnitude for m in (1, 2, 5, 10) if span / (m * magnitude) <= 6)


def _bucket(key: str) -> BucketKey:
    return BucketKey(key)


# ---- HTML ----------------------------------------------------------------------------
_CSS: Final = (
    f"body{{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:{colours.TEXT};line-height:1.4}}"
    "table{border-collapse:collapse;margin:.5em 0 1em}"
    f"td,th{{border:1px solid {colours.TABLE_RULE};padding:.25em .5em;"
    "text-align:left;vertical-align:top}td.n{text-align:right;white-space:nowrap}"
    f"tr.diff td{{background:{colours.CHANGED_ROW}}}"
    "td.f{font-family:ui-monospace,monospace;font-size:.85em}.verdict{font-weight:bold}"
    f".caption{{color:{colours.CAPTION_TEXT};font-size:.9em}}"
    f"footer{{margin-top:2em;color:{colours.FOOTER_TEXT};font-size:.9em}}"
)


def _html_rows(report: Report) -> str:
    comparison = report.comparison
    best = comparison.cheapest_fit()
    head = "".join(
        f"<th{' class=best' if i == best else ''}>{i + 1}. {escape(p.name)}</th>" for i, p in enumerate(report.plans)
    )
    body = []
    currencies = [p.estimate.compute.currency for p in comparison.plans]
    for row in comparison.rows():
        cells = "".join(
            f'<td class="n">{escape(value_text(row, v, report.unit, currencies[i]))}</td>'
            if not isinstance(v, str)
            else f"<td>{escape(v)}</td>"
            for i, v in enumerate(row.values)
        )
        cls = ' class="diff"' if report.is_comparison and row.differs else ""
        body.append(f"<tr{cls}><th>{escape(row.label)}</th>{cells}</tr>")
    return f'<table width="100%"><tr><th></th>{head}</tr>{"".join(body)}</table>'


def _cheapest_words(comparison: Comparison, name: str) -> str:
    """The comparison's answer in core.verdict's words, a narrow fit said so."""
    words = comparison.fit_answer(name)
    return words[:1].upper() + words[1:]


def _html_plan(item: ReportPlan, index: int, unit: str, several: bool, mode: Mode) -> str:
    est, d = item.estimate, item.diagnosis
    colour = verdict_colour(est.judgement(mode))
    out = [f"<section><h2>{f'{index + 1}. ' if several else ''}{escape(item.name)}</h2>"]
    out.append(f'<p class="verdict" style="color:{colour}">{escape(_verdict_line(est, unit, mode))}</p>')
    out.append(f"<p>{escape(caption(est, mode))}</p>")
    tower = _tower(est, mode)
    if tower:
        out.append(f"<p>{escape(tower)}</p>")
    heading = "Memory when serving" if mode is Mode.INFERENCE else "Memory at the peak"
    out.append(f'<h3>{heading}, with the arithmetic</h3><table width="100%">')
    out.append('<tr><th width="18%">Bucket</th><th width="14%">Size</th>')
    out.append("<th>Arithmetic</th></tr>")
    for bucket in _buckets(est, mode):
        out.append(
            f'<tr><td>{escape(bucket.label)}</td><td class="n">{escape(_size(bucket.bytes, unit))}</td>'
            f'<td class="f">{"<br>".join(escape(line) for line in bucket.formula.splitlines())}'
            f"{f'<br><i>{escape(bucket.note)}</i>' if bucket.note else ''}</td></tr>"
        )
    out.append(f"</table><p><code>{escape(_summary(est, mode))}</code></p>")
    out += _html_serving(est) if mode is Mode.INFERENCE else _html_training(est, unit)
    out.append(f"<h3>Diagnosis</h3><p>{escape(_explanation(d))}</p>")
    if d.symptom is not None:
        out.append(f"<p>Symptom: {escape(d.symptom.symptom)}. Remedies: {escape(d.symptom.remedies)}.</p>")
    remedies = _remedy_lines(d, unit)
    if remedies:
        out.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in remedies) + "</ul>")
    notes = est.warnings_for(mode) if mode is Mode.INFERENCE else est.notes
    if notes:
        out.append("<h3>Notes</h3><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _html_serving(est: Estimate) -> list[str]:
    return [
        "<h3>Serving speed</h3>",
        f"<p><code>{escape(est.inference.speed.formula)}</code></p>",
        f"<p>{escape(_speed_line(est))}</p>",
    ]


def _html_training(est: Estimate, unit: str) -> list[str]:
    out = ['<h3>Phases</h3><table width="100%">']
    for phase in est.phases:
        out.append(
            f'<tr><td>{escape(phase.name)}</td><td class="n">{escape(_size(phase.allocated_bytes, unit))}</td>'
            f"<td>{escape(phase.description)}</td></tr>"
        )
    out.append("</table><h3>Time and cost</h3>")
    out.append(f"<p><code>{escape(est.compute.formula)}</code></p>")
    out.append(
        f"<p>{hours(est.compute.hours)}, cost {money(est.compute.cost, est.compute.currency)}, "
        f"{tokens_per_s(est.compute.tokens_per_second)}, {est.compute.steps:,} optimizer steps</p>"
    )
    out.append(f"<p>MFU {escape(est.compute.mfu_text)}</p>")
    if est.compute.comm_terms:
        out.append('<table width="100%">')
        for term in est.compute.comm_terms:
            out.append(
                f'<tr><td>{escape(term.label)}</td><td class="n">{duration(term.seconds)}</td>'
                f"<td>{escape(term.formula)}</td></tr>"
            )
        out.append("</table>")
    return out


def to_html(report: Report, chart_src: str | None = None, chart_width: int = 480) -> str:
    """The report as one HTML page; the chart is inline SVG, or ``<img src=chart_src>`` of
    ``chart_width`` for renderers without SVG (Qt's QTextDocument, which the PDF export uses)."""
    comparison = report.comparison
    best = comparison.cheapest_fit()
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="generator" content="VRAM Planner">',
        f"<title>{escape(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(report.title)}</h1>",
    ]
    if report.is_comparison:
        cheapest = (
            _cheapest_words(comparison, f"{best + 1}. {escape(report.plans[best].name)}")
            if best is not None
            else "None of these plans fits its card."
        )
        parts.append(f"<p><strong>{cheapest}</strong></p>")
        parts.append("<p>Rows whose values differ between the plans are highlighted.</p>")
    if chart_src is None:
        chart = chart_svg(comparison, report.unit)
    else:
        svg_width, svg_height = chart_size(comparison)
        height = round(chart_width * svg_height / svg_width)
        chart = f'<img src="{escape(chart_src)}" width="{chart_width}" height="{height}">'
    what = "Memory per GPU when serving" if report.mode is Mode.INFERENCE else "Memory per GPU by phase"
    parts.append(f'<div class="chart">{chart}</div><p class="caption">{what}')
    parts.append(
        " for each plan (numbered bars); the dashed line is each card's capacity.</p>"
        if report.is_comparison
        else f": {escape(caption(report.plans[0].estimate, report.mode))}</p>"
    )
    parts.append("<h2>Inputs and results</h2>" + _html_rows(report))
    for index, item in enumerate(report.plans):
        parts.append(_html_plan(item, index, report.unit, report.is_comparison, report.mode))
    parts.append(
        f"<footer>VRAM Planner {escape(__version__)} · generated {escape(report.generated)} · decimal GB = 10⁹ bytes, "
        "GiB = 2³⁰ bytes</footer></body></html>"
    )
    return "".join(parts) + "\n"


# ---- Markdown ------------------------------------------------------------------------
def md_cell(text: str) -> str:
    """Text that came from outside, safe inside a Markdown table cell."""
    cleaned = " ".join(text.split())
    for char in "\\|`*_[]<>":
        cleaned = cleaned.replace(char, "\\" + char)
    return cleaned


def to_markdown(report: Report) -> str:
    comparison = report.comparison
    best = comparison.cheapest_fit()
    lines = [f"# {md_cell(report.title)}", ""]
    if report.is_comparison:
        lines.append(
            f"**{_cheapest_words(comparison, f'{best + 1}. {md_cell(report.plans[best].name)}')}**"
            if best is not None
            else "**None of these plans fits its card.**"
        )
        lines.append("")
    names = [f"{i + 1}. {md_cell(p.name)}" for i, p in enumerate(report.plans)]
    lines.append("| | " + " | ".join(names) + " |")
    lines.append("|---|" + "---:|" * len(names))
    currencies = [p.estimate.compute.currency for p in comparison.plans]
    for row in comparison.rows():
        label = f"**{md_cell(row.label)}**" if report.is_comparison and row.differs else md_cell(row.label)
        texts = (md_cell(value_text(row, v, report.unit, c)) for v, c in zip(row.values, currencies, strict=True))
        lines.append(f"| {label} | " + " | ".join(texts) + " |")
    lines.append("")
    if report.is_comparison:
        lines += ["Rows in bold differ between the plans.", ""]
    for index, item in enumerate(report.plans):
        est, d = item.estimate, item.diagnosis
        prefix = f"{index + 1}. " if report.is_comparison else ""
        mode = report.mode
        lines += [f"## {prefix}{md_cell(item.name)}", "", md_cell(_verdict_line(est, report.unit, mode)), ""]
        tower = _tower(est, mode)
        lines += [md_cell(tower), ""] if tower else []
        lines += ["| Bucket | Size | Arithmetic |", "|---|---:|---|"]
        for bucket in _buckets(est, mode):
            arithmetic = "<br>".join(md_cell(line) for line in bucket.formula.splitlines())
            lines.append(f"| {bucket.label} | {_size(bucket.bytes, report.unit)} | {arithmetic} |")
        lines += ["", f"`{_summary(est, mode)}`", ""]
        if mode is Mode.INFERENCE:
            lines += [f"Serving speed: `{est.inference.speed.formula}`", "", md_cell(_speed_line(est)), ""]
        else:
            lines += [f"Time and cost: `{est.compute.formula}`", "", f"MFU {md_cell(est.compute.mfu_text)}", ""]
        if mode is Mode.TRAINING and est.compute.comm_terms:
            lines += ["| Communication per step | Time | Arithmetic |", "|---|---:|---|"]
            lines += [
                f"| {md_cell(t.label)} | {duration(t.seconds)} | {md_cell(t.formula)} |" for t in est.compute.comm_terms
            ]
            lines.append("")
        lines += [f"Diagnosis: {md_cell(_explanation(d))}", ""]
        lines += [f"- {md_cell(line)}" for line in _remedy_lines(d, report.unit)]
        notes = est.warnings_for(mode) if mode is Mode.INFERENCE else est.notes
        lines += [f"- Note: {md_cell(n)}" for n in notes]
        lines.append("")
    lines.append(f"*VRAM Planner {__version__} · generated {report.generated}*")
    return "\n".join(lines) + "\n"


# ---- CSV -----------------------------------------------------------------------------
def to_csv(report: Report) -> str:
    """Long format, one figure per line: plan, section, item, value, unit, arithmetic."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["plan", "section", "item", "value", "unit", "arithmetic"])
    for row in report.comparison.rows():
        for item, value in zip(report.plans, row.values, strict=True):
            unit = {RowKind.BYTES: "bytes", RowKind.HOURS: "h", RowKind.RATE: "tokens/s"}.get(row.kind, "")
            shown = csv_text(value) if isinstance(value, str) else round(value) if row.kind is RowKind.BYTES else value
            writer.writerow([csv_text(item.name), row.section, row.label, shown, unit, ""])
    for item in report.plans:
        for bucket in _buckets(item.estimate, report.mode):
            writer.writerow(
                [csv_text(item.name), "arithmetic", bucket.label, round(bucket.bytes), "bytes", bucket.formula]
            )
        writer.writerow(
            [csv_text(item.name), "diagnosis", "explanation", csv_text(_csv_explanation(item.diagnosis)), "", ""]
        )
    writer.writerow(["", "tool", "VRAM Planner", __version__, "", report.generated])
    return buffer.getvalue()


def _csv_explanation(d: Diagnosis) -> str:
    """The diagnosis' cause; beside a training step that fits, serving's own verdict where serving does not fit
    or would not start (:func:`_explanation`'s, without the failing phase the CSV never carried)."""
    return _explanation(d) if d.serving_after_step else d.explanation


def csv_text(text: str) -> str:
    """A spreadsheet reads a cell starting with = + - @ as a formula: quote it as text.

    Control characters become spaces first (csv quotes a field with "\n" but not a bare "\r",
    which Excel takes as a new record), and the first visible character is compared in NFKC
    form, so a tab before "=" or a full-width "＝" (U+FF1D) is caught too (issue 28 item 19).
    """
    text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
    head = unicodedata.normalize("NFKC", text.lstrip()[:1])[:1]
    return "'" + text if head in ("=", "+", "-", "@") else text


FORMATS: Final = {"html": to_html, "md": to_markdown, "csv": to_csv}

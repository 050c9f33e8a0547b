"""The live memory chart: stacked bars of the Estimate's buckets against the card.

Training: one stacked bar per phase of the step (forward + loss, backward, optimizer
step) and one for the peak with the framework overhead on top, which is what the verdict
judges. Inference: weights + KV cache + activations + overhead. The card's capacity is a
line, the headroom band is shaded, a loaded measurement is a hatched bar.

Every plot item is built once; an update only calls ``setOpts`` on what changed. The
value labels are one item (:class:`LabelLayer`) that repaints only the labels whose text
or place changed, and the y axis keeps its range while the bars still fit it well, so that
a typical edit repaints the bars that moved and leaves the axes alone. Heights are the
Estimate's bytes shown in GB or GiB; stacking offsets are drawing geometry, not figures.

Past 400 lines because the export (PNG/SVG with the caption) draws the same items the
screen shows; it stays beside them so both pictures always agree.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QPointF, QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QPainter,
    QPen,
    QPicture,
    QStaticText,
    QTransform,
)
from PySide6.QtWidgets import QComboBox, QGraphicsItem, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from core.breakdown import BUCKET_LABELS, BUCKET_ORDER, BucketKey
from core.estimate import VERDICT_LABELS, Estimate
from core.files.measurement import Measurement
from core.plan import METHOD_LABELS
from core.verdict import Mode as Judged
from gui.format import Unit, memory, unit_scale
from gui.plotstyle import OKABE_ITO, style_plot

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


@dataclass(frozen=True)
class BarSpec:
    """One bar: its label, bytes per series, and the total printed on top."""

    label: str
    parts: dict[str, float]
    total_bytes: float
    total_text: str = ""


def training_bars(estimate: Estimate, measurement: Measurement | None, rank: int | None = None) -> list[BarSpec]:
    """The phases and the peak of one rank (the worst by default), then a measurement."""
    source = estimate.for_rank(rank)
    bars: list[BarSpec] = []
    if len(source.phases) > 1:
        for phase in source.phases:
            bars.append(BarSpec(phase.name, {b.key.value: b.bytes for b in phase.buckets}, phase.allocated_bytes))
    peak_label = "peak + overhead" if len(source.phases) > 1 else source.peak_phase
    bars.append(BarSpec(peak_label, {b.key.value: b.bytes for b in source.buckets}, source.total_bytes))
    if measurement is not None:
        bars.append(
            BarSpec("measured", {"measured": measurement.peak_allocated_bytes}, measurement.peak_allocated_bytes)
        )
    return bars


def inference_bars(estimate: Estimate, measurement: Measurement | None) -> list[BarSpec]:
    inf = estimate.inference
    plan = estimate.plan.inference
    # A pooled engine (vLLM, SGLang) holds its whole pool whatever the requests: the bar is
    # what the process holds on the card.
    label = (
        f"{inf.engine.value} pool: {inf.kv_cache_tokens:,} tokens"
        if inf.engine != "hf"
        else f"{plan.concurrent:,} × {plan.context:,} tokens"
    )
    return [
        BarSpec(
            label,
            {
                "weights": inf.weights_bytes,
                "kv_cache": inf.kv_cache_bytes,
                "activations": inf.activation_bytes,
                "overhead": inf.overhead_bytes + inf.non_torch_bytes,
            },
            inf.footprint_bytes,
        )
    ]


EXPORT_MARGIN = 8.0  # pixels around the caption of an exported chart


def _picture_dpi() -> float:
    """The resolution QPicture records at (pyqtgraph caches its axes as QPictures)."""
    return float(QPicture().logicalDpiY())


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
    if mode == "inference":
        lines[1] = f"serving {plan.inference.concurrent:,} × {plan.inference.context:,} tokens"
    lines.append(
        f"{VERDICT_LABELS[judged.verdict]}: {memory(judged.total_bytes, unit)} of "
        f"{memory(judged.capacity_bytes, unit)} per GPU "
        f"(usable with {plan.hardware.headroom:.0%} headroom: {memory(judged.usable_bytes, unit)})"
    )
    if mode == "training" and len(estimate.ranks) > 1:
        shown = estimate.worst_rank if rank is None else rank
        lines.append(f"bars: {estimate.ranks[shown].label}; the verdict is the worst rank's ({estimate.worst.label})")
    return lines


def _two_lines(label: str) -> str:
    """``label`` broken at the space nearest its middle ("backward\n(peak)")."""
    spaces = [i for i, char in enumerate(label) if char == " "]
    if not spaces:
        return label
    middle = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return f"{label[:middle]}\n{label[middle + 1 :]}"


def _nice_ceiling(value: float) -> float:
    """``value`` rounded up to a twentieth of its power of ten (103 → 105, 82.3 → 82.5): an axis
    top that stays put under small edits. Drawing geometry, not a figure."""
    if value <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(value)) / 20
    return math.ceil(value / step) * step


# Room above the tallest bar (or the capacity line) for its total and the legend: a new axis
# top is 1.2 × the tallest, and it is kept while the tallest stays between these fractions of
# it. Redrawing the axes is the costly part of a chart update, and a still axis reads better.
TOP_ROOM = 1.2
KEEP_TOP = (1 / 1.45, 1 / 1.15)


def axis_top(tallest: float, current: float) -> float:
    """The y-axis top for bars up to ``tallest``: ``current`` while it still fits them well."""
    if current > 0 and KEEP_TOP[0] * current <= tallest <= KEEP_TOP[1] * current:
        return current
    return _nice_ceiling(tallest * TOP_ROOM)


class _Bars(pg.BarGraphItem):
    """A BarGraphItem whose bounding rect is computed once per change, not on every paint.

    The scene asks for it several times a paint, and pyqtgraph's version maps pixel vectors
    each time; it changes only with the data (``setOpts``) or the view's transform.
    """

    def __init__(self, **opts: object) -> None:
        self._bounds: QRectF | None = None
        super().__init__(**opts)

    def setOpts(self, **opts: object) -> None:
        self._bounds = None
        super().setOpts(**opts)

    def viewTransformChanged(self) -> None:
        # The pixel padding changes with the view; the view repaints whole when it changes.
        self._bounds = None
        super().viewTransformChanged()

    def boundingRect(self) -> QRectF:
        if self._bounds is None:
            self._bounds = super().boundingRect()
        return QRectF(self._bounds)


PICTURES_KEPT = 48  # y-axis pictures kept for ranges that come back (a few hundred KB at most)


class _Axis(pg.AxisItem):
    """A pyqtgraph axis that redraws only what changed, and can be drawn ahead of a paint."""

    def __init__(self, orientation: str) -> None:
        self._label_html: str | None = None
        # (font key, device dpi) -> tick text -> its size, as pyqtgraph measures it
        self._text_sizes: dict[tuple[str, tuple[int, int]], dict[str, tuple[float, float]]] = {}
        # Pictures drawn, by everything they were drawn from (_picture_key), with their text width.
        self._pictures: OrderedDict[tuple[object, ...], tuple[QPicture, float]] = OrderedDict()
        self._text_width_drawn: float | None = None
        super().__init__(orientation)

    def render(self) -> None:  # type: ignore[override]
        """Draw the ticks and their text into the cached picture now, as ``paint`` would.

        pyqtgraph draws an axis lazily, in the paint that first finds no picture; measuring
        the tick text there may widen or narrow the axis, which lays the plot out again and
        paints it all a second time. Drawn ahead of the paint, the new width is laid out first.
        """
        picture = QPicture()
        painter = QPainter(picture)
        kept = None
        try:
            if self.style["tickFont"]:
                painter.setFont(self.style["tickFont"])
            key = self._picture_key(painter)
            kept = self._pictures.get(key) if key is not None else None
            if kept is None:
                self._text_width_drawn = None
                specs = self.generateDrawSpecs(painter)
                if specs is not None:
                    self.drawPicture(painter, *specs)
        finally:
            painter.end()
        if kept is not None and key is not None:  # drawn before from the same range, size, font and pens
            self._pictures.move_to_end(key)
            picture, width = kept
            self._updateMaxTextSize(width)  # as drawing it did
        elif key is not None and self._text_width_drawn is not None:
            self._pictures[key] = (picture, self._text_width_drawn)
            if len(self._pictures) > PICTURES_KEPT:
                self._pictures.popitem(last=False)
        self.picture = picture

    def paint(self, p: QPainter, *args: object) -> None:
        if self.picture is None:
            self.render()  # pyqtgraph's paint would draw it without the kept pictures
        super().paint(p, *args)

    def _plain(self) -> bool:
        """A plain vertical axis: the one :meth:`generateDrawSpecs` draws itself."""
        return not (
            self.orientation != "left"
            or self._tickLevels is not None
            or self.logMode
            or self.grid is not False
            or self.style["tickAlpha"] is not None
            or any(self.style["stopAxisAtTick"])
            or not self.style["showValues"]
        )

    def _span(self, bounds: QRectF) -> tuple[tuple[QPointF, QPointF], float]:
        """The axis line's ends in the item, and its length in device pixels (0: not drawable)."""
        span = (bounds.topRight() + QPointF(-1.0, -1.0), bounds.bottomRight() + QPointF(-1.0, 1.0))
        ends = (self.mapToDevice(span[0]), self.mapToDevice(span[1]))
        if ends[0] is None or ends[1] is None:
            return span, 0.0
        return span, math.hypot(ends[1].x() - ends[0].x(), ends[1].y() - ends[0].y())

    def _picture_key(self, painter: QPainter) -> tuple[object, ...] | None:
        """Everything the plain axis's picture is drawn from; None for any other axis.

        The y range comes back often as a user tries one value and then another (micro-batch
        4, 8, 4): the picture drawn for it then is kept, with the text width it asked for."""
        if not self._plain():
            return None
        device = painter.device()
        bounds = self.mapRectFromParent(self.geometry())
        box = self.boundingRect()
        style = self.style

        def pen_key(pen: QPen) -> tuple[object, ...]:
            return (pen.color().rgba(), pen.widthF(), pen.style(), pen.brush().style())

        return (
            tuple(self.range),
            bounds.getRect(),
            box.getRect(),
            self._span(bounds)[1],
            painter.font().key(),
            (device.logicalDpiX(), device.logicalDpiY()) if device is not None else None,
            pen_key(self.pen()),
            pen_key(self.tickPen()),
            pen_key(self.textPen()),
            self.scale,
            self.autoSIPrefixScale,
            style["tickLength"],
            style["tickTextOffset"][0],
            style["maxTextLevel"],
            tuple(style["textFillLimits"]),
        )

    def generateDrawSpecs(self, p: QPainter) -> tuple[object, list[object], list[object]] | None:  # type: ignore[override]
        """pyqtgraph's specs for a plain vertical axis, in a fraction of the time.

        The y axis is drawn afresh at about every other edit (a new range). pyqtgraph's
        general version builds a hundred Point objects and lays out every tick's text with
        the painter each time; this one keeps its tick choice (``tickValues``) and its words
        (``tickStrings``) and measures each string once. tests/gui/test_pyqtgraph_contract.py
        checks the two give the same specs.
        """
        if not self._plain():
            return super().generateDrawSpecs(p)  # type: ignore[no-any-return]
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        bounds = self.mapRectFromParent(self.geometry())
        span, length = self._span(bounds)
        if length == 0:
            return None
        tick_stop = tick_start = bounds.right()
        low, high = self.range
        levels = self.tickValues(low, high, length)
        dif = high - low
        if dif == 0:
            scale, offset = 1.0, 0.0
        else:
            scale = -bounds.height() / dif
            offset = low * scale - bounds.height()
        ends_x = (low * scale - offset, high * scale - offset)
        x_min, x_max = min(ends_x), max(ends_x)
        tick_length = self.style["tickLength"]
        base_pen = self.tickPen()
        solid = base_pen.brush().style() == Qt.BrushStyle.SolidPattern
        positions: list[list[float | None]] = []
        tick_specs: list[object] = []
        for level, (_spacing, values) in enumerate(levels):
            pen = base_pen
            if solid:
                pen = QPen(base_pen)
                colour = QColor(pen.color())
                colour.setAlpha(int(255 / (level + 1)))
                pen.setColor(colour)
            stop = tick_stop - tick_length / (level * 0.5 + 1.0)
            shown: list[float | None] = []
            for value in values:
                x = value * scale - offset
                if x < x_min or x > x_max:
                    shown.append(None)
                    continue
                shown.append(x)
                tick_specs.append((pen, QPointF(tick_start, x), QPointF(stop, x)))
            positions.append(shown)
        axis_spec = (self.pen(), span[0], span[1])

        device = p.device()
        dpi = (device.logicalDpiX(), device.logicalDpiY()) if device is not None else (0, 0)
        sizes = self._text_sizes.setdefault((p.font().key(), dpi), {})
        text_offset = self.style["tickTextOffset"][0]
        text_specs: list[object] = []
        text_rects: list[tuple[float, float]] = []
        last_width = 0.0
        box = self.boundingRect()
        flags = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextDontClip
        for level in range(min(len(levels), self.style["maxTextLevel"] + 1)):
            spacing, values = levels[level]
            strings = self.tickStrings(values, self.autoSIPrefixScale * self.scale, spacing)
            if not strings:
                continue
            rects: list[tuple[float, float] | None] = []
            for j, text in enumerate(strings):
                if positions[level][j] is None:
                    rects.append(None)
                    continue
                size = sizes.get(text)
                if size is None:
                    rect = p.boundingRect(QRectF(0, 0, 100, 100), Qt.AlignmentFlag.AlignCenter, text)
                    size = sizes[text] = (rect.width(), rect.height() * 0.8)
                rects.append(size)
                text_rects.append(size)
            width = max((w for w, _ in text_rects), default=0.0)
            if level > 0:
                fill = sum(h for _, h in text_rects) / length
                if any(len(text_specs) >= n and fill >= limit for n, limit in self.style["textFillLimits"]):
                    break
            last_width = width
            offset_text = max(0, tick_length) + text_offset
            for j, text in enumerate(strings):
                size = rects[j]
                x = positions[level][j]
                if size is None or x is None:
                    continue
                w, h = size
                rect = QRectF(tick_stop - offset_text - w, x - h / 2, w, h)
                if box & rect != rect:
                    continue
                text_specs.append((rect, flags, text))
        self._updateMaxTextSize(last_width)
        self._text_width_drawn = last_width
        return axis_spec, tick_specs, text_specs

    def reserve_text(self, sample: str) -> None:
        """Keep room beside a vertical axis for tick text as wide as ``sample``."""
        picture = QPicture()
        painter = QPainter(picture)
        try:
            if self.style["tickFont"] is not None:
                painter.setFont(self.style["tickFont"])
            width = painter.boundingRect(QRectF(0, 0, 100, 100), Qt.AlignmentFlag.AlignCenter, sample).width()
        finally:
            painter.end()
        reserved: float = getattr(self, "textWidth", 0.0)  # pyqtgraph's, set in its __init__
        if width > reserved:
            self.textWidth = width
            self._updateWidth()

    def setRange(self, mn: float, mx: float) -> None:
        # The view reports its range again whenever it is resized; the picture is in the
        # axis's own coordinates, so an unchanged range (and size) leaves it as it is.
        if self.picture is not None and self.range == [mn, mx]:
            return
        super().setRange(mn, mx)

    def _updateLabel(self) -> None:
        # Called on every change of range (for the SI prefix): the label's text, laid out
        # anew each time, is the same unless the prefix or the label changed.
        html = self.labelString()
        if html != self._label_html:
            self._label_html = html
            self.label.setHtml(html)
            self._adjustSize()
        self.picture = None
        self.update()


# Value labels laid out once per font and text ("16.1 GB" comes back at most edits).
STATIC_TEXTS_KEPT = 512
_STATIC_TEXTS: dict[tuple[str, str], tuple[QStaticText, tuple[float, float]]] = {}


class _Guide(pg.GraphicsObject):
    """An item over the whole plot, in data coordinates, within bounds the chart sets with the
    y range, that never widens the view's range: the value labels, and the capacity marks.

    pyqtgraph's InfiniteLine and LinearRegionItem, used for the marks before, work out their
    bounds from the view's pixel size whenever the scene asks (several times a paint), in
    Python; these are set once per range.
    """

    def __init__(self) -> None:
        super().__init__()
        self._bounds = QRectF(0, 0, 1, 1)

    def set_bounds(self, rect: QRectF) -> None:
        if rect != self._bounds:
            self.prepareGeometryChange()
            self._bounds = QRectF(rect)

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: object = None) -> tuple[None, None]:
        return None, None  # never widens the view's range


class _Level(_Guide):
    """A horizontal line at ``value`` (the card's capacity, the usable memory)."""

    def __init__(self) -> None:
        super().__init__()
        self._value = 0.0
        self._pen = pg.mkPen(None)

    def value(self) -> float:
        return self._value

    def setValue(self, value: float) -> None:
        if value != self._value:
            self._value = float(value)
            self.update()

    def setPen(self, pen: QPen) -> None:
        self._pen = QPen(pen)
        self._pen.setCosmetic(True)
        self.update()

    def paint(self, painter: QPainter, *_args: object) -> None:
        bounds = self._bounds
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(self._pen)
        painter.drawLine(QPointF(bounds.left(), self._value), QPointF(bounds.right(), self._value))


class _Band(_Guide):
    """A shaded horizontal band between two values (the headroom kept free)."""

    def __init__(self) -> None:
        super().__init__()
        self._region = (0.0, 0.0)
        self._brush = QBrush()

    def getRegion(self) -> tuple[float, float]:
        return self._region

    def setRegion(self, region: tuple[float, float]) -> None:
        low, high = sorted((float(region[0]), float(region[1])))
        if (low, high) != self._region:
            self._region = (low, high)
            self.update()

    def setBrush(self, brush: QBrush) -> None:
        self._brush = QBrush(brush)
        self.update()

    def paint(self, painter: QPainter, *_args: object) -> None:
        low, high = self._region
        bounds = self._bounds
        painter.fillRect(QRectF(bounds.left(), low, bounds.width(), high - low), self._brush)


class ChartLabel:
    """One value label: text drawn unscaled, anchored at a point in data coordinates."""

    __slots__ = ("anchor", "box", "colour", "font", "font_key", "static", "text", "visible", "x", "y")

    # QGraphicsTextItem (pg.TextItem) pads its text by the document margin; kept for the same look.
    MARGIN = 4.0

    def __init__(self, anchor: tuple[float, float], font: QFont) -> None:
        self.text = ""
        self.x = 0.0
        self.y = 0.0
        self.visible = False
        self.anchor = anchor
        self.font = font
        self.font_key = font.key()
        self.colour = QColor("#000000")
        self.static = QStaticText()
        self.box = (0.0, 0.0)  # width, height in pixels, margins included

    def toPlainText(self) -> str:  # the name pg.TextItem uses
        return self.text

    def set_text(self, text: str) -> None:
        self.text = text
        key = (self.font_key, text)
        laid_out = _STATIC_TEXTS.get(key)
        if laid_out is None:
            static = QStaticText(text)
            static.setTextFormat(Qt.TextFormat.PlainText)
            static.prepare(QTransform(), self.font)
            size = static.size()
            laid_out = (static, (size.width() + 2 * self.MARGIN, size.height() + 2 * self.MARGIN))
            if len(_STATIC_TEXTS) >= STATIC_TEXTS_KEPT:
                _STATIC_TEXTS.clear()
            _STATIC_TEXTS[key] = laid_out
        self.static, self.box = laid_out

    def scene_rect(self, to_scene: QTransform) -> QRectF:
        """Where the label lies in scene coordinates (pixels), given the item → scene transform."""
        point = to_scene.map(QPointF(self.x, self.y))
        width, height = self.box
        return QRectF(point.x() - width * self.anchor[0], point.y() - height * self.anchor[1], width, height)


class LabelLayer(_Guide):
    """Every value label of the chart in one item.

    One pg.TextItem per label meant 54 items, each re-laid out on every paint and on every
    change of the view; here a label is a cached QStaticText, and a changed label repaints
    only the rectangles it left and now covers.
    """

    def __init__(self) -> None:
        super().__init__()  # its bounds: where the labels may lie (the view's range and a margin)
        self.labels: list[ChartLabel] = []
        self._batch: QTransform | None = None  # the item → scene transform during a batch
        self._batch_rect = QRectF()  # what the batch's changes cover, in scene coordinates

    def add(self, anchor: tuple[float, float], font: QFont) -> ChartLabel:
        label = ChartLabel(anchor, font)
        self.labels.append(label)
        return label

    def place(self, label: ChartLabel, text: str, x: float, y: float) -> None:
        """Show ``label`` with ``text`` at (x, y); repaint it only if something changed."""
        if label.visible and label.text == text and label.x == x and label.y == y:
            return
        self._dirty(label)
        if label.text != text:
            label.set_text(text)
        label.x, label.y, label.visible = x, y, True
        self._dirty(label)

    def hide(self, label: ChartLabel) -> None:
        if label.visible:
            self._dirty(label)
            label.visible = False

    def begin(self) -> None:
        """Start a batch of changes: their repaints are asked for once, together, by :meth:`end`."""
        self._batch = self.sceneTransform() if self.scene() is not None else None
        self._batch_rect = QRectF()

    def end(self) -> None:
        if self._batch is not None and not self._batch_rect.isNull():
            self.update(self.mapRectFromScene(self._batch_rect))
        self._batch = None

    def _dirty(self, label: ChartLabel) -> None:
        if not label.visible or self.scene() is None:
            return
        if self._batch is not None:
            self._batch_rect = self._batch_rect.united(label.scene_rect(self._batch).adjusted(-2, -2, 2, 2))
            return
        rect = label.scene_rect(self.sceneTransform()).adjusted(-2, -2, 2, 2)
        self.update(self.mapRectFromScene(rect))

    def paint(self, painter: QPainter, *_args: object) -> None:
        # Text is drawn in scene units (pixels on screen, scaled with an export), not in data units.
        to_scene = self.sceneTransform()
        from_scene, invertible = to_scene.inverted()
        if not invertible:
            return
        painter.setTransform(from_scene * painter.transform())
        for label in self.labels:
            if not label.visible:
                continue
            rect = label.scene_rect(to_scene)
            painter.setFont(label.font)
            painter.setPen(label.colour)
            painter.drawStaticText(QPointF(rect.x() + ChartLabel.MARGIN, rect.y() + ChartLabel.MARGIN), label.static)


class MemoryChart(QWidget):
    """Emits ``bucketClicked(series key)`` when a bar segment is clicked."""

    bucketClicked = Signal(str)
    rankChanged = Signal(object)  # the index into Estimate.ranks shown, None for the worst

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Memory chart")
        self.mode: Mode = "training"
        self.unit: Unit = "GB"
        self.measurement: Measurement | None = None
        self.selected: str = ""
        self._estimate: Estimate | None = None
        self._bars: list[BarSpec] = []
        self._geometry: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}  # series -> (y0s, heights)
        self._tick_labels: list[str] = []
        self._geometry_drawn: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self._view_range: tuple[int, float, str] = (0, 0.0, "")
        self._view_height = 0  # the plot's height when its axis top was chosen
        self._axis_label = ""
        self.capacity_text = "capacity"
        self.usable_text = "headroom"

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        # Which kind of rank the bars show (pipeline stages differ): the worst by default, hidden
        # when every rank holds the same.
        self.rank: int | None = None
        self._rank_labels: tuple[str, ...] = ()
        self.rank_row = QWidget()
        self.rank_row.setObjectName("rankRow")
        row = QHBoxLayout(self.rank_row)
        row.setContentsMargins(4, 0, 4, 0)
        self.rank_picker = QComboBox()
        self.rank_picker.setObjectName("rankPicker")
        self.rank_picker.setAccessibleName("Rank shown in the chart")
        self.rank_picker.setToolTip("Which kind of GPU the bars show; the worst one decides the verdict.")
        self.rank_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        rank_label = QLabel("&Rank:")
        rank_label.setBuddy(self.rank_picker)
        row.addWidget(rank_label)
        row.addWidget(self.rank_picker)
        row.addStretch(1)
        self.rank_picker.activated.connect(self._rank_picked)
        self.rank_row.hide()
        layout.addWidget(self.rank_row)
        self.plot = pg.PlotWidget(axisItems={"left": _Axis("left"), "bottom": _Axis("bottom")})
        # Room for four-digit tick text from the start, never given back: a y axis that
        # widened and narrowed with its labels (8 → 10 → 100) resized the plot at an edit.
        y_axis = self.plot.getAxis("left")
        y_axis.setStyle(autoReduceTextSpace=False)
        y_axis.reserve_text("8,888")
        self.plot.setAccessibleName("Memory chart plot")
        self.plot.viewport().setAccessibleName("Memory chart plot area")
        self.plot.setToolTip("Click a bar segment to see its arithmetic.")
        layout.addWidget(self.plot, 1)
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        self.view = item.getViewBox()
        self.view.disableAutoRange()
        self.view.setDefaultPadding(0)

        self.band = _Band()
        self.band.setZValue(-10)
        item.addItem(self.band)
        self.capacity_line = _Level()
        self.capacity_line.setZValue(5)
        item.addItem(self.capacity_line)
        self.usable_line = _Level()
        item.addItem(self.usable_line)

        self.series: dict[str, _Bars] = {}
        zero = np.zeros(MAX_BARS)
        for key in ALL_SERIES:
            brush = QBrush(QColor(SERIES_COLOURS[key]))
            if key == "measured":
                brush.setStyle(Qt.BrushStyle.BDiagPattern)
            bar = _Bars(x=np.arange(MAX_BARS), height=zero, y0=zero, width=BAR_WIDTH, brush=brush)
            bar.setZValue(1)
            item.addItem(bar)
            self.series[key] = bar
        # A dashed mark at the measured peak across the estimate's peak bar, for a direct comparison.
        self.measured_mark = pg.PlotDataItem([], [])
        self._measured_mark_shown = False
        self.measured_mark.setZValue(6)
        item.addItem(self.measured_mark)

        font = QFont(self.font())
        font.setPointSizeF(max(7.5, font.pointSizeF() * 0.9))
        self.labels = LabelLayer()
        self.labels.setZValue(10)
        item.addItem(self.labels)
        self._segment_labels: dict[tuple[str, int], ChartLabel] = {}
        for key in ALL_SERIES:
            for index in range(MAX_BARS):
                self._segment_labels[(key, index)] = self.labels.add((0.5, 0.5), font)
        bold = QFont(self.font())
        bold.setBold(True)
        self._total_labels: list[ChartLabel] = [self.labels.add((0.5, 1.0), bold) for _ in range(MAX_BARS)]

        # The legend lives in the plot so that PNG/SVG exports carry it; it is rebuilt only
        # when the set of series changes (mode, measurement), never per edit.
        self.legend = pg.LegendItem(offset=(8, 4), colCount=3, horSpacing=14, verSpacing=-4)
        self.legend.setParentItem(self.view)
        self._legend_keys: tuple[str, ...] = ()
        self._legend_fitted_for: tuple[int, tuple[str, ...], str] = (0, (), "")
        self._legend_texts: tuple[str, ...] = ()  # the texts the legend was last sized for
        self._capacity_sample = pg.PlotDataItem([], [])
        self._band_sample = pg.BarGraphItem(x=[0], height=[0], width=1)

        self.plot.scene().sigMouseClicked.connect(self._scene_clicked)
        self.view.sigResized.connect(self._fit_to_width)
        self._apply_palette()

    # ---- settings ------------------------------------------------------------------
    def set_mode(self, mode: Mode) -> None:
        if mode != self.mode:
            self.mode = mode
            if self._estimate is not None:
                self._show_ranks(self._estimate)
            self._redraw()

    def set_unit(self, unit: Unit) -> None:
        if unit != self.unit:
            self.unit = unit
            if self._estimate is not None:
                self._show_ranks(self._estimate)
            self._redraw()

    def set_measurement(self, measurement: Measurement | None) -> None:
        self.measurement = measurement
        self._redraw()

    def set_selected(self, key: str) -> None:
        if key != self.selected:
            self.selected = key
            self._style_selection()

    # ---- drawing -------------------------------------------------------------------
    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        self._show_ranks(estimate)
        self._redraw()

    def set_rank(self, rank: int | None) -> None:
        """Show rank ``rank`` of the estimate's ranks; None shows the worst."""
        if rank != self.rank:
            self.rank = rank
            if self._estimate is not None:
                self._show_ranks(self._estimate)
            self._redraw()
            self.rankChanged.emit(rank)

    def _rank_picked(self, index: int) -> None:
        self.set_rank(self.rank_picker.itemData(index))

    def _show_ranks(self, estimate: Estimate) -> None:
        """The picker lists each kind of rank with its peak; another set of ranks (a new split)
        goes back to the worst."""
        labels = tuple(r.label for r in estimate.ranks)
        if labels != self._rank_labels:
            self._rank_labels = labels
            self.rank = None
        several = len(estimate.ranks) > 1 and self.mode == "training"
        if self.rank_row.isHidden() == several:
            self.rank_row.setVisible(several)
        if not several:
            return
        shown = estimate.worst_rank if self.rank is None else self.rank
        texts = [
            f"{r.label}: {memory(r.total_bytes, self.unit)}" + (" (worst)" if i == estimate.worst_rank else "")
            for i, r in enumerate(estimate.ranks)
        ]
        picker = self.rank_picker
        with QSignalBlocker(picker):
            if [picker.itemText(i) for i in range(picker.count())] != texts:
                picker.clear()
                for index, text in enumerate(texts):
                    picker.addItem(text, index)
            picker.setCurrentIndex(shown)

    def settle(self) -> None:
        """Bring the plot up to date now rather than in its next paint: the layout of its items,
        the view's transform, and the axes' pictures (which may resize an axis, and so the view).

        Left to the paint, each of these is found out there and sets off another layout pass
        and a second (or third) paint of the whole plot; done here, the plot paints once.
        """
        if not self.plot.isVisible():
            return
        item = self.plot.getPlotItem()
        scene = self.plot.scene()
        axes: list[_Axis] = [self.plot.getAxis(name) for name in ("left", "bottom")]
        for _ in range(3):  # a resized axis re-lays out the plot: at most once in practice
            QCoreApplication.sendPostedEvents(item, QEvent.Type.LayoutRequest)
            scene.prepareForPaint()  # the view's matrix, deferred by pyqtgraph to the paint
            resized = False
            for axis in axes:
                if axis.picture is None and axis.isVisible():
                    size = (axis.maximumWidth(), axis.maximumHeight())
                    axis.render()
                    resized |= size != (axis.maximumWidth(), axis.maximumHeight())
            if not resized:
                return

    def bars(self) -> list[BarSpec]:
        return list(self._bars)

    def _redraw(self) -> None:
        estimate = self._estimate
        if estimate is None:
            return
        if self.mode == "training":
            self._bars = training_bars(estimate, self.measurement, self.rank)[:MAX_BARS]
        else:
            self._bars = inference_bars(estimate, self.measurement)[:MAX_BARS]
        scale = unit_scale(self.unit)
        n = len(self._bars)
        names = (*TRAINING_SERIES, "measured") if self.mode == "training" else INFERENCE_SERIES
        # Plain tuples: compared at every edit for every series, where numpy's per-call cost
        # was most of the work; arrays only for the series whose bars moved.
        base: tuple[float, ...] = (0.0,) * n
        self._geometry = {}
        for key in ALL_SERIES:
            bar = self.series[key]
            if key not in names:
                if bar.isVisible():
                    bar.setVisible(False)
                continue
            heights = tuple(spec.parts.get(key, 0.0) / scale for spec in self._bars)
            geometry = (base, heights)
            if self._geometry_drawn.get(key) != geometry:
                bar.setOpts(x=np.arange(n), height=np.array(heights), y0=np.array(base), width=BAR_WIDTH)
                self._geometry_drawn[key] = geometry
            shown = any(heights) or key != "measured"
            if bar.isVisible() != shown:
                bar.setVisible(shown)
            self._geometry[key] = geometry
            base = tuple(b + h for b, h in zip(base, heights, strict=True))
        capacity = estimate.capacity_bytes / scale
        usable = estimate.usable_bytes / scale
        tallest = max([capacity] + [spec.total_bytes / scale for spec in self._bars])
        # A unit change rescales every height: the kept top would then be in the old unit.
        kept = self._view_range[1] if self._view_range[2] == self.unit else 0.0
        # The legend sits in the plot's top left: the bars and the capacity line stay below it.
        # (the legend's height, its offset, and a line for the bar's total above the bar).
        room_above = self.legend.height() + 8 + QFontMetricsF(self._total_labels[0].font).lineSpacing() + 6
        legend_share = min(0.6, room_above / max(1.0, self.view.height()))
        top = max(axis_top(tallest, kept), _nice_ceiling(tallest / (1 - legend_share)))
        view_range = (n, top, self.unit)
        if view_range != self._view_range:
            self._view_range = view_range
            self.view.setRange(xRange=(-0.6, n - 0.4), yRange=(0, top), padding=0)
            bounds = QRectF(-1.0, -0.1 * top, n + 1.0, 1.2 * top)
            for layer in (self.labels, self.band, self.capacity_line, self.usable_line):
                layer.set_bounds(bounds)

        if self.capacity_line.value() != capacity:
            self.capacity_line.setValue(capacity)
        if self.usable_line.value() != usable:
            self.usable_line.setValue(usable)
        headroom = estimate.plan.hardware.headroom
        self.capacity_text = f"capacity {memory(estimate.capacity_bytes, self.unit)}"
        # Short, so that the legend keeps two columns in a narrow plot; the shaded band is the rest.
        self.usable_text = f"{1 - headroom:.0%} usable: {memory(estimate.usable_bytes, self.unit)}"
        if self.band.getRegion() != (usable, capacity):
            self.band.setRegion((usable, capacity))
        if self.band.isVisible() != (capacity > usable):
            self.band.setVisible(capacity > usable)
            self.usable_line.setVisible(capacity > usable)

        self._update_labels(n, top)
        self._update_measured_mark(scale)
        self._update_axes(estimate)
        self._update_legend(names)
        self._set_legend_text(self._capacity_sample, self.capacity_text)
        self._set_legend_text(self._band_sample, self.usable_text)
        self._fit_legend()

    def _update_labels(self, n: int, top: float) -> None:
        self.labels.begin()
        try:
            self._place_labels(n, top)
        finally:
            self.labels.end()

    def _place_labels(self, n: int, top: float) -> None:
        room = top * 0.035  # a segment thinner than about a line of text gets no label
        layer = self.labels
        for (key, index), label in self._segment_labels.items():
            geometry = self._geometry.get(key)
            if geometry is None or index >= n or geometry[1][index] < room:
                layer.hide(label)
                continue
            y0, heights = geometry
            spec = self._bars[index]
            layer.place(label, memory(spec.parts[key], self.unit), index, float(y0[index] + heights[index] / 2))
        scale = unit_scale(self.unit)
        for index, label in enumerate(self._total_labels):
            if index >= n:
                layer.hide(label)
                continue
            spec = self._bars[index]
            layer.place(label, memory(spec.total_bytes, self.unit), index, spec.total_bytes / scale + top * 0.005)

    def _update_measured_mark(self, scale: float) -> None:
        if self.measurement is None or self.mode != "training" or self._estimate is None:
            if self._measured_mark_shown:
                self._measured_mark_shown = False
                self.measured_mark.setData([], [])
            return
        self._measured_mark_shown = True
        peak_index = next(
            (i for i, spec in enumerate(self._bars) if spec.label == self._estimate.for_rank(self.rank).peak_phase),
            len(self._bars) - 2,
        )
        level = self.measurement.peak_allocated_bytes / scale
        half = BAR_WIDTH / 2 + 0.08
        self.measured_mark.setData([peak_index - half, peak_index + half], [level, level])

    def _fit_to_width(self, *_: object) -> None:
        """A narrower plot: bar names on two lines, the legend in fewer columns (and the axis
        top raised so that it covers no bar). A new height chooses the axis top afresh; a new
        width alone keeps it while it still leaves the legend its room (a new top redraws the
        y axis)."""
        self._fit_legend()
        height = round(self.view.height())
        if height != self._view_height:
            self._view_height = height
            self._view_range = (0, 0.0, "")
        self._redraw()

    def _slot_width(self) -> float:
        """Pixels across one bar's slot (the view spans the bars and 0.2 of a slot of margins)."""
        return self.view.width() / (max(1, len(self._bars)) + 0.2)

    def _update_axes(self, estimate: Estimate) -> None:
        labels = [spec.label for spec in self._bars]
        peak_phase = estimate.for_rank(self.rank).peak_phase
        if peak_phase in labels and len(labels) > 1:
            index = labels.index(peak_phase)
            labels[index] = f"{labels[index]} (peak)"
        axis = self.plot.getAxis("bottom")
        metrics = QFontMetricsF(axis.style["tickFont"] or self.font())
        slot = self._slot_width() - 6
        labels = [_two_lines(label) if metrics.horizontalAdvance(label) > slot else label for label in labels]
        lines = 2 if any("\n" in label for label in labels) else 1
        height = None if lines == 1 else math.ceil(lines * metrics.lineSpacing() + 8)
        if axis.fixedHeight != height:
            axis.setHeight(height)
        if labels != self._tick_labels:
            self._tick_labels = labels
            self.plot.getAxis("bottom").setTicks([list(enumerate(labels))])
        per = "per GPU" if estimate.plan.world_size > 1 else "on the card"
        axis_label = f"{self.unit} {per}"
        if axis_label != self._axis_label:  # a new label re-renders the whole axis
            self._axis_label = axis_label
            self.plot.setLabel("left", axis_label)

    def _update_legend(self, names: tuple[str, ...]) -> None:
        keys = tuple(k for k in names if k != "measured" or self.measurement is not None)
        if keys == self._legend_keys:
            return
        self._legend_keys = keys
        self.legend.clear()
        for key in keys:
            self.legend.addItem(self.series[key], SERIES_LABELS[key])
        self.legend.addItem(self._capacity_sample, self.capacity_text)
        self.legend.addItem(self._band_sample, self.usable_text)

    def _fit_legend(self) -> None:
        """As many legend columns (3, 2 or 1) as the plot's width holds.

        The columns are chosen for the widest figures the capacity and usable lines take, so
        that another card or headroom changes their text, not the legend's columns: choosing
        lays the legend out up to three times, and ran at every such edit."""
        room = self.view.width() - 12
        fitted_for = (round(room), self._legend_keys, self.unit)
        texts = tuple(label.text for _, label in self.legend.items)
        if fitted_for != self._legend_fitted_for:
            self._legend_fitted_for = fitted_for
            widest = 888.8 * unit_scale(self.unit)
            self._set_legend_text(self._capacity_sample, f"capacity {memory(widest, self.unit)}")
            self._set_legend_text(self._band_sample, f"100% usable: {memory(widest, self.unit)}")
            self._choose_legend_columns(room, (3, 2, 1))
            self._set_legend_text(self._capacity_sample, self.capacity_text)
            self._set_legend_text(self._band_sample, self.usable_text)
            self._legend_texts = ()
        if texts != self._legend_texts:
            self._legend_texts = texts
            self.legend.layout.activate()
            self.legend.updateSize()
            if self.legend.width() > room:  # wider than the widest figures foreseen (a custom card)
                self._choose_legend_columns(room, tuple(range(self.legend.columnCount - 1, 0, -1)))

    def _choose_legend_columns(self, room: float, counts: tuple[int, ...]) -> None:
        for columns in counts:
            if columns != self.legend.columnCount:
                self.legend.setColumnCount(columns)
            self.legend.layout.activate()
            self.legend.updateSize()
            if self.legend.width() <= room:
                return

    def _set_legend_text(self, sample: pg.GraphicsObject, text: str) -> None:
        for item, label in self.legend.items:
            if item.item is sample and label.text != text:
                label.setText(text)

    def _style_selection(self) -> None:
        text_colour = self.palette().color(self.foregroundRole())
        for key, bar in self.series.items():
            selected = key == self.selected
            bar.setOpts(pen=pg.mkPen(text_colour, width=2.5) if selected else pg.mkPen(self._bar_outline, width=1))

    # ---- theme ---------------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        background, foreground, band = style_plot(self, self.plot, self.capacity_line, self.usable_line, self.band)
        capacity = QColor(OKABE_ITO["vermillion"])
        self._bar_outline = background
        self._capacity_sample.setPen(pg.mkPen(capacity, width=2, style=Qt.PenStyle.DashLine))
        self._band_sample.setOpts(brush=pg.mkBrush(band), pen=pg.mkPen(None))
        self.legend.setLabelTextColor(foreground)
        for _, label in self.legend.items:
            label.setText(label.text)  # pyqtgraph stores the colour; the shown text keeps the old one
        self.legend.setBrush(pg.mkBrush(background))
        self.measured_mark.setPen(pg.mkPen(foreground, width=2, style=Qt.PenStyle.DashLine))
        for (key, _), label in self._segment_labels.items():
            # White on the dark Okabe-Ito colours, black on the light ones: both legible.
            light = key in ("gradients", "kv_cache", "overhead", "activations")
            label.colour = QColor("#000000") if light else QColor("#FFFFFF")
        for label in self._total_labels:
            label.colour = QColor(foreground)
        self.labels.update()
        self._style_selection()

    # ---- export --------------------------------------------------------------------
    def caption(self) -> list[str]:
        """What an exported chart says under the plot: the plan, the card and the verdict."""
        estimate = self._estimate
        if estimate is None:
            return []
        return caption_lines(estimate, self.mode, self.unit, self.rank)

    def export_png(self, path: str, scale: float = 2.0) -> None:
        """The plot and its caption as a PNG, ``scale`` × the on-screen size (crisp in documents);
        the caption is also stored as the file's Description text."""
        lines = self.caption()
        width, height = self._export_size(lines)
        image = QImage(max(1, round(width * scale)), max(1, round(height * scale)), QImage.Format.Format_ARGB32)
        # The device's resolution is the pictures' (see export_svg); ``scale`` enlarges everything.
        dots_per_metre = round(_picture_dpi() / 0.0254)
        image.setDotsPerMeterX(dots_per_metre)
        image.setDotsPerMeterY(dots_per_metre)
        image.setText("Title", "VRAM Planner memory chart")
        image.setText("Description", "\n".join(lines))
        painter = QPainter(image)
        try:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
            painter.scale(scale, scale)
            self._paint_export(painter, lines, width, height)
        finally:
            painter.end()
        saved = image.save(path, "PNG")  # type: ignore[call-overload]  # stubs say bytes; PySide6 wants str
        if not saved:
            raise OSError(f"cannot write {path}")

    def export_svg(self, path: str) -> None:
        """The plot (bars, lines, legend, axes) and its caption as vector SVG.

        Rendered straight through QSvgGenerator: pyqtgraph 0.14's SVGExporter cannot parse the
        closed paths ("... Z") that Qt 6.12's SVG generator writes.
        """
        from PySide6.QtCore import QSize
        from PySide6.QtSvg import QSvgGenerator

        lines = self.caption()
        width, height = self._export_size(lines)
        generator = QSvgGenerator()
        generator.setFileName(path)
        # The axes are cached QPictures, replayed scaled by (device dpi / picture dpi): at the
        # generator's default 72 dpi they came out at 0.75 of the bars' scale.
        generator.setResolution(round(_picture_dpi()))
        generator.setSize(QSize(round(width), round(height)))
        generator.setViewBox(QRectF(0, 0, width, height))
        generator.setTitle("VRAM Planner memory chart")
        generator.setDescription("\n".join(lines))
        painter = QPainter()
        if not painter.begin(generator):
            raise OSError(f"cannot write {path}")
        try:
            self._paint_export(painter, lines, width, height)
        finally:
            painter.end()

    def _caption_font(self) -> QFont:
        return QFont(self.font())

    def _export_size(self, lines: list[str]) -> tuple[float, float]:
        source = self.plot.getPlotItem().sceneBoundingRect()
        line_height = QFontMetricsF(self._caption_font()).lineSpacing()
        return source.width(), source.height() + EXPORT_MARGIN * 2 + line_height * len(lines)

    def _paint_export(self, painter: QPainter, lines: list[str], width: float, height: float) -> None:
        self.settle()
        source = self.plot.getPlotItem().sceneBoundingRect()
        background = self.plot.backgroundBrush().color()
        painter.fillRect(QRectF(0, 0, width, height), background)
        # pyqtgraph's legend ignores transformations (it keeps its size when the view zooms), so
        # a scaled export drew it at on-screen size; its parent, the view box, is never scaled.
        ignores = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
        self.legend.setFlag(ignores, False)
        try:
            self.plot.scene().render(painter, QRectF(0, 0, source.width(), source.height()), source)
        finally:
            self.legend.setFlag(ignores, True)
        font = self._caption_font()
        painter.setFont(font)
        painter.setPen(self.palette().color(self.foregroundRole()))
        line_height = QFontMetricsF(font).lineSpacing()
        y = source.height() + EXPORT_MARGIN
        for line in lines:
            rect = QRectF(EXPORT_MARGIN, y, width - 2 * EXPORT_MARGIN, line_height)
            painter.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), line)
            y += line_height

    # ---- clicks --------------------------------------------------------------------
    def segment_at(self, x: float, y: float) -> str:
        """The series key of the bar segment at view coordinates (x, y), or ""."""
        index = round(x)
        if not 0 <= index < len(self._bars) or abs(x - index) > BAR_WIDTH / 2:
            return ""
        for key, (y0, heights) in self._geometry.items():
            if heights[index] > 0 and y0[index] <= y <= y0[index] + heights[index]:
                return key
        return ""

    def _scene_clicked(self, event: object) -> None:
        pos = event.scenePos()  # type: ignore[attr-defined]
        if not self.view.sceneBoundingRect().contains(pos):
            return
        point: QPointF = self.view.mapSceneToView(pos)
        key = self.segment_at(point.x(), point.y())
        if key and key != "measured":
            self.set_selected(key)
            self.bucketClicked.emit(key)

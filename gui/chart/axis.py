"""The chart's axes: pyqtgraph's AxisItem that redraws only what changed, draws ahead of a
paint, and keeps the pictures of y ranges that come back.

A typical edit moves the bars and leaves the axes alone (the widget keeps the y range while
the bars still fit it well); when the range does change, this axis draws its ticks in about
half pyqtgraph's time. It overrides private pyqtgraph members: tests/gui/test_pyqtgraph_contract.py
checks they still exist and that the fast path draws what pyqtgraph draws.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPicture

Positions = list[list[float | None]]  # per tick level, each value's place on the axis (None: off it)
PICTURES_KEPT = 48  # y-axis pictures kept for ranges that come back (a few hundred KB at most)


class ChartAxis(pg.AxisItem):
    """A pyqtgraph axis that redraws only what changed, and can be drawn ahead of a paint."""

    def __init__(self, orientation: str) -> None:
        self._label_html: str | None = None
        # (font key, device dpi) -> tick text -> its size, as pyqtgraph measures it
        self._text_sizes: dict[tuple[str, tuple[int, int]], dict[str, tuple[float, float]]] = {}
        # Pictures drawn, by everything they were drawn from (_picture_key), with their text width.
        self._pictures: OrderedDict[tuple[object, ...], tuple[QPicture, float]] = OrderedDict()
        self._text_width_drawn: float | None = None
        self.picture: QPicture | None = None  # pyqtgraph's cached drawing; None: draw at the next paint
        super().__init__(orientation)

    def render(self) -> None:
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

    def generateDrawSpecs(self, p: QPainter) -> tuple[object, list[object], list[object]] | None:
        """pyqtgraph's specs for a plain vertical axis, in a fraction of the time.

        The y axis is drawn afresh at about every other edit (a new range). pyqtgraph's
        general version builds a hundred Point objects and lays out every tick's text with
        the painter each time; this one keeps its tick choice (``tickValues``) and its words
        (``tickStrings``) and measures each string once. tests/gui/test_pyqtgraph_contract.py
        checks the two give the same specs.
        """
        if not self._plain():
            return super().generateDrawSpecs(p)
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        bounds = self.mapRectFromParent(self.geometry())
        span, length = self._span(bounds)
        if length == 0:
            return None
        levels = self.tickValues(self.range[0], self.range[1], length)
        tick_specs, positions = self._tick_specs(bounds, levels)
        axis_spec = (self.pen(), span[0], span[1])
        text_specs, text_width = self._text_specs(p, bounds.right(), levels, positions, length)
        self._updateMaxTextSize(text_width)
        self._text_width_drawn = text_width
        return axis_spec, tick_specs, text_specs

    def _tick_specs(self, bounds: QRectF, levels: list[tuple[float, list[float]]]) -> tuple[list[object], Positions]:
        """The tick lines of each level, and where each tick value lies (None: off the axis)."""
        tick_stop = tick_start = bounds.right()
        low, high = self.range
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
        positions: Positions = []
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
        return tick_specs, positions

    def _measured(self, p: QPainter) -> dict[str, tuple[float, float]]:
        """Tick texts' sizes as pyqtgraph measures them, kept per font and device resolution."""
        device = p.device()
        dpi = (device.logicalDpiX(), device.logicalDpiY()) if device is not None else (0, 0)
        return self._text_sizes.setdefault((p.font().key(), dpi), {})

    def _text_specs(
        self,
        p: QPainter,
        tick_stop: float,
        levels: list[tuple[float, list[float]]],
        positions: Positions,
        length: float,
    ) -> tuple[list[object], float]:
        """The tick texts of as many levels as fit (pyqtgraph's fill limits), and their width."""
        tick_length = self.style["tickLength"]
        text_offset = self.style["tickTextOffset"][0]
        sizes = self._measured(p)
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
        return text_specs, last_width

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

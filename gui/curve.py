"""Total memory against micro-batch or sequence length, with the card's limits.

Draws a :class:`core.advice.diagnosis.Curve`: the totals the core estimated for each value, the
capacity line, the usable line with the headroom band between them, the largest value
that fits with margin, a larger one that fits narrowly noted in core.verdict's words (the curve's
``parts``, from the core's solver), and the plan's current value.
Every plot item is built once; an update only calls ``setData``/``setValue``/``setRegion``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from gui import colours
from gui.format import Unit, memory, unit_scale
from gui.plotstyle import OKABE_ITO, style_plot

if TYPE_CHECKING:
    from core.advice.diagnosis import Curve

PLOT_MIN_HEIGHT = 220
AXIS_LABELS = {"micro_batch": "micro-batch", "seq_len": "sequence length (tokens)"}


class MemoryCurve(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Memory curve")
        self.unit: Unit = "GB"
        self.curve: Curve | None = None
        self.current = 0
        self.redraws = 0  # curves drawn; tests read it to check that an unchanged curve is kept
        self._x_label = ""
        self._y_label = ""
        self._range: tuple[float, float, float] = (0.0, 0.0, 0.0)

        self._plot_built = False
        self._foreground = QColor(Qt.GlobalColor.black)  # the plot's text colour, set with its palette

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        # The plot is built with the first curve (from the diagnosis worker, after the first
        # paint): a pyqtgraph plot costs tens of milliseconds that start-up need not pay.
        self.placeholder = QWidget()
        self.placeholder.setMinimumHeight(PLOT_MIN_HEIGHT)
        layout.addWidget(self.placeholder, 1)
        self.caption = QLabel()
        self.caption.setAccessibleName("Memory curve legend")
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.caption)

    def _build_plot(self) -> None:
        if self._plot_built:
            return
        self._plot_built = True
        self.plot = pg.PlotWidget()
        self.plot.setAccessibleName("Memory curve plot")
        self.plot.viewport().setAccessibleName("Memory curve plot area")
        self.plot.setMinimumHeight(PLOT_MIN_HEIGHT)
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.replaceWidget(self.placeholder, self.plot)
        self.placeholder.deleteLater()
        layout.setStretchFactor(self.plot, 1)
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.showGrid(x=False, y=True, alpha=0.15)
        self.view = item.getViewBox()
        self.view.disableAutoRange()

        self.band = pg.LinearRegionItem(orientation="horizontal", movable=False)
        self.band.setZValue(-10)
        for line in self.band.lines:
            line.setPen(pg.mkPen(None))
        item.addItem(self.band)
        self.capacity_line = pg.InfiniteLine(angle=0, movable=False)
        item.addItem(self.capacity_line)
        self.usable_line = pg.InfiniteLine(angle=0, movable=False)
        item.addItem(self.usable_line)
        self.line = pg.PlotDataItem([], [], symbol="o", symbolSize=5)
        self.line.setZValue(5)
        item.addItem(self.line)
        label_opts = {"position": 0.92, "anchors": [(0, 0), (0, 0)], "movable": False}
        self.crossing_line = pg.InfiniteLine(angle=90, movable=False, label="", labelOpts=label_opts)
        self.crossing_line.setZValue(4)
        item.addItem(self.crossing_line)
        current_opts = {"position": 0.08, "anchors": [(0, 1), (0, 1)], "movable": False}
        self.current_line = pg.InfiniteLine(angle=90, movable=False, label="", labelOpts=current_opts)
        self.current_line.setZValue(3)
        item.addItem(self.current_line)

        self._apply_palette()

    def set_unit(self, unit: Unit) -> None:
        if unit != self.unit:
            self.unit = unit
            self._redraw()

    def show_curve(self, curve: Curve, current: int) -> None:
        """``current``: the plan's own value on the curve's axis, marked for orientation.

        The same curve again (a new report that did not change it) leaves the plot as drawn."""
        if curve == self.curve and current == self.current:
            return
        self.curve = curve
        self.current = current
        self._redraw()

    # ---- drawing -------------------------------------------------------------------
    def _redraw(self) -> None:
        curve = self.curve
        if curve is None:
            return
        self._build_plot()
        self.redraws += 1
        scale = unit_scale(self.unit)
        heights = [total / scale for total in curve.total_bytes]
        self.line.setData(list(curve.values), heights)
        capacity = curve.capacity_bytes / scale
        usable = curve.usable_bytes / scale
        self.capacity_line.setValue(capacity)
        self.usable_line.setValue(usable)
        self.band.setRegion((usable, capacity))
        self.band.setVisible(capacity > usable)
        self.usable_line.setVisible(capacity > usable)

        name = AXIS_LABELS.get(curve.axis, curve.axis)
        short = name.split(" (")[0]
        answer, note = curve.parts  # core.verdict's words: with margin, a larger narrow fit noted
        fits = answer > 0
        self.crossing_line.setVisible(fits)
        self._paint_marker()
        if fits:
            self.crossing_line.setValue(answer)
            self.crossing_line.label.setFormat(f"largest that fits: {answer:,}")
        self.current_line.setValue(self.current)
        self.current_line.label.setFormat(f"now: {self.current:,}")

        # Drawing geometry only: the view spans the values and a little above the tallest line.
        top = max([capacity, *heights]) * 1.12
        left, right = min(curve.values), max(curve.values)
        view_range = (float(left), float(right), top)
        if view_range != self._range:
            self._range = view_range
            pad = max(1.0, (right - left) * 0.03)
            self.view.setRange(xRange=(max(0.0, left - pad), right + pad), yRange=(0, top), padding=0)
        if name != self._x_label:
            self._x_label = name
            self.plot.setLabel("bottom", name)
        if self.unit != self._y_label:
            self._y_label = self.unit
            self.plot.setLabel("left", f"total, {self.unit}")

        vermillion, blue = OKABE_ITO["vermillion"], OKABE_ITO["blue"]
        noted = f" ({note})" if note else ""
        verdict = (
            f"largest {short} that fits: <b>{answer:,}</b>{noted}" if fits else f"<b>no {short} fits</b>, not even 1"
        )

        def keep(text: str) -> str:  # one legend entry never breaks across lines
            return text.replace(" ", "&nbsp;")

        capacity_text = keep(f"capacity {memory(curve.capacity_bytes, self.unit)}")
        usable_text = keep(f"usable {memory(curve.usable_bytes, self.unit)}")
        self.caption.setText(
            f"<span style='color:{blue}'>●—</span>&nbsp;{keep('total memory')} &nbsp; "
            f"<span style='color:{vermillion}'>┅</span>&nbsp;{capacity_text} &nbsp; "
            f"<span style='color:{vermillion}'>┈</span>&nbsp;{usable_text} {keep('(shaded: headroom)')} &nbsp; "
            f"<span style='color:{self.marker_colour}'>│</span>&nbsp;{verdict}"
        )
        plain = verdict.replace("<b>", "").replace("</b>", "")
        self.plot.setAccessibleDescription(f"Total memory against {name}; {plain}.")

    # ---- theme ---------------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:
        if self._plot_built and event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_palette()
        super().changeEvent(event)

    @property
    def marker_colour(self) -> str:
        """The limit marker's colour: a fit's green, or where the value marked fits only narrowly (core
        Curve.fits_narrowly) a narrow fit's yellow, never a fit's green (gui.panels.verdict.NARROW_STYLE's)."""
        narrow = self.curve is not None and self.curve.fits_narrowly
        return colours.UNCERTAIN if narrow else colours.FITS

    def _paint_marker(self) -> None:
        colour = QColor(self.marker_colour)
        self.crossing_line.setPen(pg.mkPen(colour, width=2))
        # Yellow text is unreadable on a light plot: a narrow fit's label takes the text colour.
        narrow = self.curve is not None and self.curve.fits_narrowly
        self.crossing_line.label.setColor(self._foreground if narrow else colour)

    def _apply_palette(self) -> None:
        background, foreground, _band = style_plot(self, self.plot, self.capacity_line, self.usable_line, self.band)
        self._foreground = foreground
        total = QColor(OKABE_ITO["blue"])
        self.line.setPen(pg.mkPen(total, width=2))
        self.line.setSymbolBrush(pg.mkBrush(total))
        self.line.setSymbolPen(pg.mkPen(background))
        self._paint_marker()
        self.current_line.setPen(pg.mkPen(foreground, width=1, style=Qt.PenStyle.DotLine))
        self.current_line.label.setColor(foreground)

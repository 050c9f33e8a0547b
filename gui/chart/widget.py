"""The live memory chart: stacked bars of the Estimate's buckets against the card.

Training: one stacked bar per phase of the step (forward + loss, backward, optimizer
step) and one for the peak with the framework overhead on top, which is what the verdict
judges. Inference: weights + KV cache + activations + overhead. The card's capacity is a
line, the headroom band is shaded, a loaded measurement is a hatched bar.

What is drawn is worked out in :mod:`gui.chart.geometry`; this widget hands it to the
plot items, built once: an update only calls ``setOpts`` on what changed. The value labels
are one item (:class:`gui.chart.items.LabelLayer`) that repaints only the labels whose
text or place changed, and the y axis keeps its range while the bars still fit it well,
so that a typical edit repaints the bars that moved and leaves the axes alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QPointF, QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QShowEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from core.estimate import Estimate
from gui.chart import export
from gui.chart.axis import ChartAxis
from gui.chart.geometry import (
    ALL_SERIES,
    BAR_WIDTH,
    DARK_TEXT_SERIES,
    MAX_BARS,
    SERIES_COLOURS,
    BarSpec,
    Mode,
    Segments,
    bar_names,
    bar_pixels,
    bars_for,
    caption_lines,
    fitted_text,
    judged_limits,
    measured_mark,
    segment_at,
    segment_labels,
    series_for,
    stack,
    tallest,
    total_labels,
    two_lines,
    y_top,
)
from gui.chart.items import Band, Bars, ChartLabel, LabelLayer, Level
from gui.chart.legend import ChartLegend
from gui.colours import OKABE_ITO
from gui.format import Unit, memory, unit_scale
from gui.plotstyle import style_plot

if TYPE_CHECKING:
    from core.files.measurement import Measurement

WIDTHS_KEPT = 512  # value texts' measured widths kept per font ("16.1 GB" comes back at most edits)


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
        self._geometry: dict[str, Segments] = {}  # series -> (y0s, heights), as drawn now
        self._tick_labels: list[str] = []
        self._geometry_drawn: dict[str, Segments] = {}
        self._view_range: tuple[int, float, str] = (0, 0.0, "")
        self._view_height = 0  # the plot's height when its axis top was chosen
        self._fit_when_shown = False  # resized while hidden: fitted when shown
        self._axis_label = ""
        self._bar_outline = QColor()
        self._width_of: dict[str, Callable[[str], float]] = {}  # font key -> a text's width in pixels

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self._build_rank_row())
        self.plot = self._build_plot()
        layout.addWidget(self.plot, 1)
        item = self.plot.getPlotItem()
        self.view = item.getViewBox()
        self._build_items(item)
        self._build_labels(item)
        self.legend = ChartLegend(self.view, self.font().pointSizeF())
        self.plot.scene().sigMouseClicked.connect(self._scene_clicked)
        self.view.sigResized.connect(self._fit_to_width)
        self._apply_palette()

    def _build_rank_row(self) -> QWidget:
        """Which kind of rank the bars show (pipeline stages differ): the worst by default, hidden
        when every rank holds the same."""
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
        return self.rank_row

    def _build_plot(self) -> pg.PlotWidget:
        plot = pg.PlotWidget(axisItems={"left": ChartAxis("left"), "bottom": ChartAxis("bottom")})
        # Room for four-digit tick text from the start, never given back: a y axis that
        # widened and narrowed with its labels (8 → 10 → 100) resized the plot at an edit.
        y_axis = plot.getAxis("left")
        y_axis.setStyle(autoReduceTextSpace=False)
        y_axis.reserve_text("8,888")
        plot.setAccessibleName("Memory chart plot")
        plot.viewport().setAccessibleName("Memory chart plot area")
        plot.setToolTip("Click a bar segment to see its arithmetic.")
        item = plot.getPlotItem()
        # Room above the view for half a tick text: a tick at the axis top (30 of 30 GB) has its
        # text centred on it, and pyqtgraph's 1 px margin cut it in half at the widget's edge.
        tick_font = y_axis.style["tickFont"] or plot.font()
        top_margin = math.ceil(QFontMetricsF(tick_font).height() / 2) + 1
        item.layout.setContentsMargins(1, top_margin, 1, 1)  # pyqtgraph's 1 px on the other sides
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        view = item.getViewBox()
        view.disableAutoRange()
        view.setDefaultPadding(0)
        return plot

    def _build_items(self, item: pg.PlotItem) -> None:
        """The headroom band, the capacity and usable lines, one bar item per series and the
        measured peak's mark: built once, updated in place."""
        self.band = Band()
        self.band.setZValue(-10)
        item.addItem(self.band)
        self.capacity_line = Level()
        self.capacity_line.setZValue(5)
        item.addItem(self.capacity_line)
        self.usable_line = Level()
        item.addItem(self.usable_line)
        self.series: dict[str, Bars] = {}
        zero = np.zeros(MAX_BARS)
        for key in ALL_SERIES:
            brush = QBrush(QColor(SERIES_COLOURS[key]))
            if key == "measured":
                brush.setStyle(Qt.BrushStyle.BDiagPattern)
            bar = Bars(x=np.arange(MAX_BARS), height=zero, y0=zero, width=BAR_WIDTH, brush=brush)
            bar.setZValue(1)
            item.addItem(bar)
            self.series[key] = bar
        # A dashed mark at the measured peak across the estimate's peak bar, for a direct comparison.
        self.measured_mark = pg.PlotDataItem([], [])
        self._measured_mark_shown = False
        self.measured_mark.setZValue(6)
        item.addItem(self.measured_mark)

    def _build_labels(self, item: pg.PlotItem) -> None:
        """A label for every segment a bar may have, and one for each bar's total."""
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
        axes: list[ChartAxis] = [self.plot.getAxis(name) for name in ("left", "bottom")]
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
        self._bars = bars_for(estimate, self.mode, self.measurement, self.rank)
        scale = unit_scale(self.unit)
        names = series_for(self.mode)
        self._geometry = stack(self._bars, names, scale)
        self._draw_series()
        capacity_bytes, usable_bytes = judged_limits(estimate, self.mode)  # the verdict's, per mode
        capacity = capacity_bytes / scale
        usable = usable_bytes / scale
        top = self._set_view_range(tallest(self._bars, capacity, scale))
        self._draw_limits(estimate, capacity, usable)
        self._update_labels(top)
        self._update_measured_mark(scale)
        self._update_axes(estimate)
        self.legend.set_limits(
            f"capacity {memory(capacity_bytes, self.unit)}",
            # Short, so that the legend keeps two columns in a narrow plot; the shaded band is the rest.
            f"{1 - estimate.plan.hardware.headroom:.0%} usable: {memory(usable_bytes, self.unit)}",
        )
        self.legend.show_series(tuple(k for k in names if k != "measured" or self.measurement is not None), self.series)
        self._fit_legend()

    def _draw_series(self) -> None:
        """Each series' bars as stacked; only the series whose bars moved are given new data."""
        n = len(self._bars)
        for key in ALL_SERIES:
            bar = self.series[key]
            geometry = self._geometry.get(key)
            if geometry is None:
                if bar.isVisible():
                    bar.setVisible(False)
                continue
            base, heights = geometry
            if self._geometry_drawn.get(key) != geometry:
                bar.setOpts(x=np.arange(n), height=np.array(heights), y0=np.array(base), width=BAR_WIDTH)
                self._geometry_drawn[key] = geometry
            shown = any(heights) or key != "measured"
            if bar.isVisible() != shown:
                bar.setVisible(shown)

    def _set_view_range(self, highest: float) -> float:
        """The view's x and y range for the bars; returns the y-axis top (kept while it fits)."""
        n = len(self._bars)
        # A unit change rescales every height: the kept top would then be in the old unit.
        kept = self._view_range[1] if self._view_range[2] == self.unit else 0.0
        # The legend sits in the plot's top left: the bars and the capacity line stay below it
        # (the legend's height, its offset, and a line for the bar's total above the bar).
        room_above = self.legend.height() + 8 + QFontMetricsF(self._total_labels[0].font).lineSpacing() + 6
        legend_share = min(0.6, room_above / max(1.0, self.view.height()))
        top = y_top(highest, kept, legend_share)
        view_range = (n, top, self.unit)
        if view_range != self._view_range:
            self._view_range = view_range
            self.view.setRange(xRange=(-0.6, n - 0.4), yRange=(0, top), padding=0)
            bounds = QRectF(-1.0, -0.1 * top, n + 1.0, 1.2 * top)
            for layer in (self.labels, self.band, self.capacity_line, self.usable_line):
                layer.set_bounds(bounds)
        return top

    def _draw_limits(self, estimate: Estimate, capacity: float, usable: float) -> None:
        """The capacity and usable lines, and the headroom band between them."""
        if self.capacity_line.value() != capacity:
            self.capacity_line.setValue(capacity)
        if self.usable_line.value() != usable:
            self.usable_line.setValue(usable)
        if self.band.getRegion() != (usable, capacity):
            self.band.setRegion((usable, capacity))
        if self.band.isVisible() != (capacity > usable):
            self.band.setVisible(capacity > usable)
            self.usable_line.setVisible(capacity > usable)

    def _update_labels(self, top: float) -> None:
        self.labels.begin()
        try:
            self._place_labels(top)
        finally:
            self.labels.end()

    def _place_labels(self, top: float) -> None:
        """Each segment's figure in its bar and each bar's total above it, in the form that fits
        the bar (a segment's) or the slot (a total): whole, the number alone, or none."""
        layer = self.labels
        bar, slot = bar_pixels(self.view.width(), len(self._bars))
        placed = segment_labels(self._bars, self._geometry, top, self.unit)
        for key, label in self._segment_labels.items():
            spot = placed.get(key)
            text = fitted_text(spot[0], self.unit, bar, self._text_width(label)) if spot is not None else ""
            if spot is None or not text:
                layer.hide(label)
            else:
                layer.place(label, text, key[1], spot[1])
        totals = total_labels(self._bars, top, self.unit, unit_scale(self.unit))
        for index, label in enumerate(self._total_labels):
            total = totals[index] if index < len(totals) else ("", 0.0)
            text = fitted_text(total[0], self.unit, slot, self._text_width(label)) if total[0] else ""
            if not text:
                layer.hide(label)
            else:
                layer.place(label, text, index, total[1])

    def _text_width(self, label: ChartLabel) -> Callable[[str], float]:
        """How wide a text is in ``label``'s font, in pixels (measured once per font and text)."""
        found = self._width_of.get(label.font_key)
        if found is not None:
            return found
        widths: dict[str, float] = {}
        metrics = QFontMetricsF(label.font)

        def width(text: str) -> float:
            found = widths.get(text)
            if found is None:
                if len(widths) >= WIDTHS_KEPT:
                    widths.clear()
                found = widths[text] = metrics.horizontalAdvance(text)
            return found

        self._width_of[label.font_key] = width
        return width

    def _update_measured_mark(self, scale: float) -> None:
        if self.measurement is None or self.mode != "training" or self._estimate is None:
            if self._measured_mark_shown:
                self._measured_mark_shown = False
                self.measured_mark.setData([], [])
            return
        self._measured_mark_shown = True
        from core.files.measurement import measured_tensor_level  # loaded with the measurement

        shown = self._estimate.for_rank(self.rank)
        # The peak-phase bar is the phase's tensors: a run on a card is levelled without the
        # workspaces its peak holds (core.files.measurement.measured_tensor_level).
        level_bytes = measured_tensor_level(shown, self.measurement)
        left, right, level = measured_mark(self._bars, shown.peak_phase, level_bytes, scale)
        self.measured_mark.setData([left, right], [level, level])

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._fit_when_shown:
            self._fit_when_shown = False
            self._fit_to_width()

    def _fit_to_width(self, *_: object) -> None:
        """A narrower plot: bar names on two lines, the legend in fewer columns (and the axis
        top raised so that it covers no bar). A new height chooses the axis top afresh; a new
        width alone keeps it while it still leaves the legend its room (a new top redraws the
        y axis)."""
        if not self.isVisible():
            # Sizes a window goes through before it is first shown are never painted: the
            # chart is fitted when it shows (showEvent), not once per layout pass before.
            self._fit_when_shown = True
            return
        self._fit_when_shown = False  # fitted now, at the size it shows at
        self._fit_legend()
        height = round(self.view.height())
        if height != self._view_height:
            self._view_height = height
            self._view_range = (0, 0.0, "")
        self._redraw()

    def _fit_legend(self) -> None:
        self.legend.fit_columns(self.view.width() - 12, self.unit)

    def _slot_width(self) -> float:
        """Pixels across one bar's slot (the view spans the bars and 0.2 of a slot of margins)."""
        return bar_pixels(self.view.width(), len(self._bars))[1]

    def _update_axes(self, estimate: Estimate) -> None:
        labels = bar_names(self._bars, estimate.for_rank(self.rank).peak_phase)
        axis = self.plot.getAxis("bottom")
        metrics = QFontMetricsF(axis.style["tickFont"] or self.font())
        slot = self._slot_width() - 6
        full = labels
        labels = [two_lines(label) if metrics.horizontalAdvance(label) > slot else label for label in labels]
        # A line still wider than its whole slot (a large OS font in a narrow plot: "backward" ran into "optimizer")
        # is cut with an ellipsis, the whole names on the axis's tooltip. The slot without the margin above decides
        # the split only: at 1024 px "backward" (58 px) fits its 59 px slot whole.
        whole = self._slot_width()
        labels = [
            "\n".join(metrics.elidedText(line, Qt.TextElideMode.ElideRight, whole) for line in label.split("\n"))
            for label in labels
        ]
        tip = " · ".join(name for name, shown in zip(full, labels, strict=True) if "…" in shown)
        if axis.toolTip() != tip:
            axis.setToolTip(tip)
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
        legend = self.legend
        legend.capacity_sample.setPen(pg.mkPen(capacity, width=2, style=Qt.PenStyle.DashLine))
        legend.band_sample.setOpts(brush=pg.mkBrush(band), pen=pg.mkPen(None))
        legend.setLabelTextColor(foreground)
        for _, label in legend.items:
            label.setText(label.text)  # pyqtgraph stores the colour; the shown text keeps the old one
        legend.setBrush(pg.mkBrush(background))
        self.measured_mark.setPen(pg.mkPen(foreground, width=2, style=Qt.PenStyle.DashLine))
        for (key, _), label in self._segment_labels.items():
            label.colour = QColor("#000000") if key in DARK_TEXT_SERIES else QColor("#FFFFFF")
        for label in self._total_labels:
            label.colour = QColor(foreground)
        self.labels.update()
        self._style_selection()

    # ---- export (gui.chart.export) -------------------------------------------------
    def caption(self) -> list[str]:
        """What an exported chart says under the plot: the plan, the card and the verdict."""
        estimate = self._estimate
        if estimate is None:
            return []
        return caption_lines(estimate, self.mode, self.unit, self.rank)

    def export_png(self, path: str, scale: float = 2.0, force: bool = False) -> None:
        export.export_png(self, path, scale, force)

    def export_svg(self, path: str, force: bool = False) -> None:
        export.export_svg(self, path, force)

    # ---- clicks --------------------------------------------------------------------
    def segment_at(self, x: float, y: float) -> str:
        """The series key of the bar segment at view coordinates (x, y), or ""."""
        return segment_at(self._geometry, len(self._bars), x, y)

    def _scene_clicked(self, event: object) -> None:
        pos = event.scenePos()  # type: ignore[attr-defined]
        if not self.view.sceneBoundingRect().contains(pos):
            return
        point: QPointF = self.view.mapSceneToView(pos)
        key = self.segment_at(point.x(), point.y())
        if key and key != "measured":
            self.set_selected(key)
            self.bucketClicked.emit(key)

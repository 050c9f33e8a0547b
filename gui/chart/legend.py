"""The chart's legend: the series drawn, then samples of the capacity line and the headroom band,
in as many columns (3, 2 or 1) as the plot's width holds.

It lives in the plot so that PNG/SVG exports carry it. Its entries are rebuilt only when the
set of series changes (the mode, a measurement), never per edit, and its columns are chosen
once per plot width: choosing lays it out up to three times.
"""

from __future__ import annotations

import pyqtgraph as pg

from gui.chart.geometry import SERIES_LABELS
from gui.format import Unit, memory, unit_scale

# The widest figures the capacity and usable lines' texts take: the columns are chosen for
# these, so that another card or headroom changes their text, not the legend's columns.
WIDEST_GB = 888.8
DEFAULT_TEXT_PT = 9.0  # pyqtgraph 0.14 LegendItem's labelTextSize default, '9pt'


class ChartLegend(pg.LegendItem):
    def __init__(self, parent: pg.GraphicsObject, text_pt: float = DEFAULT_TEXT_PT) -> None:
        # The text at the chart's own font size: pyqtgraph's default is a fixed 9 pt, which stayed 9 pt
        # under an OS text scale of 1.5 (13.5 pt axis and bar labels beside it).
        size = f"{text_pt if text_pt > 0 else DEFAULT_TEXT_PT:g}pt"
        super().__init__(offset=(8, 4), colCount=3, horSpacing=14, verSpacing=-4, labelTextSize=size)
        self.setParentItem(parent)
        self.capacity_sample = pg.PlotDataItem([], [])
        self.band_sample = pg.BarGraphItem(x=[0], height=[0], width=1)
        self.capacity_text = "capacity"
        self.usable_text = "headroom"
        self._series_keys: tuple[str, ...] = ()
        self._fitted_for: tuple[int, tuple[str, ...], str] = (0, (), "")
        self._sized_texts: tuple[str, ...] = ()  # the texts the legend was last sized for

    def show_series(self, keys: tuple[str, ...], samples: dict[str, pg.GraphicsObject]) -> None:
        """One entry per series in ``keys`` (its bars as the sample), then the card's limits."""
        if keys == self._series_keys:
            return
        self._series_keys = keys
        self.clear()
        for key in keys:
            self.addItem(samples[key], SERIES_LABELS[key])
        self.addItem(self.capacity_sample, self.capacity_text)
        self.addItem(self.band_sample, self.usable_text)

    def set_limits(self, capacity_text: str, usable_text: str) -> None:
        """The capacity line's and the headroom band's texts."""
        self.capacity_text = capacity_text
        self.usable_text = usable_text
        self.set_sample_text(self.capacity_sample, capacity_text)
        self.set_sample_text(self.band_sample, usable_text)

    def set_sample_text(self, sample: pg.GraphicsObject, text: str) -> None:
        for item, label in self.items:
            if item.item is sample and label.text != text:
                label.setText(text)

    def fit_columns(self, room: float, unit: Unit) -> None:
        """As many columns as ``room`` pixels hold; chosen again only for another width, set of
        series or unit, or text wider than the widest foreseen (a custom card)."""
        fitted_for = (round(room), self._series_keys, unit)
        texts = tuple(label.text for _, label in self.items)
        if fitted_for != self._fitted_for:
            self._fitted_for = fitted_for
            widest = WIDEST_GB * unit_scale(unit)
            self.set_sample_text(self.capacity_sample, f"capacity {memory(widest, unit)}")
            self.set_sample_text(self.band_sample, f"100% usable: {memory(widest, unit)}")
            self._choose_columns(room, (3, 2, 1))
            self.set_sample_text(self.capacity_sample, self.capacity_text)
            self.set_sample_text(self.band_sample, self.usable_text)
            self._sized_texts = ()
        if texts != self._sized_texts:
            self._sized_texts = texts
            self.layout.activate()
            self.updateSize()
            if self.width() > room:  # wider than the widest figures foreseen (a custom card)
                self._choose_columns(room, tuple(range(self.columnCount - 1, 0, -1)))

    def _choose_columns(self, room: float, counts: tuple[int, ...]) -> None:
        for columns in counts:
            if columns != self.columnCount:
                self.setColumnCount(columns)
            self.layout.activate()
            self.updateSize()
            if self.width() <= room:
                return

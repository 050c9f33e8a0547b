"""gui/chart.py overrides and calls private pyqtgraph members. If pyqtgraph renames or stops
calling them, the chart would silently fall back to slow paths or break: fail loudly here."""

from __future__ import annotations

import inspect
from typing import Any

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QPainter, QPicture

from gui.chart import _Axis, _Bars

# The private members gui/chart.py relies on (pyqtgraph 0.13, graphicsItems/AxisItem.py,
# BarGraphItem.py, LegendItem.py).
AXIS_MEMBERS = ("_updateLabel", "_adjustSize", "generateDrawSpecs", "drawPicture", "labelString", "setRange")
BAR_MEMBERS = ("setOpts", "viewTransformChanged", "boundingRect")


def test_the_members_exist_with_the_signatures_we_override() -> None:
    for name in AXIS_MEMBERS:
        assert callable(getattr(pg.AxisItem, name, None)), f"pyqtgraph.AxisItem.{name} is gone"
    for name in BAR_MEMBERS:
        assert callable(getattr(pg.BarGraphItem, name, None)), f"pyqtgraph.BarGraphItem.{name} is gone"
    assert list(inspect.signature(pg.AxisItem._updateLabel).parameters) == ["self"]
    assert list(inspect.signature(pg.AxisItem.setRange).parameters)[:3] == ["self", "mn", "mx"]


def test_pyqtgraph_still_calls_the_overrides(qtbot: Any, monkeypatch: Any) -> None:
    axis = _Axis("left")
    for attribute in ("picture", "range", "label", "style"):
        assert hasattr(axis, attribute), f"pyqtgraph.AxisItem no longer has .{attribute}"
    assert "tickFont" in axis.style
    calls: list[str] = []
    original = _Axis._updateLabel
    monkeypatch.setattr(_Axis, "_updateLabel", lambda self: (calls.append("label"), original(self))[1])
    axis.setRange(0.0, 123.0)  # a range change re-labels the axis (the SI prefix)
    assert calls == ["label"], "AxisItem.setRange no longer calls _updateLabel"
    axis.render()
    assert axis.picture is not None

    bars = _Bars(x=[0.0], height=[1.0], width=0.5)
    first = bars.boundingRect()
    bars.setOpts(height=[2.0])
    assert bars.boundingRect().height() > first.height()  # setOpts clears the cached bounds

    legend = pg.LegendItem()
    sample = pg.PlotDataItem()
    legend.addItem(sample, "a label")
    [(item, label)] = legend.items  # gui/chart.py reads (sample, label) pairs and item.item
    assert item.item is sample and label.text == "a label"


def _specs(specs: Any) -> Any:
    """Draw specs as plain numbers and text, to compare two versions."""
    if specs is None:
        return None
    axis, ticks, texts = specs

    def line(spec: Any) -> Any:
        pen, p1, p2 = spec
        return (pen.color().rgba(), pen.widthF(), round(p1.x(), 6), round(p1.y(), 6), round(p2.x(), 6), round(p2.y(), 6))

    return (
        line(axis),
        [line(t) for t in ticks],
        [(tuple(round(v, 6) for v in r.getRect()), int(f), s) for r, f, s in texts],
    )


@pytest.mark.parametrize("height", [120, 300, 700])
@pytest.mark.parametrize("top", [1.05, 8.5, 24.0, 82.5, 105.0, 1_450.0, 12_000.0])
def test_the_fast_y_axis_draws_what_pyqtgraph_draws(qtbot: Any, top: float, height: int) -> None:
    """_Axis.generateDrawSpecs is a faster copy of pyqtgraph's for the chart's y axis: the
    same ticks, tick pens, texts and places, and the same text width asked of the layout."""
    plot = pg.PlotWidget(axisItems={"left": _Axis("left")})
    qtbot.addWidget(plot)
    plot.resize(400, height)
    plot.show()
    qtbot.waitExposed(plot)
    plot.setYRange(0, top, padding=0)
    plot.setLabel("left", "GB on the card")
    axis = plot.getAxis("left")
    for attempt in range(2):  # the second pass: text sizes come from the cache
        picture = QPicture()
        painter = QPainter(picture)
        ours = _specs(axis.generateDrawSpecs(painter))
        our_width = axis.textWidth
        theirs = _specs(pg.AxisItem.generateDrawSpecs(axis, painter))
        painter.end()
        assert ours is not None and ours[2], "no tick text drawn"
        assert ours == theirs, f"attempt {attempt}"
        assert axis.textWidth == our_width

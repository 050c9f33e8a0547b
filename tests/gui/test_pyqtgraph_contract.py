"""gui/chart/ (axis.py, items.py, legend.py) overrides and calls private pyqtgraph members. If
pyqtgraph renames or stops calling them, the chart would silently fall back to slow paths or
break: fail loudly here."""

from __future__ import annotations

import inspect
from typing import Any

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QPainter, QPicture

from gui.chart.axis import ChartAxis as _Axis
from gui.chart.items import Bars as _Bars

# The private members gui/chart/ relies on (pyqtgraph 0.13, graphicsItems/AxisItem.py,
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
    [(item, label)] = legend.items  # gui/chart/legend.py reads (sample, label) pairs and item.item
    assert item.item is sample and label.text == "a label"


def _specs(specs: Any) -> Any:
    """Draw specs as plain numbers and text, to compare two versions."""
    if specs is None:
        return None
    axis, ticks, texts = specs

    def line(spec: Any) -> Any:
        pen, p1, p2 = spec
        ends = (p1.x(), p1.y(), p2.x(), p2.y())
        return (pen.color().rgba(), pen.widthF(), *(round(v, 6) for v in ends))

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


def test_a_y_range_that_comes_back_reuses_its_picture(qtbot: Any) -> None:
    """The y axis keeps the pictures it drew by everything they were drawn from: a range that
    comes back is not drawn again, and a new pen (a theme change) or size is."""
    plot = pg.PlotWidget(axisItems={"left": _Axis("left")})
    qtbot.addWidget(plot)
    plot.resize(400, 500)
    plot.show()
    qtbot.waitExposed(plot)
    axis = plot.getAxis("left")
    drawn: list[int] = []
    original = _Axis.generateDrawSpecs

    def counting(self: _Axis, painter: Any) -> Any:
        drawn.append(1)
        return original(self, painter)

    def draw(top: float) -> Any:
        plot.setYRange(0, top, padding=0)
        axis.picture = None
        axis.render()
        return axis.picture

    first = draw(105.0)
    second = draw(8.5)
    width_small = axis.textWidth
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Axis, "generateDrawSpecs", counting)
        again = draw(105.0)
        assert drawn == [] and again is first  # kept, not drawn
        assert bytes(again.data()) == bytes(first.data())
        assert axis.textWidth >= width_small
        axis.setPen(pg.mkPen("#FF0000"))  # another theme: drawn afresh
        assert draw(105.0) is not first and drawn == [1]
        plot.resize(400, 300)  # another size: drawn afresh
        qtbot.wait(20)
        assert draw(105.0) is not first and len(drawn) == 2
    assert second is not first

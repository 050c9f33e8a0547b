"""The chart's own pyqtgraph items: bars that cache their bounds, the capacity and usable
lines, the headroom band, and every value label in one item.

pyqtgraph's InfiniteLine, LinearRegionItem and TextItem work their geometry out from the
view's pixel size whenever the scene asks (several times a paint), in Python; these items
are given their bounds once per y range (the widget sets them with the range), and a label
is a cached QStaticText. tests/gui/test_pyqtgraph_contract.py checks the pyqtgraph members
they rely on.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPen, QStaticText, QTransform


class Bars(pg.BarGraphItem):
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


# Value labels laid out once per font and text ("16.1 GB" comes back at most edits).
STATIC_TEXTS_KEPT = 512
_STATIC_TEXTS: dict[tuple[str, str], tuple[QStaticText, tuple[float, float]]] = {}


class Guide(pg.GraphicsObject):
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


class Level(Guide):
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


class Band(Guide):
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

    def brush(self) -> QBrush:
        return QBrush(self._brush)

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


class LabelLayer(Guide):
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

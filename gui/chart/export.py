"""The chart as a file: PNG or SVG, the plot the screen shows with a caption under it.

Both draw the very items on screen (so both pictures always agree), after the chart has
settled; the caption (:func:`gui.chart.geometry.caption_lines`) says what plan, card and
verdict the bars are for, so an exported chart stands on its own. Both are drawn in memory
and written by the one atomic writer (:mod:`core.files.fileio`): a full disk leaves the
previous file whole, and a pipe, a device or a read-only file is refused, never waited on.
Control characters in the caption (a model's name) are written as escapes: XML 1.0 has no
way to hold them, and one made the SVG unreadable.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QIODevice, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QImage, QPainter, QPicture
from PySide6.QtWidgets import QGraphicsItem

from core.errors import escape_controls
from core.files.fileio import save_target, write_file

if TYPE_CHECKING:
    from gui.chart.widget import MemoryChart

EXPORT_MARGIN = 8.0  # pixels around the caption of an exported chart
TITLE = "VRAM Planner memory chart"
XML_INVALID = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # XML 1.0 section 2.2, Char


def picture_dpi() -> float:
    """The resolution QPicture records at (pyqtgraph caches its axes as QPictures)."""
    return float(QPicture().logicalDpiY())


def _caption(chart: MemoryChart) -> list[str]:
    return [escape_controls(line) for line in chart.caption()]


def _buffer() -> QBuffer:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    return buffer


def export_png(chart: MemoryChart, path: str, scale: float = 2.0, force: bool = False) -> None:
    """The plot and its caption as a PNG, ``scale`` × the on-screen size (crisp in documents);
    the caption is also stored as the file's Description text."""
    save_target(path, force=force, kind="chart")  # refuse a target before drawing
    write_file(path, png_bytes(chart, scale), force=force)


def png_bytes(chart: MemoryChart, scale: float = 2.0) -> bytes:
    lines = _caption(chart)
    width, height = _export_size(chart, lines)
    image = QImage(max(1, round(width * scale)), max(1, round(height * scale)), QImage.Format.Format_ARGB32)
    # The device's resolution is the pictures' (see export_svg); ``scale`` enlarges everything.
    dots_per_metre = round(picture_dpi() / 0.0254)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    image.setText("Title", TITLE)
    image.setText("Description", "\n".join(lines))
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        _paint_export(chart, painter, lines, width, height)
    finally:
        painter.end()
    buffer = _buffer()
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]
        raise OSError("the PNG could not be encoded")
    return bytes(buffer.data().data())


def export_svg(chart: MemoryChart, path: str, force: bool = False) -> None:
    """The plot (bars, lines, legend, axes) and its caption as vector SVG."""
    save_target(path, force=force, kind="chart")
    write_file(path, svg_bytes(chart), force=force)


def svg_bytes(chart: MemoryChart) -> bytes:
    """Rendered straight through QSvgGenerator: pyqtgraph 0.14's SVGExporter cannot parse the
    closed paths ("... Z") that Qt 6.12's SVG generator writes."""
    from PySide6.QtCore import QSize
    from PySide6.QtSvg import QSvgGenerator

    lines = _caption(chart)
    width, height = _export_size(chart, lines)
    buffer = _buffer()
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    # The axes are cached QPictures, replayed scaled by (device dpi / picture dpi): at the
    # generator's default 72 dpi they came out at 0.75 of the bars' scale.
    generator.setResolution(round(picture_dpi()))
    generator.setSize(QSize(round(width), round(height)))
    generator.setViewBox(QRectF(0, 0, width, height))
    generator.setTitle(TITLE)
    generator.setDescription("\n".join(lines))
    painter = QPainter()
    if not painter.begin(generator):
        raise OSError("the SVG could not be drawn")
    try:
        _paint_export(chart, painter, lines, width, height)
    finally:
        painter.end()
    # QSvgGenerator writes text as it is: a control character in a model's name made the file
    # invalid XML (issue 28 item 23). XML 1.0 allows none but tab, LF and CR: each becomes U+FFFD.
    return XML_INVALID.sub("\ufffd".encode(), bytes(buffer.data().data()))


def _caption_font(chart: MemoryChart) -> QFont:
    return QFont(chart.font())


def caption_heights(font: QFont, lines: list[str], width: float) -> list[float]:
    """Each caption line's height when wrapped at word boundaries to ``width``: a long model
    name or verdict takes two lines rather than being cut at the chart's edge."""
    metrics = QFontMetricsF(font)
    flags = int(Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap)
    text_width = max(1.0, width - 2 * EXPORT_MARGIN)
    return [
        max(metrics.lineSpacing(), metrics.boundingRect(QRectF(0, 0, text_width, 1e6), flags, line).height())
        for line in lines
    ]


def _export_size(chart: MemoryChart, lines: list[str]) -> tuple[float, float]:
    source = chart.plot.getPlotItem().sceneBoundingRect()
    caption = sum(caption_heights(_caption_font(chart), lines, source.width()))
    return source.width(), source.height() + EXPORT_MARGIN * 2 + caption


def _paint_export(chart: MemoryChart, painter: QPainter, lines: list[str], width: float, height: float) -> None:
    chart.settle()
    plot = chart.plot
    source = plot.getPlotItem().sceneBoundingRect()
    background = plot.backgroundBrush().color()
    painter.fillRect(QRectF(0, 0, width, height), background)
    # pyqtgraph's legend ignores transformations (it keeps its size when the view zooms), so
    # a scaled export drew it at on-screen size; its parent, the view box, is never scaled.
    ignores = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
    chart.legend.setFlag(ignores, False)
    try:
        plot.scene().render(painter, QRectF(0, 0, source.width(), source.height()), source)
    finally:
        chart.legend.setFlag(ignores, True)
    font = _caption_font(chart)
    painter.setFont(font)
    painter.setPen(chart.palette().color(chart.foregroundRole()))
    y = source.height() + EXPORT_MARGIN
    flags = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextWordWrap)
    for line, line_height in zip(lines, caption_heights(font, lines, width), strict=True):
        painter.drawText(QRectF(EXPORT_MARGIN, y, width - 2 * EXPORT_MARGIN, line_height), flags, line)
        y += line_height

"""Colours shared by the app's plots: the palette's text and base, and the card's limits."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from gui.colours import OKABE_ITO

__all__ = ["OKABE_ITO", "style_plot"]


def style_plot(
    widget: QWidget, plot: Any, capacity_line: Any, usable_line: Any, band: Any
) -> tuple[QColor, QColor, QColor]:
    """Follow the widget's palette and draw the capacity (dashed), usable (dotted) lines and
    the headroom band between them; returns (background, foreground, band colour)."""
    palette = widget.palette()
    background = palette.color(palette.ColorRole.Base)
    foreground = palette.color(palette.ColorRole.Text)
    plot.setBackground(background)
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(foreground))
        axis.setTextPen(pg.mkPen(foreground))
    limit = QColor(OKABE_ITO["vermillion"])
    capacity_line.setPen(pg.mkPen(limit, width=2, style=Qt.PenStyle.DashLine))
    usable_line.setPen(pg.mkPen(limit, width=1, style=Qt.PenStyle.DotLine))
    band_colour = QColor(limit)
    band_colour.setAlpha(40)
    band.setBrush(pg.mkBrush(band_colour))
    return background, foreground, band_colour

"""Colours shared by the app's plots: the palette's text and base, and the card's limits."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from gui import colours
from gui.colours import OKABE_ITO

__all__ = ["OKABE_ITO", "band_alpha", "contrast", "style_plot"]

# The headroom band is the limit's colour, faint: alpha 40 of 255 on a light base (a pale
# peach). On the dark theme's base the same alpha gave a brown at 1.2 : 1, nearly invisible
# (docs/GUI.md, 2026-12-04); there the band takes the alpha that reaches 1.6 : 1 (about 100).
LIGHT_BAND_ALPHA = 40
DARK_BAND_CONTRAST = 1.6


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2.1 contrast ratio of two opaque colours (gui.colours.contrast)."""
    return colours.contrast((a.redF(), a.greenF(), a.blueF()), (b.redF(), b.greenF(), b.blueF()))


def _over(colour: QColor, background: QColor, alpha: int) -> QColor:
    """``colour`` at ``alpha`` painted over an opaque ``background``."""
    share = alpha / 255

    def mix(c: float, b: float) -> float:
        return c * share + b * (1 - share)

    return QColor.fromRgbF(
        mix(colour.redF(), background.redF()),
        mix(colour.greenF(), background.greenF()),
        mix(colour.blueF(), background.blueF()),
    )


def band_alpha(colour: QColor, background: QColor) -> int:
    """The band's alpha: the light theme's 40, or on a dark base the least that shows it at 1.6 : 1."""
    if background.lightness() >= 128:
        return LIGHT_BAND_ALPHA
    return next(
        (
            a
            for a in range(LIGHT_BAND_ALPHA, 256)
            if contrast(_over(colour, background, a), background) >= DARK_BAND_CONTRAST
        ),
        255,
    )


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
    band_colour.setAlpha(band_alpha(limit, background))
    band.setBrush(pg.mkBrush(band_colour))
    return background, foreground, band_colour

"""Light and dark palettes that follow the system's colour scheme (Qt 6.5+)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

from core.colours import CHANGED_ROW
from gui import colours
from gui.colours import ACCENT, OKABE_ITO, UNCERTAIN

TEXT_CONTRAST = 4.5  # WCAG 2.1 SC 1.4.3 (level AA): the least contrast of text at its usual size to its background
CHANGED_ROW_DARK_SHARE = 0.2  # borderline's yellow over a dark Base, a fifth: #494729 on dark_palette's #1f2023

_STYLES: list[QStyle] = []
_PLATFORM_PALETTE: list[QPalette] = []  # the palette the platform gave, before ours replaced it


def platform_palette() -> QPalette:
    """The platform's own palette, as it was before the first :func:`apply_theme`."""
    if not _PLATFORM_PALETTE:
        _PLATFORM_PALETTE.append(QPalette(QGuiApplication.palette()))
    return _PLATFORM_PALETTE[0]


def color_scheme(app: QApplication) -> Qt.ColorScheme:
    return app.styleHints().colorScheme()


def _mix(a: QColor, b: QColor, share_of_a: float) -> QColor:
    return QColor.fromRgbF(
        a.redF() * share_of_a + b.redF() * (1 - share_of_a),
        a.greenF() * share_of_a + b.greenF() * (1 - share_of_a),
        a.blueF() * share_of_a + b.blueF() * (1 - share_of_a),
    )


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2.1 contrast ratio of two opaque colours (gui.colours.contrast)."""
    return colours.contrast((a.redF(), a.greenF(), a.blueF()), (b.redF(), b.greenF(), b.blueF()))


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def changed_row(palette: QPalette) -> QColor:
    """The shade of a compared row whose value differs between the plans, in the palette's theme: on a light Base
    the report's pale yellow (core.colours.CHANGED_ROW, #fff3cd); on a dark one borderline's yellow a fifth over the
    Base (#494729 on dark_palette's #1f2023: 1.7:1 to the Base, its Text 7.6:1 on it). The pale yellow in the dark
    theme was a glaring block, its text forced to #222 to be read at all."""
    if not is_dark(palette):
        return QColor(CHANGED_ROW)
    return _mix(QColor(UNCERTAIN), palette.color(QPalette.ColorRole.Base), CHANGED_ROW_DARK_SHARE)


def legible(colour: QColor, backgrounds: Sequence[QColor], ink: QColor, ratio: float = TEXT_CONTRAST) -> QColor:
    """``colour`` as text on every one of ``backgrounds``: mixed towards ``ink`` (the palette's Text) in steps of a
    twentieth until it reaches ``ratio`` against each, so it keeps its hue as far as it can (the verdicts' green,
    orange, yellow and vermillion in the Compare table, on its Base and on a changed row's shade)."""
    for step in range(21):
        shade = _mix(ink, colour, step / 20)
        if all(contrast(shade, background) >= ratio for background in backgrounds):
            return shade
    return QColor(ink)


class ClearIndicators(QProxyStyle):
    """Fusion with check box and radio outlines that can be seen.

    Fusion draws an unchecked box's edge a shade darker than the window: 1.2:1 against a dark
    window and 1.7:1 against a light one, under the 3:1 that WCAG 2.1 (SC 1.4.11) asks of the
    parts of a control that show its state. The edge is drawn again halfway to the text colour.
    """

    def drawPrimitive(
        self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter, widget: QWidget | None = None
    ) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element is not QStyle.PrimitiveElement.PE_IndicatorCheckBox:
            return
        palette = option.palette
        edge = _mix(palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Window), 0.6)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(edge, 1.2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        rect = QRectF(option.rect).adjusted(0.6, 0.6, -0.6, -0.6)
        painter.drawRoundedRect(rect, 2, 2)
        painter.restore()


def dark_palette() -> QPalette:
    palette = QPalette()
    role = QPalette.ColorRole
    colours = {
        role.Window: "#2b2d30",
        role.WindowText: "#e6e6e6",
        role.Base: "#1f2023",
        role.AlternateBase: "#2b2d30",
        role.ToolTipBase: "#3a3d41",
        role.ToolTipText: "#e6e6e6",
        role.Text: "#e6e6e6",
        role.Button: "#35373b",
        role.ButtonText: "#e6e6e6",
        role.BrightText: "#ff6b6b",
        role.Link: OKABE_ITO["sky"],
        role.Highlight: ACCENT,
        role.HighlightedText: "#ffffff",
        role.PlaceholderText: "#8a8d91",
        role.Mid: "#4a4d52",
        role.Dark: "#18191b",
        role.Light: "#45484d",
    }
    for colour_role, value in colours.items():
        palette.setColor(colour_role, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for colour_role in (role.Text, role.WindowText, role.ButtonText):
        palette.setColor(disabled, colour_role, QColor("#7a7d82"))
    return palette


def system_is_dark(app: QApplication) -> bool:
    scheme = color_scheme(app)
    if scheme == Qt.ColorScheme.Unknown:
        # No scheme reported (older desktops, some X11 set-ups): judge the platform's palette
        # rather than assume light.
        return platform_palette().color(QPalette.ColorRole.Window).lightness() < 128
    return scheme == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, choice: str = "system") -> None:
    """``choice``: "system" follows the OS (and its later changes), or "light"/"dark"."""
    platform_palette()  # remember it before the first setStyle/setPalette replaces it
    if not isinstance(app.style(), ClearIndicators):
        # Fusion: the same look and the palette honoured on every OS.
        _STYLES.append(ClearIndicators("Fusion"))  # kept referenced: Qt does not own it here
        app.setStyle(_STYLES[-1])
    dark = choice == "dark" or (choice == "system" and system_is_dark(app))
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
    app.setProperty("vramplanTheme", choice)


def follow_system(app: QApplication) -> None:
    """Re-apply the theme when the OS switches between light and dark."""

    def changed(_scheme: object) -> None:
        choice = str(app.property("vramplanTheme") or "system")
        if choice == "system":
            apply_theme(app, choice)

    app.styleHints().colorSchemeChanged.connect(changed)


def fixed_font() -> QFont:
    """The system's fixed-width font, never smaller than the application's text: under a 1.5 × text scale
    (13.5 pt) the Arithmetic's sum stayed at the fixed font's 9 pt, the one small line in its panel."""
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    text = QGuiApplication.font().pointSizeF()
    if text > 0 and mono.pointSizeF() > 0 and mono.pointSizeF() < text:
        mono.setPointSizeF(text)
    return mono

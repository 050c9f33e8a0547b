"""Light and dark palettes that follow the system's colour scheme (Qt 6.5+)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


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
        role.Link: "#56B4E9",
        role.Highlight: "#0072B2",
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
    return app.styleHints().colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, choice: str = "system") -> None:
    """``choice``: "system" follows the OS (and its later changes), or "light"/"dark"."""
    app.setStyle("Fusion")  # the same look and the palette honoured on every OS
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

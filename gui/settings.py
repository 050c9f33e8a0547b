"""Typed application settings over QSettings: defaults, validation, bad values ignored.

Stored as an INI file (the same format on every OS) so tests can point QSettings.setPath
at a temporary folder; ``Settings(path)`` uses an explicit file instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from gui.format import UNITS, Unit

ORGANIZATION: Final = "VRAM Planner"
APPLICATION: Final = "vramplan"
MAX_RECENT: Final = 10
MODES: Final = ("training", "inference")
THEMES: Final = ("system", "light", "dark")


def data_folder() -> Path:
    """Per-user, per-machine application data (AppLocalDataLocation): autosave and logs.

    The one home of this folder (the autosave, :mod:`gui.crash`'s logs and the README read
    it from here). Linux ``~/.local/share/VRAM Planner/vramplan``, macOS
    ``~/Library/Application Support/VRAM Planner/vramplan``, Windows
    ``%LOCALAPPDATA%\\VRAM Planner\\vramplan``; the names come from the QApplication's
    organisation and application names (:data:`ORGANIZATION`, :data:`APPLICATION`).
    """
    location = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppLocalDataLocation)
    return Path(location) if location else Path.home() / ".vramplan"


class Settings:
    def __init__(self, path: str | None = None) -> None:
        if path:
            self.store = QSettings(path, QSettings.Format.IniFormat)
        else:
            self.store = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)

    def _text(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.store.value(key, default)
        return value if isinstance(value, str) and value in allowed else default

    # ---- display -------------------------------------------------------------------
    @property
    def unit(self) -> Unit:
        value = self._text("display/unit", "GB", UNITS)
        return "GiB" if value == "GiB" else "GB"

    @unit.setter
    def unit(self, value: Unit) -> None:
        self.store.setValue("display/unit", value)

    @property
    def chart_mode(self) -> str:
        return self._text("display/chart_mode", "training", MODES)

    @chart_mode.setter
    def chart_mode(self, value: str) -> None:
        self.store.setValue("display/chart_mode", value)

    @property
    def theme(self) -> str:
        return self._text("display/theme", "system", THEMES)

    @theme.setter
    def theme(self, value: str) -> None:
        self.store.setValue("display/theme", value)

    # ---- documents -----------------------------------------------------------------
    @property
    def recent_files(self) -> list[str]:
        value = self.store.value("files/recent", [])
        if isinstance(value, str):  # QSettings returns a lone string for a one-item list
            value = [value]
        if not isinstance(value, list):
            return []
        return [v for v in value if isinstance(v, str) and v][:MAX_RECENT]

    def add_recent(self, path: str) -> None:
        files = [path] + [p for p in self.recent_files if p != path]
        self.store.setValue("files/recent", files[:MAX_RECENT])

    def remove_recent(self, path: str) -> None:
        self.store.setValue("files/recent", [p for p in self.recent_files if p != path])

    def clear_recent(self) -> None:
        self.store.setValue("files/recent", [])

    @property
    def last_plan(self) -> str:
        value = self.store.value("session/last_plan", "")
        return value if isinstance(value, str) else ""

    @last_plan.setter
    def last_plan(self, text: str) -> None:
        self.store.setValue("session/last_plan", text)

    @property
    def last_path(self) -> str:
        value = self.store.value("session/last_path", "")
        return value if isinstance(value, str) else ""

    @last_path.setter
    def last_path(self, path: str) -> None:
        self.store.setValue("session/last_path", path)

    # ---- window --------------------------------------------------------------------
    def _bytes(self, key: str) -> QByteArray | None:
        value = self.store.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    @property
    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    @geometry.setter
    def geometry(self, value: QByteArray) -> None:
        self.store.setValue("window/geometry", value)

    @property
    def window_state(self) -> QByteArray | None:
        return self._bytes("window/state")

    @window_state.setter
    def window_state(self, value: QByteArray) -> None:
        self.store.setValue("window/state", value)

    def sync(self) -> None:
        self.store.sync()

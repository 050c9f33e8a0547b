"""Typed application settings over QSettings: defaults, validation, bad values ignored.

Stored as an INI file (the same format on every OS) so tests can point QSettings.setPath
at a temporary folder; ``Settings(path)`` uses an explicit file instead.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from gui.format import UNITS, Unit

ORGANIZATION: Final = "VRAM Planner"
APPLICATION: Final = "vramplan"
MAX_RECENT: Final = 10
MAX_CUSTOM_ENTRIES: Final = 100
MAX_ENTRY_NAME: Final = 80


@dataclass(frozen=True)
class CustomGpu:
    """A card the user described and named: what a plan needs to use it."""

    name: str
    memory_gb: float  # decimal GB, as its driver reports it
    tflops: float  # dense 16-bit peak


def _entry_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = " ".join(value.split())[:MAX_ENTRY_NAME]
    return name or None


def _positive(value: object, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0 < value <= high else None


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

    # ---- this machine -------------------------------------------------------------
    @property
    def local_gpu_preselected(self) -> bool:
        """True once this machine's card has been offered as the plan's (the first start that found one)."""
        return self.store.value("machine/gpu_preselected", False) in (True, "true")

    @local_gpu_preselected.setter
    def local_gpu_preselected(self, done: bool) -> None:
        self.store.setValue("machine/gpu_preselected", bool(done))

    # ---- the user's own catalogue entries ------------------------------------------
    def _json_list(self, key: str) -> list[Any]:
        value = self.store.value(key, "")
        try:
            data = json.loads(value) if isinstance(value, str) and value else []
        except ValueError:
            return []
        return data if isinstance(data, list) else []

    @property
    def custom_gpus(self) -> list[CustomGpu]:
        """Saved cards; an entry with a bad name or figure is skipped, never an error."""
        cards: dict[str, CustomGpu] = {}
        for item in self._json_list("catalogue/custom_gpus"):
            if not isinstance(item, dict):
                continue
            name = _entry_name(item.get("name"))
            memory = _positive(item.get("memory_gb"), 1e6)
            tflops = _positive(item.get("tflops"), 1e7)
            if name and memory and tflops:
                cards[name] = CustomGpu(name, memory, tflops)
        return list(cards.values())[:MAX_CUSTOM_ENTRIES]

    def add_custom_gpu(self, card: CustomGpu) -> None:
        """Save (or replace, by name) one of the user's cards."""
        cards = [c for c in self.custom_gpus if c.name != card.name] + [card]
        data = [{"name": c.name, "memory_gb": c.memory_gb, "tflops": c.tflops} for c in cards[-MAX_CUSTOM_ENTRIES:]]
        self.store.setValue("catalogue/custom_gpus", json.dumps(data))

    @property
    def custom_models(self) -> dict[str, dict[str, Any]]:
        """Saved models by name: each the ``ModelSpec.to_dict()`` a plan file embeds (validated on use)."""
        models: dict[str, dict[str, Any]] = {}
        for item in self._json_list("catalogue/custom_models"):
            if isinstance(item, dict) and isinstance(item.get("model"), dict):
                name = _entry_name(item.get("name"))
                if name:
                    models[name] = item["model"]
        return dict(list(models.items())[:MAX_CUSTOM_ENTRIES])

    def add_custom_model(self, name: str, model: dict[str, Any]) -> None:
        models = self.custom_models
        models.pop(name, None)
        models[name] = model
        data = [{"name": n, "model": m} for n, m in list(models.items())[-MAX_CUSTOM_ENTRIES:]]
        self.store.setValue("catalogue/custom_models", json.dumps(data))

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

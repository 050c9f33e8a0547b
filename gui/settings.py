"""Typed application settings over QSettings: defaults, validation, bad values ignored.

Stored as an INI file (the same format on every OS) so tests can point QSettings.setPath
at a temporary folder; ``Settings(path)`` uses an explicit file instead. QSettings writes
that file itself, through QSaveFile (a temporary file renamed over it).

A settings file damaged by hand, by another program or by a version of the app with other
rules never stops the app from starting: every reader here skips what it cannot read, and
:meth:`Settings.repair`, run once at start-up, drops those entries, keeps a copy of the file
as it was, and says what it dropped, so the window can tell the user once.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from core.errors import PlanError
from core.inputs import DEFAULTS
from core.model import model_from_dict
from gui.format import UNITS, Unit

LOG = logging.getLogger(__name__)
ORGANIZATION: Final = "VRAM Planner"
APPLICATION: Final = "vramplan"
MAX_RECENT: Final = 10
MAX_CUSTOM_ENTRIES: Final = 100
MAX_ENTRY_NAME: Final = 80
# A stored list of saved cards or models: 100 models of ~1 kB each, with room to spare; a
# longer value is not one this app wrote, and is not parsed.
MAX_STORED_JSON_CHARS: Final = 1_000_000


class EntryRefused(ValueError):
    """A name or an entry the user's catalogue cannot take (the message says why)."""


def entry_name(text: str) -> str:
    """The name a saved card or model is stored under: whitespace collapsed, at most
    :data:`MAX_ENTRY_NAME` characters, no control characters; :class:`EntryRefused` otherwise."""
    name = " ".join(text.split())
    if not name:
        raise EntryRefused("a name is needed")
    if len(name) > MAX_ENTRY_NAME:
        raise EntryRefused(f"the name has {len(name):,} characters; at most {MAX_ENTRY_NAME} are kept")
    if not name.isprintable():
        raise EntryRefused("the name has control characters; use letters, digits and punctuation")
    return name


@dataclass(frozen=True)
class CustomGpu:
    """A card the user described and named: what a plan needs to use it."""

    name: str
    memory_gb: float  # decimal GB, as its driver reports it
    tflops: float  # dense 16-bit peak
    # Decimal GB/s; cards saved before it was kept read as the plan's default (the A100 80GB
    # SXM's 2,039 GB/s, core/inputs.py), as a plan file without it does.
    bandwidth_gb_s: float = DEFAULTS["hardware.custom_bandwidth_gb_s"]


def _entry_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return entry_name(value)
    except EntryRefused:
        return None


def _positive(value: object, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0 < value <= high else None


MODES: Final = ("training", "inference")
THEMES: Final = ("system", "light", "dark")
_CHOICES: Final = {"display/unit": UNITS, "display/chart_mode": MODES, "display/theme": THEMES}


def _listed(value: object) -> list[Any]:
    """A QSettings list value: QSettings returns a lone string for a one-item list."""
    if isinstance(value, str):
        return [value]
    return value if isinstance(value, list) else []


def _card(item: object) -> CustomGpu | None:
    if not isinstance(item, dict):
        return None
    name = _entry_name(item.get("name"))
    memory = _positive(item.get("memory_gb"), 1e6)
    tflops = _positive(item.get("tflops"), 1e7)
    bandwidth = _positive(item.get("bandwidth_gb_s", DEFAULTS["hardware.custom_bandwidth_gb_s"]), 1e6)
    return CustomGpu(name, memory, tflops, bandwidth) if name and memory and tflops and bandwidth else None


def _readable_model(data: object) -> bool:
    if not isinstance(data, dict):
        return False
    try:
        model_from_dict(data)
    except (PlanError, TypeError, ValueError, RecursionError):
        return False
    return True


def _readable_plan(text: object) -> bool:
    from core.files import planfile  # only at start-up

    if not isinstance(text, str):
        return False
    try:
        planfile.loads(text, "last session")
    except Exception:  # anything a stored plan raises means it is dropped, never fatal
        return False
    return True


def _count(n: int, what: str, why: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'} {why}"


@dataclass(frozen=True)
class SettingsRepair:
    """What :meth:`Settings.repair` dropped, in words, and where the file as it was is kept."""

    dropped: tuple[str, ...]
    kept_aside: str | None

    def message(self) -> str:
        where = f"\n\nThe file as it was is kept as\n{self.kept_aside}" if self.kept_aside else ""
        return "Some of your settings could not be read and were left out:\n• " + "\n• ".join(self.dropped) + where


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
        return [v for v in _listed(self.store.value("files/recent", [])) if isinstance(v, str) and v][:MAX_RECENT]

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
    def _json_list(self, key: str) -> list[Any] | None:
        """The stored JSON list under ``key`` ([] when absent); None when it cannot be read
        (not text, too long, not JSON, nested past the parser's depth, not a list)."""
        value = self.store.value(key, "")
        if value in ("", None):
            return []
        if not isinstance(value, str) or len(value) > MAX_STORED_JSON_CHARS:
            return None
        try:
            data = json.loads(value)
        except (ValueError, RecursionError):  # a list nested thousands deep is a RecursionError
            return None
        return data if isinstance(data, list) else None

    def _custom_gpu_items(self) -> tuple[list[CustomGpu], int]:
        """The saved cards that read, and how many stored entries did not."""
        items = self._json_list("catalogue/custom_gpus")
        if items is None:
            return [], 1
        cards: dict[str, CustomGpu] = {}
        bad = 0
        for item in items:
            card = _card(item)
            if card is None:
                bad += 1
            else:
                cards[card.name] = card
        return list(cards.values())[:MAX_CUSTOM_ENTRIES], bad

    @property
    def custom_gpus(self) -> list[CustomGpu]:
        """Saved cards; an entry with a bad name or figure is skipped, never an error."""
        return self._custom_gpu_items()[0]

    def add_custom_gpu(self, card: CustomGpu) -> None:
        """Save (or replace, by name) one of the user's cards; :class:`EntryRefused` for a
        101st (the caller asks the user which to forget: nothing is dropped unasked)."""
        cards = [c for c in self.custom_gpus if c.name != card.name]
        if len(cards) >= MAX_CUSTOM_ENTRIES:
            raise EntryRefused(f"you have {len(cards)} saved cards, the most kept; forget one first")
        self._store_cards([*cards, card])

    def forget_custom_gpu(self, name: str) -> None:
        self._store_cards([c for c in self.custom_gpus if c.name != name])

    def _store_cards(self, cards: list[CustomGpu]) -> None:
        data = [
            {"name": c.name, "memory_gb": c.memory_gb, "tflops": c.tflops, "bandwidth_gb_s": c.bandwidth_gb_s}
            for c in cards
        ]
        self.store.setValue("catalogue/custom_gpus", json.dumps(data))

    def _custom_model_items(self) -> tuple[dict[str, dict[str, Any]], int]:
        items = self._json_list("catalogue/custom_models")
        if items is None:
            return {}, 1
        models: dict[str, dict[str, Any]] = {}
        bad = 0
        for item in items:
            name = _entry_name(item.get("name")) if isinstance(item, dict) else None
            if name is None or not _readable_model(item.get("model")):
                bad += 1
            else:
                models[name] = item["model"]
        return dict(list(models.items())[:MAX_CUSTOM_ENTRIES]), bad

    @property
    def custom_models(self) -> dict[str, dict[str, Any]]:
        """Saved models by name: each the ``ModelSpec.to_dict()`` a plan file embeds, checked
        to read back as a model; an entry that does not is skipped."""
        return self._custom_model_items()[0]

    def add_custom_model(self, name: str, model: dict[str, Any]) -> None:
        """Save (or replace, by name) one of the user's models; :class:`EntryRefused` for a 101st."""
        models = self.custom_models
        models.pop(name, None)
        if len(models) >= MAX_CUSTOM_ENTRIES:
            raise EntryRefused(f"you have {len(models)} saved models, the most kept; forget one first")
        models[name] = model
        self._store_models(models)

    def forget_custom_model(self, name: str) -> None:
        models = self.custom_models
        models.pop(name, None)
        self._store_models(models)

    def _store_models(self, models: dict[str, dict[str, Any]]) -> None:
        data = [{"name": n, "model": m} for n, m in models.items()]
        self.store.setValue("catalogue/custom_models", json.dumps(data))

    # ---- start-up: a damaged file is repaired, never fatal ------------------------------
    def repair(self) -> SettingsRepair:
        """Drop every stored entry that does not read back (saved cards and models, the last
        session's plan, recent files, display choices), after copying the file aside as it
        was; what was dropped, in words, for the window to say once. Never raises."""
        dropped: list[str] = []
        try:
            dropped = self._damaged()
        except Exception:  # a damaged store must never stop the app from starting
            LOG.exception("reading the settings failed")
            dropped = ["settings that could not be read at all"]
        if not dropped:
            return SettingsRepair((), None)
        kept = self._keep_aside()
        try:
            self._drop_damaged()
            self.store.sync()
        except Exception:  # nor may a store that cannot be rewritten
            LOG.exception("rewriting the settings failed")
        return SettingsRepair(tuple(dropped), kept)

    def _damaged(self) -> list[str]:
        dropped = []
        if self.store.status() != QSettings.Status.NoError:
            dropped.append("the settings file, which is not a settings file VRAM Planner can read")
        bad_cards = self._custom_gpu_items()[1]
        if bad_cards:
            dropped.append(_count(bad_cards, "saved card", "that did not read back"))
        bad_models = self._custom_model_items()[1]
        if bad_models:
            dropped.append(_count(bad_models, "saved model", "that did not read back"))
        if self.store.value("session/last_plan", "") and not _readable_plan(self.store.value("session/last_plan")):
            dropped.append("the last session's plan, which did not read back as a plan")
        recent = self.store.value("files/recent", [])
        if recent and not (isinstance(recent, (str, list)) and all(isinstance(p, str) for p in _listed(recent))):
            dropped.append("the list of recent files")
        for key, allowed in _CHOICES.items():
            value = self.store.value(key)
            if value is not None and value not in allowed:
                dropped.append(f"the {key.partition('/')[2].replace('_', ' ')} setting ({str(value)[:40]!r})")
        return dropped

    def _drop_damaged(self) -> None:
        cards, bad_cards = self._custom_gpu_items()
        if bad_cards:
            self._store_cards(cards)
        models, bad_models = self._custom_model_items()
        if bad_models:
            self._store_models(models)
        if self.store.value("session/last_plan", "") and not _readable_plan(self.store.value("session/last_plan")):
            self.store.remove("session/last_plan")
            self.store.remove("session/last_path")
        self.store.setValue("files/recent", self.recent_files)
        for key, allowed in _CHOICES.items():
            if self.store.value(key) is not None and self.store.value(key) not in allowed:
                self.store.remove(key)

    def _keep_aside(self) -> str | None:
        """A copy of the settings file as it was, beside it: ``vramplan.ini.damaged-<time>``."""
        source = Path(self.store.fileName())
        if not source.is_file():
            return None
        aside = source.with_name(f"{source.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            shutil.copy2(source, aside)
        except OSError:
            LOG.exception("keeping the damaged settings aside failed")
            return None
        return str(aside)

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

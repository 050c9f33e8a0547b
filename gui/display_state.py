"""How the estimate is shown, as explicit as the estimate itself.

The unit, the mode (a training step or serving), a loaded measurement and the selected
bucket live in one immutable :class:`Display`, held by :class:`DisplayState`, which emits
``changed(display)`` once per real change. Views read it from the signal; nothing else keeps
a copy that could drift (the window's menus, the chart, the panels all follow it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from core.verdict import Mode
from gui.format import Unit

if TYPE_CHECKING:
    from core.files.measurement import Measurement


@dataclass(frozen=True)
class Display:
    unit: Unit = "GB"
    mode: Mode = Mode.TRAINING
    measurement: Measurement | None = None
    selected_bucket: str = ""  # a bucket key ("weights", "inference"...), "" for none


class DisplayState(QObject):
    changed = Signal(object)  # Display

    def __init__(self, display: Display | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._display = display if display is not None else Display()

    @property
    def display(self) -> Display:
        return self._display

    @property
    def unit(self) -> Unit:
        return self._display.unit

    @property
    def mode(self) -> Mode:
        return self._display.mode

    @property
    def measurement(self) -> Measurement | None:
        return self._display.measurement

    @property
    def selected_bucket(self) -> str:
        return self._display.selected_bucket

    def update(self, **changes: Any) -> bool:
        """Change some fields; emits ``changed`` and returns True only when something changed.

        A new mode clears the selected bucket: a pick belongs to the mode it was made in.
        """
        new = replace(self._display, **changes)
        if new.mode != self._display.mode and "selected_bucket" not in changes:
            new = replace(new, selected_bucket="")
        if new == self._display:
            return False
        self._display = new
        self.changed.emit(new)
        return True

    def set_unit(self, unit: Unit) -> bool:
        return self.update(unit=unit)

    def set_mode(self, mode: Mode | str) -> bool:
        return self.update(mode=Mode.INFERENCE if mode == Mode.INFERENCE else Mode.TRAINING)

    def set_measurement(self, measurement: Measurement | None) -> bool:
        return self.update(measurement=measurement)

    def select_bucket(self, key: str) -> bool:
        return self.update(selected_bucket=key)

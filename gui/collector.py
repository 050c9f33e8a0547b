"""Python's cycle collector, run on the GUI thread only.

Automatic collection runs in whichever thread allocates when a generation's count passes its
threshold. A Qt object left in a reference cycle (a closed window, a dialog) is then destroyed
in that thread: QObject's destructor takes Qt's lock, and PySide then waits for the interpreter
lock, which the GUI thread holds while it waits for the same Qt lock — both stop for good. It
was seen with the diagnosis worker's result thread (``concurrent.futures``' manager thread)
collecting while it unpickled a report. So automatic collection is switched off for the
process, and a timer on the GUI thread collects the way the automatic collector would: the
same thresholds, the same generations, checked twice a second.
"""

from __future__ import annotations

import gc
from typing import Final

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS: Final = 500

_installed: GuiThreadCollector | None = None


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        gc.disable()
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.collect_if_due)
        self.timer.start()

    def collect_if_due(self) -> int:
        """Collect the oldest generation whose count is past its threshold; the generation, or -1."""
        counts = gc.get_count()
        due = -1
        for generation in range(3):
            if counts[generation] > self.thresholds[generation]:
                due = generation
            else:
                break
        if due >= 0:
            gc.collect(due)
        return due


def install() -> GuiThreadCollector:
    """Switch automatic collection off for this process and collect on the GUI thread (once)."""
    global _installed
    if _installed is None:
        # Owned here, not by the application: nothing that clears the application's children
        # can stop collection for the rest of the process.
        _installed = GuiThreadCollector()
    return _installed


def collecting_on_gui_thread() -> bool:
    return _installed is not None

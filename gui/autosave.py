"""Autosave and crash recovery: the current plan is never more than a second from disk.

A moment after each change (a coalesced single-shot timer) the plan is written, atomically
through :func:`core.planfile.save`, to ``autosave.vramplan.json`` in the application data
folder (:func:`gui.crash.data_folder`). A normal quit removes the file: its presence at
start-up is the mark of a session that ended unexpectedly, and :meth:`Autosave.recover`
hands its plan back. A damaged autosave is logged and ignored.

One running instance owns the autosave (a ``QLockFile`` beside it; a crashed owner's lock
is stale and taken over), so a second window neither overwrites nor offers the first's.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Final

from PySide6.QtCore import QLockFile, QObject, QTimer

from core import planfile
from core.errors import PlanError, PlanFileError
from core.estimate import Estimate
from core.plan import Plan
from gui import dialogs
from gui.controller import PlanController

if TYPE_CHECKING:
    from gui.main_window import MainWindow

LOG = logging.getLogger(__name__)
FILE_NAME: Final = "autosave.vramplan.json"
DELAY_MS: Final = 1000


class Autosave(QObject):
    def __init__(
        self, controller: PlanController, path: Path, delay_ms: int = DELAY_MS, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.controller = controller
        self.path = path
        self.active = False
        self._lock = QLockFile(str(path.with_name(path.name + ".lock")))
        self._lock.setStaleLockTime(0)  # held for a whole session: stale only when its process is gone
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.save_now)

    def start(self) -> bool:
        """Own the autosave and save each change from now on; False when another instance owns it."""
        if self.active:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            LOG.warning("no autosave: cannot create %s: %s", self.path.parent, error)
            return False
        if not self._lock.tryLock(0):
            LOG.info("another VRAM Planner owns %s; this one does not autosave", self.path)
            return False
        self.active = True
        self.controller.estimateChanged.connect(self._changed)
        return True

    def recover(self) -> Plan | None:
        """The plan a session that ended unexpectedly left behind; None when there is none
        (or it is another running instance's, or it cannot be read)."""
        if not self.active or not self.path.exists():
            return None
        try:
            return planfile.load(self.path)
        except (PlanFileError, PlanError) as error:
            LOG.warning("ignoring a damaged autosave: %s", error)
        except Exception:  # a bug in reading must not stop the app from starting
            LOG.exception("ignoring an autosave that could not be read: %s", self.path)
        return None

    def discard(self) -> None:
        """Nothing to restore next time (a normal quit, or a declined recovery)."""
        self._timer.stop()
        if not self.active:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            LOG.warning("cannot remove the autosave %s: %s", self.path, error)

    def finish(self) -> None:
        """A normal quit: remove the autosave and give up ownership."""
        self.discard()
        if self.active:
            self.controller.estimateChanged.disconnect(self._changed)
            self._lock.unlock()
            self.active = False

    @property
    def pending(self) -> bool:
        """A change not yet written."""
        return self._timer.isActive()

    def _changed(self, _estimate: Estimate) -> None:
        self._timer.start()  # restarted by every change: a burst of keystrokes is one write

    def save_now(self) -> bool:
        self._timer.stop()
        if not self.active:
            return False
        try:
            planfile.save(self.controller.plan, self.path)
        except (PlanFileError, OSError) as error:
            LOG.warning("autosave failed: %s", error)
            return False
        return True


def offer_recovery(window: MainWindow, autosave: Autosave) -> bool:
    """At start-up: offer the plan an unexpectedly ended session left; True when it was taken."""
    plan = autosave.recover()
    if plan is None or plan == window.controller.plan:
        return False  # nothing to offer, or the session already shows it
    if dialogs.ask_restore(window):
        return window.open_recovered(plan)
    autosave.discard()  # declined: not offered again
    return False

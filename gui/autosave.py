"""Autosave and crash recovery: the current plan is never more than a second from disk.

A moment after each change (a coalesced single-shot timer) the plan is written, atomically
through :func:`core.files.planfile.save`, to ``autosave.vramplan.json`` in the application data
folder (:func:`gui.settings.data_folder`). A normal quit removes the file: its presence at
start-up is the mark of a session that ended unexpectedly, and :meth:`Autosave.recover`
hands its plan back. A damaged autosave is logged and ignored.

Every running instance autosaves, each to its own slot: ``autosave.vramplan.json`` for the
first, ``autosave-2.vramplan.json`` for a second that runs beside it, and so on, each owned
through a ``QLockFile`` beside it (a crashed owner's lock is stale and taken over). So a
second window neither overwrites nor offers the first's plan, and its own edits survive a
crash too: at start-up an instance offers its slot's file or else the first one a crashed
instance left in another slot. When the folder cannot be written or a save fails (a full
disk), :attr:`Autosave.problem` says so once, and :func:`report_problems` shows it.
Temporary files of saves interrupted in this folder are removed at start.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Final

from PySide6.QtCore import QLockFile, QObject, QTimer, Signal

from core.errors import PlanError, PlanFileError
from core.estimate import Estimate
from core.files import planfile
from core.plan import Plan
from gui import dialogs
from gui.controller import PlanController

if TYPE_CHECKING:
    from gui.main_window import MainWindow

LOG = logging.getLogger(__name__)
FILE_NAME: Final = "autosave.vramplan.json"
DELAY_MS: Final = 1000
MAX_INSTANCES: Final = 16  # autosave slots: instances running at once that each autosave


def slot_path(base: Path, slot: int) -> Path:
    """The autosave file of ``slot``: ``base`` itself for 1, ``autosave-2.vramplan.json``..."""
    if slot == 1:
        return base
    head, dot, rest = base.name.partition(".")
    return base.with_name(f"{head}-{slot}{dot}{rest}")


def _lock_for(path: Path) -> QLockFile:
    lock = QLockFile(str(path.with_name(path.name + ".lock")))
    lock.setStaleLockTime(0)  # held for a whole session: stale only when its process is gone
    return lock


class Autosave(QObject):
    problem = Signal(str)  # why autosave is off or failing; emitted once per Autosave

    def __init__(
        self, controller: PlanController, path: Path, delay_ms: int = DELAY_MS, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.controller = controller
        self.base = path
        self.path = path  # the slot's own file, once started
        self.active = False
        self._told = False
        self._lock = _lock_for(path)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.save_now)

    def start(self) -> bool:
        """Take the first free autosave slot and save each change from now on; False (and
        :attr:`problem` once) when the folder cannot be written or every slot is taken."""
        if self.active:
            return True
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            LOG.warning("no autosave: cannot create %s: %s", folder, error)
            self._tell(f"the folder {folder} cannot be created ({error.strerror or error})")
            return False
        planfile.remove_stale_temporaries(folder)
        for slot in range(1, MAX_INSTANCES + 1):
            path = slot_path(self.base, slot)
            lock = _lock_for(path)
            if lock.tryLock(0):
                self._lock, self.path = lock, path
                break
            if lock.error() != QLockFile.LockError.LockFailedError:  # not another instance: no access
                LOG.warning("no autosave: cannot write the lock file in %s", folder)
                self._tell(f"the folder {folder} cannot be written")
                return False
        else:
            LOG.info("%d instances already autosave in %s", MAX_INSTANCES, folder)
            self._tell(f"{MAX_INSTANCES} other VRAM Planner windows already autosave")
            return False
        if self.path != self.base:
            LOG.info("another VRAM Planner autosaves to %s; this one autosaves to %s", self.base, self.path)
        self.active = True
        self.controller.estimateChanged.connect(self._changed)
        return True

    def _tell(self, reason: str) -> None:
        if not self._told:
            self._told = True
            self.problem.emit(f"Autosave is off: {reason}. Save the plan yourself to keep it.")

    def _adopt_orphan(self) -> None:
        """Move the autosave a crashed instance left in another slot into this one's."""
        for slot in range(1, MAX_INSTANCES + 1):
            path = slot_path(self.base, slot)
            if path == self.path or not path.exists():
                continue
            lock = _lock_for(path)
            if not lock.tryLock(0):
                continue  # a running instance's own
            try:
                if path.exists():
                    path.replace(self.path)
                    return
            except OSError as error:
                LOG.warning("cannot take over the autosave %s: %s", path, error)
            finally:
                lock.unlock()

    def recover(self) -> Plan | None:
        """The plan a session that ended unexpectedly left behind (in this slot, or else in
        a crashed instance's); None when there is none or it cannot be read."""
        if not self.active:
            return None
        if not self.path.exists():
            self._adopt_orphan()
        if not self.path.exists():
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
            planfile.save(self.controller.plan, self.path, force=True)  # the app's own file, whatever is in it
        except (PlanFileError, OSError) as error:
            LOG.warning("autosave failed: %s", error)
            self._tell(f"saving to {self.path} failed ({error.strerror if isinstance(error, OSError) else error})")
            return False
        return True


def report_problems(window: MainWindow, autosave: Autosave) -> None:
    """Show the window's autosave problem on screen (once: :attr:`Autosave.problem`)."""
    autosave.problem.connect(lambda text: dialogs.error(window, "Autosave", text))


def offer_recovery(window: MainWindow, autosave: Autosave) -> bool:
    """At start-up: offer the plan an unexpectedly ended session left; True when it was taken."""
    plan = autosave.recover()
    if plan is None or plan == window.controller.plan:
        return False  # nothing to offer, or the session already shows it
    if dialogs.ask_restore(window):
        return window.open_recovered(plan)
    autosave.discard()  # declined: not offered again
    return False

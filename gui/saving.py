"""Every file the window writes goes through :func:`write_confirmed`: the one atomic writer
(:mod:`core.files.fileio`) refuses to replace a file VRAM Planner did not write, and here
the user is asked once, through :func:`gui.dialogs.confirm_replace`, before it is."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from core.errors import PlanError, PlanFileError
from core.files.fileio import NotOurFileError
from gui import dialogs


def write_confirmed(parent: QWidget | None, failure_title: str, path: str, write: Callable[[bool], object]) -> bool:
    """``write(force)`` once without force; a file that is not ours is replaced only when the
    user confirms. Any other refusal or failure is one error box titled ``failure_title``.
    True when the file was written."""
    try:
        write(False)
        return True
    except NotOurFileError as refused:
        if not dialogs.confirm_replace(parent, path, refused.reason):
            return False
    except (PlanFileError, PlanError, OSError) as error:
        dialogs.error(parent, failure_title, str(error))
        return False
    try:
        write(True)
    except (PlanFileError, PlanError, OSError) as error:
        dialogs.error(parent, failure_title, str(error))
        return False
    return True

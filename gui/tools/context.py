"""What every tool works with, handed to it by the window: never the window itself."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QWidget

from gui.controller import PlanController
from gui.display_state import DisplayState
from gui.document import Document


@dataclass(frozen=True)
class ToolContext:
    """The parent for a tool's dialogs and docks, the plan's controller (its plan, edits and
    undo stack), the document (its file, folder and status messages) and how the estimate is
    shown (the unit, the mode)."""

    parent: QWidget
    controller: PlanController
    document: Document
    display: DisplayState

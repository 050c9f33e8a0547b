"""Menu entries for the file tools: training configs in, reports out, comparisons, cards that fit.

:func:`install` is the one hook the main window calls; the tools live in their own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMenu

from gui import open_config

if TYPE_CHECKING:
    from gui.main_window import MainWindow


class PlanTools(QObject):
    """Holds the tools' actions (and, once opened, their windows) for one main window."""

    def __init__(self, window: MainWindow, file_menu: QMenu, view_menu: QMenu) -> None:
        super().__init__(window)
        self.window = window
        self.open_config_action = window._action(
            "Open &training config…",
            lambda: open_config.open_training_config(window),
            "Ctrl+Shift+O",
            "Read a PEFT, transformers/TRL, axolotl, LLaMA-Factory or torchtune config into the plan",
        )
        file_menu.insertAction(window.save_action, self.open_config_action)


def install(window: MainWindow, file_menu: QMenu, view_menu: QMenu) -> PlanTools:
    return PlanTools(window, file_menu, view_menu)

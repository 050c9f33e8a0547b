"""Menu entries for the file tools: training configs in, reports out, comparisons, cards that fit,
the fewest GPUs that fit.

:func:`install` is the one hook the main window calls; the tools live in their own modules,
imported the first time they are used (YAML parsing, reports and PDF stay out of start-up),
and their panels are built the first time they are asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDockWidget, QMenu, QWidget

if TYPE_CHECKING:
    from gui.compare import ComparePanel
    from gui.fewest import FewestGpusPanel
    from gui.fitcards import FitCardsPanel
    from gui.main_window import MainWindow


class PlanTools(QObject):
    """Holds the tools' actions and, once opened, their panels, for one main window."""

    def __init__(self, window: MainWindow, file_menu: QMenu, view_menu: QMenu) -> None:
        super().__init__(window)
        self.window = window
        self.fit_panel: FitCardsPanel | None = None
        self.fewest_panel: FewestGpusPanel | None = None
        self.compare_panel: ComparePanel | None = None
        self.docks: dict[str, QDockWidget] = {}
        self.open_config_action = window._action(
            "Open &training config…",
            self.open_training_config,
            "Ctrl+Shift+O",
            "Read a PEFT, transformers/TRL, axolotl, LLaMA-Factory or torchtune config into the plan",
        )
        file_menu.insertAction(window.save_action, self.open_config_action)
        self.export_report_action = window._action(
            "Export &report…",
            self.export_report,
            "Ctrl+Shift+R",
            "The plan's inputs, chart, arithmetic, verdict and diagnosis as HTML, PDF, Markdown or CSV",
        )
        self.copy_markdown_action = window._action(
            "Copy report as &Markdown",
            self.copy_report_markdown,
            tip="The plan's report as Markdown on the clipboard",
        )
        file_menu.insertActions(window.quit_action, [self.export_report_action, self.copy_markdown_action])
        file_menu.insertSeparator(window.quit_action)
        self.fit_action = window._action(
            "Which cards &fit", self.show_fit, "Ctrl+Shift+F", "Every catalogue GPU × 1-8 for this plan, by cost"
        )
        self.compare_action = window._action(
            "&Compare plans", self.show_compare, "Ctrl+Shift+C", "Pin plans or open plan files; up to four side by side"
        )
        view_menu.addSeparator()
        self.fewest_action = window._action(
            "Fewest &GPUs that fit",
            self.show_fewest,
            "Ctrl+Shift+G",
            "The fewest of this card on which some split fits, with the hours and the arithmetic",
        )
        view_menu.addActions([self.compare_action, self.fit_action, self.fewest_action])
        window.display.changed.connect(self._unit_changed)

    def open_training_config(self) -> bool:
        from gui import open_config

        return open_config.open_training_config(self.window)

    def export_report(self) -> bool:
        from gui import report_export

        return report_export.export_report(self.window)

    def copy_report_markdown(self) -> str:
        from gui import report_export

        return report_export.copy_report_markdown(self.window)

    def _dock(self, key: str, title: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self.window)
        dock.setObjectName(f"{key}Dock")
        dock.setWidget(widget)
        self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.window.tabifyDockWidget(self.window.details_dock, dock)
        self.docks[key] = dock
        return dock

    def show_fit(self) -> FitCardsPanel:
        if self.fit_panel is None:
            from gui.fitcards import FitCardsPanel

            self.fit_panel = FitCardsPanel(self.window.controller)
            self.fit_panel.set_unit(self.window.unit)
            self._dock("fitCards", "Which cards fit", self.fit_panel)
        dock = self.docks["fitCards"]
        dock.show()
        dock.raise_()
        self.fit_panel.refresh()
        return self.fit_panel

    def show_fewest(self) -> FewestGpusPanel:
        if self.fewest_panel is None:
            from gui.fewest import FewestGpusPanel

            self.fewest_panel = FewestGpusPanel(self.window.controller)
            self._dock("fewestGpus", "Fewest GPUs", self.fewest_panel)
        dock = self.docks["fewestGpus"]
        dock.show()
        dock.raise_()
        self.fewest_panel.refresh()
        return self.fewest_panel

    def show_compare(self) -> ComparePanel:
        if self.compare_panel is None:
            from gui.compare import ComparePanel

            self.compare_panel = ComparePanel(self.window.controller, self.window)
            self.compare_panel.set_unit(self.window.unit)
            self._dock("compare", "Compare plans", self.compare_panel)
        dock = self.docks["compare"]
        dock.show()
        dock.raise_()
        return self.compare_panel

    def _unit_changed(self, _display: object = None) -> None:
        for panel in (self.fit_panel, self.compare_panel):
            if panel is not None:
                panel.set_unit(self.window.unit)


def install(window: MainWindow, file_menu: QMenu, view_menu: QMenu) -> PlanTools:
    return PlanTools(window, file_menu, view_menu)

"""The tools' menu entries: training configs and launch commands in, launch configs and reports out, comparisons,
the cards that fit, the fewest GPUs that fit.

The window makes one :class:`PlanTools` and puts its actions in its menus. The tools live in
their own modules, imported the first time they are used (YAML parsing, reports and PDF stay
out of start-up), and their panels are built, docked beside the Details, the first time they
are asked for. Every tool receives the :class:`~gui.tools.context.ToolContext`, never the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow, QWidget

from gui.actions import make_action
from gui.tools.context import ToolContext

if TYPE_CHECKING:
    from gui.tools.compare import ComparePanel
    from gui.tools.fewest import FewestGpusPanel
    from gui.tools.fitcards import FitCardsPanel
    from gui.tools.launch_export import LaunchExportDialog
    from gui.tools.report_export import ReportExport


class PlanTools(QObject):
    """The tools' actions and, once opened, their panels, docked in ``docks`` beside ``beside``."""

    def __init__(self, context: ToolContext, docks: QMainWindow, beside: QDockWidget) -> None:
        super().__init__(context.parent)
        self.context = context
        self._docks_window = docks
        self._beside = beside
        self.fit_panel: FitCardsPanel | None = None
        self.fewest_panel: FewestGpusPanel | None = None
        self.compare_panel: ComparePanel | None = None
        self.launch_dialog: LaunchExportDialog | None = None
        self.docks: dict[str, QDockWidget] = {}
        parent = context.parent
        self.open_config_action = make_action(
            parent,
            "Open &training config…",
            self.open_training_config,
            "Ctrl+Shift+O",
            "Read a PEFT, transformers/TRL, axolotl, LLaMA-Factory or torchtune config into the plan",
        )
        self.paste_command_action = make_action(
            parent,
            "Paste la&unch command…",
            self.paste_launch_command,
            "Ctrl+Shift+V",
            "Read a vllm serve, SGLang launch_server, llama-server or ollama command (or a vLLM --config YAML) into "
            "the serving plan; unused flags are listed",
        )
        self.export_launch_action = make_action(
            parent,
            "Export &launch config…",
            self.export_launch,
            "Ctrl+Shift+L",
            "The plan as the config or command of the tool that runs it: TRL, accelerate, DeepSpeed, axolotl, "
            "LLaMA-Factory, torchtune, torchtitan, torchrun, vllm, llama-server",
        )
        self.export_report_action = make_action(
            parent,
            "Export &report…",
            self.export_report,
            "Ctrl+Shift+R",
            "The plan's inputs, chart, arithmetic, verdict and diagnosis as HTML, PDF, Markdown or CSV",
        )
        self.copy_markdown_action = make_action(
            parent,
            "Copy report as &Markdown",
            self.copy_report_markdown,
            tip="The plan's report as Markdown on the clipboard",
        )
        self.fit_action = make_action(
            parent,
            "Which cards &fit",
            self.show_fit,
            "Ctrl+Shift+F",
            "Every catalogue GPU × 1-8 for this plan, by cost",
        )
        self.compare_action = make_action(
            parent,
            "&Compare plans",
            self.show_compare,
            "Ctrl+Shift+C",
            "Pin plans or open plan files; up to four side by side",
        )
        self.fewest_action = make_action(
            parent,
            "Fewest &GPUs that fit",
            self.show_fewest,
            "Ctrl+Shift+G",
            "The fewest of this card on which some split fits, with the hours and the arithmetic",
        )

    def open_training_config(self) -> bool:
        from gui.tools import open_config

        return open_config.open_training_config(self.context)

    def paste_launch_command(self) -> bool:
        from gui.tools import paste_command

        return paste_command.paste_launch_command(self.context)

    def export_launch(self) -> LaunchExportDialog:
        from gui.tools.launch_export import show_launch_export

        self.launch_dialog = show_launch_export(self.context, self.launch_dialog)
        return self.launch_dialog

    def export_report(self) -> ReportExport | None:
        from gui.tools import report_export

        return report_export.export_report(self.context)

    def copy_report_markdown(self) -> str:
        from gui.tools import report_export

        return report_export.copy_report_markdown(self.context)

    def _dock(self, key: str, title: str, widget: QWidget) -> QDockWidget:
        window = self._docks_window
        dock = QDockWidget(title, window)
        dock.setObjectName(f"{key}Dock")
        dock.setWidget(widget)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        window.tabifyDockWidget(self._beside, dock)
        self.docks[key] = dock
        return dock

    def _raise(self, key: str) -> None:
        dock = self.docks[key]
        dock.show()
        dock.raise_()

    def show_fit(self) -> FitCardsPanel:
        if self.fit_panel is None:
            from gui.tools.fitcards import FitCardsPanel

            self.fit_panel = FitCardsPanel(self.context)
            self._dock("fitCards", "Which cards fit", self.fit_panel)
        self._raise("fitCards")
        self.fit_panel.refresh()
        return self.fit_panel

    def show_fewest(self) -> FewestGpusPanel:
        if self.fewest_panel is None:
            from gui.tools.fewest import FewestGpusPanel

            self.fewest_panel = FewestGpusPanel(self.context)
            self._dock("fewestGpus", "Fewest GPUs", self.fewest_panel)
        self._raise("fewestGpus")
        self.fewest_panel.refresh()
        return self.fewest_panel

    def show_compare(self) -> ComparePanel:
        if self.compare_panel is None:
            from gui.tools.compare import ComparePanel

            self.compare_panel = ComparePanel(self.context)
            self._dock("compare", "Compare plans", self.compare_panel)
        self._raise("compare")
        return self.compare_panel

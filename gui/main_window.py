"""The main window: forms on the left, verdict and chart in the centre, panels on the right."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEvent, QSignalBlocker, Qt
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core import planfile
from core.errors import PlanError, PlanFileError
from core.estimate import Estimate
from core.importer import ImportedModel
from core.measurement import Measurement, load_measurement
from core.plan import Accounting, Plan
from core.presets import LESSON_EXAMPLES, default_plan
from gui import dialogs, plaintext, plan_tools
from gui.chart import MemoryChart
from gui.controller import PlanController
from gui.format import Unit
from gui.forms.accounting import AccountingForm
from gui.forms.base import PlanForm
from gui.forms.hardware import HardwareForm
from gui.forms.method import MethodForm
from gui.forms.model import ModelForm, with_model
from gui.forms.serving import ServingForm
from gui.forms.workload import WorkloadForm
from gui.model_import import ModelImporter
from gui.panels.arithmetic import ArithmeticPanel
from gui.panels.compute import ComputePanel
from gui.panels.diagnosis import DiagnosisPanel
from gui.panels.inference import InferencePanel
from gui.panels.verdict import VerdictPanel
from gui.settings import Settings
from gui.theme import apply_theme

APP_NAME = "VRAM Planner"


class MainWindow(QMainWindow):
    def __init__(
        self,
        controller: PlanController | None = None,
        settings: Settings | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings if settings is not None else Settings()
        self.controller = controller if controller is not None else PlanController(default_plan(), self)
        self.path: str | None = None
        self.measurement: Measurement | None = None
        self.unit: Unit = self.settings.unit
        self.setObjectName("mainWindow")
        self.setDockNestingEnabled(True)

        self._build_forms()
        self._build_centre()
        self._build_panels()
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status()

        self.controller.estimateChanged.connect(self._on_estimate)
        self.controller.editRejected.connect(self._on_rejected)
        self.controller.undo_stack.cleanChanged.connect(self._clean_changed)
        self.chart.bucketClicked.connect(self._bucket_clicked)
        self.arithmetic.bucketSelected.connect(self.chart.set_selected)
        self.resizeDocks([self.plan_dock, self.details_dock], [360, 380], Qt.Orientation.Horizontal)
        self.set_chart_mode(self.settings.chart_mode)
        self.set_unit(self.unit)
        self.controller.refresh()
        self._update_title()

    # ---- layout --------------------------------------------------------------------
    def _build_forms(self) -> None:
        c = self.controller
        self.model_form = ModelForm(c)
        self.model_form.importRequested.connect(self.import_model)
        self.model_importer = ModelImporter(self)
        self.model_importer.imported.connect(self._use_imported)
        self.model_importer.failed.connect(lambda message: dialogs.error(self, "Cannot read the model", message))
        self.accounting_form = AccountingForm(c)
        self.method_form = MethodForm(c)
        self.workload_form = WorkloadForm(c)
        self.hardware_form = HardwareForm(c)
        self.serving_form = ServingForm(c)
        self.forms: list[PlanForm] = [
            self.model_form,
            self.method_form,
            self.workload_form,
            self.hardware_form,
            self.serving_form,
            self.accounting_form,
        ]
        holder = QWidget()
        holder.setObjectName("planForms")
        column = QVBoxLayout(holder)
        column.setContentsMargins(8, 8, 8, 8)
        column.setSpacing(10)
        for form in self.forms:
            column.addWidget(form)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(holder)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.plan_dock = QDockWidget("Plan", self)
        self.plan_dock.setObjectName("planDock")
        self.plan_dock.setWidget(scroll)
        self.plan_dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        scroll.setMinimumWidth(320)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.plan_dock)

    def _build_centre(self) -> None:
        centre = QWidget()
        layout = QVBoxLayout(centre)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(8)
        self.verdict = VerdictPanel()
        layout.addWidget(self.verdict)
        self.chart = MemoryChart()
        layout.addWidget(self.chart, 1)
        self.setCentralWidget(centre)

    def _build_panels(self) -> None:
        self.tabs = QTabWidget()
        self.tabs.setObjectName("panelTabs")
        self.tabs.setDocumentMode(True)
        self.arithmetic = ArithmeticPanel()
        self.compute_panel = ComputePanel()
        self.inference_panel = InferencePanel()
        self.add_panel(self.arithmetic, "Arithmetic")
        self.add_panel(self.compute_panel, "Compute && time")
        self.add_panel(self.inference_panel, "Serving")
        self.diagnosis = DiagnosisPanel(self.controller)
        self.add_panel(self.diagnosis, "Diagnosis")
        self.details_dock = QDockWidget("Details", self)
        self.details_dock.setObjectName("detailsDock")
        self.details_dock.setWidget(self.tabs)
        self.details_dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        self.details_dock.setMinimumWidth(340)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.details_dock)

    def add_panel(self, widget: QWidget, title: str) -> int:
        """Add a tab to the panels area; a tab of the same title (a placeholder) is replaced.

        A panel that wants estimates connects itself to ``window.controller.estimateChanged``.
        """
        plain = title.replace("&&", "&")
        for index in range(self.tabs.count()):
            if self.tabs.tabText(index).replace("&&", "&") == plain:
                old = self.tabs.widget(index)
                self.tabs.removeTab(index)
                old.deleteLater()
                return self.tabs.insertTab(index, widget, title)
        return self.tabs.addTab(widget, title)

    # ---- actions -------------------------------------------------------------------
    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence.StandardKey | str | None = None,
        tip: str = "",
    ) -> QAction:
        action = QAction(text, self)
        action.triggered.connect(lambda _checked=False: slot())
        if isinstance(shortcut, QKeySequence.StandardKey):
            action.setShortcuts(shortcut)
        elif shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)
        return action

    def _build_actions(self) -> None:
        key = QKeySequence.StandardKey
        self.new_action = self._action("&New", self.new_plan, key.New, "Start again from the default plan")
        self.open_action = self._action("&Open…", self.open_plan, key.Open, "Open a plan file")
        self.save_action = self._action("&Save", self.save_plan, key.Save, "Save the plan")
        self.save_as_action = self._action("Save &As…", self.save_plan_as, key.SaveAs, "Save the plan to a new file")
        self.measure_action = self._action(
            "Load &measurement…",
            self.load_measurement,
            "Ctrl+M",
            "Draw a measured peak (tools/measure) beside the estimate",
        )
        self.clear_measure_action = self._action("Clear measurement", lambda: self.set_measurement(None))
        self.export_png_action = self._action("Export chart as &PNG…", lambda: self.export_chart("png"), "Ctrl+E")
        self.export_svg_action = self._action("Export chart as S&VG…", lambda: self.export_chart("svg"), "Ctrl+Shift+E")
        self.quit_action = self._action("&Quit", self.close, key.Quit)
        self.undo_action = self.controller.undo_stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcuts(key.Undo)
        self.redo_action = self.controller.undo_stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcuts(key.Redo)
        # The toolbar buttons say just "Undo"/"Redo"; the menu items and the buttons' tooltips
        # (an action's text by default) name the change. A button whose text followed every
        # edit re-laid out the toolbar and repainted all its buttons at each one.
        self.undo_action.setIconText("Undo")
        self.redo_action.setIconText("Redo")

        self.mode_group = QActionGroup(self)
        self.training_action = QAction("&Training", self, checkable=True)
        self.training_action.setShortcut(QKeySequence("Ctrl+1"))
        self.training_action.setToolTip("Chart the memory of a training step")
        self.inference_action = QAction("&Inference", self, checkable=True)
        self.inference_action.setShortcut(QKeySequence("Ctrl+2"))
        self.inference_action.setToolTip("Chart the memory of serving: weights + KV cache")
        for action in (self.training_action, self.inference_action):
            self.mode_group.addAction(action)
        self.training_action.triggered.connect(lambda: self.set_chart_mode("training"))
        self.inference_action.triggered.connect(lambda: self.set_chart_mode("inference"))

        self.unit_group = QActionGroup(self)
        self.unit_actions: dict[str, QAction] = {}
        for unit, tip in (
            ("GB", "Decimal gigabytes (10⁹ bytes), as the lesson uses"),
            ("GiB", "Binary gibibytes (2³⁰ bytes)"),
        ):
            action = QAction(unit, self, checkable=True)
            action.setToolTip(tip)
            action.triggered.connect(lambda _c=False, u=unit: self.set_unit("GiB" if u == "GiB" else "GB"))
            self.unit_group.addAction(action)
            self.unit_actions[unit] = action

        self.lesson_action = QAction("&Lesson accounting", self, checkable=True)
        self.lesson_action.setShortcut(QKeySequence("Ctrl+L"))
        self.lesson_action.setToolTip("The lesson's four buckets with a typed activation allowance")
        self.lesson_action.toggled.connect(self._lesson_toggled)

        self.theme_group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for theme, label in (("system", "Follow the &system"), ("light", "&Light"), ("dark", "&Dark")):
            action = QAction(label, self, checkable=True)
            action.triggered.connect(lambda _c=False, t=theme: self.set_theme(t))
            self.theme_group.addAction(action)
            self.theme_actions[theme] = action
        self.theme_actions[self.settings.theme].setChecked(True)

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addActions([self.new_action, self.open_action])
        self.recent_menu = file_menu.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self._fill_recent()
        file_menu.addActions([self.save_action, self.save_as_action])
        file_menu.addSeparator()
        self.examples_menu = file_menu.addMenu("E&xamples")
        for title, make_plan in LESSON_EXAMPLES:
            action = self.examples_menu.addAction(title)
            action.triggered.connect(lambda _c=False, t=title, f=make_plan: self.load_example(t, f()))
        file_menu.addActions([self.measure_action, self.clear_measure_action])
        file_menu.addSeparator()
        file_menu.addActions([self.export_png_action, self.export_svg_action])
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        edit_menu = bar.addMenu("&Edit")
        edit_menu.addActions([self.undo_action, self.redo_action])
        view_menu = bar.addMenu("&View")
        view_menu.addActions([self.training_action, self.inference_action])
        view_menu.addSeparator()
        view_menu.addAction(self.lesson_action)
        units = view_menu.addMenu("&Units")
        units.addActions(list(self.unit_actions.values()))
        themes = view_menu.addMenu("&Theme")
        themes.addActions(list(self.theme_actions.values()))
        view_menu.addSeparator()
        view_menu.addAction(self.plan_dock.toggleViewAction())
        view_menu.addAction(self.details_dock.toggleViewAction())
        self.plan_tools = plan_tools.install(self, file_menu, view_menu)  # configs, reports, comparisons
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("&About VRAM Planner", self._about))

    def _build_toolbar(self) -> None:
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        toolbar.addActions([self.new_action, self.open_action, self.save_action])
        toolbar.addSeparator()
        toolbar.addActions([self.undo_action, self.redo_action])
        toolbar.addSeparator()
        toolbar.addActions([self.training_action, self.inference_action])
        toolbar.addSeparator()
        toolbar.addAction(self.lesson_action)
        toolbar.addSeparator()
        toolbar.addActions(list(self.unit_actions.values()))

    def _build_status(self) -> None:
        self.problem = plaintext.plain_label(QLabel())  # rejected values come from files too
        self.problem.setObjectName("problemLabel")
        self.problem.setAccessibleName("Input problem")
        self.problem.setStyleSheet("color: #D55E00; font-weight: 600;")
        self.statusBar().addWidget(self.problem, 1)

    # ---- reacting ------------------------------------------------------------------
    def _on_estimate(self, estimate: Estimate) -> None:
        if self.problem.text():  # QLabel.clear() repaints the status bar even when it is empty
            self.problem.clear()
        self.verdict.show_estimate(estimate)
        self.chart.show_estimate(estimate)
        self.arithmetic.show_estimate(estimate)
        self.compute_panel.show_estimate(estimate)
        self.inference_panel.show_estimate(estimate)
        with QSignalBlocker(self.lesson_action):
            self.lesson_action.setChecked(estimate.plan.accounting is Accounting.LESSON)
        self._settle()

    def _settle(self) -> None:
        """Lay the window out now, once, so that the next paint is the only one.

        Every view has its new text and figures; the layout passes they asked for would
        otherwise run one by one between paints (a taller verdict resizes the chart, a wider
        axis re-lays out the plot), each after a paint of the whole window.
        """
        for _ in range(5):  # a layout that changes its widget's size asks its parent's again
            QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self.chart.settle()

    def _clean_changed(self, clean: bool) -> None:
        self.setWindowModified(not clean)

    def _on_rejected(self, _key: str, message: str) -> None:
        self.problem.setText(f"⚠ {message} — the estimate still shows the last valid plan.")

    def _bucket_clicked(self, key: str) -> None:
        self.arithmetic.select(key)
        self.tabs.setCurrentWidget(self.arithmetic)

    def _lesson_toggled(self, on: bool) -> None:
        mode = Accounting.LESSON if on else Accounting.DETAILED
        self.controller.update("accounting", lambda p: p.with_changes(accounting=mode), "Switch accounting")

    def set_chart_mode(self, mode: str) -> None:
        mode = "inference" if mode == "inference" else "training"
        (self.inference_action if mode == "inference" else self.training_action).setChecked(True)
        self.chart.set_mode("inference" if mode == "inference" else "training")
        self.verdict.set_mode(mode)
        self.arithmetic.select("inference" if mode == "inference" else "weights")
        self.settings.chart_mode = mode

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        self.unit_actions[unit].setChecked(True)
        self.chart.set_unit(unit)
        self.verdict.set_unit(unit)
        self.arithmetic.set_unit(unit)
        self.inference_panel.set_unit(unit)
        self.diagnosis.set_unit(unit)
        self.settings.unit = unit

    def set_theme(self, theme: str) -> None:
        self.settings.theme = theme
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)

    def set_measurement(self, measurement: Measurement | None) -> None:
        self.measurement = measurement
        self.chart.set_measurement(measurement)
        self.verdict.set_measurement(measurement)
        self.clear_measure_action.setEnabled(measurement is not None)

    # ---- documents -----------------------------------------------------------------
    def _update_title(self) -> None:
        name = Path(self.path).name if self.path else "Untitled plan"
        self.setWindowTitle(f"{plaintext.window_title(name)}[*] — {APP_NAME}")
        self.setWindowModified(not self.controller.undo_stack.isClean())

    def _maybe_save(self) -> bool:
        """True when it is fine to replace the current plan (saved, discarded, or unchanged)."""
        if self.controller.undo_stack.isClean() or self.path is None:
            return True  # an untitled plan survives as the session's last plan
        choice = dialogs.ask_save_changes(self, Path(self.path).name)
        if choice == "save":
            return self.save_plan()
        return choice == "discard"

    def new_plan(self) -> None:
        if self._maybe_save():
            self._set_document(default_plan(), None)

    def open_plan(self) -> None:
        if not self._maybe_save():
            return
        path = dialogs.open_file(self, "Open plan", dialogs.PLAN_FILTER, self._folder())
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> bool:
        try:
            plan = planfile.load(path)
        except (PlanFileError, PlanError) as error:
            dialogs.error(self, "Cannot open the plan", str(error))
            return False
        if self._set_document(plan, path):
            self.settings.add_recent(os.path.abspath(path))
            return True
        return False

    def load_example(self, title: str, plan: Plan) -> bool:
        """A worked example becomes the plan as one undoable step (the document stays)."""
        error = self.controller.set_plan(plan, text=f"Load example: {title}")
        if error is not None:
            dialogs.error(self, "Cannot load the example", str(error))
            return False
        return True

    def open_recovered(self, plan: Plan) -> bool:
        """An autosaved plan of a session that ended unexpectedly, as an untitled document."""
        return self._set_document(plan, None)

    def _set_document(self, plan: Plan, path: str | None) -> bool:
        error = self.controller.reset(plan)
        if error is not None:
            dialogs.error(self, "Cannot use the plan", str(error))
            return False
        self.path = path
        self._update_title()
        return True

    def save_plan(self) -> bool:
        if self.path is None:
            return self.save_plan_as()
        return self._write(self.path)

    def save_plan_as(self) -> bool:
        suggested = self.path or os.path.join(self._folder(), "plan.vramplan.json")
        path = dialogs.save_file(self, "Save plan as", dialogs.PLAN_FILTER, suggested)
        if not path:
            return False
        if self._write(path):
            self.path = path
            self.settings.add_recent(os.path.abspath(path))
            self._update_title()
            return True
        return False

    def _write(self, path: str) -> bool:
        try:
            planfile.save(self.controller.plan, path)  # atomic: temp file, then rename
        except (PlanFileError, OSError) as error:
            dialogs.error(self, "Cannot save the plan", str(error))
            return False
        self.controller.undo_stack.setClean()
        self.statusBar().showMessage(f"Saved {path}", 4000)
        return True

    def _folder(self) -> str:
        if self.path:
            return str(Path(self.path).parent)
        recent = self.settings.recent_files
        return str(Path(recent[0]).parent) if recent else ""

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.settings.recent_files
        for index, path in enumerate(files):
            action = self.recent_menu.addAction(f"&{index + 1} {plaintext.menu_text(Path(path).name)}")
            action.setToolTip(plaintext.tooltip(path))
            action.setStatusTip(plaintext.escape_controls(path))
            action.triggered.connect(lambda _c=False, p=path: self._open_recent(p))
        if files:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list", self.settings.clear_recent)
        self.recent_menu.setEnabled(bool(files))

    def _open_recent(self, path: str) -> None:
        if self._maybe_save():
            self.open_path(path)

    def import_model(self, kind: str = "file") -> None:
        if kind == "folder":
            path = dialogs.open_folder(self, "Open a model folder (with config.json)", self._folder())
        else:
            path = dialogs.open_file(self, "Open config.json", dialogs.CONFIG_FILTER, self._folder())
        if path:
            self.model_importer.read(path)  # a folder's safetensors are read in a worker

    @property
    def importing(self) -> bool:
        return self.model_importer.running

    def _use_imported(self, imported: ImportedModel) -> None:
        model = imported.spec
        error = self.controller.update("model", lambda plan: with_model(plan, model), "Import model")
        if error is not None:
            dialogs.error(self, "Cannot use the model", str(error))

    def load_measurement(self) -> None:
        path = dialogs.open_file(self, "Load measurement", dialogs.MEASUREMENT_FILTER, self._folder())
        if not path:
            return
        try:
            measurement = load_measurement(path)
        except PlanFileError as error:
            dialogs.error(self, "Cannot read the measurement", str(error))
            return
        self.set_measurement(measurement)

    def export_chart(self, kind: str) -> bool:
        from pyqtgraph.exporters import ImageExporter

        name_filter = dialogs.PNG_FILTER if kind == "png" else dialogs.SVG_FILTER
        stem = Path(self.path).name.removesuffix(".json").removesuffix(".vramplan") if self.path else "memory"
        suggested = os.path.join(self._folder(), f"{stem}.{kind}")
        path = dialogs.save_file(self, f"Export chart as {kind.upper()}", name_filter, suggested)
        if not path:
            return False
        item = self.chart.plot.getPlotItem()
        try:
            if kind == "png":
                exporter = ImageExporter(item)
                # Twice the on-screen width: crisp in documents and on high-DPI screens.
                exporter.parameters()["width"] = max(1200, int(item.sceneBoundingRect().width() * 2))
                exporter.export(path)
            else:
                self.chart.export_svg(path)
        except (OSError, RuntimeError, ValueError) as error:
            dialogs.error(self, "Cannot export the chart", str(error))
            return False
        if not os.path.exists(path):
            dialogs.error(self, "Cannot export the chart", f"{path} could not be written")
            return False
        self.plan_tools.caption_chart(path, kind)  # model, method, GPU and verdict under the chart
        self.statusBar().showMessage(f"Exported {path}", 4000)
        return True

    def _about(self) -> None:
        dialogs.info(
            self,
            f"About {APP_NAME}",
            "VRAM Planner tells you whether a training or serving run fits in GPU memory, "
            "what fills the memory, and how long the run takes.",
        )

    # ---- session -------------------------------------------------------------------
    def restore_session(self) -> None:
        """Window geometry and docks, and the last plan, as they were at the last close."""
        geometry = self.settings.geometry
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = self.settings.window_state
        if state is not None:
            self.restoreState(state)
        text = self.settings.last_plan
        if not text:
            return
        try:
            plan = planfile.loads(text, "last session")
        except (PlanFileError, PlanError):
            return  # a stale or damaged stored plan: start from the default one
        path = self.settings.last_path or None
        if path is not None:
            try:
                if planfile.load(path) != plan:
                    path = None  # the session's plan differs from the file: keep it untitled
            except (PlanFileError, PlanError):
                path = None
        self._set_document(plan, path)

    def save_session(self) -> None:
        self.settings.geometry = self.saveGeometry()
        self.settings.window_state = self.saveState()
        self.settings.last_plan = planfile.dumps(self.controller.plan)
        self.settings.last_path = self.path or ""
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._maybe_save():
            event.ignore()
            return
        self.save_session()
        event.accept()

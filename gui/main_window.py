"""The main window: forms on the left, verdict and chart in the centre, panels on the right.

It builds the widgets, menus and docks and wires them to the controllers; the document
life-cycle is gui.document's, the diagnosis gui.diagnosis_controller's, and how things are
shown gui.display_state's. Past 400 lines because it lays out every action and dock.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QSignalBlocker, QSize, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QFont,
    QFontMetricsF,
    QKeySequence,
    QResizeEvent,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QDockWidget,
    QGridLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core.errors import PlanFileError
from core.estimate import Estimate
from core.plan import Accounting, Plan
from core.presets import LESSON_EXAMPLES, default_plan
from core.verdict import Mode
from gui import collector, colours, dialogs, offthread, plaintext, saving
from gui.actions import make_action
from gui.chart.widget import MemoryChart
from gui.controller import PlanController
from gui.diagnosis_controller import DiagnosisController
from gui.display_state import Display, DisplayState
from gui.document import Document
from gui.format import Unit
from gui.forms.accounting import AccountingForm
from gui.forms.base import PlanForm
from gui.forms.fields import is_marked_invalid
from gui.forms.hardware import HardwareForm
from gui.forms.method import MethodForm
from gui.forms.model import ModelForm
from gui.forms.parallel import ParallelForm
from gui.forms.serving import ServingForm
from gui.forms.workload import WorkloadForm
from gui.layout import LayoutFence, quiet_tab_layouts, settle_layouts
from gui.panels.arithmetic import ArithmeticPanel
from gui.panels.verdict import VerdictPanel
from gui.settings import Settings
from gui.theme import apply_theme
from gui.toolbar import add_follower as toolbar_follower
from gui.tools.context import ToolContext
from gui.tools.menu import PlanTools
from gui.worker.runner import JobFailed

if TYPE_CHECKING:  # looked at once the window has painted, or when a file is opened: not imported before
    from core.files.local_gpus import LocalGpus
    from core.files.measurement import Measurement
    from gui.local_machine import LocalMachine
    from gui.panels.compute import ComputePanel
    from gui.panels.diagnosis import DiagnosisPanel
    from gui.panels.inference import InferencePanel

APP_NAME = "VRAM Planner"
NO_MEASUREMENT_TIP = "No measurement is loaded: File → Load measurement… draws one beside the estimate"
# Side docks: least widths that keep every form row and the tab names readable, and the share
# of the window each takes at first (then they keep their share as the window is resized).
DETAILS_MIN_WIDTH = 270  # the tabs' short names fit (SHORT_TAB_NAMES: 265 px offscreen)
# The font DETAILS_MIN_WIDTH was measured at (the offscreen platform's default): at a larger one (an OS text
# scale of 1.5: 13.5 pt) the least width grows with it, else the Diagnosis tab scrolled out of sight and
# the Diagnosis and Serving panels were cut on the right (their rows need 352 px at 13.5 pt).
DETAILS_MIN_WIDTH_FONT_PT = 9.0
# Tab names when the Details dock is narrower than the full names need.
SHORT_TAB_NAMES = {"Arithmetic": "Sums", "Compute && time": "Time"}
DOCK_SHARES = (0.25, 0.35)
CHART_SHARE = 0.36
# Below this width left to the chart between the two side docks' least widths (800 × 600: 110 px, the bars
# a sliver, their labels piled up), a first start stacks Details as a tab beside the Plan. 1024 × 700 leaves
# 334 px; 1366 × 768 at the largest OS text ~350 px (tests/gui/test_large_font.py): both keep three columns.
CHART_LEAST_BESIDE_DOCKS = 200
FIRST_LEAST = QSize(1024, 700)  # the smallest window the layout is checked at (tests/gui/test_window_layout.py)
FIRST_SHARE = 0.8  # of the screen's free area, at a first start
# How long the edits pause before the verdict's banner gives back room it no longer needs.
BANNER_SHRINK_DELAY_MS = 1200
# This machine is looked at once the window has painted: its GPUs at once (a thread, waiting
# on drivers), the Hugging Face cache a moment later (it starts the "machine" worker process,
# which should not compete with the window's first interactions on a two-core laptop).
SCAN_AFTER_PAINT_MS = 500
# This machine's modules load a moment after the first paint, once the painted frame is on
# screen and the input queued meanwhile is handled (the load takes 30-80 ms on a 2-core box).
LOOK_AFTER_PAINT_MS = 50
FIRST_PAINT_FALLBACK_MS = 2000  # a window that never gets a Paint event (hidden) still looks


class _FormColumn(QScrollArea):
    """The plan's forms, scrolled up and down only: never narrower than its widest form row."""

    _least_width = -1

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        inner = self.widget()
        if inner is None:
            return hint
        width = inner.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        return QSize(max(hint.width(), width + 2 * self.frameWidth()), hint.height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            # Rows shown or hidden: the least width may have changed. Only then the dock (and
            # so the main window, with all its docks) is laid out again.
            width = self.minimumSizeHint().width()
            if width != self._least_width:
                self._least_width = width
                self.updateGeometry()
        return super().eventFilter(watched, event)


class _FirstPaint(QObject):
    """Calls ``then`` once, just after the first paint of ``widget``, or after
    :data:`FIRST_PAINT_FALLBACK_MS` if none comes.

    ``widget`` is one the first paint pass always covers (the verdict banner: opaque, on top):
    a window covered by opaque children never gets a Paint event of its own. Watched alone,
    not through an application-wide filter, which ran Python for each of the ~2,500 events
    before the first paint."""

    def __init__(self, widget: QWidget, then: Callable[[], None]) -> None:
        super().__init__(widget)
        self._widget = widget
        self._then: Callable[[], None] | None = then
        widget.installEventFilter(self)
        QTimer.singleShot(FIRST_PAINT_FALLBACK_MS, self._fire)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._widget and event.type() == QEvent.Type.Paint:
            self._widget.removeEventFilter(self)
            if self._then is not None:
                QTimer.singleShot(LOOK_AFTER_PAINT_MS, self._fire)  # after the whole paint pass
        return False

    def _fire(self) -> None:
        then, self._then = self._then, None
        self._widget.removeEventFilter(self)
        if then is not None:
            then()


def first_size(screen: QSize) -> QSize:
    """The window's size at a first start (no saved geometry): FIRST_SHARE of the screen, at
    least the 1024 × 700 the layout is made for, never larger than the screen.

    Left to Qt, the window took its size hint, 780 × 533: the two side docks' least widths
    left the chart 9 pixels."""
    width = max(FIRST_LEAST.width(), round(screen.width() * FIRST_SHARE))
    height = max(FIRST_LEAST.height(), round(screen.height() * FIRST_SHARE))
    return QSize(min(width, screen.width()), min(height, screen.height()))


class MainWindow(QMainWindow):
    def __init__(
        self,
        controller: PlanController | None = None,
        settings: Settings | None = None,
        parent: QWidget | None = None,
        *,
        plan: Plan | None = None,
    ) -> None:
        """``plan``: the plan to open with (the default plan if None), when no ``controller``."""
        super().__init__(parent)
        collector.install()  # before the diagnosis worker's threads exist (gui/collector.py)
        self.settings = settings if settings is not None else Settings()
        if controller is None:
            controller = PlanController(plan if plan is not None else default_plan(), self)
        self.controller = controller
        self.display = DisplayState(Display(unit=self.settings.unit, mode=Mode(self.settings.chart_mode)), self)
        self.document = Document(self.controller, self.settings, dialog_parent=self, parent=self, display=self.display)
        self._shown: Display | None = None
        self.diagnoser = DiagnosisController(self.controller, self.display, self)
        self._local: LocalMachine | None = None  # made when first asked for (see local)
        self._first_paint: _FirstPaint | None = None
        self.setObjectName("mainWindow")
        self.setDockNestingEnabled(True)
        # Docks take a new size at once: animated, a verdict banner that grew or shrank slid
        # over the docks below it for a fifth of a second, repainting the window at each step.
        self.setAnimated(False)

        self._build_forms()
        self._build_centre()
        self._build_panels()
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status()
        self._explain_dock_buttons()

        self.controller.estimateChanged.connect(self._on_estimate)
        self.controller.editRejected.connect(self._on_rejected)
        for form in self._forms:
            form.problemCleared.connect(self._problem_cleared)
        self.controller.undo_stack.cleanChanged.connect(self._clean_changed)
        self.document.pathChanged.connect(self._update_title)
        self.document.message.connect(lambda text: self.statusBar().showMessage(text, 4000))
        self.diagnoser.failed.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self.chart.bucketClicked.connect(self._bucket_clicked)
        self.chart.rankChanged.connect(lambda _rank: self._refresh_panel(self.tabs.currentWidget()))
        self.arithmetic.bucketSelected.connect(self.display.select_bucket)
        self._docks_sized = False
        self.display.changed.connect(self._show_display)
        self._show_display(self.display.display)
        self.controller.refresh()
        self._update_title()

    # ---- layout --------------------------------------------------------------------
    def _build_forms(self) -> None:
        c = self.controller
        self.model_form = ModelForm(c, settings=self.settings)
        self.model_form.importRequested.connect(self.import_model)
        self.accounting_form = AccountingForm(c)
        self.method_form = MethodForm(c)
        self.workload_form = WorkloadForm(c)
        self.hardware_form = HardwareForm(c, settings=self.settings)
        self.parallel_form = ParallelForm(c)
        self.parallel_form.fewestRequested.connect(self.show_fewest_gpus)
        # The Serving form shows in Inference mode only: built when first wanted (start-up).
        self._serving_form: ServingForm | None = None
        # The forms built so far, in the column's order (Serving goes after Parallelism).
        self._forms: list[PlanForm] = [
            self.model_form,
            self.method_form,
            self.workload_form,
            self.hardware_form,
            self.parallel_form,
            self.accounting_form,
        ]
        holder = QWidget()
        holder.setObjectName("planForms")
        holder.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        # Opaque, so that a changed field repaints from here, not from the main window down.
        holder.setAutoFillBackground(True)
        column = QVBoxLayout(holder)
        column.setContentsMargins(8, 8, 8, 8)
        column.setSpacing(10)
        for form in self._forms:
            column.addWidget(form)
        column.addStretch(1)
        scroll = _FormColumn()
        scroll.setAccessibleName("Plan forms")
        # No Tab stop of its own: Tab went from the last form field to the column itself, a stop with no visible
        # focus, before the chart. A field Tab reaches is still scrolled into view (QScrollArea.focusNextPrevChild).
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
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
        self._form_column = column
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.plan_dock)

    @property
    def forms(self) -> list[PlanForm]:
        """Every plan form, in the column's order (the Serving form built if it was not yet)."""
        self.serving_form  # noqa: B018 - built on first use
        return list(self._forms)

    @property
    def serving_form(self) -> ServingForm:
        """The Serving form, built the first time it is wanted: Inference mode, or a caller."""
        if self._serving_form is None:
            self._serving_form = self._make_serving_form()
        return self._serving_form

    def _make_serving_form(self) -> ServingForm:
        form = ServingForm(self.controller)
        form.setVisible(False)  # explicitly: a widget put into a shown layout would show itself
        if self._local is not None:
            form.attach_local(self._local)
        form.mode = self.display.mode.value
        after = self.parallel_form
        self._form_column.insertWidget(self._form_column.indexOf(after) + 1, form)
        self._forms.insert(self._forms.index(after) + 1, form)
        form.problemCleared.connect(self._problem_cleared)
        # Tab goes from the Parallelism form's fields to the Serving form's, as if built in order.
        stops = [w for w in self._focus_chain(after) if w.focusPolicy() & Qt.FocusPolicy.TabFocus]
        last = stops[-1] if stops else None
        for widget in self._focus_chain(form):
            if last is not None and widget.focusPolicy() & Qt.FocusPolicy.TabFocus:
                QWidget.setTabOrder(last, widget)
                last = widget
        form.show_estimate_now(self.controller.estimate)
        return form

    @staticmethod
    def _focus_chain(widget: QWidget) -> list[QWidget]:
        """``widget``'s descendants in the order Tab visits them."""
        found: list[QWidget] = []
        following = widget.nextInFocusChain()
        while following is not None and following is not widget and widget.isAncestorOf(following):
            found.append(following)
            following = following.nextInFocusChain()
        return found

    def _build_centre(self) -> None:
        # The verdict sits in a top dock: the top area spans the window's whole width, above
        # both side docks, so its one-line headline no longer sets the window's least width.
        banner = QWidget()
        banner.setObjectName("verdictBanner")
        banner.setAutoFillBackground(True)  # a new verdict repaints the banner, not the window under it
        grid = QGridLayout(banner)
        grid.setContentsMargins(8, 6, 8, 2)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self.verdict = VerdictPanel()
        grid.addWidget(self.verdict, 0, 0)
        self.diagnosis_button = QPushButton("What would make it fit? →")
        self.diagnosis_button.setObjectName("diagnosisButton")
        self.diagnosis_button.setAccessibleName("Show the diagnosis")
        self.diagnosis_button.setToolTip("Open the Diagnosis tab: the changes that would make this plan fit")
        self.diagnosis_button.clicked.connect(self.show_diagnosis)
        self.diagnosis_button.hide()
        grid.addWidget(self.diagnosis_button, 0, 1, Qt.AlignmentFlag.AlignVCenter)
        grid.setColumnStretch(0, 1)
        grid.setRowStretch(0, 1)  # spare height goes to the verdict, never taken from it
        self.plan_warning = plaintext.plain_label(QLabel())  # model names come from files
        self.plan_warning.setObjectName("planWarning")
        self.plan_warning.setAccessibleName("Plan warning")
        self.plan_warning.setWordWrap(True)
        self.plan_warning.setStyleSheet(colours.PROBLEM_TEXT_STYLE)
        self.plan_warning.hide()
        grid.addWidget(self.plan_warning, 1, 0, 1, 2)
        self.verdict_dock = QDockWidget("Verdict", self)
        self.verdict_dock.setObjectName("verdictDock")
        self.verdict_dock.setWidget(LayoutFence(banner))
        self._banner = banner
        # The banner grows at once for a longer verdict or a warning, and gives the room back
        # only once the edits pause: a banner that shrank and grew as a user typed would move
        # the chart up and down under them, and re-lay out and repaint the whole window each time.
        self._banner_shrink = QTimer(self)
        self._banner_shrink.setSingleShot(True)
        self._banner_shrink.setInterval(BANNER_SHRINK_DELAY_MS)
        self._banner_shrink.timeout.connect(self.settle_banner)
        # Fits it again once the window has laid itself out (shown, resized): one pass however
        # many resize events a drag sends before it.
        self._banner_refit = QTimer(self)
        self._banner_refit.setSingleShot(True)
        self._banner_refit.setInterval(0)
        self._banner_refit.timeout.connect(self.settle_banner)
        self.verdict_dock.setTitleBarWidget(QWidget())
        self.verdict_dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        self.addDockWidget(Qt.DockWidgetArea.TopDockWidgetArea, self.verdict_dock)

        centre = QWidget()
        layout = QVBoxLayout(centre)
        layout.setContentsMargins(4, 4, 4, 4)
        self.chart = MemoryChart()
        layout.addWidget(self.chart, 1)
        self.setCentralWidget(centre)

    def _build_panels(self) -> None:
        self.tabs = QTabWidget()
        self.tabs.setObjectName("panelTabs")
        self.tabs.setAccessibleName("Details")
        self.tabs.tabBar().setAccessibleName("Details tabs")
        self.tabs.setDocumentMode(True)
        # The tabs other than the Arithmetic are hidden at start-up: each panel is built when
        # its tab is first shown or the panel first asked for (compute_panel, inference_panel,
        # diagnosis); until then its tab holds an empty page.
        self._compute_panel: ComputePanel | None = None
        self._inference_panel: InferencePanel | None = None
        self._diagnosis: DiagnosisPanel | None = None
        self._unbuilt: dict[QWidget, Callable[[], QWidget]] = {}
        # What each Details panel was last shown (the estimate, and the chart's rank): only the
        # current tab's panel follows the edits; another is brought up to date when its tab is
        # shown or the panel is asked for (with the Diagnosis tab shown, the hidden Arithmetic
        # set its rich text at every edit).
        self._panel_shown: dict[QWidget, tuple[Estimate, int | None]] = {}
        self.arithmetic = ArithmeticPanel()
        self.add_panel(self.arithmetic, "Arithmetic")
        for title, build in (
            ("Compute && time", lambda: self.compute_panel),
            ("Serving", lambda: self.inference_panel),
            ("Diagnosis", lambda: self.diagnosis),
        ):
            page = QWidget()
            page.setAccessibleName(title.replace("&&", "&"))
            self._unbuilt[page] = build
            self.add_panel(page, title)
        self.tabs.currentChanged.connect(self._build_current_tab)
        self.details_dock = QDockWidget("Details", self)
        self.details_dock.setObjectName("detailsDock")
        self.details_dock.setWidget(LayoutFence(self.tabs))
        quiet_tab_layouts(self.tabs)
        self.details_dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        bar = self.tabs.tabBar()
        bar.setElideMode(Qt.TextElideMode.ElideNone)  # a tab's name whole, or scroll arrows
        bar.setUsesScrollButtons(True)
        for index in range(self.tabs.count()):
            bar.setTabToolTip(index, self.tabs.tabText(index).replace("&&", "&"))
        self._full_tabs_width = bar.sizeHint().width()
        self.details_least_width = self._details_least_width()
        self.details_dock.setMinimumWidth(self.details_least_width)
        self.tabs.installEventFilter(self)  # short names when the dock is narrow (1024 × 700)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.details_dock)

    def _details_least_width(self) -> int:
        """The least width of the Details dock at the window's font: DETAILS_MIN_WIDTH scaled from the font
        it was measured at, and never less than the tabs' short names take (measured, then put back)."""
        bar = self.tabs.tabBar()
        full = [self.tabs.tabText(index) for index in range(self.tabs.count())]
        for index, name in enumerate(full):
            bar.setTabText(index, SHORT_TAB_NAMES.get(name, name))
        short = bar.sizeHint().width()
        for index, name in enumerate(full):
            bar.setTabText(index, name)
        font = self.font()
        reference = QFont(font)
        reference.setPointSizeF(DETAILS_MIN_WIDTH_FONT_PT)
        scale = QFontMetricsF(font).height() / QFontMetricsF(reference).height() if font.pointSizeF() > 0 else 1.0
        return max(DETAILS_MIN_WIDTH, round(DETAILS_MIN_WIDTH * scale), short + 5)

    @property
    def compute_panel(self) -> ComputePanel:
        """The "Compute & time" panel, built when first wanted (its tab shown, or a caller)."""
        if self._compute_panel is None:
            from gui.panels.compute import ComputePanel

            panel = self._compute_panel = ComputePanel()
            panel.set_mode(self.display.mode.value)
            self._put_in_tab(panel, "Compute && time")
        self._refresh_panel(self._compute_panel)
        return self._compute_panel

    @property
    def inference_panel(self) -> InferencePanel:
        """The "Serving" panel, built when first wanted."""
        if self._inference_panel is None:
            from gui.panels.inference import InferencePanel

            panel = self._inference_panel = InferencePanel()
            panel.set_unit(self.display.unit)
            self._put_in_tab(panel, "Serving")
        self._refresh_panel(self._inference_panel)
        return self._inference_panel

    @property
    def diagnosis(self) -> DiagnosisPanel:
        """The "Diagnosis" panel, built when first wanted (the diagnosis itself runs only while
        its tab is shown: gui.diagnosis_controller)."""
        if self._diagnosis is None:
            from gui.panels.diagnosis import DiagnosisPanel

            panel = self._diagnosis = DiagnosisPanel(self.diagnoser, self.display)
            self._put_in_tab(panel, "Diagnosis")
        return self._diagnosis

    def _put_in_tab(self, panel: QWidget, title: str) -> None:
        """``panel`` takes the place of its tab's empty page, the tab staying current if it was."""
        page = next((p for p, _ in self._unbuilt.items() if p.accessibleName() == title.replace("&&", "&")), None)
        if page is None:
            return  # the page was replaced (add_panel) before the panel was wanted
        del self._unbuilt[page]
        index = self.tabs.indexOf(page)
        current = self.tabs.currentIndex() == index
        text, tip = self.tabs.tabText(index), self.tabs.tabToolTip(index)
        with QSignalBlocker(self.tabs):
            self.tabs.removeTab(index)
            self.tabs.insertTab(index, panel, text)
            self.tabs.setTabToolTip(index, tip)
            if current:
                self.tabs.setCurrentIndex(index)
        page.deleteLater()

    def _build_current_tab(self, index: int) -> None:
        page = self.tabs.widget(index)
        build = self._unbuilt.get(page) if page is not None else None
        if build is not None:
            build()
        self._refresh_panel(self.tabs.widget(index))

    def _refresh_panel(self, panel: QWidget | None) -> None:
        """``panel`` (a Details tab's) shows the current estimate, unless it already does; the
        Arithmetic shows the rank the chart shows."""
        if panel is None:
            return
        estimate, rank = self.controller.estimate, self.chart.rank
        shown = self._panel_shown.get(panel)
        if shown is not None and shown[0] is estimate and shown[1] == rank:
            return
        compute, inference = self._compute_panel, self._inference_panel
        if panel is self.arithmetic:
            self.arithmetic.show_estimate(estimate.for_rank(rank))
        elif compute is not None and panel is compute:
            compute.show_estimate(estimate)
        elif inference is not None and panel is inference:
            inference.show_estimate(estimate)
        else:
            return  # an empty page, or the Diagnosis (which follows the plan itself)
        self._panel_shown[panel] = (estimate, rank)

    def _fit_tab_names(self) -> None:
        """The tabs' full names when they fit the dock, else their short ones (never scrolled
        out of sight: "Compute & time" showed as "ute & time" at 1024 × 700)."""
        short = self.tabs.width() < self._full_tabs_width
        for index in range(self.tabs.count()):
            full = self.tabs.tabToolTip(index).replace("&", "&&")
            name = SHORT_TAB_NAMES.get(full, full) if short else full
            if self.tabs.tabText(index) != name:
                self.tabs.setTabText(index, name)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.tabs and event.type() is QEvent.Type.Resize:
            self._fit_tab_names()
        return super().eventFilter(watched, event)

    def add_panel(self, widget: QWidget, title: str) -> int:
        """Add a tab to the panels area; a tab of the same title (a placeholder) is replaced.

        A panel that wants estimates connects itself to ``window.controller.estimateChanged``.
        """
        plain = title.replace("&&", "&")
        for index in range(self.tabs.count()):
            if self.tabs.tabText(index).replace("&&", "&") == plain:
                old = self.tabs.widget(index)
                self.tabs.removeTab(index)
                if old is not None:
                    self._unbuilt.pop(old, None)  # an empty page's panel goes with it
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
        return make_action(self, text, slot, shortcut, tip)

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
        # No "Plan" and "Details" items: the two docks cannot be closed, and their show/hide actions stood
        # greyed in the menu with no reason given.
        self._add_tools(file_menu, view_menu)
        self.help_menu = bar.addMenu("&Help")
        self.help_menu.addAction(self._action("&How to read this window", self._how_to_read, "F1"))
        self.help_menu.addAction(self._action("&Keyboard shortcuts", self._shortcuts))
        self.help_menu.addSeparator()
        self.help_menu.addAction(self._action("&About VRAM Planner", self._about))

    def _add_tools(self, file_menu: QMenu, view_menu: QMenu) -> None:
        """Configs in, reports out, comparisons, the cards that fit, the fewest GPUs (gui.tools):
        they are handed the controller, the document and the display state, never the window."""
        context = ToolContext(self, self.controller, self.document, self.display)
        tools = self.plan_tools = PlanTools(context, self, self.details_dock)
        file_menu.insertActions(self.save_action, [tools.open_config_action, tools.paste_command_action])
        file_menu.insertActions(
            self.quit_action, [tools.export_launch_action, tools.export_report_action, tools.copy_markdown_action]
        )
        file_menu.insertSeparator(self.quit_action)
        view_menu.addSeparator()
        view_menu.addActions([tools.compare_action, tools.fit_action, tools.fewest_action])

    def _build_toolbar(self) -> None:
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        toolbar.addActions([self.new_action, self.open_action, self.save_action])
        toolbar.addSeparator()
        # Buttons of their own: the stack's actions change text at every edit (gui.toolbar).
        self.undo_button_action = toolbar_follower(toolbar, self.undo_action, "Undo")
        self.redo_button_action = toolbar_follower(toolbar, self.redo_action, "Redo")
        toolbar.addSeparator()
        toolbar.addActions([self.training_action, self.inference_action])
        toolbar.addSeparator()
        toolbar.addAction(self.lesson_action)
        toolbar.addSeparator()
        toolbar.addActions(list(self.unit_actions.values()))

    def _build_status(self) -> None:
        self._problem_key = ""
        self.problem = plaintext.plain_label(QLabel())  # rejected values come from files too
        self.problem.setObjectName("problemLabel")
        self.problem.setAccessibleName("Input problem")
        self.problem.setStyleSheet(colours.PROBLEM_TEXT_STYLE)
        self.statusBar().addWidget(self.problem, 1)

    # ---- this machine ------------------------------------------------------------------
    @property
    def local(self) -> LocalMachine:
        """This machine's GPUs and downloaded models (gui.local_machine), made and handed to the
        forms the first time it is asked for: after the first paint, so that neither its imports
        nor its work weigh on start-up."""
        if self._local is None:
            from gui.local_machine import LocalMachine

            self._local = LocalMachine(self)
            self._local.gpusDetected.connect(self._gpus_detected)
            self.model_form.attach_local(self._local)
            self.hardware_form.attach_local(self._local)
            if self._serving_form is not None:
                self._serving_form.attach_local(self._local)
        return self._local

    def start_local_machine(self) -> None:
        """Look at this machine (its GPUs, then its Hugging Face cache) once the window has
        painted, so that neither delays the first paint."""
        if self._first_paint is not None:
            return
        self._first_paint = _FirstPaint(self._banner, self._look_at_machine)

    def _look_at_machine(self) -> None:
        self.local.detect()
        QTimer.singleShot(SCAN_AFTER_PAINT_MS, self.local.scan)

    def _gpus_detected(self, found: LocalGpus) -> None:
        """The first start that finds a GPU plans on it (an untouched default plan only), once;
        a driver's note is said once, in the status bar (and stays in the Hardware form)."""
        if found.notes:
            self.statusBar().showMessage("GPU detection: " + "; ".join(found.notes), 10000)
        if not found.gpus or self.settings.local_gpu_preselected:
            return
        self.settings.local_gpu_preselected = True
        untouched = self.document.path is None and self.controller.undo_stack.count() == 0
        if untouched and self.controller.plan == default_plan():
            gpu = found.gpus[0]
            plan = self.controller.plan.with_hardware(**found.hardware_changes(gpu))
            # Its host RAM and speed too, where found: the plan is this machine's (docs/LOCAL_MACHINE.md).
            plan = found.host.apply(plan) if found.host is not None else plan
            if self.controller.reset(plan) is None:
                self.statusBar().showMessage(f"Planning on this machine's {gpu.spec.name}", 6000)

    # ---- reacting ------------------------------------------------------------------
    def _on_estimate(self, estimate: Estimate) -> None:
        if self.problem.text() and not self._problem_field_marked():
            self.problem.clear()  # QLabel.clear() repaints the status bar even when it is empty
        self.verdict.show_estimate(estimate)
        self.chart.show_estimate(estimate)
        self._refresh_panel(self.tabs.currentWidget())  # the hidden tabs' panels when shown
        with QSignalBlocker(self.lesson_action):
            self.lesson_action.setChecked(estimate.plan.accounting is Accounting.LESSON)
        self._show_warnings(estimate)
        self._place_accounting(estimate.plan.accounting is Accounting.LESSON)
        self._settle()

    def _show_warnings(self, estimate: Estimate) -> None:
        text = "\n".join(f"⚠ {warning}" for warning in estimate.warnings_for(self.display.mode))
        if text != self.plan_warning.text():
            self.plan_warning.setText(text)
        self.plan_warning.setVisible(bool(text))
        self.diagnosis_button.setVisible(not estimate.judgement(self.display.mode).fits)

    def _fit_banner(self, shrink: bool = False) -> bool:
        """The verdict's dock as tall as the verdict and the warnings under it need; True if it changed.

        A dock keeps its height when its content grows: a warning line squeezed the verdict.
        Less room needed is given back only with ``shrink`` (a resize, or the edits pausing)."""
        banner = self._banner
        layout = banner.layout()
        if not isinstance(layout, QGridLayout):
            return False
        margins = layout.contentsMargins()
        verdict = self.verdict
        # Its wrapped labels' height at the width they have (a size hint guesses a narrower one).
        tall = verdict.heightForWidth(verdict.width()) if verdict.hasHeightForWidth() else -1
        needed = margins.top() + margins.bottom() + (tall if tall > 0 else verdict.sizeHint().height())
        if not self.plan_warning.isHidden():
            inner = max(1, banner.width() - margins.left() - margins.right())
            needed += layout.verticalSpacing() + self.plan_warning.heightForWidth(inner)
        if banner.minimumHeight() == needed:
            self._banner_shrink.stop()
            return False
        if needed < banner.minimumHeight() and not shrink:
            self._banner_shrink.start()  # restarted by each edit that still needs less
            return False
        self._banner_shrink.stop()
        banner.setMinimumHeight(needed)
        fence = self.verdict_dock.widget()
        if isinstance(fence, LayoutFence):
            fence.pass_limits()  # the dock's least height now, not at the fence's next layout pass
        self.resizeDocks([self.verdict_dock], [needed], Qt.Orientation.Vertical)
        return True

    def settle_banner(self) -> None:
        """Give the verdict's banner exactly the room it needs now, as a pause in the edits does."""
        settle_layouts()
        if self._fit_banner(shrink=True):
            settle_layouts()  # the docks take their new heights now, before the next paint

    def _place_accounting(self, lesson: bool) -> None:
        """Lesson accounting asks for P and T: its form moves up, under the model, to be seen."""
        index = self._form_column.indexOf(self.accounting_form)
        wanted = 1 if lesson else len(self._forms) - 1
        if index != wanted:
            self._form_column.removeWidget(self.accounting_form)
            self._form_column.insertWidget(wanted, self.accounting_form)

    def show_fewest_gpus(self) -> None:
        self.plan_tools.show_fewest()

    def show_diagnosis(self) -> None:
        self.details_dock.show()
        self.details_dock.raise_()  # above the Plan where a narrow first start stacked them as tabs
        self.tabs.setCurrentWidget(self.diagnosis)
        self.diagnosis.setFocus()

    def _explain_dock_buttons(self) -> None:
        """The docks' icon-only float buttons (Qt's own, no tooltip) say what they do."""
        for dock in (self.plan_dock, self.details_dock):
            button = dock.findChild(QAbstractButton, "qt_dockwidget_floatbutton")
            if button is not None and not button.toolTip():
                title = dock.windowTitle()
                button.setToolTip(f"Float the {title} panel in a window of its own (double-click its title to dock it)")

    def _side_docks(self) -> list[QDockWidget]:
        return [d for d in (self.plan_dock, self.details_dock) if d.isVisible() and not d.isFloating()]

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._docks_sized:
            return
        self._docks_sized = True
        # Once the docks have their widths (laid out after this event), the verdict's wrapped
        # text its exact height: sized before, it was measured at another width.
        self._banner_refit.start()
        if self.settings.window_state is None:  # else the docks stay as the user left them
            width = self.width()
            plan = max(self.plan_dock.minimumSizeHint().width(), round(width * DOCK_SHARES[0]))
            # The chart keeps at least CHART_SHARE of a narrow window; Details give way first.
            room = round(width * (1 - CHART_SHARE)) - plan
            details = max(self.details_least_width, min(round(width * DOCK_SHARES[1]), room))
            wanted = {self.plan_dock: plan, self.details_dock: details}
            docks = self._side_docks()
            if width - plan - self.details_least_width < CHART_LEAST_BESIDE_DOCKS and len(docks) == 2:
                self.tabifyDockWidget(self.plan_dock, self.details_dock)
                self.plan_dock.raise_()
                docks = [self.plan_dock]
            self.resizeDocks(docks, [wanted[d] for d in docks], Qt.Orientation.Horizontal)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        old, new = event.oldSize().width(), event.size().width()
        if old != new and self._docks_sized:
            self._banner_refit.start()  # wrapped text takes more or fewer lines at another width
        if self._docks_sized and old > 0 and old != new:
            # The side panels keep their share of the window instead of the chart taking it all.
            docks = self._side_docks()
            self.resizeDocks(docks, [round(d.width() * new / old) for d in docks], Qt.Orientation.Horizontal)

    def _settle(self) -> None:
        """Lay the window out now, once, so that the next paint is the only one.

        Every view has its new text and figures; the layout passes they asked for would
        otherwise run one by one between paints (a taller verdict resizes the chart, a wider
        axis re-lays out the plot), each after a paint of the whole window.
        """
        settle_layouts()
        # Measured after the layout pass, which has already sized the verdict's new text.
        if self._fit_banner():
            settle_layouts()
        self.chart.settle()

    def _clean_changed(self, clean: bool) -> None:
        self.setWindowModified(not clean)

    def _on_rejected(self, key: str, message: str) -> None:
        self._problem_key = key
        self.problem.setText(f"⚠ {message} — the estimate still shows the last valid plan.")

    def _problem_cleared(self, key: str) -> None:
        if key == self._problem_key and self.problem.text():
            self.problem.clear()

    def _problem_field_marked(self) -> bool:
        """The field the status-bar warning is about still holds the refused text."""
        for form in self._forms:
            widget = form.fields.get(self._problem_key)
            if widget is not None:
                return is_marked_invalid(widget) and widget.hasFocus()
        return False

    def _bucket_clicked(self, key: str) -> None:
        self.display.select_bucket(key)
        self.details_dock.raise_()  # above the Plan where a narrow first start stacked them as tabs
        self.tabs.setCurrentWidget(self.arithmetic)

    def _lesson_toggled(self, on: bool) -> None:
        mode = Accounting.LESSON if on else Accounting.DETAILED
        self.controller.update("accounting", lambda p: p.with_changes(accounting=mode), "Switch accounting")

    # ---- display state (gui.display_state): one object, one signal, pushed to the views ----
    @property
    def unit(self) -> Unit:
        return self.display.unit

    @property
    def measurement(self) -> Measurement | None:
        return self.display.measurement

    def set_chart_mode(self, mode: str) -> None:
        self.display.set_mode(mode)

    def _show_forms_for(self, mode: str) -> None:
        """Inference mode: the serving form, no training-only forms; Training mode the reverse."""
        serving = mode == "inference"
        if serving or self._serving_form is not None:
            self.serving_form.setVisible(serving)
        for form in self._forms:
            form.set_mode(mode)
        for form in (self.method_form, self.workload_form, self.parallel_form, self.accounting_form):
            form.setVisible(not serving)

    def set_unit(self, unit: Unit) -> None:
        self.display.set_unit(unit)

    def set_measurement(self, measurement: Measurement | None) -> None:
        self.display.set_measurement(measurement)

    def _show_display(self, display: Display) -> None:
        shown = self._shown
        self._shown = display
        if shown is None or display.mode != shown.mode:
            mode = display.mode
            (self.inference_action if mode is Mode.INFERENCE else self.training_action).setChecked(True)
            self.chart.set_mode(mode.value)
            self.verdict.set_mode(mode.value)
            if self._compute_panel is not None:
                self._compute_panel.set_mode(mode.value)
            self.arithmetic.set_mode(mode)
            self._show_forms_for(mode.value)
            self.settings.chart_mode = mode.value
            self._show_warnings(self.controller.estimate)  # each mode has its own
            if shown is not None:  # another mode is not typing: the banner fits its new verdict now
                self.settle_banner()
        if shown is None or display.unit != shown.unit:
            unit = display.unit
            self.unit_actions[unit].setChecked(True)
            self.chart.set_unit(unit)
            self.verdict.set_unit(unit)
            self.arithmetic.set_unit(unit)
            if self._inference_panel is not None:
                self._inference_panel.set_unit(unit)
            self.settings.unit = unit
        if shown is None or display.measurement is not shown.measurement:
            self.chart.set_measurement(display.measurement)
            self.verdict.set_measurement(display.measurement)
            loaded = display.measurement is not None
            self.clear_measure_action.setEnabled(loaded)
            # Greyed, it says why (the status bar shows a menu item's tip).
            tip = "Remove the measured peak from the chart" if loaded else NO_MEASUREMENT_TIP
            self.clear_measure_action.setStatusTip(tip)
            self.clear_measure_action.setToolTip(tip)
        if shown is None or display.selected_bucket != shown.selected_bucket or display.mode != shown.mode:
            # No pick: the arithmetic shows the mode's own bucket (the KV cache when serving).
            default = "inference" if display.mode is Mode.INFERENCE else "weights"
            self.arithmetic.select(display.selected_bucket or default)
            self.chart.set_selected(display.selected_bucket)

    def set_theme(self, theme: str) -> None:
        self.settings.theme = theme
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)

    # ---- documents (the life-cycle is gui.document.Document's) --------------------------
    @property
    def path(self) -> str | None:
        return self.document.path

    def _update_title(self) -> None:
        self.setWindowTitle(f"{self.document.name}[*] — {APP_NAME}")
        self.setWindowModified(self.document.modified)

    def new_plan(self) -> None:
        self.document.new()

    def open_plan(self) -> None:
        self.document.open()

    def open_path(self, path: str) -> bool:
        return self.document.open_path(path)

    def load_example(self, title: str, plan: Plan) -> bool:
        return self.document.load_example(title, plan)

    def open_recovered(self, plan: Plan) -> bool:
        return self.document.open_recovered(plan)

    def save_plan(self) -> bool:
        return self.document.save()

    def save_plan_as(self) -> bool:
        return self.document.save_as()

    def import_model(self, kind: str = "file") -> None:
        self.document.import_model(kind)

    @property
    def importing(self) -> bool:
        return self.document.importing

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.settings.recent_files
        for index, path in enumerate(files):
            action = self.recent_menu.addAction(f"&{index + 1} {plaintext.menu_text(Path(path).name)}")
            action.setToolTip(plaintext.tooltip(path))
            action.setStatusTip(plaintext.escape_controls(path))
            action.triggered.connect(lambda _c=False, p=path: self.document.open_recent(p))
        if files:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list", self.settings.clear_recent)
        self.recent_menu.setEnabled(bool(files))

    def load_measurement(self) -> None:
        path = dialogs.open_file(self, "Load measurement", dialogs.MEASUREMENT_FILTER, self.document.folder())
        if not path:
            return
        from core.files.measurement import load_measurement

        try:  # a large file is parsed in the worker process: the window keeps running
            measurement = offthread.read_file(
                self, load_measurement, path, title="Load measurement", name="measurementProgress"
            )
        except (PlanFileError, JobFailed) as error:
            dialogs.error(self, "Cannot read the measurement", str(error))
            return
        if measurement is not None:
            self.set_measurement(measurement)

    def export_chart(self, kind: str) -> bool:
        name_filter = dialogs.PNG_FILTER if kind == "png" else dialogs.SVG_FILTER
        suggested = self.document.export_path(kind)
        path = dialogs.save_file(self, f"Export chart as {kind.upper()}", name_filter, suggested)
        if not path:
            return False
        chart = self.chart

        def write(force: bool) -> None:
            if kind == "png":
                chart.export_png(path, force=force)
            else:
                chart.export_svg(path, force=force)

        if not saving.write_confirmed(self, "Cannot export the chart", path, write):
            return False
        self.statusBar().showMessage(f"Exported {path}", 4000)
        return True

    def _how_to_read(self) -> None:
        dialogs.info(
            self,
            "How to read this window",
            "Left, the Plan: the model, the fine-tuning method, the workload, the card and how "
            "many of them (Parallelism: nodes, GPUs per node, the strategy and the split). Every "
            "value applies when you press Enter or leave its box; a box outlined in red says why "
            "it cannot take what you typed, and Escape puts the plan's value back.\n\n"
            "Top, the verdict: whether the peak memory of a training step, plus the framework's "
            "overhead, fits in the card's memory less the headroom you keep free. When it does "
            "not, the button beside it opens the Diagnosis.\n\n"
            "Centre, the chart: one bar per phase of a step (forward, backward, optimizer step) "
            "and the peak, split into weights, gradients, optimizer state, activations and "
            "overhead. The dashed line is the card's capacity; the shaded band is the headroom. "
            "Click a segment to see its arithmetic. On several GPUs the bars are one GPU's, the "
            "worst by default; with pipeline stages, Rank picks another.\n\n"
            "Right, the Details: Arithmetic (how each figure is made), Compute & time (FLOPs, "
            "hours and cost), Serving (memory for inference) and Diagnosis (the changes that "
            "would make the plan fit, cheapest first).",
        )

    def _shortcuts(self) -> None:
        dialogs.info(self, "Keyboard shortcuts", "\n".join(self.shortcut_lines()))

    def shortcut_lines(self) -> list[str]:
        """Every menu action with a shortcut (the tools' Ctrl+Shift ones too), in menu order."""
        actions: list[QAction] = []
        menus: list[QMenu] = [m for a in self.menuBar().actions() if isinstance(m := a.menu(), QMenu)]
        while menus:
            for action in menus.pop(0).actions():
                sub = action.menu()
                if isinstance(sub, QMenu):
                    menus.append(sub)
                elif action not in actions:
                    actions.append(action)
        native = QKeySequence.SequenceFormat.NativeText
        named = [(a.shortcut().toString(native), a.iconText().replace("&", "").rstrip("…")) for a in actions]
        lines = [f"{keys}\t{name}" for keys, name in named if keys]
        lines += [
            "Enter\tApply the value typed in a box",
            "Escape\tPut the plan's value back in a box",
            "Tab / Shift+Tab\tNext / previous field",
        ]
        return lines

    def _about(self) -> None:
        dialogs.info(
            self,
            f"About {APP_NAME}",
            "VRAM Planner tells you whether a training or serving run fits in GPU memory, "
            "what fills the memory, and how long the run takes.",
        )

    # ---- session -------------------------------------------------------------------
    def restore_session(self, stored: Plan | None = None) -> None:
        """Window geometry and docks, and the last plan, as they were at the last close
        (``stored``: the last plan, when the caller has read it already)."""
        geometry = self.settings.geometry
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(first_size(self.screen().availableGeometry().size()))
        state = self.settings.window_state
        if state is not None:
            self.restoreState(state)
        self.document.restore(stored)

    def save_session(self) -> None:
        self.settings.geometry = self.saveGeometry()
        self.settings.window_state = self.saveState()
        self.document.store()
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.document.maybe_save():
            event.ignore()
            return
        self.save_session()
        event.accept()

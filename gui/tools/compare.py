"""View → Compare plans: pinned plans and plan files side by side, with the current plan live.

Up to four plans: one grouped chart (phases × plans on one axis, drawn from core's SVG),
a table of every input and figure with the differing rows highlighted, and the cheapest
that fits. Pinning, opening and removing plans are steps on the window's undo stack, so
Edit → Undo takes them back like any edit. The comparison saves as a file and exports as
a report. All figures come from :mod:`core.advice.compare`; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QByteArray, QEvent, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QFont,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
    QShowEvent,
    QUndoCommand,
)
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from core.advice import compare as comparisons
from core.advice.compare import MAX_PLANS, Comparison
from core.errors import PlanError, PlanFileError
from core.estimate import Estimate, gpu_for
from core.files import comparison as comparison_file
from core.files.report import (
    CHART_HEIGHT,
    CHART_MIN_WIDTH,
    CHART_WIDTH,
    ChartInk,
    Report,
    chart_least_height,
    chart_svg_sized,
    report_for_comparison,
)
from core.plan import METHOD_LABELS, Plan
from gui import dialogs, offthread, plaintext, saving
from gui.display_state import Display
from gui.format import Unit
from gui.layout import FlowLayout
from gui.tools import report_export
from gui.tools.compare_table import CompareTable
from gui.tools.context import ToolContext
from gui.worker.runner import JobFailed

COMPARISON_FILTER = "VRAM Planner comparisons (*.json);;All files (*)"
PLANS_FILTER = "VRAM Planner plans or comparisons (*.json);;All files (*)"
CURRENT = "Current plan (live)"
REFRESH_MS = 80
PIN_TIP = "Keep a copy of the plan as it is now; edit on and compare"
FULL_TIP = f"{MAX_PLANS} plans are compared at most: remove one to pin another"
REMOVE_TIP = "Remove the selected plan (a column of the table)"
USE_TIP = "Make the selected pinned plan the current plan"
NOTHING_PINNED_TIP = "No plan is pinned yet: pin the current plan or open plan files"


def chart_ink(palette: QPalette) -> ChartInk:
    """The report chart's text and gridlines in the window's palette: its text colour, and its Mid role for the
    gridlines (#b8b8b8 on Fusion's white base, #4a4d52 on gui.theme's dark one). Here, not in gui.plotstyle: the
    window's chart loads that at start-up, and core.files.report brings the diagnosis with it."""
    return ChartInk(
        text=palette.color(QPalette.ColorRole.Text).name(),
        gridline=palette.color(QPalette.ColorRole.Mid).name(),
    )


class SvgView(QWidget):
    """Paints an SVG document scaled to the widget, keeping its aspect ratio (QtSvg only). A chart set with
    :meth:`set_chart` is drawn again for each size the widget takes and each palette, so it shows at its own
    size in the window's theme; the widget keeps the chart's least size (its scroll area scrolls below it)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.renderer = QSvgRenderer(self)
        self.setMinimumHeight(200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._draw: Callable[[int, int, ChartInk], str] | None = None
        self._least_height: Callable[[int], int] | None = None
        self._drawn_at = QSize()

    def set_svg(self, svg: str) -> None:
        self._draw = self._least_height = None
        self.setMinimumSize(0, 200)
        self.renderer.load(QByteArray(svg.encode("utf-8")))
        self.update()

    def set_chart(self, draw: Callable[[int, int, ChartInk], str], least_height: Callable[[int], int]) -> None:
        """``draw(width, height, ink)``: the SVG for a box of that size in the palette's colours
        (core.files.report.chart_svg_sized); ``least_height(width)``: the least box it draws for that width
        (chart_least_height). The widget is held at CHART_MIN_WIDTH × that: docked at ~375 px in a 768 px
        window the splitter gave it 200 px, and the 333 px chart was scaled to 0.6 (its 11 px text ~6.6 px).
        CHART_MIN_WIDTH (240 px) is under the 256 px pane the dock's least width leaves: docked, it never
        scrolls sideways (it did by 104 px at 1024 × 768 when the chart was held at 360 px)."""
        self._draw, self._least_height = draw, least_height
        self.setMinimumWidth(CHART_MIN_WIDTH)
        self._drawn_at = QSize()
        self._redraw()

    def _redraw(self) -> None:
        if self._draw is None or self.size() == self._drawn_at:
            return
        if self._least_height is not None:
            self.setMinimumHeight(self._least_height(self.width()))
        self._drawn_at = self.size()
        self.renderer.load(QByteArray(self._draw(self.width(), self.height(), chart_ink(self.palette())).encode()))
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._redraw()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._drawn_at = QSize()  # drawn again in the new palette's colours
            self._redraw()
        super().changeEvent(event)

    def sizeHint(self) -> QSize:
        return QSize(CHART_WIDTH, CHART_HEIGHT)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base))
        size = self.renderer.defaultSize()
        if size.isEmpty():
            return
        scale = min(self.width() / size.width(), self.height() / size.height())
        w, h = size.width() * scale, size.height() * scale
        self.renderer.render(painter, QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h))
        painter.end()


class PinnedEdit(QUndoCommand):
    """Replace the list of pinned plans; undone with the window's other edits."""

    def __init__(self, panel: ComparePanel, after: list[tuple[str, Plan]], text: str) -> None:
        super().__init__(text)
        self.panel = panel
        self.before = list(panel.pinned)
        self.after = list(after)

    def redo(self) -> None:
        self.panel._set_pinned(self.after)

    def undo(self) -> None:
        self.panel._set_pinned(self.before)


FIRST_SHARE = (320, 420)  # the chart's and the table's parts of a tall dock, before the handle is moved
TABLE_FIRST_ROWS = 2  # the table's rows under the plans' names the chart's first share leaves in sight


class ComparePanel(QWidget):
    comparisonChanged = Signal(object)  # Comparison | None

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("comparePanel")
        self.context = context
        self.controller = controller = context.controller
        self.unit: Unit = context.display.unit
        self.pinned: list[tuple[str, Plan]] = []
        self.comparison: Comparison | None = None
        self._pin_count = 0

        # The chart and the table take the dock's whole width (a scroll area's edge needs no margin): docked at
        # 375 px, 8 px each side left the chart's pane 359 px, under its 360 px least width, so it scrolled sideways.
        self._outer = outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 8, 0, 8)
        self._top = layout = QVBoxLayout()  # the buttons, the live plan's box and the summary
        layout.setContentsMargins(8, 0, 8, 0)
        outer.addLayout(layout)
        layout.addLayout(self._build_buttons())
        self.include_current = QCheckBox("Include the current plan, live")
        self.include_current.setChecked(True)
        self.include_current.toggled.connect(self.refresh)
        layout.addWidget(self.include_current)
        self.summary = QLabel()
        self.summary.setObjectName("compareSummary")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        bold = QFont(self.summary.font())
        bold.setBold(True)
        self.summary.setFont(bold)
        layout.addWidget(self.summary)

        self.splitter = splitter = QSplitter(Qt.Orientation.Vertical)
        self.chart = SvgView()
        self.chart.setObjectName("compareChart")
        # Scrolled where the splitter's pane is smaller than the chart's least size, never scaled below it.
        self.chart_scroll = QScrollArea()
        self.chart_scroll.setWidgetResizable(True)
        self.chart_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.chart_scroll.setWidget(self.chart)
        splitter.addWidget(self.chart_scroll)
        self.table = CompareTable()  # side by side where the plans' columns fit, else one block a row
        self.table.removeRequested.connect(self.remove_selected)
        splitter.addWidget(self.table)
        splitter.setSizes(list(FIRST_SHARE))
        # Until the handle is moved by hand the chart's pane is sized by _share_chart; then it stays where put.
        self._split_by_hand = False
        splitter.splitterMoved.connect(self._handle_moved)
        outer.addWidget(splitter, 1)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        controller.estimateChanged.connect(self._estimate_changed)
        context.display.changed.connect(self._display_changed)
        self.refresh()

    def _handle_moved(self) -> None:
        self._split_by_hand = True

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)  # the layout has set the splitter's new size
        self._hold_least_size()
        self._share_chart()

    def _hold_least_size(self) -> None:
        """The least size the panel takes, its dock floating or not: as wide as the chart's least width beside a
        vertical scroll bar, so its pane never scrolls sideways, and as tall as the buttons' rows, the live plan's
        box and the summary take at this width, over the splitter's least height. The layout's own least size
        (213 × 231 px) took no account of the buttons' rows wrapping: a floating dock dragged to it drew four rows
        of buttons over the box and the summary, and the chart's pane 213 px wide scrolled sideways."""
        outer = self._outer
        margins = outer.contentsMargins()
        bar = self.chart_scroll.verticalScrollBar().sizeHint().width()
        width = max(CHART_MIN_WIDTH + bar, self._top.minimumSize().width()) + margins.left() + margins.right()
        top = self._top.heightForWidth(max(width, self.width()) - margins.left() - margins.right())
        height = margins.top() + top + outer.spacing() + self.splitter.minimumSizeHint().height() + margins.bottom()
        if self.minimumSize() != QSize(width, height):
            self.setMinimumSize(width, height)

    def _share_chart(self) -> None:
        """The splitter's first share, until the handle is moved: the chart's pane as tall as the chart's least
        height (core.files.report.chart_least_height, a horizontal scroll bar's height more where the pane is
        narrower than CHART_MIN_WIDTH), or FIRST_SHARE's part where that is more, the table keeping the plans'
        names and TABLE_FIRST_ROWS rows in sight (CompareTable.kept_rows), and its own scroll bar.
        The proportional 320 : 420 gave the chart 162 px of 375 at 1024 × 768 (its least 333 px: it started
        scrolled); docked at 375 px, 180 of 417 px, and the vertical scroll bar narrowed its pane further below
        the chart's least width, so it scrolled sideways as well."""
        splitter, comparison, table = self.splitter, self.comparison, self.table
        total = sum(splitter.sizes())
        if self._split_by_hand or comparison is None or total <= 0:
            return
        # At the width the chart keeps beside a vertical scroll bar: the least height at the pane's whole width
        # left it a few px short, and the bar that showed narrowed it to the taller least height.
        scroll = self.chart_scroll
        width = scroll.width() - scroll.verticalScrollBar().sizeHint().width()
        want = chart_least_height(comparison, width)
        if width < CHART_MIN_WIDTH:
            want += scroll.horizontalScrollBar().sizeHint().height()
        keep = table.kept_height(TABLE_FIRST_ROWS) + 2 * table.frameWidth()
        if table.horizontalHeader().length() > table.viewport().width():  # the table scrolls sideways too
            keep += table.horizontalScrollBar().sizeHint().height()
        chart = max(0, min(max(want, total * FIRST_SHARE[0] // sum(FIRST_SHARE)), total - keep))
        if splitter.sizes() != [chart, total - chart]:
            splitter.setSizes([chart, total - chart])

    def _build_buttons(self) -> FlowLayout:
        buttons = FlowLayout()
        self.pin_button = QPushButton("Pin current plan")
        self.pin_button.setToolTip(PIN_TIP)
        self.pin_button.clicked.connect(self.pin_current)
        self.open_button = QPushButton("Open plan files…")
        self.open_button.clicked.connect(self.open_files)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip(REMOVE_TIP)
        self.remove_button.clicked.connect(self.remove_selected)
        self.use_button = QPushButton("Edit this plan")
        self.use_button.setToolTip(USE_TIP)
        self.use_button.clicked.connect(self.use_selected)
        self.save_button = QPushButton("Save comparison…")
        self.save_button.clicked.connect(self.save)
        self.report_button = QPushButton("Export report…")
        self.report_button.clicked.connect(self.export_report)
        self.copy_button = QPushButton("Copy as Markdown")
        self.copy_button.clicked.connect(self.copy_markdown)
        # In rows that wrap to the dock's width: the seven in one row held the dock at ~810 px
        # (opening the comparison at 1280 × 720 squeezed the memory chart to a sliver), two
        # fixed rows at ~430 px (at 1024 × 700, a 150 px chart).
        for button in (
            self.pin_button,
            self.open_button,
            self.remove_button,
            self.use_button,
            self.save_button,
            self.report_button,
            self.copy_button,
        ):
            buttons.addWidget(button)
        return buttons

    # ---- the plans -------------------------------------------------------------------
    def named_plans(self) -> list[tuple[str, Plan]]:
        named = list(self.pinned)
        if self.include_current.isChecked() and len(named) < MAX_PLANS:
            named.append((CURRENT, self.controller.plan))
        return named

    def _push(self, after: list[tuple[str, Plan]], text: str) -> None:
        self.controller.undo_stack.push(PinnedEdit(self, after, text))

    def _set_pinned(self, pinned: list[tuple[str, Plan]]) -> None:
        self.pinned = list(pinned)
        self.refresh()

    def _name_for(self, plan: Plan) -> str:
        self._pin_count += 1
        # Names people read (Llama 3.1 8B, LoRA, NVIDIA GeForce RTX 4090), not catalogue ids.
        card = gpu_for(plan).name
        cards = f"{card} × {plan.world_size}" if plan.world_size > 1 else card
        return f"#{self._pin_count} {plan.model.name}, {METHOD_LABELS[plan.method]}, {cards}"

    def pin_current(self) -> bool:
        if len(self.pinned) >= MAX_PLANS:
            dialogs.error(self, "Compare plans", f"A comparison holds {MAX_PLANS} plans; remove one first.")
            return False
        plan = self.controller.plan
        self._push([*self.pinned, (self._name_for(plan), plan)], "Pin the plan for comparison")
        return True

    def add_plans(self, named: list[tuple[str, Plan]], text: str) -> bool:
        room = MAX_PLANS - len(self.pinned)
        if len(named) > room:
            dialogs.error(
                self, "Compare plans", f"{len(named)} plans do not fit: a comparison holds {MAX_PLANS} ({room} free)."
            )
            return False
        self._push([*self.pinned, *named], text)
        return True

    def open_files(self) -> bool:
        paths = dialogs.open_files(self, "Open plans to compare", PLANS_FILTER)
        if not paths:
            return False
        room = MAX_PLANS - len(self.pinned)
        if len(paths) > room:  # each file holds a plan at least: refused before any is read
            dialogs.error(
                self, "Compare plans", f"{len(paths)} files do not fit: a comparison holds {MAX_PLANS} ({room} free)."
            )
            return False
        try:  # large files are parsed in the worker process: the window keeps running
            loaded = offthread.read_off_the_gui_thread(
                self,
                comparison_file.load_named,
                list(paths),
                lane="files",
                title="Open plans to compare",
                text=f"Reading {len(paths)} file(s)…",
                name="compareProgress",
                worker=offthread.worker_for(paths),
            )
            if loaded is None:
                return False  # cancelled
            named = loaded
            for name, plan in named:  # a plan the estimator refuses (an unknown GPU id) never gets in
                comparisons.compare([(name, plan)])
        except (PlanFileError, PlanError, JobFailed) as error:
            dialogs.error(self, "Cannot open the plans", str(error))
            return False
        return self.add_plans(named, f"Open {len(named)} plan(s) for comparison")

    def selected_index(self) -> int | None:
        return self.table.selected_plan()

    def remove_selected(self) -> bool:
        index = self.selected_index()
        if index is None or index >= len(self.pinned):
            return False
        name = self.pinned[index][0]
        text = plaintext.menu_text(f"Remove {name} from the comparison")
        self._push([p for i, p in enumerate(self.pinned) if i != index], text)
        return True

    def use_selected(self) -> bool:
        index = self.selected_index()
        if index is None or index >= len(self.pinned):
            return False
        name, plan = self.pinned[index]
        return self.controller.set_plan(plan, text=plaintext.menu_text(f"Edit {name}")) is None

    # ---- files and reports ------------------------------------------------------------
    def save(self) -> bool:
        if self.comparison is None:
            return False
        path = dialogs.save_file(self, "Save comparison", COMPARISON_FILTER, "plans.comparison.json")
        if not path:
            return False
        comparison = self.comparison
        return saving.write_confirmed(
            self, "Cannot save the comparison", path, lambda force: comparison_file.save(comparison, path, force=force)
        )

    def _report(self) -> Report | None:
        if self.comparison is None:
            return None
        return report_for_comparison(self.comparison, unit=self.unit)

    def export_report(self) -> report_export.ReportExport | None:
        """The comparison's report, built and written in the worker (with progress and Cancel)."""
        if self.comparison is None:
            return None
        return report_export.export_report(self.context, [(p.name, p.plan) for p in self.comparison.plans])

    def copy_markdown(self) -> str:
        report = self._report()
        return report_export.copy_markdown(report) if report is not None else ""

    # ---- showing ------------------------------------------------------------------
    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        self.refresh()

    def _display_changed(self, display: Display) -> None:
        if display.unit != self.unit:
            self.set_unit(display.unit)
        elif self.comparison is not None and display.mode is not self.comparison.mode:
            self.refresh()  # compared for what the window answers now: training or serving

    def _estimate_changed(self, _estimate: Estimate) -> None:
        if self.include_current.isChecked() and self.isVisible():
            self._timer.start()

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh()
        super().showEvent(event)

    def refresh(self) -> None:
        self._timer.stop()
        named = self.named_plans()
        self.comparison = comparisons.compare(named, self.context.display.mode) if named else None
        # A greyed button says why in its tip (the pin button stood greyed at four plans, its tip unchanged).
        pinned, room = bool(self.pinned), len(self.pinned) < MAX_PLANS
        for button, on, tip, greyed in (
            (self.remove_button, pinned, REMOVE_TIP, NOTHING_PINNED_TIP),
            (self.use_button, pinned, USE_TIP, NOTHING_PINNED_TIP),
            (self.pin_button, room, PIN_TIP, FULL_TIP),
        ):
            button.setEnabled(on)
            button.setToolTip(tip if on else greyed)
        self.save_button.setEnabled(self.comparison is not None)
        self._fill()
        self._hold_least_size()  # the summary's new text may take another line
        self.comparisonChanged.emit(self.comparison)

    def _fill(self) -> None:
        comparison = self.comparison
        self.table.show_comparison(comparison, self.unit)
        if comparison is None:
            self.summary.setText("Pin the current plan or open plan files to compare up to four plans.")
            self.chart.set_svg("")
            return
        best = comparison.cheapest_fit()
        self.summary.setText(
            f"Cheapest that fits: {best + 1}. {plaintext.escape_controls(comparison.names[best])}"
            if best is not None
            else "None of these plans fits its card."
        )
        unit = self.unit
        self.chart.set_chart(
            lambda width, height, ink: chart_svg_sized(comparison, unit, width, height, ink),
            lambda width: chart_least_height(comparison, width),
        )
        self._share_chart()

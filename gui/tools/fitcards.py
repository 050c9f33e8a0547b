"""View → Which cards fit: the current plan on every catalogue GPU × 1-8, sorted by cost.

Rows come from :func:`core.advice.fit.cards_for`; the view only formats them. Clicking a row makes
that card and count the plan's (one undoable edit). While the panel is hidden it does no
work; while shown, bursts of edits are coalesced into one refresh.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.advice.fit import CardFit, cards_for, cheapest_fit, plan_on
from core.estimate import VERDICT_LABELS, Estimate
from core.files.report import VERDICT_COLOURS
from gui import plaintext
from gui.display_state import Display
from gui.format import Unit, hours, memory, money
from gui.tools.context import ToolContext

COLUMNS = ("GPU", "×", "Sharding", "Per GPU", "Capacity", "Verdict", "Time", "Price/GPU-h", "Cost", "Tokens/s")
REFRESH_MS = 120


class LivePlanPanel(QWidget):
    """A panel that follows the current plan while it is shown: it refreshes when shown, and
    while shown a burst of edits is coalesced into one refresh; hidden, it does no work."""

    def __init__(self, context: ToolContext, refresh_ms: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context = context
        self.controller = controller = context.controller
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(refresh_ms)
        self._timer.timeout.connect(self.refresh)
        controller.estimateChanged.connect(self._estimate_changed)

    def _estimate_changed(self, _estimate: Estimate) -> None:
        if self.isVisible():
            self._timer.start()

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh()
        super().showEvent(event)

    def refresh(self) -> None:
        """Read the plan again (subclasses extend this and call it first)."""
        self._timer.stop()


class FitCardsPanel(LivePlanPanel):
    cardApplied = Signal(str, int)  # gpu id, count

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        super().__init__(context, REFRESH_MS, parent)
        self.setObjectName("fitCardsPanel")
        self.unit: Unit = context.display.unit
        self.rows: tuple[CardFit, ...] = ()
        self.shown_rows: list[CardFit] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.summary = QLabel()
        self.summary.setObjectName("fitSummary")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        options = QHBoxLayout()
        self.fits_only = QCheckBox("Only cards that fit")
        self.fits_only.setChecked(True)
        self.fits_only.toggled.connect(self._fill)
        self.keep_sharding = QCheckBox("Keep the plan's sharding")
        self.keep_sharding.setToolTip("Off: several cards shard fully (ZeRO-3 / FSDP) when the plan does not shard")
        self.keep_sharding.toggled.connect(self.refresh)
        options.addWidget(self.fits_only)
        options.addWidget(self.keep_sharding)
        options.addStretch(1)
        layout.addLayout(options)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("fitTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setToolTip("Click a row to use that card and count")
        self.table.cellClicked.connect(self._clicked)
        layout.addWidget(self.table, 1)
        hint = QLabel("Click a row to use that card and count (Edit → Undo takes it back).")
        hint.setObjectName("fitHint")
        layout.addWidget(hint)
        context.display.changed.connect(self._display_changed)

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        self._fill()

    def _display_changed(self, display: Display) -> None:
        if display.unit != self.unit:
            self.set_unit(display.unit)

    def refresh(self) -> None:
        super().refresh()
        self.rows = cards_for(self.controller.plan, keep_sharding=self.keep_sharding.isChecked())
        self._fill()

    def _fill(self) -> None:
        plan = self.controller.plan
        best = cheapest_fit(self.rows)
        self.shown_rows = [r for r in self.rows if r.fits or not self.fits_only.isChecked()]
        self.summary.setText(
            f"{plan.model.name}, {plan.method.value}: "
            + (
                f"cheapest that fits is {best.gpu.name} × {best.count} ({money(best.cost)} at "
                f"{best.price:g} per GPU-hour, {hours(best.hours)}). Prices marked * are the catalogue's "
                f"typical cloud prices; the others are the plan's {plan.hardware.price_per_gpu_hour:g}."
                if best
                else "no catalogue card fits, even eight of them."
            )
        )
        table = self.table
        table.setUpdatesEnabled(False)
        table.setRowCount(len(self.shown_rows))
        bold = QFont()
        bold.setBold(True)
        for index, row in enumerate(self.shown_rows):
            est = row.estimate
            cells = (
                row.gpu.name,
                str(row.count),
                row.sharding.value,
                memory(est.total_bytes, self.unit),
                memory(est.capacity_bytes, self.unit),
                VERDICT_LABELS[row.verdict],
                hours(row.hours),
                money(row.price) + ("" if row.price_from == "the plan" else " *"),
                money(row.cost),
                f"{est.compute.tokens_per_second:,.0f}",
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row is best:
                    item.setFont(bold)
                if column == 5:
                    item.setForeground(QBrush(QColor(VERDICT_COLOURS[row.verdict])))
                if column == 7:
                    item.setToolTip(plaintext.tooltip(f"Price per GPU-hour from {row.price_from}"))
                table.setItem(index, column, item)
        table.setUpdatesEnabled(True)

    def _clicked(self, index: int, _column: int) -> None:
        if not 0 <= index < len(self.shown_rows):
            return
        row = self.shown_rows[index]
        keep = self.keep_sharding.isChecked()
        gpu, count, price = row.gpu.id, row.count, row.price
        error = self.controller.update(
            "",
            lambda p: plan_on(p, gpu, count, keep_sharding=keep, price=price),
            f"Use {count} × {row.gpu.name}",
        )
        if error is None:
            self.cardApplied.emit(gpu, count)

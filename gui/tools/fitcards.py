"""View → Which cards fit: the current plan on every catalogue GPU × 1-8, sorted by cost.

The rows are :func:`core.advice.fit.cards_for`'s, found in the worker process
(:func:`gui.tools.searches.find_cards`: 576 estimates, with progress and Cancel); the view
only formats them. Clicking a row makes that card and count the plan's (one undoable
edit). While the panel is hidden it does no work; while shown, bursts of edits are
coalesced into one search.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
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

from core.advice.fit import plan_on
from core.verdict import cheapest_fit_words
from gui import plaintext
from gui.display_state import Display
from gui.format import hours, memory, money
from gui.panels.verdict import text_colour
from gui.tools.context import ToolContext
from gui.tools.live import SearchPanel
from gui.tools.searches import CardRow, CardsAnswer, CardsRequest, find_cards

COLUMNS = ("GPU", "×", "Sharding", "Per GPU", "Capacity", "Verdict", "Time", "Price/GPU-h", "Cost", "Tokens/s")
REFRESH_MS = 120
HINT = "Click a row to use that card and count (Edit → Undo takes it back)."


class FitCardsPanel(SearchPanel):
    cardApplied = Signal(str, int)  # gpu id, count

    def __init__(self, context: ToolContext, parent: QWidget | None = None) -> None:
        texts = (HINT, "Trying every card…", "%v of %m cards")
        super().__init__(context, find_cards, REFRESH_MS, texts, parent)
        self.setObjectName("fitCardsPanel")
        self.answer: CardsAnswer | None = None
        self.shown_rows: list[CardRow] = []
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
        layout.addWidget(self._build_table(), 1)
        layout.addWidget(self.progress)
        context.display.changed.connect(self._display_changed)

    def _build_table(self) -> QTableWidget:
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
        return self.table

    @property
    def rows(self) -> tuple[CardRow, ...]:
        return self.answer.rows if self.answer is not None else ()

    def request(self) -> CardsRequest:
        return CardsRequest(self.controller.plan, self.keep_sharding.isChecked())

    def show_answer(self, answer: CardsAnswer) -> None:
        self._fill()

    def _display_changed(self, _display: Display) -> None:
        self._fill()  # another unit

    def _fill(self) -> None:
        answer = self.answer
        if answer is None:
            return
        plan = answer.request.plan
        best = answer.rows[answer.cheapest] if answer.cheapest is not None else None
        self.shown_rows = [r for r in answer.rows if r.fits or not self.fits_only.isChecked()]
        self.summary.setText(
            f"{plan.model.name}, {plan.method.value}: "
            + (
                f"{cheapest_fit_words(f'{best.gpu_name} × {best.count}', best.narrow)} "
                f"({money(best.cost, best.currency)} at "
                f"{money(best.price, best.currency)} per GPU-hour, {hours(best.hours)}). Prices marked * are the "
                "catalogue's typical cloud prices, in US dollars; a card without one has an unknown cost."
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
            for column, item in enumerate(self._cells(row)):
                if row is best:
                    item.setFont(bold)
                table.setItem(index, column, item)
        table.setUpdatesEnabled(True)

    def _cells(self, row: CardRow) -> list[QTableWidgetItem]:
        unit = self.context.display.unit
        texts = (
            row.gpu_name,
            str(row.count),
            row.sharding.value,
            memory(row.total_bytes, unit),
            memory(row.capacity_bytes, unit),
            row.label,
            hours(row.hours),
            money(row.price, row.currency) + (" *" if row.currency else ""),
            money(row.cost, row.currency),
            f"{row.tokens_per_second:,.0f}",
        )
        items = []
        for column, text in enumerate(texts):
            item = QTableWidgetItem(text)
            if column >= 3:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if column == 5:
                item.setForeground(QBrush(QColor(text_colour(row.colour))))
            if column == 7:
                item.setToolTip(plaintext.tooltip(f"Price per GPU-hour from {row.price_from}"))
            items.append(item)
        return items

    def _clicked(self, index: int, _column: int) -> None:
        if not 0 <= index < len(self.shown_rows) or self.answer is None:
            return
        row = self.shown_rows[index]
        keep = self.answer.request.keep_sharding
        gpu, count = row.gpu_id, row.count
        price = row.price if math.isfinite(row.price) else None  # unknown: the plan keeps its own
        error = self.controller.update(
            "",
            lambda p: plan_on(p, gpu, count, keep_sharding=keep, price=price),
            f"Use {count} × {row.gpu_name}",
        )
        if error is None:
            self.cardApplied.emit(gpu, count)

"""Rows of remedies with an Apply button, each showing the core's total, verdict and cost.

Row widgets are built once and reused between updates, and a row whose entry reads the
same as before keeps its text (only the plan behind its Apply button is replaced); a row
only formats a :class:`RemedyEntry`, made from a core :class:`core.advice.diagnosis.Remedy` or
``Combination``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QGridLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from core.plan import Plan
from core.verdict import Verdict, verdict_label
from gui.format import Unit, memory
from gui.panels.verdict import text_colour, verdict_style
from gui.plaintext import tooltip as plain_tooltip
from gui.plaintext import wrappable

if TYPE_CHECKING:
    from core.advice.diagnosis import Combination, Remedy


@dataclass(frozen=True)
class RemedyEntry:
    """One row of a remedy list: a plan to apply and the core's verdict and cost for it."""

    key: str
    title: str
    plan: Plan
    total_bytes: float
    verdict: Verdict
    cost: str
    serving: bool = False
    # A fit whose range reaches into the headroom (core.verdict's narrow fit): badged NARROW_LABEL, not green.
    narrow: bool = False

    @property
    def label(self) -> str:
        """The verdict in core.verdict's words."""
        return verdict_label(self.verdict, self.narrow)

    @classmethod
    def from_remedy(cls, remedy: Remedy) -> RemedyEntry:
        r = remedy
        return cls(r.key, r.title, r.plan, r.total_bytes, r.verdict, r.cost, r.serving, r.fits_narrowly)

    @classmethod
    def from_combination(cls, combination: Combination) -> RemedyEntry:
        serving = combination.judgement.total_bytes != combination.estimate.total_bytes
        return cls(
            "combination",
            f"Together: {combination.title}",
            combination.plan,
            combination.total_bytes,
            combination.verdict,
            combination.cost,
            serving,
            combination.fits_narrowly,
        )


def _verdict_text(entry: RemedyEntry) -> str:
    symbol, _ = verdict_style(entry.verdict, entry.narrow)
    return f"{symbol} {entry.label}"


def _verdict_html(entry: RemedyEntry) -> str:
    colour = text_colour(verdict_style(entry.verdict, entry.narrow)[1])  # a darker shade of a light colour
    return f"<span style='color:{colour}; font-weight:600'>{_verdict_text(entry)}</span>"


SIDE_BY_SIDE_WIDTH = 300  # a row this wide shows its total and verdict on one line


class _RemedyRow(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("remedyRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.entry: RemedyEntry | None = None
        self._shown: tuple[object, ...] = ()  # what the row's text says now
        self.updates = 0  # times its text was rewritten; tests read it
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(2)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.title.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        grid.addWidget(self.title, 0, 0)
        self.apply = QPushButton("Apply")
        self.apply.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        grid.addWidget(self.apply, 0, 1, 2, 1, Qt.AlignmentFlag.AlignVCenter)
        # The new total and its verdict side by side in a wide panel, one above the other in a
        # narrow one (the Details dock at 1024 × 700), so a row never widens the panel.
        figures = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        figures.setSpacing(2)
        self._figures = figures
        self.total = QLabel()
        self.total.setAccessibleName("New total")
        self.total.setFont(bold)
        figures.addWidget(self.total)
        self.status = QLabel()
        self.status.setAccessibleName("Fits")
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setWordWrap(True)  # a narrow Details dock (1024 × 700) wraps it, not cuts the panel
        self.status.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        figures.addWidget(self.status, 1)
        figures.addStretch(1)
        grid.addLayout(figures, 1, 0)
        self.cost = QLabel()
        self.cost.setAccessibleName("Cost")
        self.cost.setWordWrap(True)
        self.cost.setTextFormat(Qt.TextFormat.PlainText)
        self.cost.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        small = self.cost.font()
        small.setPointSizeF(small.pointSizeF() * 0.92)
        self.cost.setFont(small)
        grid.addWidget(self.cost, 2, 0, 1, 2)
        grid.setColumnStretch(0, 1)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        wide = self.width() >= SIDE_BY_SIDE_WIDTH
        direction = QBoxLayout.Direction.LeftToRight if wide else QBoxLayout.Direction.TopToBottom
        if self._figures.direction() != direction:
            self._figures.setDirection(direction)
            self._figures.setSpacing(12 if wide else 2)

    def show_entry(self, entry: RemedyEntry, unit: Unit) -> None:
        self.entry = entry  # always the new one: Apply applies this report's plan
        shown = (entry.title, entry.total_bytes, entry.verdict, entry.narrow, entry.cost, entry.serving, unit)
        if shown == self._shown:
            return  # the row already reads so: no new text to lay out and paint
        self._shown = shown
        self.updates += 1
        self.title.setText(wrappable(entry.title))  # a long word breaks inside the dock, never widens it
        self.total.setText(memory(entry.total_bytes, unit))
        self.total.setToolTip(
            "New serving total"
            if entry.serving
            else "New judged figure (nvidia-smi; amd-smi on an AMD card, the MPS driver's on a Mac)"
        )
        self.status.setText(_verdict_html(entry))
        self.cost.setText(entry.cost)
        self.apply.setAccessibleName(f"Apply: {entry.title}")
        self.apply.setToolTip(plain_tooltip(f"Change the plan: {entry.title} (one undoable step)"))
        self.setAccessibleName(f"{entry.title}: {memory(entry.total_bytes, unit)}, {entry.label}")


class RemedyList(QWidget):
    """Rows of remedies, each with an Apply button; row widgets are reused between updates."""

    applyRequested = Signal(object)  # RemedyEntry

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self._pool: list[_RemedyRow] = []
        self._count = 0
        self.unit: Unit = "GB"
        self._entries: tuple[RemedyEntry, ...] = ()

    @property
    def rows(self) -> list[_RemedyRow]:
        return self._pool[: self._count]

    @property
    def entries(self) -> tuple[RemedyEntry, ...]:
        return self._entries

    def show_entries(self, entries: tuple[RemedyEntry, ...], unit: Unit) -> None:
        self._entries = entries
        self.unit = unit
        while len(self._pool) < len(entries):
            row = _RemedyRow(self)
            row.apply.clicked.connect(lambda _checked=False, r=row: self._clicked(r))
            self._layout.addWidget(row)
            self._pool.append(row)
        for row, entry in zip(self._pool, entries, strict=False):
            row.show_entry(entry, unit)
            row.setVisible(True)
        for row in self._pool[len(entries) :]:
            row.setVisible(False)
        self._count = len(entries)
        self.setVisible(bool(entries))

    def set_unit(self, unit: Unit) -> None:
        if unit != self.unit:
            self.show_entries(self._entries, unit)

    def set_applicable(self, on: bool) -> None:
        for row in self._pool:
            row.apply.setEnabled(on)

    def _clicked(self, row: _RemedyRow) -> None:
        if row.entry is not None:
            self.applyRequested.emit(row.entry)

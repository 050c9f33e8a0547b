"""A panel of labelled figures from the Estimate, refreshed only while it can be seen."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from core.estimate import Estimate


def _selectable_label(name: str, tooltip: str = "", wrap: bool = False) -> QLabel:
    label = QLabel()
    label.setAccessibleName(name)
    if tooltip:
        label.setToolTip(tooltip)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class FiguresPanel(QWidget):
    """Rows of (label, value) plus a formula line; subclasses fill them in ``_show``.

    A hidden tab's labels would be measured again on every layout pass of the window (a
    tab widget sizes itself to all its pages), so a hidden panel keeps the estimate and
    catches up when it is shown.

    The rows, the formula and whatever a subclass adds to ``content`` scroll up and down: at
    1280 × 720 the serving speed's wrapped assumptions were squeezed to four lines and cut
    (a word-wrapped label in a full layout gets less than its height for its width).
    """

    def __init__(
        self,
        name: str,
        rows: tuple[tuple[str, str, str], ...],
        formula_name: str,
        parent: QWidget | None = None,
        headline_name: str = "",
    ) -> None:
        super().__init__(parent)
        self.setAccessibleName(name)
        self._estimate: Estimate | None = None
        self._stale = False
        scroll = QScrollArea()
        scroll.setAccessibleName(name)  # a focus stop: a screen reader names it as the panel
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # the labels wrap
        body = QWidget()
        scroll.setWidget(body)
        QVBoxLayout(self).addWidget(scroll)
        self.layout().setContentsMargins(0, 0, 0, 0)  # type: ignore[union-attr]
        self.content = layout = QVBoxLayout(body)
        self.headline: QLabel | None = None
        if headline_name:
            self.headline = _selectable_label(headline_name, wrap=True)
            layout.addWidget(self.headline)
        self.form = form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        layout.addLayout(form)
        self.values: dict[str, QLabel] = {}
        for key, label, tooltip in rows:
            self.values[key] = _selectable_label(label, tooltip)
            form.addRow(label + ":", self.values[key])
        self.formula = _selectable_label(formula_name, wrap=True)
        layout.addWidget(self.formula)
        layout.addStretch(1)

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        if self.isVisible():
            self._show(estimate)
        else:
            self._stale = True

    def refresh(self) -> None:
        """Show the last estimate again (after a unit change, say)."""
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def showEvent(self, event: QShowEvent) -> None:
        if self._stale and self._estimate is not None:
            self._stale = False
            self._show(self._estimate)
        super().showEvent(event)

    def _show(self, estimate: Estimate) -> None:
        raise NotImplementedError

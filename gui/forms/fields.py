"""Input widgets with a range, a unit and a tooltip, that mark bad input where it is typed.

Each widget emits ``edited(value)`` only for a user edit that parses and lies in range,
and ``rejected(message)`` for text that does not; programmatic updates go through
``show_value`` and emit nothing, so model → widget never loops back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import Enum
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QFocusEvent, QValidator
from PySide6.QtWidgets import QComboBox, QCompleter, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from core import units

# Vermillion from the Okabe-Ito palette: the same colour marks "wrong" everywhere.
INVALID_STYLE = "border: 2px solid #D55E00; border-radius: 3px;"


def mark_invalid(widget: QWidget, message: str | None) -> None:
    """Red border and the message as tooltip while ``message`` is set; restore otherwise."""
    invalid = message is not None
    if bool(widget.property("invalid")) == invalid and (not invalid or widget.toolTip().endswith(message or "")):
        return
    if widget.property("plainToolTip") is None:
        widget.setProperty("plainToolTip", widget.toolTip())
    widget.setProperty("invalid", invalid)
    widget.setStyleSheet(INVALID_STYLE if invalid else "")
    plain = str(widget.property("plainToolTip") or "")
    widget.setToolTip(f"{plain}\n\n⚠ {message}" if invalid else plain)


def is_marked_invalid(widget: QWidget) -> bool:
    return bool(widget.property("invalid"))


def _describe(widget: QWidget, name: str, tooltip: str) -> None:
    widget.setAccessibleName(name)
    widget.setToolTip(tooltip)
    widget.setProperty("plainToolTip", tooltip)
    widget.setAccessibleDescription(tooltip)


def _let_shrink(combo: QComboBox) -> None:
    # Long entries ("Lesson (four buckets, typed activations)") must not widen the form
    # column: the popup still shows them in full.
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(10)


class IntField(QSpinBox):
    edited = Signal(int)
    rejected = Signal(str)

    def __init__(self, name: str, minimum: int, maximum: int, suffix: str, tooltip: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setRange(minimum, maximum)
        self.setSuffix(f" {suffix}" if suffix else "")
        self.setGroupSeparatorShown(True)
        self.setAccelerated(True)
        # Live: every keystroke that forms a valid number updates the estimate.
        self.setKeyboardTracking(True)
        _describe(self, name, f"{tooltip}\nRange {minimum:,} to {maximum:,}{' ' + suffix if suffix else ''}.")
        self._name = name
        self.valueChanged.connect(self.edited)
        self.lineEdit().textEdited.connect(self._check_text)
        self.editingFinished.connect(self._check_text)

    def _check_text(self, *_: object) -> None:
        text = self.lineEdit().text()
        state = self.validate(text, 0)[0]
        if state is QValidator.State.Acceptable:
            return
        suffix = self.suffix().strip()
        self.rejected.emit(
            f"{self._name}: “{text.removesuffix(self.suffix()).strip()}” is not a whole number from "
            f"{self.minimum():,} to {self.maximum():,}{' ' + suffix if suffix else ''}"
        )

    def show_value(self, value: int) -> None:
        if self.value() != value:
            with QSignalBlocker(self):
                self.setValue(value)


class FloatField(QDoubleSpinBox):
    """A float input; ``scale`` shows a fraction as a percentage (0.4 ↔ 40 %)."""

    edited = Signal(float)
    rejected = Signal(str)

    def __init__(
        self,
        name: str,
        minimum: float,
        maximum: float,
        suffix: str,
        tooltip: str,
        *,
        decimals: int = 2,
        step: float = 1.0,
        scale: float = 1.0,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self._scale = scale
        self._name = name
        self.setDecimals(decimals)
        self.setRange(minimum * scale, maximum * scale)
        self.setSingleStep(step)
        self.setSuffix(f" {suffix}" if suffix else "")
        self.setGroupSeparatorShown(True)
        self.setKeyboardTracking(True)
        _describe(
            self, name, f"{tooltip}\nRange {minimum * scale:g} to {maximum * scale:g}{' ' + suffix if suffix else ''}."
        )
        self.valueChanged.connect(lambda shown: self.edited.emit(shown / self._scale))
        self.lineEdit().textEdited.connect(self._check_text)
        self.editingFinished.connect(self._check_text)

    def _check_text(self, *_: object) -> None:
        text = self.lineEdit().text()
        if self.validate(text, 0)[0] is QValidator.State.Acceptable:
            return
        suffix = self.suffix().strip()
        self.rejected.emit(
            f"{self._name}: “{text.removesuffix(self.suffix()).strip()}” is not a number from "
            f"{self.minimum():g} to {self.maximum():g}{' ' + suffix if suffix else ''}"
        )

    def model_value(self) -> float:
        return self.value() / self._scale

    def show_value(self, value: float) -> None:
        shown = value * self._scale
        if not math.isclose(self.value(), shown, rel_tol=0, abs_tol=0.5 * 10 ** -self.decimals()):
            with QSignalBlocker(self):
                self.setValue(shown)


def parse_count(text: str) -> int | None:
    """The count ``text`` stands for (:func:`core.units.parse_count`), or None."""
    try:
        return units.parse_count(text)
    except ValueError:
        return None


class CountField(QLineEdit):
    """Big integer counts (token budgets, parameter counts) beyond a QSpinBox's 2³¹.

    Accepts 6.7e9, 6,700,000,000, 20M or 1.5B. With ``blank_means`` set, an empty box
    stands for that value ("derive it"), shown as the placeholder text.
    """

    edited = Signal(object)  # Python int: counts go far beyond a C++ int
    rejected = Signal(str)

    def __init__(
        self,
        name: str,
        minimum: int,
        maximum: int,
        unit: str,
        tooltip: str,
        *,
        blank_means: int | None = None,
        placeholder: str = "",
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self._name = name
        self._minimum = minimum
        self._maximum = maximum
        self._unit = unit
        self._blank_means = blank_means
        self.setPlaceholderText(placeholder)
        self.setClearButtonEnabled(blank_means is not None)
        _describe(
            self,
            name,
            f"{tooltip}\nType 6.7e9, 6,700,000,000, 20M or 1.5B; range {minimum:,} to {maximum:.3g} {unit}.",
        )
        self.textEdited.connect(self._parse)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        # Qt 6 emits editingFinished on focus-out only when the text changed since the last
        # emission: bad text confirmed with Enter, then left, would stay (marked) for good.
        if is_marked_invalid(self) and event.reason() is not Qt.FocusReason.PopupFocusReason:
            self.editingFinished.emit()

    def value(self) -> int | None:
        text = self.text().strip()
        if not text and self._blank_means is not None:
            return self._blank_means
        value = parse_count(text)
        if value is None or not self._minimum <= value <= self._maximum:
            return None
        return value

    def _parse(self, text: str) -> None:
        value = self.value()
        if value is None:
            try:
                units.parse_count(text)
                why = "is out of range"
            except ValueError as exc:
                why = str(exc)
            self.rejected.emit(
                f"{self._name}: “{text.strip()}” {why}; expected a count "
                f"from {self._minimum:,} to {self._maximum:.3g} {self._unit}"
            )
            return
        self.edited.emit(value)

    def show_value(self, value: int) -> None:
        if self.value() == value:
            return  # leave the user's own spelling (6.7e9) alone
        with QSignalBlocker(self):
            self.setText("" if self._blank_means is not None and value == self._blank_means else f"{value:,}")


class ChoiceField(QComboBox):
    """A fixed list of (label, value) choices; ``edited`` carries the value."""

    edited = Signal(object)

    def __init__(self, name: str, choices: Iterable[tuple[str, Any]], tooltip: str, parent: QWidget | None = None):
        super().__init__(parent)
        _describe(self, name, tooltip)
        _let_shrink(self)
        for label, value in choices:
            self.addItem(label, value)
        self.currentIndexChanged.connect(lambda index: self.edited.emit(self.itemData(index)))

    def show_value(self, value: Any) -> None:
        for index in range(self.count()):
            data = self.itemData(index)
            if data == value or (isinstance(value, Enum) and data == value.value):
                if index != self.currentIndex():
                    with QSignalBlocker(self):
                        self.setCurrentIndex(index)
                return

    def value(self) -> Any:
        return self.currentData()


class CatalogueField(QComboBox):
    """A catalogue picker with type-to-search: the typed words filter the list as you type.

    ``edited(id)`` fires when an entry is chosen (click, Enter on a match, completer);
    Enter on text that names no entry emits ``rejected``.
    """

    edited = Signal(str)
    rejected = Signal(str)
    # The user left the box (the form then drops a stale "invalid" mark), as a spin box's.
    editingFinished = Signal()

    def __init__(self, name: str, entries: Iterable[tuple[str, str]], tooltip: str, parent: QWidget | None = None):
        super().__init__(parent)
        self._name = name
        self._shown_text = ""  # the text show_value put up: the plan's entry
        _let_shrink(self)
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setMaxVisibleItems(20)
        for label, entry_id in entries:
            self.addItem(label, entry_id)
            self.setItemData(self.count() - 1, entry_id, Qt.ItemDataRole.ToolTipRole)
        completer = QCompleter(self.model(), self)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setCompleter(completer)
        _describe(self, name, tooltip + "\nType part of a name to search.")
        self.activated.connect(self._chosen)
        completer.activated[str].connect(self._chosen_text)
        self.lineEdit().returnPressed.connect(lambda: self._chosen_text(self.currentText()))

    def _chosen(self, index: int) -> None:
        if index >= 0:
            self.edited.emit(str(self.itemData(index)))

    def _chosen_text(self, text: str) -> None:
        wanted = text.strip().lower()
        for index in range(self.count()):
            if self.itemText(index).lower() == wanted or str(self.itemData(index)).lower() == wanted:
                if index != self.currentIndex():
                    with QSignalBlocker(self):
                        self.setCurrentIndex(index)
                self.edited.emit(str(self.itemData(index)))
                return
        self.rejected.emit(f"{self._name}: no entry called “{text.strip()}”; pick one from the list")

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if event.reason() is Qt.FocusReason.PopupFocusReason:
            return  # the list or the completer opened: still choosing
        # Text typed but never chosen (or refused) must not stay behind as if it were the plan.
        if self.currentText() != self._shown_text:
            with QSignalBlocker(self):
                self.setEditText(self._shown_text)
        self.lineEdit().setCursorPosition(0)
        self.editingFinished.emit()

    def show_value(self, entry_id: str, fallback_text: str = "") -> None:
        """Select ``entry_id``; an id not in the list (a custom model) shows ``fallback_text``."""
        index = self.findData(entry_id)
        with QSignalBlocker(self):
            if index >= 0:
                if index != self.currentIndex() or self.currentText() != self.itemText(index):
                    self.setCurrentIndex(index)
                    self.setEditText(self.itemText(index))
            else:
                self.setCurrentIndex(-1)
                self.setEditText(fallback_text)
            # Show a long name from its start ("NVIDIA GeForce…", not "…IDIA GeForce RTX 4090").
            self.lineEdit().setCursorPosition(0)
        self._shown_text = self.currentText()

    def value(self) -> str:
        return str(self.currentData() or "")

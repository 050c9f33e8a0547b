"""Input widgets with a range, a unit and a tooltip, that mark bad input where it is typed.

Each widget emits ``edited(value)`` only for a user edit that parses and lies in range,
and ``rejected(message)`` for text that does not; programmatic updates go through
``show_value`` and emit nothing, so model → widget never loops back.

One concern past 400 lines: the integer, decimal, count and choice fields share the typing
rules (kept as typed, applied on commit, Escape restores, Ctrl+Z undoes the plan).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from PySide6.QtCore import QEvent, QSignalBlocker, QSize, Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent, QKeySequence, QStandardItemModel, QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QCompleter,
    QDoubleSpinBox,
    QLineEdit,
    QSpinBox,
    QStyle,
    QStyleOptionComboBox,
    QWidget,
)
from shiboken6 import Shiboken

from core import units
from gui import colours, plaintext

# Vermillion from the Okabe-Ito palette: the same colour marks "wrong" everywhere.
INVALID_STYLE = f"border: 2px solid {colours.PROBLEM}; border-radius: 3px;"


def mark_invalid(widget: QWidget, message: str | None) -> None:
    """Red border and the message as tooltip while ``message`` is set; restore otherwise."""
    invalid = message is not None
    if bool(widget.property("invalid")) == invalid and (not invalid or widget.property("invalidMessage") == message):
        return
    widget.setProperty("invalidMessage", message)
    if widget.property("plainToolTip") is None:
        widget.setProperty("plainToolTip", widget.toolTip())
    key = Shiboken.getCppPointer(widget)[0]
    if invalid:
        if key not in _marked:
            # A widget destroyed while marked (a form rebuilt, a window closed) stops counting:
            # left counted, every later edit redrew every form (any_marked stayed true).
            widget.destroyed.connect(lambda *_: _marked.discard(key))
        _marked.add(key)
    else:
        _marked.discard(key)
    widget.setProperty("invalid", invalid)
    widget.setStyleSheet(INVALID_STYLE if invalid else "")
    plain = str(widget.property("plainToolTip") or "")
    # The message quotes what was typed or read (a name with markup): shown as text.
    widget.setToolTip(plaintext.tooltip(f"{plain}\n\n⚠ {message}") if invalid else plain)


def is_marked_invalid(widget: QWidget) -> bool:
    return bool(widget.property("invalid"))


_marked: set[int] = set()  # the widgets marked now, by their C++ address; a destroyed one leaves


def any_marked() -> bool:
    """Whether any field is marked: each edit looks for stale marks only when one is."""
    return bool(_marked)


def describe(widget: QWidget, name: str, tooltip: str) -> None:
    """A field's name and tooltip, for the eye and for a screen reader (its inner text box too)."""
    widget.setAccessibleName(name)
    widget.setToolTip(tooltip)
    widget.setProperty("plainToolTip", tooltip)
    widget.setAccessibleDescription(tooltip)
    line = getattr(widget, "lineEdit", None)
    inner = line() if callable(line) else None
    if isinstance(inner, QLineEdit) and inner is not widget:
        # The text box inside a spin box or an editable combo box is a focus stop of its own
        # for a screen reader: it carries the field's name too.
        inner.setAccessibleName(name)
        inner.setAccessibleDescription(tooltip)


def _let_shrink(combo: QComboBox) -> None:
    # Long entries ("Lesson (four buckets, typed activations)") must not widen the form
    # column: the popup still shows them in full.
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(10)


def _typing_keys(event: QKeyEvent) -> str:
    """What a key means to a field being typed into: "commit", "restore", "undo", "redo" or ""."""
    if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
        return "commit"
    if event.key() == Qt.Key.Key_Escape:
        return "restore"
    if event.matches(QKeySequence.StandardKey.Undo):
        return "undo"
    if event.matches(QKeySequence.StandardKey.Redo):
        return "redo"
    return ""


# The most characters a number field takes, its unit included: the largest count, 10¹⁶ tokens,
# is 22 characters with group separators. Qt's own check of a spin box's text grows faster than
# its length: 4,000 digits pasted into "GPUs per node" blocked the window 0.4 s, 32,767 for
# minutes (benchmarks/gui_input_audit.py).
MAX_TYPED_CHARS = 100


class _TypedNumber:
    """What IntField and FloatField share: a value applies when it is committed (Enter, focus
    leaving, an arrow step), never per keystroke, and typing is never rewritten.

    A spin box's own validator drops a keystroke it refuses (``1e30`` became ``130``, ``-5``
    became ``5``); here text the box cannot take stays as typed, marked with the reason. Enter
    on it leaves it there to correct; leaving the box or Escape puts the plan's value back.
    Ctrl+Z / Ctrl+Shift+Z undo the plan (the window's actions) unless there is typing to drop.
    """

    edited: Any
    rejected: Any
    cleared: Any  # the text is acceptable again, or the committed value is back
    restoreRequested: Any  # Escape: the form puts the plan's value back
    _name: str
    _typing: bool

    def _start_typing_rules(self) -> None:
        box: Any = self
        box.lineEdit().setMaxLength(MAX_TYPED_CHARS)
        box.setKeyboardTracking(False)
        box.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToPreviousValue)
        self._typing = False
        box.lineEdit().textEdited.connect(self._on_text_edited)

    # Qt's own validation of a spin box (QSpinBox.validate / QDoubleSpinBox.validate).
    def _qt_state(self, text: str) -> QValidator.State:
        raise NotImplementedError

    def _problem(self, body: str) -> str:
        raise NotImplementedError

    def validate(self, text: str, pos: int, /) -> tuple[QValidator.State, str, int]:
        # Never Invalid: Qt would drop the keystroke, and the user would see another number.
        state = self._qt_state(text)
        return (QValidator.State.Intermediate if state is QValidator.State.Invalid else state, text, pos)

    def _body(self) -> str:
        box: Any = self
        text = str(box.lineEdit().text())
        return text.removeprefix(box.prefix()).removesuffix(box.suffix()).strip()

    def _text_problem(self) -> str | None:
        box: Any = self
        body = self._body()
        suffix = str(box.suffix()).strip()
        if _ambiguous_comma(body):
            # Qt reads "1,5" as 15 (a group separator); count fields refuse it, and so does this.
            return f"{self._name}: “{body}” has an ambiguous comma: write 1.5, or 1,500 for a thousands group"
        if self._qt_state(box.lineEdit().text()) is QValidator.State.Acceptable:
            return None
        return f"{self._name}: “{body}” {self._problem(body)}{' ' + suffix if suffix else ''}"

    def _on_text_edited(self, _text: str) -> None:
        self._typing = True
        problem = self._text_problem()
        if problem is None:
            self.cleared.emit()
        else:
            self.rejected.emit(problem)

    def _restore(self) -> None:
        box: Any = self
        self._typing = False
        with QSignalBlocker(box):
            box.setValue(box.value())  # rewrites the text from the committed value
        self.cleared.emit()

    def _handle_key(self, event: QKeyEvent) -> bool:
        """True when the key was handled here (the spin box must not see it)."""
        meaning = _typing_keys(event)
        if meaning == "commit" and self._text_problem() is not None:
            self.rejected.emit(self._text_problem())  # stays as typed, to be corrected
            event.accept()
            return True
        if meaning == "restore" or (meaning == "undo" and self._typing):
            self._restore()
            # The committed value may be one the plan refused (TP 16 on 8 KV heads): the form
            # shows the plan's value again.
            self.restoreRequested.emit()
            event.accept()
            return True
        if meaning == "commit":
            self._typing = False
        return False

    def _override_shortcut(self, event: QEvent) -> bool:
        """Undo/redo with nothing typed go to the window's plan undo, not the text's."""
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            meaning = _typing_keys(event)
            if meaning == "redo" or (meaning == "undo" and not self._typing):
                event.ignore()
                return True
            if meaning == "undo" or meaning == "restore":
                event.accept()
                return True
        return False

    def _left(self) -> None:
        """After the box lost focus: Qt put the committed value back over refused text."""
        if self._typing:
            self._typing = False
            self.cleared.emit()


_GROUPED = re.compile(r"^[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?$")


def _ambiguous_comma(body: str) -> bool:
    """A comma that does not group thousands by three ("1,5", "1,50"): 1.5 or 15?"""
    compact = body.replace(" ", "").replace("\u202f", "")
    return "," in compact and not _GROUPED.match(compact)


def _number(body: str, locale_group: str, locale_point: str) -> float | None:
    cleaned = body.replace(locale_group, "").replace(",", "").replace("\u202f", "").replace(" ", "")
    if locale_point != ".":
        cleaned = cleaned.replace(locale_point, ".")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _range_problem(value: float, minimum: str, maximum: str, low: float, high: float) -> str:
    if value < low:
        return f"is below the minimum {minimum}"
    if value > high:
        return f"is above the maximum {maximum}"
    return f"is not a value from {minimum} to {maximum}"


_WHOLE = re.compile(r"^[+-]?[0-9][0-9,\u202f ]*$")


class IntField(_TypedNumber, QSpinBox):
    edited = Signal(int)
    rejected = Signal(str)
    cleared = Signal()
    restoreRequested = Signal()

    def __init__(self, name: str, minimum: int, maximum: int, suffix: str, tooltip: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setRange(minimum, maximum)
        # "1 step", "2 steps": a plural unit ("steps", "requests") is singular for exactly one.
        self._units = (f" {suffix.removesuffix('s')}" if suffix.endswith("s") else f" {suffix}", f" {suffix}")
        if not suffix:
            self._units = ("", "")
        self.setSuffix(self._units[1])
        self.setGroupSeparatorShown(True)
        self.setAccelerated(True)
        describe(self, name, f"{tooltip}\nRange {minimum:,} to {maximum:,}{' ' + suffix if suffix else ''}.")
        self._name = name
        self._start_typing_rules()
        self.valueChanged.connect(self._agree_unit)
        self.valueChanged.connect(self.edited)
        self._agree_unit(self.value())

    def _agree_unit(self, value: int) -> None:
        unit = self._units[0] if value == 1 else self._units[1]
        if unit != self.suffix():
            with QSignalBlocker(self):
                self.setSuffix(unit)

    def _qt_state(self, text: str) -> QValidator.State:
        return QSpinBox.validate(self, text, 0)[0]

    def _problem(self, body: str) -> str:
        allowed = f"{self.minimum():,} to {self.maximum():,}"
        value = _number(body, self.locale().groupSeparator(), ".")
        if value is None or not _WHOLE.match(body):
            return f"is not a whole number from {allowed}"
        return _range_problem(value, f"{self.minimum():,}", f"{self.maximum():,}", self.minimum(), self.maximum())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self._handle_key(event):
            super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        return self._override_shortcut(event) or super().event(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self._left()

    def show_value(self, value: int) -> None:
        if self.value() != value:
            with QSignalBlocker(self):
                self.setValue(value)
            self._agree_unit(value)


class FloatField(_TypedNumber, QDoubleSpinBox):
    """A float input; ``scale`` shows a fraction as a percentage (0.4 ↔ 40 %)."""

    edited = Signal(float)
    rejected = Signal(str)
    cleared = Signal()
    restoreRequested = Signal()

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
        describe(
            self, name, f"{tooltip}\nRange {minimum * scale:g} to {maximum * scale:g}{' ' + suffix if suffix else ''}."
        )
        self._start_typing_rules()
        self.valueChanged.connect(lambda shown: self.edited.emit(shown / self._scale))

    def _qt_state(self, text: str) -> QValidator.State:
        return QDoubleSpinBox.validate(self, text, 0)[0]

    def _problem(self, body: str) -> str:
        low, high = f"{self.minimum():g}", f"{self.maximum():g}"
        value = _number(body, self.locale().groupSeparator(), self.locale().decimalPoint())
        if value is None:
            return f"is not a number from {low} to {high}"
        if value != round(value, self.decimals()) and self.minimum() <= value <= self.maximum():
            places = "one decimal place" if self.decimals() == 1 else f"{self.decimals()} decimal places"
            return f"has more than {places}; allowed {low} to {high}"
        return _range_problem(value, low, high, self.minimum(), self.maximum())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self._handle_key(event):
            super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        return self._override_shortcut(event) or super().event(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self._left()

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
    cleared = Signal()
    # Escape, or leaving refused text: the form shows the plan's value again.
    restoreRequested = Signal()

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
        self.setMaxLength(MAX_TYPED_CHARS)
        self.setClearButtonEnabled(blank_means is not None)
        describe(
            self,
            name,
            f"{tooltip}\nType 6.7e9, 6,700,000,000, 20M or 1.5B; range {minimum:,} to {maximum:.3g} {unit}.",
        )
        self._typing = False
        self.textEdited.connect(self._check)
        self.returnPressed.connect(self._commit)

    def _problem(self) -> str | None:
        if self.value() is not None:
            return None
        text = self.text().strip()
        try:
            units.parse_count(text)
            why = "is out of range"
        except ValueError as exc:
            why = str(exc)  # the parser's reason: "1,5B" is ambiguous, "abc" is not a number
        expected = f"a count from {self._minimum:,} to {self._maximum:.3g} {self._unit}"
        return f"{self._name}: “{text}” {why}; expected {expected}"

    def _check(self, _text: str) -> None:
        # Typing is only checked: a count applies when committed (Enter or leaving the box), so
        # that "1e30" never leaves the plan at "1e3" on the way.
        self._typing = True
        problem = self._problem()
        if problem is None:
            self.cleared.emit()
        else:
            self.rejected.emit(problem)

    def _commit(self) -> None:
        problem = self._problem()
        if problem is not None:
            self.rejected.emit(problem)
            return
        self._typing = False
        self.edited.emit(self.value())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        meaning = _typing_keys(event)
        if meaning == "restore" or (meaning == "undo" and self._typing):
            self._typing = False
            self.restoreRequested.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            meaning = _typing_keys(event)
            if meaning == "redo" or (meaning == "undo" and not self._typing):
                event.ignore()  # the window's plan undo, not the text's
                return True
            if meaning in ("undo", "restore"):
                event.accept()
                return True
        return super().event(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        leaving = event.reason() is not Qt.FocusReason.PopupFocusReason
        if leaving and self._typing and self._problem() is None:
            self._commit()
        super().focusOutEvent(event)
        # Qt 6 emits editingFinished on focus-out only when the text changed since the last
        # emission: bad text confirmed with Enter, then left, would stay (marked) for good.
        if leaving and (self._typing or is_marked_invalid(self)):
            self._typing = False
            self.restoreRequested.emit()

    def value(self) -> int | None:
        text = self.text().strip()
        if not text and self._blank_means is not None:
            return self._blank_means
        value = parse_count(text)
        if value is None or not self._minimum <= value <= self._maximum:
            return None
        return value

    def show_value(self, value: int) -> None:
        if self.value() == value:
            return  # leave the user's own spelling (6.7e9) alone
        with QSignalBlocker(self):
            self.setText("" if self._blank_means is not None and value == self._blank_means else f"{value:,}")


class SettingField(QLineEdit):
    """A settings string (PYTORCH_CUDA_ALLOC_CONF): applied on Enter or when the box is left;
    the plan checks it as the library would, and a refusal marks the box with its reason."""

    edited = Signal(str)
    restoreRequested = Signal()

    def __init__(self, name: str, tooltip: str, placeholder: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        describe(self, name, tooltip)
        self.setPlaceholderText(placeholder)
        self.setClearButtonEnabled(True)
        self._shown = ""
        self.editingFinished.connect(self._commit)

    def _commit(self) -> None:
        if self.text() != self._shown:
            self.edited.emit(self.text())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if _typing_keys(event) == "restore":
            self.restoreRequested.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        # Qt 6 emits editingFinished on focus-out only when the text changed since the last
        # emission: refused text confirmed with Enter, then left, would stay (marked) for good.
        if event.reason() is not Qt.FocusReason.PopupFocusReason and is_marked_invalid(self):
            self.restoreRequested.emit()

    def show_value(self, value: str) -> None:
        self._shown = value
        if self.text() != value:
            with QSignalBlocker(self):
                self.setText(value)


class ChoiceField(QComboBox):
    """A fixed list of (label, value) choices; ``edited`` carries the value."""

    edited = Signal(object)

    def __init__(self, name: str, choices: Iterable[tuple[str, Any]], tooltip: str, parent: QWidget | None = None):
        super().__init__(parent)
        describe(self, name, tooltip)
        _let_shrink(self)
        for label, value in choices:
            self.addItem(label, value)
        self._refused: Mapping[str, str] = {}  # the greyed entries' values, with why (show_refused)
        self.currentIndexChanged.connect(lambda index: self.edited.emit(self.itemData(index)))

    def show_refused(self, refused: Mapping[str, str]) -> None:
        """Grey the entries whose value ``refused`` holds, each one's tooltip saying why ("Not offered: ..."), and
        enable the rest, which keep the field's tooltip. The arrow keys and the wheel pass over a greyed entry."""
        if refused == self._refused:
            return
        self._refused = refused
        entries = self.model()
        assert isinstance(entries, QStandardItemModel)  # QComboBox's own model
        for index in range(self.count()):
            reason = refused.get(str(self.itemData(index)))
            self.setItemData(index, f"Not offered: {reason}" if reason else None, Qt.ItemDataRole.ToolTipRole)
            item = entries.item(index)
            if item is not None:
                item.setEnabled(reason is None)

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
        self._widest = (-1, 0)  # (entries, least width) measured for minimumSizeHint
        _let_shrink(self)
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setMaxVisibleItems(20)
        for label, entry_id in entries:
            self.addItem(label, entry_id)
            self.setItemData(self.count() - 1, plaintext.tooltip(entry_id), Qt.ItemDataRole.ToolTipRole)
        completer = QCompleter(self.model(), self)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setCompleter(completer)
        describe(self, name, tooltip + "\nType part of a name to search.")
        self.activated.connect(self._chosen)
        completer.activated[str].connect(self._chosen_text)  # type: ignore[index]  # PySide6's overload index
        self._line().returnPressed.connect(lambda: self._chosen_text(self.currentText()))

    def _line(self) -> QLineEdit:
        """The text box (an editable combo box always has one)."""
        line = self.lineEdit()
        assert line is not None
        return line

    def minimumSizeHint(self) -> QSize:
        """Wide enough to show every entry's name whole ("…RTX 3060 12GE" was the last one cut)."""
        hint = super().minimumSizeHint()
        if self._widest[0] != self.count():
            metrics = self._line().fontMetrics()
            widest = max((metrics.horizontalAdvance(self.itemText(i)) for i in range(self.count())), default=0)
            option = QStyleOptionComboBox()
            self.initStyleOption(option)
            content = QSize(widest + 8, hint.height())  # the line edit's own text margins
            need = self.style().sizeFromContents(QStyle.ContentsType.CT_ComboBox, option, content, self).width()
            self._widest = (self.count(), need)
        return QSize(max(hint.width(), self._widest[1]), hint.height())

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
        self._line().setCursorPosition(0)
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
            self._line().setCursorPosition(0)
        self._shown_text = self.currentText()

    def value(self) -> str:
        return str(self.currentData() or "")

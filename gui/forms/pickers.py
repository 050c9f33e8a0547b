"""Catalogue pickers that search: words, a memory size ("24 GB"), a vendor or a group.

The GPU picker lists the catalogue under group headings (laptop, desktop, data centre,
Apple) followed by the user's own cards; typing filters the list through
:func:`core.catalogue.search`, so "24 GB", "amd laptop" or "apple 128gb" find what they say.
The model picker lists the catalogue, the models downloaded on this machine and the user's
own; text that names no entry may still mean something to its form (a Hub id: ``typed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSignalBlocker,
    QSize,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QFont, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QCompleter, QStyle, QStyleOptionComboBox, QWidget

from gui import plaintext
from gui.forms.fields import CatalogueField

# (label, entry id) for an entry; (heading, "") for a heading row.
Entry = tuple[str, str]
Matcher = Callable[[str, str, str], bool]  # (entry id, label, typed text) -> shown?
USER_PREFIX = "mine:"  # ids of the user's own saved entries
CACHED_PREFIX = "hf:"  # ids of models in this machine's Hugging Face cache ("hf:Qwen/Qwen3-8B")
# Entries named from outside the catalogue: however long, their names never widen the plan column.
_OUTSIDE_PREFIXES = (USER_PREFIX, CACHED_PREFIX)
# A search reads this much of the typed text: every entry is matched against every word, so a
# pasted 32,767 characters (a line edit's most) of one-letter words took 0.4 s per keystroke in
# the GPU picker (benchmarks/gui_input_audit.py). The longest label (an 80-character saved name
# and its figures) fits.
MAX_QUERY_CHARS = 300


def words_match(entry_id: str, label: str, text: str) -> bool:
    haystack = f"{entry_id} {label}".lower()
    return all(word in haystack for word in text.lower().split())


class _SearchFilter(QSortFilterProxyModel):
    def __init__(self, matcher: Matcher, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._matcher = matcher
        self._text = ""

    def set_text(self, text: str) -> None:
        text = text.strip()[:MAX_QUERY_CHARS]
        if hasattr(self, "beginFilterChange"):  # Qt 6.10+: invalidateFilter() is deprecated there
            self.beginFilterChange()
            self._text = text
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._text = text
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent: QModelIndex | QPersistentModelIndex) -> bool:
        source = self.sourceModel()
        index = source.index(row, 0, parent)
        entry_id = str(source.data(index, Qt.ItemDataRole.UserRole) or "")
        if not entry_id:
            return False  # headings are for browsing the list, not for search results
        label = str(source.data(index, Qt.ItemDataRole.DisplayRole) or "")
        return not self._text or self._matcher(entry_id, label, self._text)


class SearchingPicker(CatalogueField):
    """A :class:`CatalogueField` with headed groups and a search that understands the catalogue.

    ``sections`` is a list of (heading, entries); an empty heading adds the entries without one.
    Without a ``matcher`` the typed text is matched as one piece anywhere in a label (the
    plain :class:`CatalogueField` completer); with one, every typed word goes through it.
    Enter on text that names no entry emits ``typed(text)`` where ``free_text(text)`` accepts
    it (the form looks it up elsewhere), else ``rejected``.
    """

    typed = Signal(str)

    def __init__(
        self,
        name: str,
        sections: Iterable[tuple[str, list[Entry]]],
        tooltip: str,
        matcher: Matcher | None = None,
        parent: QWidget | None = None,
        *,
        free_text: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(name, [], tooltip, parent)
        self._free_text = free_text
        self._filter = _SearchFilter(matcher or words_match, self)
        self._filter.setSourceModel(self.model())
        completer, line = self.completer(), self.lineEdit()
        if matcher is not None and completer is not None and line is not None:
            completer.setModel(self._filter)
            completer.setCompletionMode(QCompleter.CompletionMode.UnfilteredPopupCompletion)
            line.textEdited.connect(self._filter.set_text)
        self._lists_fitted = False
        self.set_sections(sections)
        completer = self.completer()
        popup = completer.popup() if completer is not None else None
        if popup is not None:
            popup.installEventFilter(self)

    def set_sections(self, sections: Iterable[tuple[str, list[Entry]]]) -> None:
        """Replace the list (the user added a card); the shown entry is kept by the caller."""
        self.blockSignals(True)
        try:
            self.clear()
            model = self.model()
            assert isinstance(model, QStandardItemModel)
            for heading, entries in sections:
                if not entries:
                    continue
                if heading:
                    self.addItem(heading, "")
                    item = model.item(self.count() - 1)
                    item.setFlags(Qt.ItemFlag.NoItemFlags)  # a heading cannot be chosen
                    font = QFont(item.font())
                    font.setBold(True)
                    item.setFont(font)
                for label, entry_id in entries:
                    self.addItem(label, entry_id)
                    # A saved entry's name is the user's (or a config.json's): never markup.
                    self.setItemData(self.count() - 1, plaintext.tooltip(label), Qt.ItemDataRole.ToolTipRole)
        finally:
            self.blockSignals(False)
        self._lists_fitted = False  # measured when a list is first shown (fit_lists)

    def fit_lists(self) -> None:
        """The lists show names in full ("Apple M4 Max (40-core GPU, 128 GB) · 96.0 GB for the
        GPU") though the box itself stays narrow. Measured when a list is about to show, not
        for every new set of entries: measuring every name took ~3 ms per picker at start-up."""
        if self._lists_fitted:
            return
        self._lists_fitted = True
        width = self.view().sizeHintForColumn(0) + 2 * self.view().frameWidth() + 24
        self.view().setMinimumWidth(width)
        completer = self.completer()
        popup = completer.popup() if completer is not None else None
        if popup is not None:
            popup.setMinimumWidth(width)

    def showPopup(self) -> None:
        self.fit_lists()
        super().showPopup()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Show:
            self.fit_lists()  # the completer's list, shown as the user types
        return super().eventFilter(watched, event)

    def minimumSizeHint(self) -> QSize:
        """Wide enough for every catalogue name, not for the figures after " · " nor the user's names.

        The list itself shows labels in full; a name the user typed for a saved entry, however
        long, must not widen the plan column.
        """
        hint = QComboBox.minimumSizeHint(self)
        names = [
            self.itemText(i).split(" · ")[0]
            for i in range(self.count())
            if self.itemData(i) and not str(self.itemData(i)).startswith(_OUTSIDE_PREFIXES)
        ]
        line = self.lineEdit()
        metrics = line.fontMetrics() if line is not None else self.fontMetrics()
        widest = max((metrics.horizontalAdvance(name) for name in names), default=0)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        content = QSize(widest + 8, hint.height())  # the line edit's own text margins
        need = self.style().sizeFromContents(QStyle.ContentsType.CT_ComboBox, option, content, self).width()
        return QSize(max(hint.width(), need), hint.height())

    def matches(self, text: str) -> list[str]:
        """Entry ids the search shows for ``text``, in list order."""
        self._filter.set_text(text)
        return [
            str(self._filter.data(self._filter.index(row, 0), Qt.ItemDataRole.UserRole))
            for row in range(self._filter.rowCount())
        ]

    def _chosen(self, index: int) -> None:
        if index >= 0 and not self.itemData(index):  # a heading: nothing to choose, the plan's entry stays
            with QSignalBlocker(self):
                self.setCurrentIndex(self.findText(self._shown_text))
                self.setEditText(self._shown_text)
            return
        super()._chosen(index)

    def _chosen_text(self, text: str) -> None:
        # Enter on a search with one result picks it ("5070 ti", "h100 nvl").
        wanted = text.strip().lower()
        exact = [i for i in range(self.count()) if wanted in (self.itemText(i).lower(), str(self.itemData(i)).lower())]
        if wanted and exact and not any(self.itemData(i) for i in exact):
            self.rejected.emit(f"{self._name}: “{text.strip()}” is a heading; pick an entry below it")
            return
        found = [] if exact or not wanted else self.matches(text)
        if len(found) > 1:
            # "4090" finds the RTX 4090 and the RTX 4090 Laptop GPU: the entry the words name
            # with the least else in it is meant (the desktop card), when one is the shortest.
            names = sorted((len(self.itemText(self.findData(f)).split(" · ")[0]), f) for f in found)
            if names[0][0] < names[1][0]:
                found = [names[0][1]]
        if len(found) == 1:
            with QSignalBlocker(self):
                self.setCurrentIndex(self.findData(found[0]))
            self.edited.emit(found[0])
            return
        if not exact and self._free_text is not None and self._free_text(text.strip()):
            self.typed.emit(text.strip())
            return
        super()._chosen_text(text)

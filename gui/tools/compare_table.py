"""The Compare tab's table: every input and figure of the compared plans, laid out for the width it is given.

Side by side (a column a plan, the rows' labels in the vertical header, which stays put) where every column fits
the table's width at its least width: each column as wide as its widest word (a number is one word: never cut),
the labels as wide as theirs, and the room left shared out towards each one's whole line, as a browser lays out an
automatic table. Narrower than that, one block a row: the row's label over each plan's value, numbered as the chart
numbers the plans, after a block naming them. Neither scrolls sideways. Docked at 1024 × 768 (270 px) the four
plans' side-by-side columns scrolled sideways by 496 px; at 1920 × 1080 (672 px) by 92 px: each column was held at
its header's widest line (142 px) and the labels took 180 px.

The figures and texts come from :mod:`core.advice.compare`; this module only measures words and lays them out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QContextMenuEvent,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QPalette,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QMenu,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from core.advice.compare import Comparison, Row
from core.files.report import csv_text, value_text, verdict_colour
from core.verdict import Judgement
from gui import plaintext, theme
from gui.format import Unit

HEADER_PADDING_PX = 12  # a header section's own margins around its text (QHeaderView's, measured offscreen)
HEADER_MAX_LINES = 4  # a plan's name in its column's header: model, method and card each take a line or more
NAMES_HEADING = "Plans"  # the first block of the one-block-a-row layout: each plan's number and whole name
PLAN_ROLE = Qt.ItemDataRole.UserRole  # the plan (0-based) a cell belongs to; None on a block's heading
SPOKEN = Qt.ItemDataRole.AccessibleTextRole  # a wrapped header's whole text, as a screen reader names it
CHEAPEST = "cheapest that fits"


def words(text: str) -> list[str]:
    """``text``'s runs between spaces, a run of neither letters nor digits ("/", "×", "·") kept with the word before
    it: a line never starts with one ("Tensor /" over "pipeline /" over "context", "Full on 2 ×" over "A100 80GB")."""
    kept: list[str] = []
    for word in text.split():
        if kept and not any(ch.isalnum() for ch in word):
            kept[-1] = f"{kept[-1]} {word}"
        else:
            kept.append(word)
    return kept


def widest_word(texts: Sequence[str], metrics: QFontMetrics, split: Callable[[str], list[str]] = str.split) -> int:
    """The widest run between spaces in ``texts`` (``split`` into runs: :func:`words` for the lines
    :func:`wrap_words` breaks): the least width that wraps them without cutting a word."""
    return max((metrics.horizontalAdvance(word) for text in texts for word in split(text)), default=0)


def widest_line(texts: Sequence[str], metrics: QFontMetrics) -> int:
    return max((metrics.horizontalAdvance(line) for text in texts for line in text.splitlines()), default=0)


def wrap_words(text: str, metrics: QFontMetrics, width: int) -> list[str]:
    """``text`` in lines no wider than ``width``, broken at spaces between :func:`words`; a word wider than the width
    alone on its line, elided (its whole text is in the tooltip)."""
    lines: list[str] = []
    for word in words(text):
        if metrics.horizontalAdvance(word) > width:
            word = metrics.elidedText(word, Qt.TextElideMode.ElideRight, width)
        joined = f"{lines[-1]} {word}" if lines else word
        if lines and metrics.horizontalAdvance(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(word)
    return lines


def balanced_wrap(text: str, metrics: QFontMetrics, width: int) -> list[str]:
    """``text`` wrapped as :func:`wrap_words` wraps it to ``width``, in as many lines, at the least width that keeps
    that many (as CSS's text-wrap: balance): "4. LoRA r16 on an" over "L4" becomes "4. LoRA r16" over "on an L4".
    The greedy wrap takes no more lines at a wider width, so the least such width is found by halving."""
    lines = wrap_words(text, metrics, width)
    if len(lines) < 2:
        return lines
    low, high = min(width, widest_word([text], metrics, words)), width
    while low < high:
        middle = (low + high) // 2
        if len(wrap_words(text, metrics, middle)) <= len(lines):
            high = middle
        else:
            low = middle + 1
    return wrap_words(text, metrics, high)


def name_parts(name: str) -> list[str]:
    """A plan's name in its parts (model, method, card), each on lines of its own in a header."""
    parts = [part.strip() for part in name.replace(" · ", ", ").split(", ")]
    return [part for part in parts if part] or [name]


def header_text(name: str, metrics: QFontMetrics, width: int) -> str:
    """A column's header: the name's parts on lines of their own, each wrapped at spaces to ``width`` in balanced
    lines; past
    HEADER_MAX_LINES the last line ends in an ellipsis after a whole word."""
    lines = [line for part in name_parts(name) for line in balanced_wrap(part, metrics, width)]
    if len(lines) > HEADER_MAX_LINES:
        kept = lines[:HEADER_MAX_LINES]
        words = kept[-1].split()
        while words and metrics.horizontalAdvance(" ".join([*words, "…"])) > width:
            words.pop()
        kept[-1] = " ".join([*words, "…"])
        lines = kept
    return "\n".join(lines)


def share_out(least: list[int], natural: list[int], room: int) -> list[int]:
    """Widths for columns given their least and whole-line widths and ``room`` (at least the sum of the least):
    each gets its least, then the rest goes towards each one's whole line in proportion to what it lacks; what is
    left after every column has its whole line goes to the last columns (the plans) equally."""
    widths = list(least)
    spare = room - sum(least)
    lacking = [max(0, n - w) for n, w in zip(natural, widths, strict=True)]
    wanted = sum(lacking)
    if spare <= 0:
        return widths
    if wanted >= spare:
        given = [spare * lack // wanted for lack in lacking]
        given[lacking.index(max(lacking))] += spare - sum(given)
        return [w + g for w, g in zip(widths, given, strict=True)]
    widths = [w + lack for w, lack in zip(widths, lacking, strict=True)]
    spare -= wanted
    plans = len(widths) - 1
    for c in range(1, len(widths)):
        widths[c] += spare // plans + (1 if c - 1 < spare % plans else 0)
    return widths


class CompareTable(QTableWidget):
    """The comparison's table; :meth:`show_comparison` fills it, and each new width lays it out again. Copy
    (Ctrl+C) puts the selected plans' rows on the clipboard as a table; Delete asks to remove the selected plan."""

    removeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 0, parent)
        self.setObjectName("compareTable")
        self.setAccessibleName("Plans compared")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setWordWrap(True)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # A selected plan's column selects every row: the labels, all drawn bold as highlighted sections, lost the
        # bold that marks the rows whose values differ between the plans.
        self.verticalHeader().setHighlightSections(False)
        self.horizontalHeader().setMinimumSectionSize(1)
        self.comparison: Comparison | None = None
        self.unit: Unit = "GB"
        self.stacked = False  # one block a row (the table too narrow for the plans' columns)
        self._laid_out_at = -1

    # ---- measuring ------------------------------------------------------------------
    def _bold(self, font: QFont) -> QFontMetrics:
        bold = QFont(font)
        bold.setBold(True)
        return QFontMetrics(bold)

    def _cell_padding(self) -> int:
        """An item's text margins (QCommonStyle: PM_FocusFrameHMargin + 1 each side), the grid's line and a pixel
        the delegate rounds up: QTableView.sizeHintForColumn gives the text's advance + 8 px in Fusion (PySide6
        6.11, offscreen, bold: "★ 1" 23 → 31 px, "20,000,000" 76 → 83 px)."""
        return 2 * (self.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, self) + 1) + 2

    def room(self) -> int:
        """The width the columns share: the table's, less its frame and a vertical scroll bar (always counted, so
        that the bar's coming and going never changes the layout)."""
        return self.width() - 2 * self.frameWidth() - self.verticalScrollBar().sizeHint().width()

    def _texts(self) -> list[list[str]]:
        """Each plan's cells' texts, column by column."""
        comparison = self.comparison
        assert comparison is not None
        currencies = [p.estimate.compute.currency for p in comparison.plans]
        rows = comparison.rows()
        return [
            [value_text(row, row.values[c], self.unit, currencies[c]) for row in rows]  # the report's cells
            for c in range(len(comparison.plans))
        ]

    def _side_by_side_widths(self, names: list[str], texts: list[list[str]]) -> list[int] | None:
        """The labels' width, then each plan column's, where they all fit the room at their least; else None."""
        comparison = self.comparison
        assert comparison is not None
        cells, pad = QFontMetrics(self.font()), self._cell_padding()
        heads = self._bold(self.horizontalHeader().font())
        labels_font = self._bold(self.verticalHeader().font())
        labels = [row.label for row in comparison.rows()]
        least = [widest_word(labels, labels_font, words) + HEADER_PADDING_PX]
        natural = [widest_line(labels, labels_font) + HEADER_PADDING_PX]
        for name, column in zip(names, texts, strict=True):
            parts = name_parts(f"★ {name}")  # room for the cheapest's star, whichever column it marks
            least.append(max(widest_word(column, cells) + pad, widest_word(parts, heads, words) + HEADER_PADDING_PX))
            natural.append(max(widest_line(column, cells) + pad, widest_line(parts, heads) + HEADER_PADDING_PX))
        room = self.room()
        return share_out(least, natural, room) if sum(least) <= room else None

    # ---- filling --------------------------------------------------------------------
    def show_comparison(self, comparison: Comparison | None, unit: Unit) -> None:
        self.comparison, self.unit = comparison, unit
        self._fill()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.comparison is not None and self.width() != self._laid_out_at:
            self._fill()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        changes = (QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.PaletteChange)
        if event.type() in changes and self.comparison is not None:
            self._fill()  # the words measured again in the new font or style's margins; headings in the new shade

    def _fill(self) -> None:
        comparison = self.comparison
        self.setUpdatesEnabled(False)
        self.clearSpans()
        self._laid_out_at = self.width()
        if comparison is None:
            self.setRowCount(0)
            self.setColumnCount(0)
            self.setUpdatesEnabled(True)
            return
        names = [plaintext.escape_controls(f"{i + 1}. {name}") for i, name in enumerate(comparison.names)]
        texts = self._texts()
        widths = self._side_by_side_widths(names, texts)
        self.stacked = widths is None
        # The rows sized to their contents once, when all are filled: sized at each item set, the 200 rows of four
        # plans' blocks took 670 ms a fill (thread CPU, offscreen), 45 ms side by side.
        rows = self.verticalHeader()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        if widths is None:
            self._fill_blocks(names, texts)
        else:
            self._fill_columns(names, texts, widths)
        rows.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.setUpdatesEnabled(True)

    def _value_item(self, row: Row, c: int, text: str, differs: bool, plan_name: str) -> QTableWidgetItem:
        comparison = self.comparison
        assert comparison is not None
        item = QTableWidgetItem(text)
        item.setData(PLAN_ROLE, c)
        item.setData(Qt.ItemDataRole.AccessibleDescriptionRole, f"{row.label}, {plan_name}")
        if not isinstance(row.values[c], str):
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if differs:
            item.setBackground(QBrush(theme.changed_row(self.palette())))  # its text in the palette's Text
        if row.key == "verdict":
            item.setForeground(QBrush(self.verdict_ink(comparison.plans[c].estimate.judgement(comparison.mode))))
        return item

    def verdict_ink(self, judged: Judgement) -> QColor:
        """A verdict's colour as text the table's palette can show on its Base and on a changed row's shade alike,
        at WCAG's 4.5:1 (gui.theme.legible): the verdict panel's light-background shades read 3.1-3.5:1 on the
        pale yellow (Over headroom's #B07800, Fits' green, Out of memory's vermillion), and Fits narrowly's #7A6A00
        3.0:1 on the dark Base."""
        palette = self.palette()
        backgrounds = (palette.color(QPalette.ColorRole.Base), theme.changed_row(palette))
        return theme.legible(QColor(verdict_colour(judged)), backgrounds, palette.color(QPalette.ColorRole.Text))

    def _fill_columns(self, names: list[str], texts: list[list[str]], widths: list[int]) -> None:
        """A column a plan; the labels, wrapped at spaces to their share, in the vertical header."""
        comparison = self.comparison
        assert comparison is not None
        rows = comparison.rows()
        best = comparison.cheapest_fit()
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectColumns)
        self.horizontalHeader().show()
        self.verticalHeader().show()
        self.setColumnCount(len(names))
        self.setRowCount(len(rows))
        heads = self._bold(self.horizontalHeader().font())
        labels_font = self._bold(self.verticalHeader().font())
        header = self.horizontalHeader()
        header.setStretchLastSection(False)
        for c, name in enumerate(names):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(c, widths[c + 1])
            shown = f"★ {name}" if c == best else name
            item = QTableWidgetItem(header_text(shown, heads, widths[c + 1] - HEADER_PADDING_PX))
            item.setToolTip(plaintext.tooltip(name))  # a name from a file is never markup
            item.setData(SPOKEN, f"{name}, {CHEAPEST}" if c == best else name)
            if c == best:
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            self.setHorizontalHeaderItem(c, item)
        self.verticalHeader().setFixedWidth(widths[0])
        several = len(names) > 1
        for r, row in enumerate(rows):
            differs = several and row.differs
            label = QTableWidgetItem("\n".join(balanced_wrap(row.label, labels_font, widths[0] - HEADER_PADDING_PX)))
            label.setData(SPOKEN, row.label)
            if differs:
                font = label.font()
                font.setBold(True)
                label.setFont(font)
            self.setVerticalHeaderItem(r, label)
            for c in range(len(names)):
                self.setItem(r, c, self._value_item(row, c, texts[c][r], differs, names[c]))

    def _fill_blocks(self, names: list[str], texts: list[list[str]]) -> None:
        """One block a row: its label across the table, then each plan's number and value; first, the plans'
        numbers and whole names."""
        comparison = self.comparison
        assert comparison is not None
        rows = comparison.rows()
        best = comparison.cheapest_fit()
        plans = len(names)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.horizontalHeader().hide()
        self.verticalHeader().hide()
        self.setColumnCount(2)
        self.setRowCount((1 + len(rows)) * (1 + plans))
        bold = QFont(self.font())
        bold.setBold(True)
        numbers = [f"★\u00a0{c + 1}" if c == best else str(c + 1) for c in range(plans)]  # never wrapped
        header = self.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(0, widest_line(numbers, QFontMetrics(bold)) + self._cell_padding())
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        several = plans > 1
        shade = self.palette().brush(QPalette.ColorRole.Window)
        at = 0
        for heading, values, differs, row in (
            (NAMES_HEADING, [n.split(". ", 1)[1] for n in names], False, None),
            *((r.label, [texts[c][i] for c in range(plans)], several and r.differs, r) for i, r in enumerate(rows)),
        ):
            title = QTableWidgetItem(heading)
            title.setFont(bold)
            title.setBackground(shade)  # shaded as a header section is, in the window's theme
            title.setData(SPOKEN, heading)
            self.setItem(at, 0, title)
            self.setSpan(at, 0, 1, 2)
            at += 1
            for c, value in enumerate(values):
                number = QTableWidgetItem(numbers[c])
                number.setData(PLAN_ROLE, c)
                number.setToolTip(plaintext.tooltip(names[c]))
                number.setData(SPOKEN, f"{names[c]}, {CHEAPEST}" if c == best else names[c])
                if c == best:
                    number.setFont(bold)
                self.setItem(at, 0, number)
                if row is None:
                    item = QTableWidgetItem(value)
                    item.setData(PLAN_ROLE, c)
                    item.setToolTip(plaintext.tooltip(names[c]))
                else:
                    item = self._value_item(row, c, value, differs, names[c])
                self.setItem(at, 1, item)
                at += 1

    # ---- reading back ----------------------------------------------------------------
    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Copy: the selected plans as a table (QAbstractItemView's copied the current cell's text alone, one value
        of one plan). Delete and Backspace: remove the selected plan, as the Remove button does."""
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy_selected()
            event.accept()
        elif event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and self.selected_plan() is not None:
            self.removeRequested.emit()
            event.accept()
        else:
            super().keyPressEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = self.context_menu()
        menu.exec(event.globalPos())
        menu.deleteLater()

    def context_menu(self) -> QMenu:
        """The right-click menu: Copy, the selected plans as a table (every plan where none is: a right-click
        selects the plan under it first). A table with no menu left the keyboard's Copy to be guessed."""
        menu = QMenu(self)
        one = self.selected_plan() is not None
        copy = menu.addAction("Copy the selected plan" if one else "Copy every plan")
        copy.setShortcut(QKeySequence(QKeySequence.StandardKey.Copy))  # shown beside it; the table's keys copy
        copy.setEnabled(self.comparison is not None)
        copy.triggered.connect(self.copy_selected)
        return menu

    def copy_selected(self) -> str:
        text = self.copied_text()
        QGuiApplication.clipboard().setText(text)
        return text

    def copied_text(self) -> str:
        """The selected plans (every plan where none is) as tab-separated lines a spreadsheet pastes into cells: the
        plans' numbered names, then a row's label and its values, in either layout; a cell a spreadsheet would read
        as a formula (a name from a file starting with "=", a negative margin) quoted as text, as the CSV report's."""
        comparison = self.comparison
        if comparison is None:
            return ""
        chosen = sorted({p for p in (item.data(PLAN_ROLE) for item in self.selectedItems()) if isinstance(p, int)})
        plans = chosen or list(range(len(comparison.plans)))
        texts = self._texts()
        lines = [["", *(f"{c + 1}. {comparison.names[c]}" for c in plans)]]
        lines += [[row.label, *(texts[c][r] for c in plans)] for r, row in enumerate(comparison.rows())]
        return "".join("\t".join(csv_text(cell).replace("\t", " ") for cell in line) + "\n" for line in lines)

    def kept_rows(self, rows: int) -> int:
        """The rows the table keeps in sight when the chart's pane is sized: side by side, ``rows`` rows under the
        header that names the plans; in blocks, the block that names them (its heading and a row a plan, as
        tall as four header lines and two rows for four plans), the chart's legend naming them too."""
        if self.stacked and self.comparison is not None:
            return min(1 + len(self.comparison.plans), self.rowCount())
        return min(rows, self.rowCount())

    def kept_height(self, rows: int) -> int:
        """The header's height where it shows and the :meth:`kept_rows`' heights."""
        header = self.horizontalHeader()
        height = 0 if header.isHidden() else header.sizeHint().height()
        return height + sum(self.rowHeight(r) for r in range(self.kept_rows(rows)))

    def selected_plan(self) -> int | None:
        """The plan (0-based) of the selected cells: a column side by side, a plan's row in the blocks."""
        plans = [item.data(PLAN_ROLE) for item in self.selectedItems()]
        found = [p for p in plans if isinstance(p, int)]
        return min(found) if found else None

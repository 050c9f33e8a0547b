"""Text that came from outside (a file, a path, a model's name, an error carrying either)
shown in Qt as the characters it is, never as markup.

Qt's ``QLabel``, ``QMessageBox`` and tooltips guess the format (``Qt.AutoText``): text
that looks like HTML is rendered, so ``<img src='/dev/zero'>`` in a model's name made Qt
read until memory ran out. Every widget that shows outside text goes through here:

- :func:`plain_label` fixes a label to plain text (the status bar's problem line);
- :func:`html` escapes text that is put inside our own markup (the model summary, the
  panels' rich labels);
- :func:`tooltip` makes a tooltip that shows its text literally;
- :func:`menu_text` and :func:`window_title` escape Qt's two other markers, the ``&``
  mnemonic and the ``[*]`` modified placeholder;

and :mod:`gui.dialogs` builds every message box with ``Qt.PlainText``. Control and format
characters (ESC, bidi overrides) are shown as escapes everywhere.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGui
from PySide6.QtWidgets import QLabel

from core.errors import escape_controls

__all__ = ["escape_controls", "html", "menu_text", "plain_label", "tooltip", "window_title", "wrappable"]


def html(text: str) -> str:
    """``text`` escaped for a place inside rich text."""
    return escape(escape_controls(text), quote=True)


def plain_label(label: QLabel) -> QLabel:
    """``label`` showing whatever text it is given as plain text."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def tooltip(text: str) -> str:
    """A tooltip showing ``text`` literally: escaped and wrapped, so Qt takes it as rich text
    whose content is plain characters (a bare escaped string would show its entities)."""
    return QtGui.convertFromPlainText(escape_controls(text), Qt.WhiteSpaceMode.WhiteSpaceNormal)


def menu_text(text: str) -> str:
    """``text`` for a menu item or button: a literal ``&`` is ``&&`` (a lone one makes a mnemonic)."""
    return escape_controls(text).replace("&", "&&")


def window_title(text: str) -> str:
    """``text`` for a window title: Qt reads ``[*]`` as the modified marker, ``[*][*]`` as ``[*]``."""
    return escape_controls(text).replace("[*]", "[*][*]")


# A word longer than this may be wider than a narrow panel (the Details dock at 1024 × 700, 256 px):
# QLabel wraps at spaces only, so one long word sets the label's minimum width and the panel is laid
# out wider than the dock and cut on the right (h58left: "(from_pretrained(torch_dtype=torch.bfloat16))"
# in a remedy's title, 319 px, cut the whole Diagnosis tab).
LONG_WORD = 16
ZERO_WIDTH_SPACE = "\u200b"
_BREAK_AFTER = frozenset("(=._/,:")


def wrappable(text: str) -> str:
    """``text`` with a zero-width space after the punctuation within each word longer than LONG_WORD
    characters (``(``, ``=``, ``.``, ``_``, ``/``, ``,``, ``:``), where a wrapping label may break it;
    shorter words and the rest of the text are left as they are."""
    words = text.split(" ")
    for i, word in enumerate(words):
        if len(word) > LONG_WORD:
            inside = "".join(c + ZERO_WIDTH_SPACE if c in _BREAK_AFTER else c for c in word[1:-1])
            words[i] = word[0] + inside + word[-1]  # never a line of "(" alone
    return " ".join(words)

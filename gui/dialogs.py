"""Every modal dialog the app shows goes through here, so tests monkeypatch one module.

Each function returns plain values (a path or None, a choice string) and never raises.
Every message box shows its text as plain text (:func:`_box`): messages carry values read
from files, and Qt's default format would render any that look like HTML.
"""

from __future__ import annotations

from typing import Literal

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from core.errors import escape_controls

PLAN_FILTER = "VRAM Planner plans (*.vramplan.json *.json);;All files (*)"
CONFIG_FILTER = "Model configuration (config.json *.json);;All files (*)"
MEASUREMENT_FILTER = "Measurements (*.json);;All files (*)"
PNG_FILTER = "PNG image (*.png)"
SVG_FILTER = "SVG drawing (*.svg)"

SaveChoice = Literal["save", "discard", "cancel"]


def open_file(parent: QWidget | None, title: str, name_filter: str, folder: str = "") -> str | None:
    path, _ = QFileDialog.getOpenFileName(parent, title, folder, name_filter)
    return path or None


def open_files(parent: QWidget | None, title: str, name_filter: str, folder: str = "") -> list[str]:
    paths, _ = QFileDialog.getOpenFileNames(parent, title, folder, name_filter)
    return list(paths)


def open_folder(parent: QWidget | None, title: str, folder: str = "") -> str | None:
    path = QFileDialog.getExistingDirectory(parent, title, folder)
    return path or None


def save_file(parent: QWidget | None, title: str, name_filter: str, suggested: str = "") -> str | None:
    path, _ = QFileDialog.getSaveFileName(parent, title, suggested, name_filter)
    return path or None


def ask_text(parent: QWidget | None, title: str, label: str, text: str = "") -> str | None:
    """A one-line answer (a name for a saved card or model); None when cancelled or empty."""
    answer, ok = QInputDialog.getText(parent, escape_controls(title), label, text=text)
    return (answer.strip() or None) if ok else None


def _box(
    parent: QWidget | None,
    icon: QMessageBox.Icon,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Ok,
    default: QMessageBox.StandardButton = QMessageBox.StandardButton.NoButton,
) -> QMessageBox.StandardButton:
    """A modal message box whose title and text are shown as the characters they are."""
    box = QMessageBox(icon, escape_controls(title), text, buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    if default != QMessageBox.StandardButton.NoButton:
        box.setDefaultButton(default)
    box.exec()
    clicked = box.clickedButton()
    return box.standardButton(clicked) if clicked is not None else QMessageBox.StandardButton.NoButton


def error(parent: QWidget | None, title: str, text: str) -> None:
    _box(parent, QMessageBox.Icon.Warning, title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    _box(parent, QMessageBox.Icon.Information, title, text)


def confirm(parent: QWidget | None, title: str, text: str) -> bool:
    """True when the user answers Yes; the default answer (Cancel, Escape, closing the box)
    changes nothing."""
    buttons = QMessageBox.StandardButton
    answer = _box(parent, QMessageBox.Icon.Warning, title, text, buttons.Yes | buttons.Cancel, buttons.Cancel)
    return answer == buttons.Yes


def confirm_replace(parent: QWidget | None, path: str, why: str = "") -> bool:
    """True to replace ``path``, an existing file VRAM Planner did not write, or one of
    another kind (``why``: the refusal's reason, as core.files.fileio.NotOurFileError gives it)."""
    if why and not why.startswith("exists and is not"):
        title, said = "Replace a file of another kind?", why.split(";")[0]
    else:
        title, said = "Replace a file VRAM Planner did not write?", "exists and is not a file VRAM Planner wrote"
    text = f"{escape_controls(path)}\n{escape_controls(said)}.\n\nReplace it? What it holds now will be lost."
    return confirm(parent, title, text)


def ask_save_changes(parent: QWidget | None, document: str) -> SaveChoice:
    buttons = QMessageBox.StandardButton
    answer = _box(
        parent,
        QMessageBox.Icon.Question,
        "Unsaved changes",
        f"Save the changes to “{document}” before closing it?",
        buttons.Save | buttons.Discard | buttons.Cancel,
        buttons.Save,
    )
    if answer == buttons.Save:
        return "save"
    if answer == buttons.Discard:
        return "discard"
    return "cancel"


def unexpected_error(parent: QWidget | None, summary: str, log_path: str | None) -> None:
    """The crash handler's report: what went wrong in one line, where the details are."""
    where = f"The details are in\n{log_path}" if log_path else "The details could not be written to a log file."
    _box(
        parent,
        QMessageBox.Icon.Critical,
        "Unexpected error",
        f"Something went wrong: {summary}\n\nVRAM Planner is still running and your plan is kept. {where}",
    )


def ask_restore(parent: QWidget | None) -> bool:
    """True to take back the autosaved plan of a session that ended unexpectedly."""
    buttons = QMessageBox.StandardButton
    answer = _box(
        parent,
        QMessageBox.Icon.Question,
        "Restore unsaved plan",
        "Restore the plan from the session that ended unexpectedly?",
        buttons.Yes | buttons.No,
        buttons.Yes,
    )
    return answer == buttons.Yes

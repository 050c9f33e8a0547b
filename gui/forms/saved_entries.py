"""Saving the user's own cards and models: the name asked for and checked, and a full list
(:data:`gui.settings.MAX_CUSTOM_ENTRIES`) never makes room by dropping an entry unasked."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from gui import dialogs
from gui.settings import EntryRefused, entry_name


def ask_entry_name(parent: QWidget | None, title: str, label: str, suggested: str) -> str | None:
    """The name the user gives, as it will be stored; None when cancelled or refused (said)."""
    answer = dialogs.ask_text(parent, title, label, suggested)
    if answer is None:
        return None
    try:
        return entry_name(answer)
    except EntryRefused as refusal:
        dialogs.error(parent, title, f"Not saved: {refusal}.")
        return None


def store_entry(
    parent: QWidget | None,
    title: str,
    kind: str,
    names: list[str],
    add: Callable[[], None],
    forget: Callable[[str], None],
) -> bool:
    """``add()`` the entry; when the list is full, ask before forgetting the oldest of
    ``names`` (oldest first) to make room. True when it was saved."""
    try:
        add()
        return True
    except EntryRefused:
        oldest = names[0] if names else ""
        question = (
            f"You have {len(names)} saved {kind}s, the most VRAM Planner keeps.\n\n"
            f"Forget the oldest, “{oldest}”, to keep this one?"
        )
        if not oldest or not dialogs.confirm(parent, title, question):
            return False
    forget(oldest)
    add()
    return True

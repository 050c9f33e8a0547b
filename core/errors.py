"""The project's own exceptions: every bad input ends up as one of these."""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with newlines and other control characters escaped, so a message stays one line."""
    return text if text.isprintable() else repr(text)[1:-1]


def escape_controls(text: str) -> str:
    """``text`` with control and format characters (ESC, BEL, CR, bidi overrides) written as
    ``\\x1b``-style escapes and everything else left as it is: safe to print on a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class PlanError(ValueError):
    """A value a user gave is outside what the estimator accepts.

    ``field`` names the input (dotted path, as in the plan file), ``value`` is what was
    given and ``allowed`` says what would have been accepted. The message carries all three
    so a command line or a dialog can show it as it is.
    """

    def __init__(self, field: str, value: object, allowed: str, reason: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.reason = reason
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        text = f"{one_line(field)}: {shown} is not allowed; expected {one_line(allowed)}"
        if reason:
            text += f" ({one_line(reason)})"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[PlanError], tuple[str, object, str, str]]:
        # Rebuilt from its own arguments when it crosses from the worker process to the window.
        return (type(self), (self.field, self.value, self.allowed, self.reason))


class PlanFileError(ValueError):
    """A plan, config, measurement or catalogue file could not be read."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{one_line(path)}: {one_line(reason)}")

    def __reduce__(self) -> tuple[type[PlanFileError], tuple[str, str]]:
        # Rebuilt from its own arguments when it crosses from the worker process to the window.
        return (type(self), (self.path, self.reason))


class ImportCancelled(Exception):
    """A model import stopped because its caller asked (the window's Cancel button)."""

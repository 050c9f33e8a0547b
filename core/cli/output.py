"""The one way anything the command line says reaches the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO

from core.errors import escape_controls, one_line
from core.format import for_encoding


class OutputError(Exception):
    """Standard output could not take the text (a full disk, a closed pipe).

    ``quiet`` for a pipe closed by its reader (``vramplan models | head -1``): as Unix
    tools do, that ends the program without a message.
    """

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


def write_output(text: str, stream: TextIO | None) -> None:
    """Every subcommand's output goes through here.

    - no stream (a windowed Windows build has ``sys.stdout is None``): nothing is written;
    - control and format characters (ESC, BEL, CR, bidi overrides from a model's name) are
      escaped, so nothing read from a file can drive the terminal;
    - a stream whose encoding cannot take the text (an ASCII locale, a Windows console redirected
      to a cp1252 file) gets our own symbols in ASCII (8.03e9 for 8.03 × 10⁹, x, -, ...:
      :func:`core.format.for_encoding`) and anything else (a model's name in another script) as an
      escape instead of a UnicodeEncodeError;
    - a failed write (``> /dev/full``, a closed pipe) raises :class:`OutputError`.
    """
    if stream is None:
        return
    safe = "\n".join(escape_controls(line) for line in text.split("\n"))
    encoding = getattr(stream, "encoding", None)
    if isinstance(encoding, str):
        safe = for_encoding(safe, encoding)
    try:
        try:
            stream.write(safe)
        except UnicodeEncodeError:
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is None:
                raise
            reconfigure(errors="backslashreplace")
            stream.write(safe)
        stream.flush()
    except (OSError, ValueError) as exc:  # UnicodeEncodeError is a ValueError; so is a closed file
        _discard_pending(stream)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"cannot write the output ({one_line(reason)})", isinstance(exc, BrokenPipeError)) from None


def _discard_pending(stream: TextIO) -> None:
    """Point a failed standard output at the null device, so the interpreter's own flush at
    exit does not fail a second time with "Exception ignored" and a traceback."""
    if stream is not sys.__stdout__:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def say(text: str) -> None:
    """One line on stderr, where there is one and it can take it."""
    with contextlib.suppress(OutputError):
        write_output(text, sys.stderr)

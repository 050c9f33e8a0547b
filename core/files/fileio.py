"""Opening files read from outside without blocking on them or reading without limit."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from core.errors import PlanFileError


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, only if it is a regular file.

    Opened non-blocking and checked on the open descriptor, so a FIFO (whose plain open
    waits for a writer, forever) or a device swapped in after a check is refused, never
    waited on. Raises :class:`PlanFileError` for what is not a regular file and OSError for
    what cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PlanFileError(str(path), "is not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | os.PathLike[str], max_bytes: int, kind: str) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (``kind`` names what it should
    be, "a plan file", for the message); every failure is one :class:`PlanFileError`.

    The one reader of bounded files from outside: plan files, config.json, measurements and
    training configs all come through here.
    """
    where = str(path)
    try:
        if os.path.isdir(path):
            raise PlanFileError(where, f"is a folder; choose {kind} in it")
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise PlanFileError(where, f"is {size:,} bytes, over the {max_bytes:,} read; {kind} is a few kB")
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise PlanFileError(where, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:  # it grew after the size check
        raise PlanFileError(where, f"is over the {max_bytes:,} bytes read; {kind} is a few kB")
    return raw

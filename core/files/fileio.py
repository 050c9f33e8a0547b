"""Files in and out: reading from outside without blocking or reading without limit, and the
one atomic writer every file the app writes goes through.

Reading: :func:`open_regular` and :func:`read_regular_file` (plan files, config.json,
measurements, training configs).

Writing: :func:`atomic_write_bytes` and :func:`atomic_write_text` write a temporary file
beside the target, fsync it and rename it over the target, keeping the target's mode (and,
where allowed, its owner). They refuse:

- what is not a regular file (a FIFO, a socket, a device node, a folder) and a read-only
  file, before anything is written;
- an existing file that VRAM Planner did not write (:func:`written_by_vramplan`), unless
  the caller passes ``force=True`` (the command line's ``--force``; the window asks first):
  :class:`NotOurFileError`;
- a symlink that leads nowhere. The rule on symlinks: a symlink to an existing regular file
  is written *through* (the link stays, the file it names is replaced), as Qt's QSaveFile
  does, and that file is checked exactly as if it had been named itself (so a link to a
  system file is refused as "not a VRAM Planner file"); a dangling symlink, or a chain that
  ends in a missing file, is refused, so a save never creates a file at a place the user
  did not name.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Final

from core.errors import PlanFileError


class NotOurFileError(PlanFileError):
    """The target exists and VRAM Planner did not write it: it is kept unless the user says
    to replace it (``force=True``)."""


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
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise PlanFileError(where, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if len(raw) > max_bytes:  # it grew after the size check
        raise PlanFileError(where, f"is over the {max_bytes:,} bytes read; {kind} is a few kB")
    return raw


# ---- what VRAM Planner wrote ------------------------------------------------------------
# Every file the app writes carries a mark at a fixed place, and the mark says what kind of
# document it is: plan and comparison files open with their "format" (the first key), HTML
# reports with their generator tag, Markdown and HTML reports end with their footer line
# ("VRAM Planner 0.9.0 · generated"), CSV reports with their tool line, chart pictures are a
# PNG or SVG whose title is the chart's, PDFs carry their Creator (UTF-16, as Qt's QPdfWriter
# writes it), launch configs open with their comment line. A mark anywhere else is not one:
# a shell script or notes that merely quote "written by VRAM Planner" or a plan are the
# user's (2026-12-04: `report --md run.sh` replaced such a script without --force).
_HEAD_MARKS: Final = (
    (re.compile(rb'\A\s*\{\s*"format"\s*:\s*"vramplan-(?P<kind>[a-z]+)"'), ""),
    (
        re.compile(
            rb"\A<!DOCTYPE html><html[^>]{0,40}><head>"
            rb'<meta charset="utf-8"><meta name="generator" content="VRAM Planner'
        ),
        "report",
    ),
    (re.compile(rb"\A# [A-Za-z][\w.-]*(?: [\w.-]+){0,3} written by VRAM Planner\b"), "launch config"),
    (re.compile(rb"\A(?:\x89PNG\r\n\x1a\n|<\?xml|<svg)[\s\S]{0,4096}?VRAM Planner memory chart"), "chart"),
)
_END_MARKS: Final = (
    re.compile("VRAM Planner [0-9][^ \n]* · generated[^\n]*\n?\\Z".encode()),  # Markdown, HTML
    re.compile(rb"\n,tool,VRAM Planner,[^\n]*\n?\Z"),  # CSV
)
_PDF_CREATOR: Final = re.compile(re.escape(b"/Creator (\xfe\xff" + "VRAM Planner".encode("utf-16-be")))
SIGNATURE_SPAN: Final = 65_536  # bytes read at each end of an existing file to find one


def vramplan_kind(head: bytes, tail: bytes = b"") -> str | None:
    """What kind of VRAM Planner document a file whose first and last bytes are these is
    ("plan", "comparison", "report", "chart", "launch config"), or None: not one of ours.
    ``tail`` is empty when ``head`` is the whole file."""
    for pattern, kind in _HEAD_MARKS:
        match = pattern.search(head)
        if match is not None:
            return kind or match.group("kind").decode()
    if any(pattern.search(tail or head) for pattern in _END_MARKS):
        return "report"
    if head.startswith(b"%PDF-") and (_PDF_CREATOR.search(head) or _PDF_CREATOR.search(tail)):
        return "report"
    return None


# The door each of the app's own documents opens by, for a reader handed one meant for another
# (`estimate --plan report.md`, `--from plan.json`, `--config plan.json` each named only the parse error).
DOORS: Final = {
    "plan": "open it as a plan (`vramplan estimate --plan FILE`, File → Open)",
    "comparison": "open it as a comparison (`vramplan compare FILE`, Compare plans → Open)",
    "report": "a report is made from plans; open the plan it was made from",
    "chart": "a chart is made from plans; open the plan it was made from",
    "launch config": "a training config is read with `vramplan estimate --from FILE` (File → Open training config)",
}


def other_door(kind: str | None, not_a: str) -> str:
    """ "is a VRAM Planner report, not a plan: <where it opens>", or "" when ``kind`` is none of ours."""
    return f"is a VRAM Planner {kind}, not {not_a}: {DOORS[kind]}" if kind in DOORS else ""


def other_door_of(document: object, not_a: str) -> str:
    """:func:`other_door` for a parsed JSON document, by its ``"format": "vramplan-…"`` key."""
    own = document.get("format") if isinstance(document, dict) else None
    return other_door(own.removeprefix("vramplan-"), not_a) if isinstance(own, str) else ""


def written_by_vramplan(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file whose first and last bytes are these is one VRAM Planner wrote
    (an empty file counts: replacing it loses nothing)."""
    return (not head and not tail) or vramplan_kind(head, tail) is not None


def _ends(data: bytes) -> tuple[bytes, bytes]:
    """The bytes :func:`_ends_of` would read of a file holding ``data``."""
    return data[:SIGNATURE_SPAN], data[max(SIGNATURE_SPAN, len(data) - SIGNATURE_SPAN) :]


def _ends_of(path: Path, size: int) -> tuple[bytes, bytes]:
    with open_regular(path) as handle:
        head = handle.read(SIGNATURE_SPAN)
        tail = b""
        if size > SIGNATURE_SPAN:
            handle.seek(max(SIGNATURE_SPAN, size - SIGNATURE_SPAN))
            tail = handle.read(SIGNATURE_SPAN)
    return head, tail


# ---- the atomic writer --------------------------------------------------------------------
# Temporary files of a save are named ``.<target name>.vramplan-save-<random>.tmp`` so that a
# clean-up can tell them from anything else; the earlier ``.<name>.<8 random>.tmp`` names
# (tempfile.mkstemp's) are recognised too. Older than this, no save is still writing them:
# a save of a few kB takes milliseconds.
TEMP_MARK: Final = "vramplan-save-"
STALE_TEMP_SECONDS: Final = 60.0
_TEMP_STEM_CHARS: Final = 100  # of the target's name in a temporary's: 255-byte names still save
_TEMP_NAME: Final = re.compile(r"^\.(?P<target>.+)\.(?:" + TEMP_MARK + r"[A-Za-z0-9_]+|[a-z0-9_]{8})\.tmp$")


def _new_file_mode() -> int:
    """0o666 less the umask, what open() gives a new file (mkstemp's own 0o600 is not that)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc: read the umask by setting it (briefly) and back
    os.umask(mask)
    return 0o666 & ~mask


def _temp_stem(target_name: str) -> str:
    """The target's name as a temporary's name carries it (shortened, so that the
    temporary's name stays within the 255 bytes a file name may have)."""
    # os.fsencode, not str.encode: a name of non-UTF-8 bytes reaches here as surrogate escapes
    # (`--save $'bad\xff.json'` raised UnicodeEncodeError, a traceback, before 2026-12-04).
    return target_name if len(os.fsencode(target_name)) <= _TEMP_STEM_CHARS else target_name[: _TEMP_STEM_CHARS // 4]


def remove_stale_temporaries(folder: str | os.PathLike[str], target_name: str | None = None) -> int:
    """Remove the temporary files interrupted saves left in ``folder`` (of ``target_name``
    only, if given) that are older than :data:`STALE_TEMP_SECONDS`; the number removed.

    Only regular files, owned by this user, whose names match the save's own pattern are
    removed; a symlink named like one is left alone, and nothing here raises.
    """
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or (target_name is not None and match.group("target") != _temp_stem(target_name)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
            if stat.S_ISREG(info.st_mode) and mine and now - info.st_mtime > STALE_TEMP_SECONDS:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def save_target(
    path: str | os.PathLike[str], *, force: bool = False, kind: str | None = None
) -> tuple[Path, os.stat_result | None]:
    """Where a save of ``path`` really writes (the end of any chain of symlinks) and what is
    there now (None: nothing yet); :class:`PlanFileError` for a target that must not be
    replaced, :class:`NotOurFileError` for one VRAM Planner did not write, or one of another
    ``kind`` than the document being saved (a plan under a report: `report --md p.json p.json`
    replaced the plan it read), unless ``force``.

    The checks of :func:`atomic_write_bytes`, for a caller that wants to ask before it
    renders (the window asks "replace?" before drawing a PDF).
    """
    where = str(path)
    if not where:
        raise PlanFileError('""', "is an empty file name; name the file to write")
    if where == "-":  # other tools read "-" as standard output; here it made a file named "-"
        raise PlanFileError(where, "names standard output in other tools; VRAM Planner writes only to files: name one")
    if where.endswith(("/", os.sep)) and not os.path.isdir(where):  # a folder is refused below
        # realpath drops the slash: `--save plan.json/` wrote plan.json, a name not given.
        raise PlanFileError(where, "ends with a slash, the name of a folder; name the file to write")
    try:
        link = os.path.islink(path)
        target = Path(os.path.realpath(path))
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        if link:
            missing = f"is a symlink to {target}, which does not exist; nothing is created there"
            raise PlanFileError(where, missing) from None
        return target, None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise PlanFileError(where, f"cannot be written ({getattr(exc, 'strerror', None) or exc})") from None
    assert info is not None
    if not stat.S_ISREG(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe, socket or device)"
        raise PlanFileError(where, f"is {what}; VRAM Planner writes only to files")
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise PlanFileError(where, "is read-only; save under another name")
    if not force:
        try:
            ends = _ends_of(target, info.st_size)
        except OSError as exc:
            raise PlanFileError(where, f"cannot be read to check what it is ({exc.strerror or exc})") from None
        _refuse_unless_ours(where, ends, kind)
    return target, info


def _refuse_unless_ours(where: str, ends: tuple[bytes, bytes], kind: str | None) -> None:
    """:class:`NotOurFileError` unless the file whose ends are ``ends`` is empty or a VRAM
    Planner document of ``kind`` (any kind when ``kind`` is None)."""
    if not any(ends):
        return
    found = vramplan_kind(*ends)
    if found is None:
        raise NotOurFileError(where, "exists and is not a file VRAM Planner wrote; it was left as it is")
    if kind is not None and found != kind:
        raise NotOurFileError(where, f"is a VRAM Planner {found}, not a {kind}; it was left as it is")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """Write ``data`` to a temporary file beside the real target, fsync it, then rename it over.

    A failure at any point (a full disk included) leaves the previous file as it was. The
    file keeps its mode and (where allowed) its owner and group; a new file gets the umask's
    mode. A hard-linked file is replaced like any other (QSaveFile does the same): the name
    saved to holds the new content and the other names keep the old one, whole. Raises
    :class:`PlanFileError` (or :class:`NotOurFileError`) for targets it refuses, see
    :func:`save_target`, and OSError for failures of the write itself.
    """
    target, existing = save_target(path, force=force, kind=vramplan_kind(*_ends(data)))
    folder = target.parent
    remove_stale_temporaries(folder, target.name)
    fd, temp = tempfile.mkstemp(prefix=f".{_temp_stem(target.name)}.{TEMP_MARK}", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), stat.S_IMODE(existing.st_mode) if existing else _new_file_mode())
            if existing is not None and hasattr(os, "fchown"):
                with contextlib.suppress(OSError):  # only root (or the owner, for the group) may
                    os.fchown(handle.fileno(), existing.st_uid, existing.st_gid)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, force: bool = False) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8, its newlines as they are."""
    atomic_write_bytes(path, text.encode("utf-8"), force=force)


def write_file(path: str | os.PathLike[str], data: bytes | str, *, force: bool = False) -> None:
    """:func:`atomic_write_bytes` (or ``_text``) with every failure one :class:`PlanFileError`:
    what the app's savers call."""
    try:
        if isinstance(data, str):
            atomic_write_text(path, data, force=force)
        else:
            atomic_write_bytes(path, data, force=force)
    except OSError as exc:
        raise PlanFileError(str(path), f"cannot be written ({exc.strerror or exc})") from None
    except UnicodeEncodeError as exc:  # before anything is written: the old file stays whole
        # A lone surrogate: bytes of a name or argument that were not UTF-8 (`--title $'\xff'`,
        # `--command`), or a "\ud800" escape read from JSON; UTF-8 cannot hold it (a traceback
        # before 2026-12-04).
        bad = exc.object[exc.start : exc.end]
        raise PlanFileError(str(path), f"cannot be written: the text holds {bad!r}, which is not UTF-8") from None

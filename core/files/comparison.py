"""Comparisons on disk: a versioned JSON document whose entries are whole plan documents,
so plan-file migrations apply to them unchanged; plan and comparison files read by name."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from core.advice.compare import MAX_PLANS, Comparison, check_name, compare
from core.errors import PlanError, PlanFileError
from core.files.fileio import write_file
from core.files.planfile import MAX_FILE_BYTES, load_saved, plan_to_dict, saved_from_dict
from core.files.runconfig.reading import read_json_document
from core.plan import Plan
from core.verdict import Mode

FORMAT: Final = "vramplan-comparison"
VERSION: Final = 1


def to_dict(comparison: Comparison) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        # each entry a whole plan document, with the comparison's mode (branch h56mode)
        "plans": [{"name": p.name, "plan": plan_to_dict(p.plan, comparison.mode)} for p in comparison.plans],
    }


def dumps(comparison: Comparison) -> str:
    return json.dumps(to_dict(comparison), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def from_dict(document: Any) -> Comparison:
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise PlanError("format", document.get("format") if isinstance(document, Mapping) else None, f"'{FORMAT}'")
    version = document.get("version")
    if version != VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
        raise PlanError("version", version, str(VERSION), "written by a newer VRAM Planner?" if newer else "")
    extra = sorted(set(document) - {"format", "version", "plans"})
    if extra:
        raise PlanError(extra[0], document[extra[0]], "only format, version and plans", "unknown key")
    entries = document.get("plans")
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_PLANS:
        raise PlanError("plans", entries if not isinstance(entries, list) else len(entries), f"1 to {MAX_PLANS} plans")
    named, modes = [], []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "plan"}:
            raise PlanError(f"plans[{index}]", entry, "an object with name and plan")
        try:
            saved = saved_from_dict(entry["plan"])
        except PlanError as exc:
            raise PlanError(f"plans[{index}].{exc.field}", exc.value, exc.allowed, exc.reason) from None
        named.append((check_name(entry["name"], index), saved.plan))
        modes.append(saved.mode)
    return compare(named, common_mode(modes, "plans"))


def common_mode(modes: Sequence[Mode], where: str) -> Mode:
    """The one mode the plans were saved with; plans saved for different questions are refused
    (a comparison judges every plan one way), naming both: give --mode to choose."""
    if len(set(modes)) > 1:
        raise PlanError(where, " and ".join(sorted({m.value for m in modes})), "plans saved in one mode", "give --mode")
    return modes[0] if modes else Mode.TRAINING


def load(path: str | os.PathLike[str]) -> Comparison:
    where = str(path)
    document = read_json_document(path, MAX_FILE_BYTES * MAX_PLANS, "a comparison")
    try:
        return from_dict(document)
    except PlanError as exc:
        raise PlanFileError(where, str(exc)) from None


def load_named(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, Plan]]:
    """Plan files (named by their file name) and comparison files (their plans' own names), in order."""
    return [(name, plan) for name, plan, _ in load_named_modes(paths)]


def load_named_modes(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, Plan, Mode]]:
    """:func:`load_named` with the mode each plan was saved with (a comparison's own for its plans)."""
    named: list[tuple[str, Plan, Mode]] = []
    for path in paths:
        document = read_json_document(path, MAX_FILE_BYTES * MAX_PLANS, "a plan or a comparison")
        if isinstance(document, Mapping) and document.get("format") == FORMAT:
            comparison = load(path)
            named += [(p.name, p.plan, comparison.mode) for p in comparison.plans]
        else:
            # A file name of non-UTF-8 bytes (surrogate escapes) named a plan no report could write.
            name = os.fsencode(Path(path).name).decode("utf-8", "replace")
            stem = name.removesuffix(".json").removesuffix(".vramplan")
            saved = load_saved(path)
            named.append((stem, saved.plan, saved.mode))
    return named


def save(comparison: Comparison, path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Through the one atomic writer: a file VRAM Planner did not write is kept unless ``force``."""
    write_file(path, dumps(comparison), force=force)

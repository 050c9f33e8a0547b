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
from core.files.planfile import MAX_FILE_BYTES, plan_from_dict, plan_to_dict
from core.files.planfile import load as load_plan
from core.files.runconfig.reading import read_json_document
from core.plan import Plan

FORMAT: Final = "vramplan-comparison"
VERSION: Final = 1


def to_dict(comparison: Comparison) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "plans": [{"name": p.name, "plan": plan_to_dict(p.plan)} for p in comparison.plans],
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
    named = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "plan"}:
            raise PlanError(f"plans[{index}]", entry, "an object with name and plan")
        try:
            plan = plan_from_dict(entry["plan"])
        except PlanError as exc:
            raise PlanError(f"plans[{index}].{exc.field}", exc.value, exc.allowed, exc.reason) from None
        named.append((check_name(entry["name"], index), plan))
    return compare(named)


def load(path: str | os.PathLike[str]) -> Comparison:
    where = str(path)
    document = read_json_document(path, MAX_FILE_BYTES * MAX_PLANS, "a comparison")
    try:
        return from_dict(document)
    except PlanError as exc:
        raise PlanFileError(where, str(exc)) from None


def load_named(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, Plan]]:
    """Plan files (named by their file name) and comparison files (their plans' own names), in order."""
    named: list[tuple[str, Plan]] = []
    for path in paths:
        document = read_json_document(path, MAX_FILE_BYTES * MAX_PLANS, "a plan or a comparison")
        if isinstance(document, Mapping) and document.get("format") == FORMAT:
            named += [(p.name, p.plan) for p in load(path).plans]
        else:
            # A file name of non-UTF-8 bytes (surrogate escapes) named a plan no report could write.
            name = os.fsencode(Path(path).name).decode("utf-8", "replace")
            stem = name.removesuffix(".json").removesuffix(".vramplan")
            named.append((stem, load_plan(path)))
    return named


def save(comparison: Comparison, path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Through the one atomic writer: a file VRAM Planner did not write is kept unless ``force``."""
    write_file(path, dumps(comparison), force=force)

"""A plan saved, loaded back, and loaded from the same file as a release before one of its
fields wrote it (the key removed): the two plans a field's compatibility tests compare."""

from __future__ import annotations

import json
from pathlib import Path

from core.files import planfile
from core.plan import Plan


def reload_and_without(plan: Plan, directory: Path, section: str, key: str) -> tuple[Plan, Plan]:
    """``plan`` saved under ``directory`` and loaded back, and the same document without
    ``plan.<section>.<key>`` loaded (a file written before the field)."""
    path = directory / "plan.json"
    planfile.save(plan, path)
    document = json.loads(path.read_text())
    del document["plan"][section][key]
    return planfile.load(path), planfile.loads(json.dumps(document))

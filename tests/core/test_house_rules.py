"""Rules of the house a machine checks (issue 25): every colour core draws with has one home,
core/colours.py; no function in core or gui runs past 80 lines, so each can be read at once
(read as text: no Qt needed)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import core.colours

CORE = Path(__file__).resolve().parents[2] / "core"
HEX_COLOUR = re.compile(r"#(?:[0-9A-Fa-f]{8}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{3})\b")
MAX_FUNCTION_LINES = 80
# Functions allowed past the limit, with why. A declarative table (a function that is one
# long literal) may be listed too, with a comment saying so where it is defined.
LONG_FUNCTIONS: dict[str, str] = {}


def _string_literals(path: Path) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [t.string for t in tokens if t.type == tokenize.STRING]  # f-strings too, on Python 3.11


def test_core_spells_colours_only_in_their_home() -> None:
    offenders = [
        f"{path.relative_to(CORE.parent)}: {match}"
        for path in sorted(CORE.rglob("*.py"))
        if path != CORE / "colours.py"
        for literal in _string_literals(path)
        for match in HEX_COLOUR.findall(literal)
    ]
    assert offenders == []


def test_the_home_is_found_by_the_rule() -> None:
    """The pattern sees every colour the home holds, so an offender cannot slip past it."""
    named = [value for name, value in vars(core.colours).items() if name.isupper()]
    values = [v for v in named if isinstance(v, str)] + [v for d in named if isinstance(d, dict) for v in d.values()]
    assert values and all(HEX_COLOUR.fullmatch(v) for v in values)


def test_no_function_in_core_or_gui_runs_past_80_lines() -> None:
    long = {}
    for path in sorted([*CORE.rglob("*.py"), *(CORE.parent / "gui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{path.relative_to(CORE.parent).as_posix()}:{node.name}"
                if lines > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS:
                    long[name] = lines
    assert long == {}


# The measuring libraries are the tools' (tools/measure, benchmarks), never the app's: the app runs and its tests pass
# where none is installed (pyproject.toml keeps them in the optional "measure" extra).
MEASURING_ONLY = frozenset({"torch", "transformers", "peft", "safetensors", "triton", "bitsandbytes"})


def test_no_module_in_core_or_gui_imports_a_measuring_library() -> None:
    offenders = []
    for path in sorted([*CORE.rglob("*.py"), *(CORE.parent / "gui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(CORE.parent)}: {n}" for n in names if n.split(".")[0] in MEASURING_ONLY]
    assert offenders == []

"""Rules of the house a machine checks (issue 25): every colour core draws with has one home,
core/colours.py; no function in core or gui runs past 80 lines, so each can be read at once; and
docs/ARCHITECTURE.md, a newcomer's map, names every module of core, gui and packaging, names nothing
that is gone, and answers each "where does rule X live?" with a function that exists (read as text:
no Qt needed)."""

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


# ---- docs/ARCHITECTURE.md against the code (issue 25: a house a newcomer can walk) ------------
ARCHITECTURE = CORE.parent / "docs" / "ARCHITECTURE.md"
MAPPED = ("core", "gui", "packaging")
DOTTED = re.compile(r"\b((?:core|gui|packaging)(?:\.\w+)+)")
PATH = re.compile(r"\b((?:core|gui|packaging|tests|benchmarks|tools|resources|docs)/[\w./-]*\w)")


def _names_defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """What a module or class body defines: functions, classes, assigned names, imported names."""
    found: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update((n.id, node) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            found.update(_names_defined(node.body))
    return found


def resolves(dotted: str) -> bool:
    """Whether ``core.a.b.name.attr`` names a module of the tree and, after it, a name defined in
    it (and an attribute of a class there), read from the source: no import, so gui needs no Qt."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = CORE.parent.joinpath(*parts[:cut])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            break
    else:
        return False
    body = ast.parse(source.read_text(encoding="utf-8")).body
    for name in parts[cut:]:
        node = _names_defined(body).get(name)
        if node is None:
            return False
        if not isinstance(node, ast.ClassDef):
            return True  # a function's or a constant's own attributes are not followed
        body = node.body
    return True


def test_architecture_names_every_module() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for top in MAPPED:
        for path in sorted((CORE.parent / top).rglob("*.py")):
            rel = path.relative_to(CORE.parent)
            named = f"{rel.parent.as_posix()}/" if path.name == "__init__.py" else rel.as_posix()
            if f"`{named}`" not in text:
                missing.append(named)
    assert missing == []


def _class_members() -> dict[str, set[str]]:
    """Every class of core and gui by name: what its body defines and what its methods set on ``self``."""
    members: dict[str, set[str]] = {}
    for path in sorted([*CORE.rglob("*.py"), *(CORE.parent / "gui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found = members.setdefault(node.name, set())
                found.update(_names_defined(node.body))
                found.update(
                    target.attr
                    for sub in ast.walk(node)
                    if isinstance(sub, ast.Assign | ast.AnnAssign)
                    for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                    if isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                )
    return members


def test_architecture_names_nothing_that_is_gone() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    gone = [p for p in sorted(set(PATH.findall(text))) if not (CORE.parent / p).exists()]
    gone += [d for d in sorted(set(DOTTED.findall(text))) if not resolves(d)]
    # Class.member as the page writes it (PlanController.update, VerdictPanel._show_training); a class that is
    # not ours (Qt's, the enum module's) is not checked.
    members = _class_members()
    gone += [
        f"{cls}.{name}"
        for cls, name in sorted(set(re.findall(r"`?\b([A-Z]\w+)\.(_?[a-z]\w*)", text)))
        if cls in members and name not in members[cls]
    ]
    assert gone == []


def _where_table() -> list[tuple[str, str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Where a rule lives") :]
    return re.findall(r"^\| ([^|`][^|]*?) \| `([\w.]+)` \|", section, flags=re.MULTILINE)


def test_where_a_rule_lives_names_functions_that_exist() -> None:
    rows = _where_table()
    asked = ("caching allocator's reserve", "LoRA", "vLLM's KV pool", "TFLOP/s", "banner", "plan files")
    assert all(any(word in question for question, _ in rows) for word in asked)
    assert [name for _, name in rows if not resolves(name)] == []


def test_the_resolver_tells_a_gone_name() -> None:
    """The checks above are only as good as the resolver: it must refuse what does not exist."""
    assert resolves("core.model.ModelSpec.adapted_rows") and resolves("gui.panels.verdict.VerdictPanel")
    assert resolves("core.files.launch") and resolves("core.runtime.CUDA_CONTEXT_BYTES")
    assert not resolves("core.model.ModelSpec.no_such_rule")
    assert not resolves("core.no_such_module.f") and not resolves("gui.chart.geometry.no_such_bars")
    members = _class_members()
    assert {"update", "_show"} <= members["PlanController"] and "micro_batch" in members["WorkloadForm"]
    assert "no_such_method" not in members["PlanController"]

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

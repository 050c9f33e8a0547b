"""The option strings ``python -m sglang.launch_server`` accepts, per SGLang release, read from the released wheels.

    pip download sglang==0.4.6 --no-deps -d /tmp/whl            # each release's own wheel (what an export pins)
    pip download sglang==0.4.6.post5 --no-deps -d /tmp/whl      # and its last .postN, where it has one
    python -m tools.engine_flags.sglang_server_flags /tmp/whl/sglang-*.whl > resources/engine_flags/sglang_server.txt

The wheels are read as zip files, never installed nor imported. ``launch_server`` parses ``sys.argv[1:]`` with
``prepare_server_args`` (``sglang/srt/server_args.py``): a plain ``argparse.ArgumentParser()`` (prefix matching on)
that ``ServerArgs.add_cli_args`` fills, then ``parse_args``, which exits with "unrecognized arguments" on any other
word. What ``add_cli_args`` adds is read from its source:

* every ``parser.add_argument`` call of ``ServerArgs.add_cli_args`` (and of any other function of server_args.py
  it calls with the parser): its option strings, those of a loop over a literal list included; an
  ``action=argparse.BooleanOptionalAction`` adds argparse's ``--no-`` spelling;
* from the releases that build flags from dataclass fields (0.5.14 on:
  ``add_cli_args_from_dataclass(parser, ServerArgs)``, ``sglang/srt/arg_groups/arg_utils.py``): every field of
  ServerArgs and, where ServerArgs is assembled from namespace classes (``_INPUT_NAMESPACES`` of
  ``sglang/srt/arg_groups/fields/*.py``, 0.5.20 on), of those classes, annotated ``A[T, "help"]`` or
  ``A[T, Arg(...)]``: ``Arg.cli_name`` or ``--field-name``, its ``aliases``, none for ``no_cli=True``, ``--no-``
  for ``action=argparse.BooleanOptionalAction``.

The parser's name in argparse's error line: ``ArgumentParser()`` is named after ``sys.argv[0]``, launch_server.py's
path under ``python -m``; ``ArgumentParser(prog="sglang serve")`` where a release names it.

Output (``resources/engine_flags/sglang_server.txt``): a header naming each wheel read and its parser's name, then
each option once with the wheels that accept it (``--pp-size 0.4.6.post5-0.5.23``: a .postN adds flags, 22 of them
in 0.4.6.post5), in the format of ``vllm_serve.txt`` (:mod:`tools.engine_flags.vllm_serve_flags`), with the values
each wheel takes for the options the planner reads or writes after them (:func:`server_choices`; 4.0 KB, 0.8 KB
compressed of the file's 36 KB, 7.7 KB).
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tools.engine_flags.choices import ANY, SGLANG_OPTIONS, Names
from tools.engine_flags.vllm_serve_flags import call_loops, print_table

SERVER_ARGS = "sglang/srt/server_args.py"
FIELDS = "sglang/srt/arg_groups/fields/"
CHOICES = "sglang/srt/arg_groups/choices.py"  # QUANTIZATION_CHOICES and the rest from 0.5.20


def _sources(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zipped:
        return {
            name: zipped.read(name).decode("utf-8")
            for name in zipped.namelist()
            if name in (SERVER_ARGS, CHOICES) or (name.startswith(FIELDS) and name.endswith(".py"))
        }


def _called(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _is_help(node: ast.expr) -> bool:
    """A bare string in ``A[T, "help"]``: a literal, an f-string or a sum of literals."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and _is_help(node.left)


def _boolean_action(keywords: Iterable[ast.keyword]) -> bool:
    return any(
        k.arg == "action" and "BooleanOptionalAction" in ast.unparse(k.value) for k in keywords if k.arg is not None
    )


def _with_no(options: list[str], boolean: bool) -> set[str]:
    out = {o for o in options if o.startswith("-")}
    if boolean:
        out |= {"--no-" + o[2:] for o in options if o.startswith("--")}
    return out


def _field_flags(item: ast.AnnAssign) -> set[str]:
    """The flags one ``A[T, ...]`` field gets from add_cli_args_from_dataclass (none without Arg or help)."""
    annotation = item.annotation
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in ("A", "Annotated")):
        return set()
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    assert isinstance(item.target, ast.Name)
    name = "--" + item.target.id.replace("_", "-")
    for meta in parts[1:]:
        if isinstance(meta, ast.Call) and _called(meta) == "Arg":
            kw = {k.arg: k.value for k in meta.keywords if k.arg is not None}
            if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                return set()
            cli = kw.get("cli_name")
            first = cli.value if isinstance(cli, ast.Constant) and isinstance(cli.value, str) else name
            aliases = _strings(kw["aliases"]) if "aliases" in kw else []
            return _with_no([first, *aliases], _boolean_action(meta.keywords))
        if _is_help(meta):
            return {name}
    return set()


class _Release:
    def __init__(self, sources: Mapping[str, str]) -> None:
        self.trees = {path: ast.parse(text) for path, text in sources.items()}
        self.classes: dict[str, ast.ClassDef] = {}
        for path in sorted(self.trees, key=lambda p: p != SERVER_ARGS):
            for node in self.trees[path].body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)
        self.functions = {
            node.name: node for node in ast.walk(self.trees[SERVER_ARGS]) if isinstance(node, ast.FunctionDef)
        }
        self.flags: set[str] = set()

    def namespaces(self) -> list[str]:
        """The classes ServerArgs is assembled from (``_INPUT_NAMESPACES = [Model, ...]``), ServerArgs first."""
        for node in self.trees[SERVER_ARGS].body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in node.targets
            ):
                return ["ServerArgs", *(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))]
        return ["ServerArgs"]

    def dataclass_flags(self, cls_name: str, only: list[str] | None) -> None:
        names = self.namespaces() if cls_name == "ServerArgs" else [cls_name]
        for name in names:
            cls = self.classes.get(name)
            if cls is None:
                raise SystemExit(f"class {name} not found")
            for item in cls.body:
                named = isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                if named and (only is None or item.target.id in only):
                    self.flags |= _field_flags(item)

    def read_function(self, function: ast.FunctionDef, seen: set[str]) -> None:
        seen.add(function.name)
        loops = call_loops(function)
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            called = _called(node)
            if called == "add_argument":
                options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                loop = loops.get(id(node))
                if any(not isinstance(a, ast.Constant) for a in node.args) and loop is not None:
                    if not isinstance(loop.iter, (ast.List, ast.Tuple)):
                        raise SystemExit(f"add_argument in a loop over {ast.unparse(loop.iter)[:60]}")
                    options += [s for s in _strings(loop.iter) if s.startswith("-")]
                self.flags |= _with_no(options, _boolean_action(node.keywords))
            elif called == "add_cli_args_from_dataclass" and len(node.args) >= 2:
                only = next((_strings(k.value) for k in node.keywords if k.arg == "fields"), None)
                self.dataclass_flags(ast.unparse(node.args[1]).rsplit(".", 1)[-1], only)
            elif (
                called in self.functions
                and called not in seen
                and any(isinstance(a, ast.Name) and a.id == "parser" for a in node.args)
            ):
                self.read_function(self.functions[called], seen)


def server_flags(sources: Mapping[str, str]) -> set[str]:
    """The option strings of ``launch_server``'s parser in one release's sources."""
    release = _Release(sources)
    server_args = release.classes.get("ServerArgs")
    add = (
        next(
            (f for f in server_args.body if isinstance(f, ast.FunctionDef) and f.name == "add_cli_args"),
            None,
        )
        if server_args is not None
        else None
    )
    if add is None:
        raise SystemExit("ServerArgs.add_cli_args not found")
    release.read_function(add, set())
    return release.flags | {"-h", "--help"}  # argparse's own


def server_choices(sources: Mapping[str, str]) -> dict[str, list[str]]:
    """The values argparse lets through for each of :data:`choices.SGLANG_OPTIONS` in one release's sources, ``*``
    where it lets any through: the ``choices=`` of the option's ``parser.add_argument`` call (0.4.x - 0.5.13:
    ``ServerArgs.add_cli_args`` and the functions it hands the parser; a literal list or a module-level
    ``QUANTIZATION_CHOICES``-style list), or of the ``Arg(...)`` of the dataclass field that becomes the option
    (0.5.14 on: ``cli_name``, ``aliases`` or ``--field-name``)."""
    trees = {p: ast.parse(t) for p, t in sources.items()}
    names = Names(trees, prefer=(CHOICES, SERVER_ARGS))
    out: dict[str, list[str]] = {}

    def record(options: Iterable[str], choices: ast.expr | None) -> None:
        for option in options:
            if option in SGLANG_OPTIONS:
                found = [ANY] if choices is None else names.values(choices)
                if found is None:
                    raise SystemExit(f"{option}: choices {ast.unparse(choices)[:60]} not read")  # type: ignore[arg-type]
                out.setdefault(option, found)

    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) == "add_argument":
                options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                record(options, next((k.value for k in node.keywords if k.arg == "choices"), None))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                annotation = node.annotation
                if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in ("A", "Annotated")):
                    continue
                parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
                name = "--" + node.target.id.replace("_", "-")
                for meta in parts[1:]:
                    if isinstance(meta, ast.Call) and _called(meta) == "Arg":
                        kw = {k.arg: k.value for k in meta.keywords if k.arg is not None}
                        cli = kw.get("cli_name")
                        first = cli.value if isinstance(cli, ast.Constant) and isinstance(cli.value, str) else name
                        record([first, *(_strings(kw["aliases"]) if "aliases" in kw else [])], kw.get("choices"))
                    elif _is_help(meta):
                        record([name], None)
    return out


def prog_of(sources: Mapping[str, str]) -> str:
    """The parser's name in argparse's messages: prepare_server_args' ``prog=``, else launch_server.py."""
    named = re.search(r"def prepare_server_args.*?ArgumentParser\(prog=\"([^\"]+)\"", sources[SERVER_ARGS], re.S)
    return named.group(1) if named else "launch_server.py"


def version_key(version: str) -> tuple[int, ...]:
    """0.4.6 before 0.4.6.post5 before 0.4.7."""
    release, _, post = version.partition(".post")
    return (*(int(x) for x in release.split(".")), int(post) if post else -1)


def main(argv: list[str]) -> int:
    wheels = sorted((Path(a) for a in argv), key=lambda w: version_key(w.name.split("-")[1]))
    per_release: dict[str, set[str]] = {}
    choices: dict[str, dict[str, list[str]]] = {}
    header = []
    for wheel in wheels:
        sources = _sources(wheel)
        version = wheel.name.split("-")[1]
        per_release[version] = server_flags(sources)
        choices[version] = server_choices(sources)
        header.append(f"# sglang {version} wheel {wheel.name} prog {prog_of(sources)}")
    print("# The option strings `python -m sglang.launch_server` accepts, by release:")
    print("# python -m tools.engine_flags.sglang_server_flags (tools/engine_flags/sglang_server_flags.py) over these")
    print("# wheels, each release's own and its last .postN, read from their source; prog: argparse's name in errors")
    print("\n".join(header))
    print_table(per_release, choices, SGLANG_OPTIONS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

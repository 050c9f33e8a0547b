"""The option strings ``vllm serve`` accepts, per vLLM release line, read from the released wheels.

    pip download vllm==0.19.1 --no-deps -d /tmp/whl          # one wheel per release line, the line's last patch
    python -m tools.engine_flags.vllm_serve_flags /tmp/whl/vllm-*.whl > resources/engine_flags/vllm_serve.txt

The wheels are read as zip files, never installed nor imported (vLLM's parser needs torch and its own compiled
ops). The serve parser is read from its source as ``vllm serve`` builds it:

* ``ServeSubcommand.subparser_init`` (``vllm/entrypoints/cli/serve.py``) calls ``make_arg_parser``
  (``vllm/entrypoints/openai/cli_args.py`` up to 0.28, ``vllm/entrypoints/launchers/cli_args.py`` 0.29-0.32,
  ``vllm/entrypoints/common/cli_args.py`` from 0.33), which adds its own options, ``FrontendArgs.add_cli_args``'
  (from 0.10 one ``--field-name`` per dataclass field of FrontendArgs and its bases, with any ``"flags"`` aliases
  ``_customize_cli_kwargs`` gives) and ``AsyncEngineArgs`` / ``EngineArgs.add_cli_args``
  (``vllm/engine/arg_utils.py``): every ``add_argument`` call's option strings, including those of a loop over a
  literal list (0.11's deprecated guided-decoding flags).
* A boolean option gets argparse's ``--no-`` spelling: ``action=argparse.BooleanOptionalAction`` written out, or
  ``**x_kwargs["field"]`` where ``x_kwargs = get_kwargs(SomeConfig)`` and the field is annotated with ``bool``
  (``get_kwargs`` / ``_compute_kwargs``: ``contains_type(type_hints, bool)``; from 0.21 a field typed exactly
  ``bool | str | None`` is an optional-valued flag instead, ``nargs="?"``). From 0.33 vLLM registers
  ``EnableDisableAction`` for ``BooleanOptionalAction`` (``vllm/utils/argparse_utils.py``), which also accepts
  ``--disable-x`` for ``--enable-x`` and the reverse.

Output (``resources/engine_flags/vllm_serve.txt``): a header naming each wheel read (its release and the commit its
``vllm/_version.py`` records; 0.6-0.9 record none), then each option once with the release lines that accept it
(``--swap-space 0.6-0.17``; ``0.6-0.12,0.15-0.34`` where it left and came back), then the values each line takes for
the options the planner reads or writes (``--quantization=mxfp4 0.10-0.34``: :func:`serve_choices`,
:mod:`tools.engine_flags.choices`): 25 KB, 6 KB compressed (the values added 3.5 KB, 0.8 KB compressed), where 29
full lists would be ten times that. Prefix matching and ``_`` for ``-`` are the reader's
(:mod:`core.files.launch.serve_command`), as vLLM's parser does them at parse time.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tools.engine_flags.choices import ANY, VLLM_OPTIONS, Names, value_rows

CLI_ARGS = (
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/entrypoints/openai/cli_args.py",
)
ARG_UTILS = "vllm/engine/arg_utils.py"
SERVE = "vllm/entrypoints/cli/serve.py"
BOOL_ACTIONS = ("BooleanOptionalAction",)
# where the choices of --quantization (QUANTIZATION_METHODS, QuantizationMethods) and --load-format (LoadFormats) live
CHOICE_SOURCES = (
    "vllm/model_executor/layers/quantization/__init__.py",
    "vllm/model_executor/model_loader/__init__.py",
)


def _sources(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zipped:
        return {
            name: zipped.read(name).decode("utf-8")
            for name in zipped.namelist()
            if (name.endswith(".py") and (name.startswith(("vllm/config", "vllm/entrypoints/", "vllm/engine/"))))
            or name in ("vllm/_version.py", "vllm/version.py", "vllm/utils/argparse_utils.py", *CHOICE_SOURCES)
        }


def _classes(sources: Mapping[str, str]) -> dict[str, ast.ClassDef]:
    """Every class of vllm/config* and the entrypoints, by name (a config module's first where two share one)."""
    found: dict[str, ast.ClassDef] = {}
    for path in sorted(sources, key=lambda p: (not p.startswith("vllm/config"), p)):
        try:
            tree = ast.parse(sources[path])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, node)
    return found


def _names(annotation: ast.expr) -> set[str]:
    """The type names an annotation mentions (a string annotation parsed); None as 'None'."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return set()
    names = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and node.value is None:
            names.add("None")
    return names


def _fields(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef], seen: frozenset[str] = frozenset()) -> dict:
    """A dataclass's annotated fields (its bases' first), name -> annotation."""
    out: dict[str, ast.expr] = {}
    for base in cls.bases:
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        if name in classes and name not in seen:
            out.update(_fields(classes[name], classes, seen | {cls.name}))
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" in _names(item.annotation) or item.target.id.startswith("_"):
                continue
            out[item.target.id] = item.annotation
    return out


class _Release:
    def __init__(self, sources: Mapping[str, str]) -> None:
        self.sources = sources
        self.classes = _classes(sources)
        kwargs_source = sources.get(ARG_UTILS, "")
        self.optional_valued = "{bool, str, type(None)}" in kwargs_source  # 0.21 on
        self.enable_disable = "class EnableDisableAction" in sources.get("vllm/utils/argparse_utils.py", "")
        self.flags: set[str] = set()

    def is_bool(self, cls_name: str, field: str) -> bool:
        cls = self.classes.get(cls_name)
        if cls is None:
            return False
        annotation = _fields(cls, self.classes).get(field)
        if annotation is None:
            return False
        names = _names(annotation) - {"Optional", "Union"}
        if "bool" not in names:
            return False
        return not (self.optional_valued and names == {"bool", "str", "None"})

    def add(self, options: Iterable[str], boolean: bool) -> None:
        longs = [o for o in options if o.startswith("--")]
        self.flags.update(o for o in options if o.startswith("-"))
        if boolean:
            self.flags.update("--no-" + o[2:] for o in longs)
            if self.enable_disable:
                for option in longs:
                    for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                        if option.startswith(prefix):
                            self.flags.add(inverse + option.removeprefix(prefix))

    def read_function(self, function: ast.FunctionDef, owner: str = "") -> None:
        """Every add_argument call of one function; ``owner`` the class a ``get_kwargs(cls)`` loop reads."""
        kwargs_of: dict[str, str] = {}  # "model_kwargs" -> "ModelConfig"
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                called = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
                if called == "get_kwargs" and call.args and len(node.targets) == 1:
                    target = node.targets[0]
                    arg = call.args[0]
                    cls = arg.id if isinstance(arg, ast.Name) else getattr(arg, "attr", "")
                    if isinstance(target, ast.Name):
                        kwargs_of[target.id] = owner if cls == "cls" else cls
        loops = call_loops(function)
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                continue
            options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            boolean = False
            for keyword in node.keywords:
                if keyword.arg == "action":
                    boolean = any(n in BOOL_ACTIONS for n in _names(keyword.value))
                elif keyword.arg is None:  # **x_kwargs["field"], or **{**x_kwargs["field"], "default": None}
                    action_set = any(k.arg == "action" for k in node.keywords) or any(
                        isinstance(k, ast.Constant) and k.value == "action"
                        for d in ast.walk(keyword.value)
                        if isinstance(d, ast.Dict)
                        for k in d.keys
                    )
                    for sub in ast.walk(keyword.value):
                        if not isinstance(sub, ast.Subscript):
                            continue
                        base, key = sub.value, sub.slice
                        if isinstance(base, ast.Name) and isinstance(key, ast.Constant) and base.id in kwargs_of:
                            boolean = boolean or (not action_set and self.is_bool(kwargs_of[base.id], str(key.value)))
            dynamic = [a for a in node.args if not isinstance(a, ast.Constant)]
            loop = loops.get(id(node))
            if dynamic and loop is not None:
                iterated = loop.iter
                if isinstance(iterated, (ast.List, ast.Tuple)):  # for arg, type in [("--x", str), ...]
                    for item in ast.walk(iterated):
                        if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value[:1] == "-":
                            options.append(item.value)
                elif isinstance(iterated, ast.Call) and getattr(iterated.func, "attr", "") == "items":
                    source = iterated.func.value  # for key, value in frontend_kwargs.items()
                    cls = kwargs_of.get(source.id, "") if isinstance(source, ast.Name) else ""
                    self.read_dataclass_loop(cls, function)
            self.add(options, boolean)

    def read_dataclass_loop(self, cls_name: str, function: ast.FunctionDef) -> None:
        """FrontendArgs.add_cli_args: ``--field-name`` for every field, its ``flags`` aliases, ``--no-`` for bools."""
        cls = self.classes.get(cls_name)
        if cls is None:
            raise SystemExit(f"class {cls_name} not found")
        customized = self.customized(cls_name)
        for field, annotation in _fields(cls, self.classes).items():
            names = _names(annotation) - {"Optional", "Union"}
            store_true = customized.get(field, {}).get("action") == "store_true"
            boolean = (
                "bool" in names and not store_true and not (self.optional_valued and names == {"bool", "str", "None"})
            )
            self.add(["--" + field.replace("_", "-"), *customized.get(field, {}).get("flags", [])], boolean)

    def customized(self, cls_name: str) -> dict[str, dict]:
        """What ``_customize_cli_kwargs`` (and the code after get_kwargs) sets per field: its "flags" and "action"."""
        out: dict[str, dict] = {}
        names = {cls_name, *self._bases(cls_name)}
        for name in names:
            cls = self.classes.get(name)
            for node in ast.walk(cls) if cls is not None else ():
                if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                    continue
                target = node.targets[0]
                if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
                    continue
                field, what = target.value.slice, target.slice
                if not (isinstance(field, ast.Constant) and isinstance(what, ast.Constant)):
                    continue
                entry = out.setdefault(str(field.value), {})
                if what.value == "flags":
                    strings = (n for n in ast.walk(node.value) if isinstance(n, ast.Constant))
                    entry["flags"] = [n.value for n in strings if isinstance(n.value, str)]
                elif what.value == "action" and isinstance(node.value, ast.Constant):
                    entry["action"] = node.value.value
        return out

    def _bases(self, cls_name: str) -> list[str]:
        cls = self.classes.get(cls_name)
        if cls is None:
            return []
        names = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases]
        return [n for base in names for n in (base, *self._bases(base))]


def call_loops(function: ast.FunctionDef) -> dict[int, ast.For]:
    """The ``for`` loop each call of ``function`` is in, by the call node's id."""
    return {
        id(call): loop
        for loop in ast.walk(function)
        if isinstance(loop, ast.For)
        for call in ast.walk(loop)
        if isinstance(call, ast.Call)
    }


def _functions(tree: ast.Module) -> Iterable[tuple[ast.FunctionDef, str]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node, ""
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield item, node.name


def serve_flags(sources: Mapping[str, str]) -> set[str]:
    """The option strings of ``vllm serve``'s parser in one release's sources."""
    release = _Release(sources)
    cli_args = next((p for p in CLI_ARGS if "def make_arg_parser" in sources.get(p, "")), None)
    if cli_args is None:
        raise SystemExit("make_arg_parser not found")
    wanted = {
        cli_args: {"make_arg_parser", "add_cli_args"},
        ARG_UTILS: {"add_cli_args"},
        SERVE: {"subparser_init"},
    }
    # the classes make_arg_parser asks for their options (FrontendArgs.add_cli_args): a base class's method reads
    # get_kwargs(cls) of the class it was called on
    called = re.findall(r"(\w+)\.add_cli_args\(", sources[cli_args])
    for path, functions in wanted.items():
        if path not in sources:
            continue
        for function, owner in _functions(ast.parse(sources[path])):
            if function.name in functions and (path != ARG_UTILS or owner in ("EngineArgs", "AsyncEngineArgs")):
                if path == cli_args and owner:
                    owner = next((c for c in called if c == owner or owner in release._bases(c)), owner)
                release.read_function(function, owner)
    return release.flags | {"-h", "--help"}  # argparse's own


def serve_choices(sources: Mapping[str, str]) -> dict[str, list[str]]:
    """The values argparse lets through for each of :data:`choices.VLLM_OPTIONS` in one release's sources, ``*``
    added where it lets any through (see :mod:`tools.engine_flags.choices`). The option's ``add_argument`` call in
    ``EngineArgs.add_cli_args``: its ``choices=`` (0.6-0.8: a literal list, ``[*QUANTIZATION_METHODS, None]``,
    ``[f.value for f in LoadFormat]``), else the ``**x_kwargs["field"]`` it spreads, which ``get_kwargs``
    (``_compute_kwargs``) builds from the field's annotation: a ``Literal`` gives ``choices`` — ``metavar`` instead
    where the annotation also holds ``str``, in the releases whose ``literal_to_kwargs`` says so (0.10 on) — and no
    Literal gives none."""
    trees = {p: ast.parse(t) for p, t in sources.items() if p.endswith(".py")}
    names = Names(trees, prefer=(ARG_UTILS,))
    release = _Release(sources)
    metavar = '"metavar" if contains_type(type_hints, str)' in sources.get(ARG_UTILS, "")
    out: dict[str, list[str]] = {}
    for function, owner in _functions(trees[ARG_UTILS]):
        if function.name != "add_cli_args" or owner not in ("EngineArgs", "AsyncEngineArgs"):
            continue
        kwargs_of = {
            node.targets[0].id: ast.unparse(node.value.args[0])
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("get_kwargs")
            and node.value.args
            and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                continue
            option = next((a.value for a in node.args if isinstance(a, ast.Constant) and a.value in VLLM_OPTIONS), None)
            if option is None:
                continue
            keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
            if "choices" in keywords:
                found = names.values(keywords["choices"])
                if found is None:
                    raise SystemExit(f"{option}: choices {ast.unparse(keywords['choices'])[:60]} not read")
                out[option] = found
                continue
            spread = next((k.value for k in node.keywords if k.arg is None), None)
            field = spread.slice if isinstance(spread, ast.Subscript) else None
            holder = ast.unparse(spread.value) if isinstance(spread, ast.Subscript) else ""
            cls = release.classes.get(kwargs_of.get(holder, ""))
            if cls is None or not (isinstance(field, ast.Constant) and isinstance(field.value, str)):
                out[option] = [ANY]
                continue
            annotation = _fields(cls, release.classes).get(field.value)
            # the annotation's names as the class's own module binds them at run time (config.py's
            # ``QuantizationMethods = Any``, not quantization/__init__.py's Literal)
            home = next(
                (
                    p
                    for p in sorted(trees, key=lambda p: (not p.startswith("vllm/config"), p))  # _classes' order
                    if any(isinstance(n, ast.ClassDef) and n.name == cls.name for n in ast.walk(trees[p]))
                ),
                "",
            )
            local = Names(trees, prefer=(home,)) if home else names
            values, literal, has_str = local.annotation(annotation) if annotation is not None else ([], False, False)
            out[option] = sorted(values) + ([ANY] if not literal or (metavar and has_str) else [])
    if out.get("--quantization") == [ANY]:
        # 0.9 on: QuantizationMethods is Any at run time (imported under TYPE_CHECKING), so argparse takes any name;
        # ModelConfig._verify_quantization then stops on one not in QUANTIZATION_METHODS ("Unknown quantization
        # method"): its names are written beside the "*"
        known = names.values(ast.Name("QUANTIZATION_METHODS"))
        out["--quantization"] = [*sorted(known or []), ANY]
    return out


def release_of(wheel: Path, sources: Mapping[str, str]) -> tuple[str, str]:
    version = wheel.name.split("-")[1]
    text = sources.get("vllm/_version.py", "") + sources.get("vllm/version.py", "")
    commit = re.search(r"commit_id\b[^\n]*?=\s*['\"]?(?:g)?([0-9a-f]{7,40})", text) or re.search(
        r"\+g([0-9a-f]{7,40})", text
    )
    return version, commit.group(1) if commit else "unknown"


def line_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def ranges(present: list[bool], lines: list[str]) -> str:
    out, start = [], None
    for i, here in enumerate([*present, False]):
        if here and start is None:
            start = i
        elif not here and start is not None:
            out.append(lines[start] if start == i - 1 else f"{lines[start]}-{lines[i - 1]}")
            start = None
    return ",".join(out)


def main(argv: list[str]) -> int:
    wheels = sorted((Path(a) for a in argv), key=lambda w: tuple(int(x) for x in re.findall(r"\d+", w.name)[:3]))
    per_line: dict[str, set[str]] = {}
    choices: dict[str, dict[str, list[str]]] = {}
    header = []
    for wheel in wheels:
        sources = _sources(wheel)
        version, commit = release_of(wheel, sources)
        per_line[line_of(version)] = serve_flags(sources)
        choices[line_of(version)] = serve_choices(sources)
        header.append(f"# vllm {version} commit {commit} {wheel.name}")
    print("# The option strings `vllm serve` accepts, by release line: python -m tools.engine_flags.vllm_serve_flags")
    print("# (tools/engine_flags/vllm_serve_flags.py) over these wheels, one per line, read from their source:")
    print("\n".join(header))
    print_table(per_line, choices, VLLM_OPTIONS)
    return 0


def print_table(
    per_line: Mapping[str, set[str]], choices: Mapping[str, Mapping[str, list[str]]], options: Iterable[str]
) -> None:
    """The ``# lines`` row, then each option once with the lines (in ``per_line``'s order) that take it, then the
    values of ``options`` each line's parser lets through (tools/engine_flags/choices.py)."""
    lines = list(per_line)
    print(f"# lines {' '.join(lines)}")
    for flag in sorted(set().union(*per_line.values())):
        print(flag, ranges([flag in per_line[line] for line in lines], lines))
    print("# values: OPTION=VALUE and the lines whose argparse choices= hold it; OPTION=* the lines whose parser takes")
    print("# any value for it (beside a * line, the names the release knows): tools/engine_flags/choices.py")
    for row, present in value_rows(choices, options):
        print(row, ranges(present, lines))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

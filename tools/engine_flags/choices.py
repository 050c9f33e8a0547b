"""The ``choices=`` of a few options, read from an engine release's source as its argparse parser gets them.

Shared by :mod:`tools.engine_flags.vllm_serve_flags` and :mod:`tools.engine_flags.sglang_server_flags`. Only the
options the planner reads or writes are recorded (:data:`VLLM_OPTIONS`, :data:`SGLANG_OPTIONS`), to keep the
resource small. A choices expression is evaluated from the source, never run: a list / tuple / set literal (a
``*NAME`` inside it spread), a dict's keys, ``Literal[...]``, ``get_args(X)`` / ``list(X)`` / ``sorted(X)``,
``[f.value for f in SomeEnum]`` (the Enum's string members), ``A + B``, and a name bound at module level in any
module read (the runtime branch of an ``if TYPE_CHECKING:``). A value that is not a string (``None`` in
``[*QUANTIZATION_METHODS, None]``) is left out: no pasted word is it.

Output rows, after the option rows of the same file: ``--quantization=mxfp4 0.10-0.34`` (the releases whose
choices hold the value) and ``--load-format=* 0.10-0.34`` (the releases whose parser takes any value for it: no
``choices=``; where vLLM types a field ``Literal[...] | str`` its ``literal_to_kwargs`` sets ``metavar`` instead, so
the Literal's names are written as values of those releases too — the names it knows — beside the ``*``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

VLLM_OPTIONS = ("--dtype", "--quantization", "--kv-cache-dtype", "--load-format")
SGLANG_OPTIONS = ("--dtype", "--quantization", "--kv-cache-dtype", "--attention-backend", "--load-format")
ANY = "*"  # the option takes any value in that release: argparse has no choices for it


def _runtime_body(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements as they run: an ``if TYPE_CHECKING:``'s else branch, other ifs' both branches."""
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                yield from _runtime_body(node.orelse)
            else:
                yield from _runtime_body([*node.body, *node.orelse])
        elif isinstance(node, (ast.Try,)):
            yield from _runtime_body(node.body)
        else:
            yield node


class Names:
    """Module-level bindings (``NAME = expr``, ``NAME: T = expr``, ``class NAME``) of every module read, then the
    names functions bind; a name bound
    in several modules (``QuantizationMethods = Any`` beside the Literal it stands for at run time): each binding in
    turn (``prefer``'s modules first, then the paths in sorted order), the first that reads for a value list, the
    first for an annotation."""

    def __init__(self, trees: Mapping[str, ast.Module], prefer: Iterable[str] = ()) -> None:
        self.bound: dict[str, list[ast.AST]] = {}
        order = [p for p in prefer if p in trees] + sorted(p for p in trees if p not in set(prefer))
        for path in order:
            for node in _runtime_body(trees[path].body):
                if isinstance(node, ast.Assign) and node.value is not None:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.bound.setdefault(target.id, []).append(node.value)
                elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
                    self.bound.setdefault(node.target.id, []).append(node.value)
                elif isinstance(node, ast.ClassDef):
                    self.bound.setdefault(node.name, []).append(node)
        for path in order:  # then a function's own names (0.5.1's ATTN_BACKENDS = [...] inside add_cli_args)
            for node in ast.walk(trees[path]):
                if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
                    continue
                bound = self.bound.setdefault(node.targets[0].id, [])
                if node.value not in bound:
                    bound.append(node.value)

    def get(self, node: ast.expr) -> list[ast.AST]:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return self.bound.get(name, [])

    def values(self, node: ast.AST, depth: int = 0) -> list[str] | None:
        """The string values an expression of choices holds, in order; None where it cannot be read."""
        if depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else []
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._concat(node.elts, depth)
        if isinstance(node, ast.Starred):
            return self.values(node.value, depth + 1)
        if isinstance(node, ast.Dict):
            return self._concat([k for k in node.keys if k is not None], depth)
        if isinstance(node, (ast.Name, ast.Attribute)):
            for bound in self.get(node):
                found = self.values(bound, depth + 1)
                if found is not None:
                    return found
            return None
        if isinstance(node, ast.ClassDef):  # an Enum: its members' string values
            return [
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign)
                and isinstance(item.value, ast.Constant)
                and isinstance(item.value.value, str)
            ]
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self._concat(parts, depth)
        if isinstance(node, ast.Call) and node.args:
            called = ast.unparse(node.func).rsplit(".", 1)[-1]
            if called in ("get_args", "list", "sorted", "tuple", "set"):
                found = self.values(node.args[0], depth + 1)
                return sorted(found) if found is not None and called == "sorted" else found
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys":
            return self.values(node.func.value, depth + 1)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            # [f.value for f in LoadFormat]
            return self.values(node.generators[0].iter, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.values(node.left, depth + 1), self.values(node.right, depth + 1)
            return None if left is None or right is None else left + right
        return None

    def _concat(self, nodes: Iterable[ast.AST], depth: int) -> list[str] | None:
        out: list[str] = []
        for item in nodes:
            found = self.values(item, depth + 1)
            if found is None:
                return None
            out += found
        return out

    def annotation(self, node: ast.AST, depth: int = 0) -> tuple[list[str], bool, bool]:
        """A field annotation as vLLM's get_kwargs sees it at run time: the values of the Literal types it holds,
        whether it holds a Literal at all and whether it holds ``str``."""
        if depth > 8:
            return [], False, False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
            try:
                return self.annotation(ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return [], False, False
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            return self.values(node) or [], True, False
        if isinstance(node, ast.Name) and node.id == "str":
            return [], False, True
        if isinstance(node, (ast.Name, ast.Attribute)):
            bound = self.get(node)
            if bound and isinstance(bound[0], ast.expr):
                return self.annotation(bound[0], depth + 1)
            return [], False, False
        parts: list[ast.AST] = []
        if isinstance(node, ast.BinOp):  # X | Y
            parts = [node.left, node.right]
        elif isinstance(node, ast.Subscript):  # Optional[X], Union[X, Y], SkipValidation[X], A[X, ...]
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            head = ast.unparse(node.value).rsplit(".", 1)[-1]
            parts = inner[:1] if head in ("A", "Annotated") else inner
        values: list[str] = []
        literal = has_str = False
        for part in parts:
            v, lit, s = self.annotation(part, depth + 1)
            values += v
            literal, has_str = literal or lit, has_str or s
        return values, literal, has_str


def value_rows(per_release: Mapping[str, Mapping[str, list[str] | None]], options: Iterable[str]) -> list[tuple]:
    """(option=value, [present per release]) for every value of every option, ``option=*`` where a release's parser
    takes any value; releases in ``per_release``'s order. A release with no entry for an option (it has not the
    option) is absent from all of its rows."""
    releases = list(per_release)
    rows = []
    for option in options:
        values = sorted({v for r in releases for v in (per_release[r].get(option) or []) if v != ANY})
        for value in [*values, ANY]:
            present = [value in (per_release[r].get(option) or []) for r in releases]
            if any(present):
                rows.append((f"{option}={value}", present))
    return rows

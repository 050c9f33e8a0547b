"""Reading training configs as plain data, and taking values out of them with their source.

Files are parsed as JSON or with PyYAML's safe loader (:data:`SAFE_LOADER`; it builds only
dicts, lists, strings, numbers, booleans, dates and null: a ``!!python/object`` tag is an
error, never an object). Pickles (``training_args.bin``, ``*.pt``) are refused unread:
unpickling runs code. Sizes, nesting and entry counts are capped before and after parsing.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from core.errors import PlanFileError, one_line
from core.files.fileio import read_regular_file
from core.files.runconfig.result import FieldRead
from core.units import finite_number

# A training config is a few kB (the largest real one in tests/data/runconfigs is ~5 kB);
# a megabyte leaves room for long chat templates and refuses anything absurd unread.
MAX_CONFIG_BYTES: Final = 1_000_000
MAX_ENTRIES: Final = 20_000  # dict entries and list items, counted through YAML aliases
MAX_DEPTH: Final = 32
# libyaml's safe loader where PyYAML was built with it: the same SafeConstructor (plain data
# only, a Python tag is an error) over a parser in C, about 6 times faster (250 kB: 1.1 s
# against 6.8 s on the shared 2-core machine, loaded), so a capped file blocks far less.
SAFE_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Extensions of files written with pickle (torch.save, pickle.dump).
PICKLE_SUFFIXES: Final = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
PICKLE_REFUSAL: Final = (
    "is a Python pickle (Trainer writes training_args.bin with torch.save); unpickling can run "
    "arbitrary code, so it is never opened. Save the arguments as JSON instead: "
    "open(path, 'w').write(args.to_json_string())"
)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _yaml_error(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.constructor.ConstructorError) and exc.problem and "tag" in exc.problem:
        return "uses a YAML tag that would build a Python object; only plain data is read"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"is not valid YAML ({problem}{where})"


def _plain_keys(value: Any, where: str, budget: list[int], depth: int = 1, hint: str = "") -> Any:
    """A copy with string keys, counting entries (aliases count each time they are used)."""
    if depth > MAX_DEPTH:
        raise PlanFileError(where, f"is nested more than {MAX_DEPTH} levels deep; a training config is flat")
    if isinstance(value, dict | list):
        budget[0] -= len(value)
        if budget[0] < 0:
            raise PlanFileError(where, f"has more than {MAX_ENTRIES:,} entries{hint}; a training config has dozens")
    if isinstance(value, dict):
        return {str(k): _plain_keys(v, where, budget, depth + 1, hint) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_keys(v, where, budget, depth + 1, hint) for v in value]
    return value


# A TOML token: a string (the four kinds), a comment, a bare key or number, or one character.
_TOML_TOKEN: Final = re.compile(
    r'''"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|#[^\n]*|[A-Za-z0-9_+-]+|[ \t]+|.''',
    re.DOTALL,
)


def _toml_nesting(text: str) -> int:
    """An upper bound on how deep a TOML text nests, from the text alone (issue 28 item 12).

    tomllib spends seconds and gigabytes on one dotted key of thousands of parts before any
    depth check can run; this counts the dots of each dotted key (strings and comments
    skipped) plus the open brackets around it, in one pass of a regular expression.
    """
    deepest = brackets = dots = 0
    for match in _TOML_TOKEN.finditer(text):
        token = match.group()
        if token == ".":
            dots += 1
        elif token[0] in "\"'#" or token[0].isalnum() or token[0] in "_+- \t":
            pass  # a key part, a string, a comment or spaces: the dotted key goes on
        else:
            brackets += token in "[{"
            brackets -= token in "]}"
            dots = 0
        deepest = max(deepest, brackets + dots + 1)
    return deepest


def parse_text(raw: bytes, where: str, suffix: str = "") -> dict[str, Any]:
    """Parse the bytes of a config file (JSON, YAML, or TOML by its suffix) into a dict with string keys."""
    if raw.startswith(b"\x80") and len(raw) > 1 and raw[1] <= 5:  # pickle protocol 2-5 header
        raise PlanFileError(where, PICKLE_REFUSAL)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PlanFileError(where, "is not UTF-8 text (is it a training config?)") from None
    if "\x00" in text:
        raise PlanFileError(where, "contains NUL bytes; a training config is text")
    document: Any
    kind = "JSON" if suffix.lower() == ".json" or text.lstrip().startswith("{") else "YAML"
    kind = "TOML" if kind == "YAML" and suffix.lower() == ".toml" else kind  # torchtitan's job configs
    if kind == "TOML" and _toml_nesting(text) > MAX_DEPTH:
        raise PlanFileError(where, f"is nested more than {MAX_DEPTH} levels deep; a training config is flat")
    try:
        if kind == "JSON":
            document = json.loads(text, parse_constant=_reject_constant)
        else:
            document = tomllib.loads(text) if kind == "TOML" else yaml.load(text, Loader=SAFE_LOADER)
    except RecursionError:
        raise PlanFileError(where, "is nested too deeply to be a training config") from None
    except yaml.YAMLError as exc:
        raise PlanFileError(where, _yaml_error(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanFileError(where, f"is not valid TOML ({exc})") from None
    except ValueError as exc:  # JSONDecodeError, NaN, and from any format an integer of thousands of digits
        if "digits" in str(exc):
            raise PlanFileError(where, "holds an integer thousands of digits long; no setting takes one") from None
        raise PlanFileError(where, f"is not valid {kind} ({exc})") from None
    if not isinstance(document, dict):
        shown = "empty" if document is None else f"a {type(document).__name__}"
        raise PlanFileError(where, f"is {shown}, not a mapping of settings")
    hint = " (YAML aliases expanding?)" if kind == "YAML" else ""
    result: dict[str, Any] = _plain_keys(document, where, [MAX_ENTRIES], hint=hint)
    return result


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse a config file with every cap applied; errors are one-line PlanFileErrors."""
    if Path(path).suffix.lower() in PICKLE_SUFFIXES:
        raise PlanFileError(str(path), PICKLE_REFUSAL)
    return parse_text(read_regular_file(path, MAX_CONFIG_BYTES, "a training config"), str(path), Path(path).suffix)


def read_json_document(path: str | os.PathLike[str], limit: int, what: str) -> Any:
    """A JSON file as plain data (no NaN, capped size and depth)."""
    where = str(path)
    raw = read_regular_file(path, limit, what)
    try:
        document = json.loads(raw.decode("utf-8-sig"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise PlanFileError(where, f"is not UTF-8 text (is it {what}?)") from None
    except RecursionError:
        raise PlanFileError(where, f"is nested too deeply to be {what}") from None
    except ValueError as exc:
        raise PlanFileError(where, f"is not valid JSON ({exc})") from None
    _plain_keys(document, where, [MAX_ENTRIES])
    return document


def _lookup(document: Mapping[str, Any], key: str) -> Any:
    value: Any = document
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class Taker:
    """Takes values out of a parsed config, checking each and remembering where it came from.

    Keys taken, noted or declared irrelevant count as understood; :meth:`unknown` lists
    every other key that carries a value.
    """

    def __init__(self, document: Mapping[str, Any], where: str) -> None:
        self.document = document
        self.where = where
        self.fields: list[FieldRead] = []
        self.notes: list[FieldRead] = []
        self._understood: set[str] = set()

    # ---- raw access ----------------------------------------------------------------
    def has(self, key: str) -> bool:
        return _lookup(self.document, key) is not None

    def raw(self, key: str) -> Any:
        self._understood.add(key)
        return _lookup(self.document, key)

    def fail(self, key: str, value: object, allowed: str) -> PlanFileError:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return PlanFileError(self.where, f"{key}: {shown} is not allowed; expected {allowed}")

    def record(self, setting: str, value: object, source: str) -> None:
        self.fields.append(FieldRead(setting, value, source))

    # ---- typed takers ----------------------------------------------------------------
    def integer(self, key: str, setting: str | None, low: int = 1, high: int = 100_000_000) -> int | None:
        value = self.raw(key)
        if value is None:
            return None
        number = finite_number(value)
        if number is None or not number.is_integer() or not low <= number <= high:
            raise self.fail(key, value, f"an integer from {low:,} to {high:,}")
        if setting:
            self.record(setting, int(number), key)
        return int(number)

    def number(self, key: str, setting: str, low: float, high: float) -> float | None:
        value = self.raw(key)
        if value is None:
            return None
        number = finite_number(value)
        if number is None or not low < number <= high:
            raise self.fail(key, value, f"a number above {low:g} up to {high:g}")
        self.record(setting, number, key)
        return number

    def flag(self, key: str, setting: str | None = None) -> bool | None:
        """A boolean; YAML's true/false and the strings "true"/"false" people quote."""
        value = self.raw(key)
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise self.fail(key, value, "true or false")
        if setting:
            self.record(setting, value, key)
        return value

    def word(self, key: str, allowed: str = "a name") -> str | None:
        """A value that must be text (a mode, a kernel, an optimizer name): any other type is
        refused here, so no reader compares, hashes or indexes a list or a table by mistake.
        A word the reader does not know is the reader's to list as not understood."""
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, str) or len(value) > 1000:
            raise self.fail(key, value, allowed)
        return value.strip()

    def text(self, key: str) -> str | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, value, "a name")
        if len(value) > 1000:
            raise self.fail(key, value, "at most 1,000 characters")
        return value.strip()

    def names(self, key: str) -> tuple[str, ...] | None:
        """A module list: a YAML/JSON list of names, or one comma-separated string."""
        value = self.raw(key)
        if value is None:
            return None
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items = [v.strip() for v in value if v.strip()]
        else:
            raise self.fail(key, value, "a list of module names")
        if not items or len(items) > 1000:
            raise self.fail(key, value, "1 to 1,000 module names")
        return tuple(items)

    # ---- bookkeeping ---------------------------------------------------------------
    def note(self, key: str, why: str) -> None:
        """A value the estimate has no input for; shown with the reason, never dropped."""
        value = self.raw(key)
        if value not in (None, False, "", [], {}):
            self.notes.append(FieldRead("note", value, f"{key}: {why}"))

    def missing(self, setting: str, why: str) -> None:
        """A setting the file does not give: say so, and what the plan keeps."""
        self.notes.append(FieldRead(setting, None, why))

    def irrelevant(self, *keys: str) -> None:
        """Keys understood to have no effect on memory or time (paths, logging, learning rate)."""
        self._understood.update(keys)

    def unknown(self) -> tuple[str, ...]:
        return tuple(self._walk(self.document, ""))

    def _walk(self, mapping: Mapping[str, Any], prefix: str) -> Iterator[str]:
        for key, value in mapping.items():
            path = prefix + key
            if path in self._understood or value is None or value == {} or value == []:
                continue
            if isinstance(value, Mapping):
                yield from self._walk(value, path + ".")
            else:
                yield one_line(path)

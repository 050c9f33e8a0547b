"""A small TOML writer for the tables of scalars a job config is (TOML 1.0, read back by ``tomllib``).

Supported: tables nested in tables, and in them strings, booleans, integers, finite floats and
arrays of those. Keys that are not bare (``A-Za-z0-9_-``) and every string are written as
basic strings with ``\\``, ``"`` and every control character escaped, so text from outside
(a model's name) cannot end a string or start a table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        elif 0xD800 <= ord(char) <= 0xDFFF:  # a lone surrogate cannot be written in UTF-8
            raise ValueError("a string with a lone surrogate cannot be written as TOML")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a number a job config takes")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"a {type(value).__name__} is not written as TOML here")


def _table(path: list[str], table: Mapping[str, Any], lines: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        lines.append(("\n" if lines else "") + "[" + ".".join(_key(p) for p in path) + "]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
    for key, sub in tables:
        _table([*path, key], sub, lines)


def dumps_toml(document: Mapping[str, Any]) -> str:
    """``document`` as TOML text; ``tomllib.loads`` of it gives ``document`` back."""
    lines: list[str] = []
    _table([], document, lines)
    return "\n".join(lines) + "\n"

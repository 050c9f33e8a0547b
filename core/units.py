"""Units and storage sizes. Bytes internally; GB/GiB only where something is shown."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Final

GB: Final = 1_000_000_000  # decimal gigabyte, as the lesson uses
GiB: Final = 1 << 30
MiB: Final = 1 << 20
MB: Final = 1_000_000


def finite_number(value: object) -> float | None:
    """``value`` as a finite float, or None: bools, strings, NaN, infinities and integers
    beyond float range (JSON allows 10**400, ``math.isfinite`` overflows on it) are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# Count suffixes, case-insensitive, as people write model sizes and token budgets: k
# (10³), M (10⁶), B or G (10⁹: "7B" models, "giga"), T (10¹²: "15T tokens"), P (10¹⁵, the
# next SI step, which gui.format.count also prints). Lower-case m is mega: a count has no
# thousandths.
COUNT_SUFFIXES: Final = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12, "p": 10**15}
MAX_COUNT_TEXT: Final = 64  # characters; longer text is not a count anyone types
MAX_COUNT: Final = 10**30  # far past any parameter count or token budget; stops 1e999999
_COUNT = re.compile(
    r"(?P<number>(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.[0-9]+)?|\.[0-9]+)"  # 6.7, 6,700,000, .5
    r"(?P<exp>e[+-]?[0-9]+)?"
    r"(?P<suffix>[kmbgtp]?)"
)


# Spaces people type inside a number: the plain space, the no-break and the narrow no-break space.
_SPACES: Final = " \u00a0\u202f"


def parse_count(text: str) -> int:
    """A count as people type it: 6.7e9, 6,700,000,000, 6_700_000_000, 20M, 1.5 B, 10P.

    Commas are only thousands separators in groups of three; "1,5B" (1.5 or 15 billion?)
    is refused. Raises ValueError with a one-line reason; the result is exact (Decimal, no
    float rounding) and a whole, non-negative number.
    """
    if len(text) > MAX_COUNT_TEXT:
        raise ValueError(f"is too long to be a count ({len(text)} characters)")
    stripped = text.strip()
    if not stripped:
        raise ValueError("is empty; type a count such as 20M or 6.7e9")
    if any(ch.isspace() and ch not in _SPACES for ch in stripped):
        raise ValueError("has a line break or tab inside: type one count, such as 20M or 6.7e9")
    # One space may stand before the suffix (1.5 B); other spaces group thousands by three, as
    # commas do (6 700 000 000). Two counts side by side ("4096 8192") are neither.
    spaced = re.sub(f"(?<=[0-9.])[{_SPACES}]+(?=[kmbgtpKMBGTP]$)", "", stripped)
    grouped = re.sub(f"[{_SPACES}]", ",", spaced)
    cleaned = grouped.replace("_", "").lower()
    match = _COUNT.fullmatch(cleaned)
    if match is None and grouped != spaced:
        raise ValueError("has a space inside: type one count (4096), or group thousands by three (6 700 000)")
    if match is None:
        if "," in cleaned and re.fullmatch(r"[0-9,.]+(?:e[+-]?[0-9]+)?[kmbgtp]?", cleaned):  # 1,5B; 1,50; 1,5000
            raise ValueError("has an ambiguous comma: write 1.5B or 1,500,000,000, not 1,5B")
        raise ValueError("is not a count (examples: 6.7e9, 6,700,000,000, 20M, 1.5B)")
    exponent = match.group("exp")
    if exponent and abs(int(exponent[1:])) > 40:
        raise ValueError("is too large to be a count")
    value = Decimal(match.group("number").replace(",", "") + (exponent or "")) * COUNT_SUFFIXES[match.group("suffix")]
    if value > MAX_COUNT:
        raise ValueError("is too large to be a count")
    if value != value.to_integral_value():
        raise ValueError("is not a whole number")
    return int(value)

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


def format_memory(n_bytes: float, unit: str = "GB") -> str:
    """A memory size as the window and the command line both show it: three significant
    figures, as the lesson prints totals (81.9 GB, 5.12 GB, 0.54 GB); under a hundredth of
    the unit, MB/MiB (or bytes); "—" for a size that is not finite. ``unit`` is GB or GiB."""
    if not math.isfinite(n_bytes):
        return "—"
    big, small, small_name = (GiB, MiB, "MiB") if unit == "GiB" else (GB, MB, "MB")
    unit = "GiB" if unit == "GiB" else "GB"
    if n_bytes != 0 and abs(n_bytes) < big / 100:
        return f"{n_bytes / small:,.0f} {small_name}" if abs(n_bytes) >= small else f"{n_bytes:,.0f} B"
    value = n_bytes / big
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def format_count(n: float) -> str:
    """Counts as people say them (124M, 6.74B, 20M), in the suffixes :func:`parse_count` reads."""
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}"
    return f"{n:g}"


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


def parse_count(text: str) -> int:
    """A count as people type it: 6.7e9, 6,700,000,000, 6_700_000_000, 20M, 1.5 B, 10P.

    Commas are only thousands separators in groups of three; "1,5B" (1.5 or 15 billion?)
    is refused. Raises ValueError with a one-line reason; the result is exact (Decimal, no
    float rounding) and a whole, non-negative number.
    """
    if len(text) > MAX_COUNT_TEXT:
        raise ValueError(f"is too long to be a count ({len(text)} characters)")
    cleaned = "".join(text.split()).replace("_", "").replace("\u202f", "").lower()
    if not cleaned:
        raise ValueError("is empty; type a count such as 20M or 6.7e9")
    match = _COUNT.fullmatch(cleaned)
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

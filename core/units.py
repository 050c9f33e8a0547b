"""Units and storage sizes. Bytes internally; GB/GiB only where something is shown."""

from __future__ import annotations

import math
from typing import Final

GB: Final = 1_000_000_000  # decimal gigabyte, as the lesson uses
GiB: Final = 1 << 30
MiB: Final = 1 << 20
MB: Final = 1_000_000

# Bytes per stored element. Sources: IEEE 754 (fp32/fp16), bfloat16 is 16 bits by
# definition; int8 and 4-bit formats store 8 and 4 bits per element before their block
# scales, which core.storage accounts for separately.
DTYPE_BYTES: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "nf4": 0.5,
    "fp4": 0.5,
    "int4": 0.5,
}


def to_gb(n_bytes: float) -> float:
    return n_bytes / GB


def to_gib(n_bytes: float) -> float:
    return n_bytes / GiB


def format_bytes(n_bytes: float, unit: str = "GB", digits: int = 2) -> str:
    """'13.40 GB' or '12.48 GiB'; small values fall back to MB/MiB so they stay readable."""
    if unit == "GiB":
        if abs(n_bytes) < GiB / 10 and n_bytes != 0:
            return f"{n_bytes / MiB:.{digits}f} MiB"
        return f"{n_bytes / GiB:.{digits}f} GiB"
    if abs(n_bytes) < GB / 10 and n_bytes != 0:
        return f"{n_bytes / MB:.{digits}f} MB"
    return f"{n_bytes / GB:.{digits}f} GB"


def format_count(n: float) -> str:
    """Parameter counts as people say them: 124.4M, 6.74B."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
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

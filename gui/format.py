"""Turning figures from an Estimate into text. Formatting only: no figure is derived here; the
rules are core.format's, so the window reads as the command line and the reports do."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from core.format import count as format_count
from core.format import counted as counted  # re-exported: the views count through gui.format
from core.format import grouped as grouped
from core.format import hours as hours  # re-exported: the views format through gui.format
from core.format import latency as latency
from core.format import memory as format_memory
from core.format import money as money
from core.units import GB, GiB

if TYPE_CHECKING:
    from core.files.measurement import Measurement

Unit = Literal["GB", "GiB"]
UNITS: tuple[Unit, ...] = ("GB", "GiB")


def unit_scale(unit: Unit) -> float:
    """Bytes per display unit; the one conversion the views make, at the edge that displays."""
    return float(GiB if unit == "GiB" else GB)


def memory(n_bytes: float, unit: Unit = "GB") -> str:
    """Three significant figures, as the lesson prints totals (the command line's too)."""
    return format_memory(n_bytes, unit)


def plain_number(value: float) -> str:
    """A count people read: 6,700,000,000 → 6.7e9 in inputs, 1.23 × 10¹⁸ for FLOPs."""
    if not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    if exponent < 6:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    mantissa = value / 10**exponent
    return f"{mantissa:.2f} × 10{_superscript(exponent)}"


_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _superscript(n: int) -> str:
    return str(n).translate(_SUPERSCRIPTS)


def count(value: float) -> str:
    """Short form for big counts: 8.03B, 3.41M, 20M (the command line's too)."""
    return format_count(value)


def measurement_label(measurement: Measurement) -> str:
    """What was measured, in one line: the case id, else its model and method."""
    case = measurement.case
    described = ", ".join(str(case[k]) for k in ("model", "method", "precision") if k in case)
    label = measurement.case_id or described or "measured run"
    return f"{label} ({measurement.backend})" if measurement.backend else label

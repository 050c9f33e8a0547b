"""Turning figures from an Estimate into text. Formatting only: no figure is derived here; the
rules are core.format's, so the window reads as the command line and the reports do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from core.format import count as format_count
from core.format import counted as counted  # re-exported: the views count through gui.format
from core.format import duration as duration
from core.format import grouped as grouped
from core.format import hours as hours  # re-exported: the views format through gui.format
from core.format import latency as latency
from core.format import memory as format_memory
from core.format import money as money
from core.format import scientific
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
    """A count people read: 1.23 × 10¹⁸ for FLOPs, in full below a million (core.format.scientific)."""
    return scientific(value)


def count(value: float) -> str:
    """Short form for big counts: 8.03B, 3.41M, 20M (the command line's too)."""
    return format_count(value)


def measurement_label(measurement: Measurement) -> str:
    """What was measured, in one line: the case id, else its model and method."""
    case = measurement.case
    described = ", ".join(str(case[k]) for k in ("model", "method", "precision") if k in case)
    label = measurement.case_id or described or "measured run"
    return f"{label} ({measurement.backend})" if measurement.backend else label

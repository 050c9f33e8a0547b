"""Figures as text: the one home for how memory, counts, hours and money read.

Every view — the window, the command line, reports — formats through these, so the same figure
reads the same everywhere. Bytes and seconds stay numbers until this edge. A figure with no
finite value (an unknown price, zero throughput) reads as "unknown" or "—", never "nan".

One rule per kind of quantity:

- bytes: :func:`memory` (three significant figures and the unit: 81.9 GB, 5.12 GB, 540 MB); the parts of a
  sum :func:`amount` (its unit named once, after the sum);
- counts of parameters, elements and FLOPs: m × 10ⁿ, never "8.03e9" or "8.03B" beside it: a figure
  :func:`scientific` (8.03 × 10⁹, in full below a million), a worked formula :func:`sci` (the four digits that
  redo its sum: 2.614 × 10⁹, in full below 10⁸ where whole); :func:`count` (8.03B) only in the command line's
  catalogue columns, as model names and --params give sizes;
- tokens (a budget, a context): in full, grouped (20,000,000 tokens); token rates :func:`tokens_per_s`;
- time: :func:`hours`, :func:`latency`, :func:`duration`; money: :func:`money`.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Final

from core.units import GB, MB, GiB, MiB

UNKNOWN: Final = "unknown"


def memory(n_bytes: float, unit: str = "GB") -> str:
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


_SUFFIXES: Final = ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def count(n: float) -> str:
    """Counts as people say them (124M, 6.74B, 20M), in the suffixes core.units.parse_count
    reads. A count that rounds up to the next suffix takes it (999.9M reads 1B, not 1e+03M)."""
    for index, (div, suffix) in enumerate(_SUFFIXES):
        if abs(n) >= div:
            text = f"{n / div:.3g}"
            if float(text) >= 1000 and index > 0:
                bigger, name = _SUFFIXES[index - 1]
                return f"{n / bigger:.3g}{name}"
            return text + suffix
    if abs(n) >= 999.5:  # 999.7 rounds to 1e+03
        return f"{n / 1e3:.3g}k"
    return f"{n:g}"


# What a serving plan's "in total" rate counts, said beside it wherever it is shown (the CLI, the report,
# the window's tooltip): core.serving.speed.queue's output tokens over each wave's whole life.
TOTAL_RATE_BASIS: Final = "over all requests and replicas, prompts' prefill included"


def tokens_per_s(value: float) -> str:
    """A token rate, the one form every view gives it: whole tokens grouped, "1,234 tokens/s"; no finite
    value (no compute throughput) reads "—"."""
    return f"{value:,.0f} tokens/s" if math.isfinite(value) else "—"


def counted(n: int, noun: str, plural: str = "") -> str:
    """A count with its noun in the number it takes: "1 request", "32 requests", "2,048 tokens"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def hours(value: float) -> str:
    """Hours as every view gives them: two decimals under one hour (0.72 h), else one (6.7 h,
    1,234.5 h); no finite value (no compute throughput) reads as such."""
    if not math.isfinite(value):
        return "never (no compute throughput)"
    if value < 1:
        return f"{value:.2f} h"
    return f"{value:,.1f} h"


def latency(seconds: float) -> str:
    """A wait people feel, as every view gives it: milliseconds under ten seconds (840 ms,
    9,999 ms), seconds past them (12.5 s, 1,234.5 s) -- "12,519 ms" read as a number to parse;
    no finite value reads "—"."""
    if not math.isfinite(seconds):
        return "—"
    if round(seconds * 1e3) < 10_000:
        return f"{seconds * 1e3:,.0f} ms"
    return f"{seconds:,.1f} s"


def duration(seconds: float) -> str:
    """A time, a part of a step or a step, three significant digits in the unit of its size: 287 µs, 98.7 ms,
    2.91 s, 1,235 s ("0.000287 s" read as a number to count zeros in, "3.92e-05 s" and "1.07e+03 ms" as a count
    in e-notation: docs/GUI.md, 2026-12-07, left 3); under a microsecond in ns, under a thousandth of one
    "< 0.001 ns"; a negative time with its sign; no finite value reads "—". Never e-notation."""
    if not math.isfinite(seconds):
        return "—"
    if seconds == 0:
        return "0 s"
    if seconds < 0:
        return "−" + duration(-seconds)
    if seconds < 5e-13:  # rounds to 0.000 ns: .3g would write "1e-04 ns"
        return "< 0.001 ns"
    for scale, unit in ((1e-6, "ns"), (1e-3, "µs"), (1.0, "ms")):  # the next unit once three digits round past 999
        if seconds < scale * 0.9995:
            return f"{_fixed3(seconds / scale * 1e3)} {unit}"
    return f"{seconds:.3g} s" if seconds < 99.95 else f"{seconds:,.0f} s"


def _fixed3(value: float) -> str:
    """``value`` (under 999.5) to three significant digits as ``{:.3g}`` gives them, written without an exponent
    (0.000123, not 1.23e-04)."""
    digits = max(0, 2 - math.floor(math.log10(value))) if value >= 1e-3 else 5
    return f"{float(f'{value:.3g}'):.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"


_UNGROUPED: Final = re.compile(r"(?<![\d,.])\d{4,}(?![\d,.])")


def grouped(text: str) -> str:
    """A quoted text with its whole numbers grouped as ours are: nvidia-smi's "24564 MiB" reads
    "24,564 MiB" beside "21,564 MiB free now" (docs/GUI.md, 2026-12-04). Decimals and numbers
    already grouped are left as they are."""
    return _UNGROUPED.sub(lambda m: f"{int(m.group()):,}", text)


def money(value: float, currency: str = "") -> str:
    """An amount in the price's currency (2 decimals), after its sign where the currency is known
    (``Compute.currency``: "$" for the catalogue's US-dollar prices; a typed price is in the user's
    own currency and shows bare); an unknown price reads "unknown"."""
    if not math.isfinite(value):
        return UNKNOWN
    return f"{currency}{value:,.2f}"


def cost(value: float, currency: str = "") -> str:
    """A cost as a noun in a sentence: :func:`money`'s amount, or "an unknown cost" where no price is
    known ("6.5 h and unknown for 20,000,000 tokens" read as a typo, h55ux)."""
    return money(value, currency) if math.isfinite(value) else "an unknown cost"


def gb(n_bytes: float) -> str:
    """A value in decimal GB the way the lesson prints parts: 0.50, 3.35, 13.4, 53.6."""
    value = n_bytes / GB
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def amount(n_bytes: float, unit: str = "GB") -> str:
    """A part of a sum in ``unit`` (GB or GiB), no unit after it, as :func:`gb` writes it in GB: the
    window's Arithmetic writes its sums in the unit picked (h55ux)."""
    if unit != "GiB":
        return gb(n_bytes)
    value = n_bytes / GiB
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


@lru_cache(maxsize=4096)
def sci(n: float) -> str:
    """A count in a worked formula (parameters, elements): :func:`scientific`'s form with the four significant
    digits a reader needs to redo the sum (2.614 × 10⁹ × 4 B = 10.5 GB), in full below 10⁸ where it is whole
    (16,777,216). It wrote "8.03e9" and "427.8e6" beside the model box's and the Compute tab's counts
    (docs/GUI.md, 2026-12-07, left 2).

    Cached: a session formats the same few counts (P, T, N·d) again and again.
    """
    magnitude = abs(n)
    if magnitude < 1e8 and n == int(n):
        return f"{int(n):,}"
    if magnitude < 1e6 or not math.isfinite(n):
        return f"{n:g}"
    return _times_ten(n, 4)


_SUPERSCRIPTS: Final = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def scientific(value: float) -> str:
    """A large count as people read it, the one form for FLOPs wherever they are shown (the window's
    figures, the formula beside them, the command line): 7.97 × 10¹⁷; below a million, in full."""
    if not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    if math.floor(math.log10(abs(value))) < 6:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return _times_ten(value, 3)


def _times_ten(value: float, digits: int) -> str:
    """``value`` as m × 10ⁿ with ``digits`` significant digits: fixed (7.97, 1.00) for three, as FLOPs read;
    trailing zeros dropped (2.614, 6.7) for a formula's four."""
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10**exponent
    if round(abs(mantissa), digits - 1) >= 10:  # 9.996e17 reads 1.00 × 10¹⁸, not 10.00 × 10¹⁷
        exponent, mantissa = exponent + 1, mantissa / 10
    text = f"{mantissa:.2f}" if digits == 3 else f"{mantissa:.{digits}g}"
    return f"{text} × 10{str(exponent).translate(_SUPERSCRIPTS)}"


_TIMES_TEN: Final = re.compile(r"(\d+(?:\.\d+)?) × 10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)")
_RAISED: Final = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻ⁿᵀ]+")
_UNRAISED: Final = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻ⁿᵀ", "0123456789-nT")
# The ASCII forms of the characters this program's own texts use (format, the formulas, the
# verdicts and the diagnosis); a character from a file (a model's name) has none and is left to the
# stream's own escape.
_ASCII_FORMS: Final = {
    "×": "x",
    "·": "*",
    "÷": "/",
    "−": "-",
    "–": "-",
    "—": "--",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "…": "...",
    "≈": "~",
    "≤": "<=",
    "≥": ">=",
    "≠": "!=",
    "“": '"',
    "”": '"',
    "‘": "'",
    "’": "'",
    "µ": "u",
    "½": "1/2",
    "Σ": "sum ",
    "Δ": "delta ",
    "√": "sqrt",
    "⌈": "ceil(",
    "⌉": ")",
    "‖": "||",
    "₁": "1",
    "＝": "=",
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "λ": "lambda",
    "§": "section ",
    "\u00a0": " ",
    "\u202f": " ",
}


@lru_cache(maxsize=4096)
def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def for_encoding(text: str, encoding: str) -> str:
    """``text`` as a stream in ``encoding`` can take it (a Windows console redirected to a cp1252
    file, an ASCII locale): unchanged where it encodes; otherwise a count m × 10ⁿ reads 8.03e9, another
    raised figure ^2, and each of our own symbols that does not encode its ASCII form (× x, − -, … ...,
    ≈ ~, ≤ <=). The one place the command line's fallback lives; what is left (a model's name in another
    script) is the stream's to escape. An encoding Python does not know leaves the text as it is."""
    try:
        text.encode(encoding)
        return text
    except LookupError:
        return text
    except UnicodeEncodeError:
        pass

    def exponent(match: re.Match[str]) -> str:
        if _encodes(match[0], encoding):
            return match[0]
        return f"{match[1]}e{match[2].translate(_UNRAISED)}"

    def raised(match: re.Match[str]) -> str:
        return match[0] if _encodes(match[0], encoding) else "^" + match[0].translate(_UNRAISED)

    text = _RAISED.sub(raised, _TIMES_TEN.sub(exponent, text))
    return "".join(ch if ch < "\x80" or _encodes(ch, encoding) else _ASCII_FORMS.get(ch, ch) for ch in text)

"""The app's colours, one home: the Okabe–Ito palette and what each colour means here.

Okabe & Ito (2008), "Color Universal Design": the eight colours stay distinguishable with
every common form of colour-vision deficiency. The meanings are used by the verdict badge,
the marks on refused input and the warnings, so "wrong" is the same vermillion everywhere.
"""

from __future__ import annotations

from typing import Final

RGB = tuple[float, float, float]  # a colour's red, green and blue, each 0-1

OKABE_ITO: Final = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}

FITS: Final = OKABE_ITO["green"]  # the plan fits
CAUTION: Final = OKABE_ITO["orange"]  # over the headroom asked for, under the capacity
PROBLEM: Final = OKABE_ITO["vermillion"]  # out of memory, refused input, a warning
UNCERTAIN: Final = OKABE_ITO["yellow"]  # borderline: the capacity lies within the estimate's range
ACCENT: Final = OKABE_ITO["blue"]  # selection and highlight

# A line of text that reports a problem (status bar, plan warnings, dialogs).
PROBLEM_TEXT_STYLE: Final = f"color: {PROBLEM}; font-weight: 600;"


def contrast(a: RGB, b: RGB) -> float:
    """WCAG 2.1 contrast ratio of two opaque colours (relative luminance, sRGB channels linearised)."""

    def luminance(colour: RGB) -> float:
        def channel(value: float) -> float:
            return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

        red, green, blue = colour
        return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)

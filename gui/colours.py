"""The app's colours, one home: the Okabe–Ito palette and what each colour means here.

Okabe & Ito (2008), "Color Universal Design": the eight colours stay distinguishable with
every common form of colour-vision deficiency. The meanings are used by the verdict badge,
the marks on refused input and the warnings, so "wrong" is the same vermillion everywhere.
"""

from __future__ import annotations

from typing import Final

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

"""The colours core draws with, one home: the HTML and SVG reports' (:mod:`core.files.report`).

The palette is Okabe & Ito (2008), "Color Universal Design": its eight colours stay
distinguishable with every common form of colour-vision deficiency. The window uses the same
eight (``gui/colours.py``; a test keeps the two equal), so a report looks like the app it came
from. Every other module of core names a colour by what it means here, never by its value.
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

# What a palette colour means, as in the window: the verdicts and the card's capacity line.
FITS: Final = OKABE_ITO["green"]
CAUTION: Final = OKABE_ITO["orange"]  # over the headroom asked for, under the capacity
PROBLEM: Final = OKABE_ITO["vermillion"]  # out of memory; the capacity a bar must stay under
UNCERTAIN: Final = OKABE_ITO["yellow"]  # borderline: the capacity lies within the estimate's range

# The chart's buckets, by BucketKey value (the window's chart uses the same).
BUCKET_COLOURS: Final = {
    "weights": OKABE_ITO["blue"],
    "gradients": OKABE_ITO["orange"],
    "optimizer": OKABE_ITO["green"],
    "activations": OKABE_ITO["purple"],
    "overhead": OKABE_ITO["grey"],
    "kv_cache": OKABE_ITO["sky"],  # serving's KV cache, as the window's serving chart draws it
}

# The report page's neutral greys (not palette colours: text, rules and a highlight).
TEXT: Final = "#222"
GRIDLINE: Final = "#ddd"
TABLE_RULE: Final = "#ccc"
CAPTION_TEXT: Final = "#555"
FOOTER_TEXT: Final = "#666"
CHANGED_ROW: Final = "#fff3cd"  # a row whose value differs between the compared plans

"""A GPU as its driver names it, matched to the GPU catalogue by name and memory.

Drivers spell cards their own way: ``nvidia-smi`` says "NVIDIA A100-SXM4-80GB" and
"NVIDIA H100 80GB HBM3" (the SXM board) where the catalogue says "NVIDIA A100 80GB SXM" and
"NVIDIA H100 SXM 80GB"; ``rocm-smi`` says "AMD Instinct MI300X OAM"; macOS says "Apple M2 Pro".
Both names are reduced to their identifying words (model numbers and variant words such as
Ti, SUPER, Laptop, PCIe), and a catalogue entry matches when its memory is the reported
memory (within what ECC on or off changes) and every word of its name is in the driver's,
and every variant word of the driver's name is in its (an SXM board does not say "SXM").
"""

from __future__ import annotations

import re
from typing import Final

from core.catalogue import GpuSpec, load_gpus
from core.errors import PlanFileError
from core.units import GiB

# Words that do not identify a card: brands, product lines, form words. Catalogue names
# also carry details in parentheses ("(HGX, 1000 W)", "(8-core GPU, 16 GB)"), dropped whole.
_STOP_WORDS: Final = frozenset(
    {"nvidia", "geforce", "tesla", "quadro", "gpu", "graphics", "generation", "amd", "instinct", "apple", "radeon"}
)
# Words that tell two boards of one chip apart: the driver's name must not carry one the
# entry lacks (a "Laptop GPU" is not the desktop card, a "PCIe" board not the SXM one).
_VARIANT_WORDS: Final = frozenset({"ti", "super", "laptop", "pcie", "nvl", "max", "pro", "ultra", "mini", "xtx", "xt"})
# The catalogue writes the SXM board's form, drivers do not: an entry may carry it unsaid.
_IMPLIED_WORDS: Final = frozenset({"sxm"})
# ECC on a GDDR board takes 1/16 of the memory (RTX A6000: 49,140 MiB off, 46,068 MiB on);
# 7 % covers it and still tells apart every pair of catalogue sizes of one chip (A100 40/80 GB,
# V100 16/32 GB, RTX 3080 10/12 GB).
MEMORY_TOLERANCE: Final = 0.07


def name_words(name: str) -> frozenset[str]:
    """The identifying words of a GPU name, lower case ("NVIDIA A100-SXM4-80GB" -> {a100, sxm})."""
    text = re.sub(r"\([^)]*\)", " ", name.lower())
    text = re.sub(r"(\d+)\s*gb\b", r"\1gb", text)
    words = set()
    for word in re.split(r"[\s\-_,/\[\]]+", text):
        if not word or word in _STOP_WORDS or re.fullmatch(r"\d+gb|hbm\d*e?|gddr\d*x?|oam", word):
            continue
        words.add("sxm" if re.fullmatch(r"sxm\d*", word) else word)
    return frozenset(words)


def _memory_matches(entry: GpuSpec, total_bytes: int, unified_bytes: int | None) -> bool:
    if entry.unified_memory_gb is not None and entry.vendor == "apple":  # an Apple machine: its RAM decides
        return unified_bytes is not None and abs(unified_bytes / GiB - entry.unified_memory_gb) < 0.5
    return abs(entry.memory_bytes - total_bytes) <= MEMORY_TOLERANCE * entry.memory_bytes


def _words_match(entry_words: frozenset[str], found: frozenset[str]) -> bool:
    return entry_words - _IMPLIED_WORDS <= found and (found & _VARIANT_WORDS) <= entry_words


def match_catalogue(
    name: str, vendor: str, total_bytes: int, unified_bytes: int | None = None, gpus: tuple[GpuSpec, ...] | None = None
) -> GpuSpec | None:
    """The catalogue entry for a card the driver reports, or None (then the card is custom).

    ``vendor`` is "nvidia", "amd" or "apple"; ``total_bytes`` the memory the driver reports
    (for Apple, the GPU's default share) and ``unified_bytes`` an Apple machine's RAM.
    Among several matches the one sharing the most words wins.
    """
    if gpus is None:
        try:
            gpus = load_gpus()
        except PlanFileError:
            return None
    found = name_words(name)
    best: tuple[int, GpuSpec] | None = None
    for entry in gpus:
        if entry.vendor != vendor or not _memory_matches(entry, total_bytes, unified_bytes):
            continue
        words = name_words(entry.name)
        if not words or not _words_match(words, found):
            continue
        score = len(words & found)
        if best is None or score > best[0]:
            best = (score, entry)
    return None if best is None else best[1]

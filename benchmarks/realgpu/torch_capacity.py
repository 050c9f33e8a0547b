"""A card's total memory as PyTorch sees it: published totals against the planner's (issues 22, 23).

vLLM and SGLang size their KV pool from ``torch.cuda.mem_get_info()``'s total, and PyTorch's CUDA
OOM message prints the same number: pytorch/pytorch eb42ad6e, c10/cuda/CUDACachingAllocator.cpp,
DeviceCachingAllocator::malloc calls ``cudaMemGetInfo(&device_free, &device_total)`` when no block
is found and formats ``device_total`` ("GPU 0 has a total capacity of X GiB"; before torch 2.1
"(GPU 0; X GiB total capacity; …)"). torch_capacity.json quotes such messages per card; this script prints, per
card, the published totals (n, min, median, max) beside the total the planner uses
(core.serving.vllm_rules.vllm_total_memory: the catalogue's memory less the driver reserve of
core.serving.fit), and flags a card whose planner total is off by more than 0.05 GiB.

The total moved with the driver: an RTX 3090 showed 23.68–23.70 GiB up to R550 and 23.56–23.58 GiB
on later stacks. A record is "old" when it names a driver before R560 or is dated before R560
existed (2024-08); "new" when it names R560 or later or is a Blackwell card; the rest are
"unknown". A card is compared with its records that are not old (the current stacks the
planner models): it is flagged when the planner's total lies more than 0.05 GiB outside their
range. A card with old records only is listed, not compared (its totals on current drivers are
not published here; on the cards with both they run 0.1-0.2 GiB lower). Records from Windows or
of an ECC mode other than the catalogue's are listed and not compared.

benchmarks/realgpu/serving.py (``capacity_observations``) gives a card its own driver reserve from
these records where no engine log prints its total and at least three current ones agree.

    python -m benchmarks.realgpu.torch_capacity [--check]

``--check`` exits 1 when a card with at least two compared records is flagged.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalogue import find_gpu  # noqa: E402
from core.serving.vllm_rules import vllm_total_memory  # noqa: E402
from core.units import GiB  # noqa: E402

CORPUS: Final = Path(__file__).with_name("torch_capacity.json")
TOLERANCE_GIB: Final = 0.05
# R560 (2024-08) is the first driver branch after R550; a message older than it ran R550 or before.
FIRST_NEW_DRIVER: Final = 560
FIRST_NEW_DATE: Final = "2024-08"


def records() -> list[dict[str, Any]]:
    return list(json.loads(CORPUS.read_text())["records"])


def driver_branch(record: dict[str, Any]) -> int | None:
    """The driver branch a record names (550 for "550.120", 580 for "R580"), if any."""
    found = re.search(r"(\d{3})", str(record.get("driver", "")))
    return int(found.group(1)) if found else None


def era(record: dict[str, Any]) -> str:
    """ "old" (a driver before R560), "new" (R560 or later) or "unknown"."""
    branch = driver_branch(record)
    if branch is not None:
        return "new" if branch >= FIRST_NEW_DRIVER else "old"
    date = record.get("date")
    return "old" if date and date < FIRST_NEW_DATE else "unknown"


def comparable(record: dict[str, Any]) -> bool:
    """Linux (or unstated) and the catalogue's ECC mode: Windows and other ECC modes report other totals."""
    return record.get("platform", "linux?") != "windows" and "ecc" not in record


@dataclass(frozen=True)
class CardRow:
    card: str
    totals: tuple[float, ...]  # every comparable record
    compared: tuple[float, ...]  # the ones not known to run a driver before R560
    old: tuple[float, ...]
    planner_gib: float

    @property
    def off_gib(self) -> float:
        """How far the planner's total lies outside the compared records' range (0 inside it)."""
        if not self.compared:
            return 0.0
        low, high = min(self.compared), max(self.compared)
        return max(self.planner_gib - high, 0.0) + min(self.planner_gib - low, 0.0)

    @property
    def flagged(self) -> bool:
        return abs(self.off_gib) > TOLERANCE_GIB + 1e-9


def card_rows(rows: Sequence[dict[str, Any]] | None = None) -> list[CardRow]:
    by_card: dict[str, list[dict[str, Any]]] = {}
    for record in rows if rows is not None else records():
        if comparable(record):
            by_card.setdefault(record["card"], []).append(record)
    out = []
    for card, found in sorted(by_card.items()):
        current = tuple(r["total_gib"] for r in found if era(r) != "old")
        old = tuple(r["total_gib"] for r in found if era(r) == "old")
        every = tuple(r["total_gib"] for r in found)
        planner = vllm_total_memory(find_gpu(card)) / GiB
        out.append(CardRow(card, every, current, old, planner))
    return out


def _stats(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{len(values)}: {min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def table(rows: Sequence[CardRow]) -> str:
    lines = [
        "| card | all (n: min / median / max) | up to R550 | compared (not old) | planner | outside by | |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for row in rows:
        flag = ("**off**" if row.flagged else "ok") if row.compared else "old drivers only"
        off = f"{row.off_gib:+.2f}" if row.compared else "—"
        lines.append(
            f"| {row.card} | {_stats(row.totals)} | {_stats(row.old)} | {_stats(row.compared)} | "
            f"{row.planner_gib:.2f} | {off} | {flag} |"
        )
    return "\n".join(lines)


def not_compared(rows: Sequence[dict[str, Any]] | None = None) -> list[str]:
    """One line per record from another platform or ECC mode than the catalogue's."""
    lines = []
    for r in rows if rows is not None else records():
        if not comparable(r):
            why = r.get("os") or "ECC " + r["ecc"]
            lines.append(f"{r['card']} {r['total_gib']:.2f} GiB ({why}): {r.get('url') or r.get('corpus_file_id')}")
    return lines


def misses(rows: Sequence[CardRow]) -> list[CardRow]:
    """Flagged cards with at least two compared records (one message is not enough to move a constant)."""
    return [row for row in rows if row.flagged and len(row.compared) >= 2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a card with two or more records is off")
    args = parser.parse_args(argv)
    rows = card_rows()
    print(table(rows))
    print("\nNot compared (another platform or ECC mode than the catalogue's):")
    for line in not_compared():
        print(f"- {line}")
    missed = misses(rows)
    print(f"\nTarget: every card with two or more records within {TOLERANCE_GIB} GiB of their range — ", end="")
    print("met" if not missed else "MISSED: " + ", ".join(f"{r.card} ({r.off_gib:+.2f})" for r in missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())

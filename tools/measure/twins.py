"""Print each measured case that names a `twin_of` beside its twin: what the one knob changes.

    python -m tools.measure.twins [--markdown]

Reads benchmarks/accuracy/cases*.json for the pairs and measured/<id>.json for the bytes
(no torch needed). The optimizer phase is listed apart because a knob such as fused vs
foreach moves that phase's peak even when the step's overall peak stays in the backward.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ACC = REPO / "benchmarks" / "accuracy"


def _phase_max(doc: dict, phase: str) -> int:
    return max(int(v.get(phase, 0)) for v in doc["phase_peaks"].values())


def rows() -> list[dict]:
    cases = []
    for name in ("cases.json", "cases_holdout.json"):
        cases += json.loads((ACC / name).read_text())["cases"]
    out = []
    for case in cases:
        twin = case.get("twin_of")
        a, b = ACC / "measured" / f"{case['id']}.json", ACC / "measured" / f"{twin}.json"
        if not twin or not a.exists() or not b.exists():
            continue
        new, old = json.loads(a.read_text()), json.loads(b.read_text())
        out.append(
            {
                "case": case["id"],
                "twin": twin,
                "isolates": case.get("isolates", ""),
                "peak": new["peak_allocated_bytes"],
                "twin_peak": old["peak_allocated_bytes"],
                "where": f"{new['peak_step']}/{new['peak_phase']}",
                "twin_where": f"{old['peak_step']}/{old['peak_phase']}",
                "opt": _phase_max(new, "optimizer"),
                "twin_opt": _phase_max(old, "optimizer"),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    table = rows()
    if args.markdown:
        print("| case | twin | knob | peak (B) | twin peak (B) | Δ | optimizer-phase peak | twin's |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in table:
        d = (r["peak"] - r["twin_peak"]) / r["twin_peak"] * 100
        if args.markdown:
            print(
                f"| {r['case']} | {r['twin']} | {r['isolates']} | {r['peak']:,} ({r['where']}) | "
                f"{r['twin_peak']:,} ({r['twin_where']}) | {d:+.1f} % | {r['opt']:,} | {r['twin_opt']:,} |"
            )
        else:
            print(
                f"{r['case']}\n  vs {r['twin']} [{r['isolates']}]\n  peak {r['peak']:,} ({r['where']}) vs "
                f"{r['twin_peak']:,} ({r['twin_where']}) {d:+.1f} %; "
                f"optimizer phase {r['opt']:,} vs {r['twin_opt']:,}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``vramplan compare PLAN...``: up to four plans side by side, as a table, Markdown or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from core.advice.compare import Comparison, compare
from core.cli.parser import add_force_option, add_mode_option, text_arg
from core.cli.plans import load_plans_and_mode
from core.cli.render import json_text
from core.files.comparison import save as save_comparison
from core.files.report import build_report, to_markdown, value_text


def register(sub: Any) -> None:
    comp = sub.add_parser("compare", help="compare up to four plans side by side")
    comp.add_argument("plans", nargs="+", metavar="PLAN", help="plan files or a comparison file (up to 4 plans)")
    shape = comp.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="machine-readable, bytes throughout")
    shape.add_argument("--markdown", action="store_true", help="a Markdown table")
    comp.add_argument("--save", type=text_arg, metavar="FILE", help="also save the comparison to FILE")
    add_force_option(comp)
    comp.add_argument("--gib", action="store_true", help="GiB instead of decimal GB")
    add_mode_option(comp, "compare for a training step or for serving (verdicts, buckets and diagnosis follow it)")


def run(args: argparse.Namespace) -> str:
    named, mode = load_plans_and_mode(args.plans, args.mode)
    comparison = compare(named, mode)
    if args.save:
        save_comparison(comparison, args.save, force=args.force)
    unit = "GiB" if args.gib else "GB"
    if args.json:
        return json_text(comparison_json(comparison))
    if args.markdown:
        return to_markdown(build_report(named, unit=unit, mode=mode))
    return render_comparison(comparison, unit) + "\n"


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    best = comparison.cheapest_fit()
    return {
        "plans": list(comparison.names),
        "mode": comparison.mode.value,
        "rows": [
            {"key": r.key, "label": r.label, "kind": r.kind.value, "values": list(r.values), "differs": r.differs}
            for r in comparison.rows()
        ],
        "phases": {
            name: list(values) for name, values in zip(comparison.phase_names(), comparison.phase_bytes(), strict=True)
        },
        "cheapest_fit": comparison.names[best] if best is not None else None,
        # False where the cheapest is a narrow fit, none fitting with margin (core.verdict); None where none fits.
        "cheapest_fit_with_margin": (
            comparison.plans[best].estimate.judgement(comparison.mode).fits_with_margin if best is not None else None
        ),
    }


def render_comparison(comparison: Comparison, unit: str) -> str:
    best = comparison.cheapest_fit()
    rows = comparison.rows()
    names = [f"{i + 1}. {n}" for i, n in enumerate(comparison.names)]
    cells = [[value_text(r, v, unit) for v in r.values] for r in rows]
    widths = [max([len(names[i])] + [len(c[i]) for c in cells]) for i in range(len(names))]
    label_w = max(len(r.label) for r in rows) + 2
    lines = [" " * label_w + "  ".join(n.rjust(w) for n, w in zip(names, widths, strict=True))]
    for row, values in zip(rows, cells, strict=True):
        mark = "* " if len(names) > 1 and row.differs else "  "
        lines.append(
            f"{mark}{row.label:<{label_w - 2}}" + "  ".join(v.rjust(w) for v, w in zip(values, widths, strict=True))
        )
    lines.append("")
    if len(names) > 1:
        lines.append("* differs between the plans")
    if best is None:
        lines.append("none of these plans fits its card")
    else:  # core.verdict's words: a narrow fit is the answer only where none fits with margin, and says so
        lines.append(comparison.fit_answer(names[best]))
    return "\n".join(lines)

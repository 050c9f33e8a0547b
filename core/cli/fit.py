"""``vramplan fit [PLAN]``: which cards fit a plan, every catalogue GPU × 1-8, sorted by cost. The plan is a plan
file, or the options of ``vramplan estimate`` (the one builder, core.cli.parser.add_plan_options; h88fix)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from core.advice.fit import CardFit, cards_for, cheapest_fit
from core.cli.parser import UsageError, add_plan_options
from core.cli.plans import plan_from_args
from core.cli.render import json_text
from core.format import hours, money
from core.plan import Plan
from core.units import GB
from core.verdict import cheapest_fit_words


def register(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="which cards fit a plan: every catalogue GPU × 1-8, sorted by cost",
        description="The plan: a plan file (vramplan estimate ... --save PLAN), or the options of "
        "`vramplan estimate` (-m, --method, --micro-batch, ...), which also override a plan file's.",
    )
    fit.add_argument(
        "plan_file", metavar="PLAN", nargs="?", help="a plan file (vramplan estimate ... --save PLAN); = --plan PLAN"
    )
    add_plan_options(fit)
    fit.add_argument("--json", action="store_true", help="machine-readable rows, bytes throughout")
    fit.add_argument("--fits-only", action="store_true", help="only the rows that fit")
    fit.add_argument(
        "--keep-sharding",
        action="store_true",
        help="keep the plan's sharding for several cards (default: FSDP when the plan does not shard)",
    )
    fit.add_argument("--max-count", type=int, default=8, help="largest number of cards per row (1-8)")


def run(args: argparse.Namespace) -> str:
    if not 1 <= args.max_count <= 8:
        raise UsageError(f"--max-count: {args.max_count} is not allowed; expected 1 to 8")
    if args.plan_file is not None:
        if args.plan is not None and args.plan != args.plan_file:
            raise UsageError("give the plan file once: PLAN or --plan FILE")
        args.plan = args.plan_file
    plan = plan_from_args(args)
    rows = cards_for(plan, counts=range(1, args.max_count + 1), keep_sharding=args.keep_sharding)
    if args.fits_only:
        rows = tuple(r for r in rows if r.fits)
    if args.json:
        return json_text(fit_rows_json(rows))
    return render_fit(plan, rows) + "\n"


def fit_rows_json(rows: tuple[CardFit, ...]) -> list[dict[str, Any]]:
    return [
        {
            "gpu": r.gpu.id,
            "gpu_name": r.gpu.name,
            "count": r.count,
            "sharding": r.sharding.value,
            "peak_bytes": round(r.estimate.peak_bytes),
            "total_bytes": round(r.estimate.total_bytes),
            "capacity_bytes": round(r.estimate.capacity_bytes),
            "verdict": r.verdict.value,
            "fits_with_margin": r.estimate.judgement().fits_with_margin,  # False for a narrow fit (core.verdict)
            "hours": r.hours,
            "cost": r.cost,
            "price_per_gpu_hour": r.price,
            "price_source": r.price_from,
            "tokens_per_second": r.estimate.compute.tokens_per_second,
        }
        for r in rows
    ]


def _price(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def render_fit(plan: Plan, rows: tuple[CardFit, ...]) -> str:
    best = cheapest_fit(rows)
    # Names are written whole: cut to a fixed width, two boards of one chip (RTX PRO 5000 Blackwell 48 and
    # 72 GB, RTX PRO 6000 Blackwell and its Max-Q) read as the same card.
    width = max((len(r.gpu.name) for r in rows), default=3)
    lines = [
        f"{plan.model.name} · {plan.method.value} · {plan.precision_word} · micro-batch "
        f"{plan.workload.micro_batch} × {plan.workload.seq_len:,} tokens; cards priced from the catalogue "
        f"where it has a price (p), the plan's card at the plan's own price, others unknown",
        f"  {'GPU':<{width}} {'×':>2} {'sharding':<8} {'per GPU':>10} {'of':>9}  {'verdict':<13} {'time':>9} "
        f"{'$/GPU-h':>9} {'cost':>10}",
    ]
    for r in rows:
        mark = "*" if r is best else " "
        lines.append(
            f"{mark} {r.gpu.name:<{width}} {r.count:>2} {r.sharding.value:<8} "
            f"{r.estimate.total_bytes / GB:>7.1f} GB {r.estimate.capacity_bytes / GB:>6.1f} GB  "
            f"{r.label:<13} {hours(r.hours):>9} {_price(r.price):>7}"
            f"{' ' if not r.currency else 'p'} {money(r.cost, r.currency):>10}"
        )
    if best is None:
        lines.append("no card in the catalogue fits")
    else:  # a narrow fit is the answer only where none fits with margin, and says so (core.verdict)
        lines.append("* " + cheapest_fit_words(f"{best.gpu.name} × {best.count}", best.fits_narrowly))
    return "\n".join(lines)

"""What a lent card's timing runs say about the two open time questions (docs/TRAINING_TIME.md, issue 24).

Reads the JSON lines that ``tools/measure/gemm_timing.py`` and ``tools/measure/sdpa_timing.py`` write (no torch
here: it runs on any machine, on a folder fetched back from the card) and prints a table and a verdict each:

1. *Small matmuls, sum or max* (the "A matmul's compute and its traffic" section, branch h84roof): each timed kernel
   beside the app's prediction under today's rule, compute + traffic (core.training.speed times each matmul kernel
   as ``gemm:<family>/<kind>`` × its padded FLOPs at the peak plus ``gemm_bytes`` × its operand bytes at the
   bandwidth), and under the roofline's max of the two. Then each rule with its own two coefficients fitted on the
   card's kernels (least squares of the log error, a grid search): the rule whose best fit leaves the smaller error
   across the shapes is the one whose *shape* fits, whatever level the corpus fit gives it. p 2 ((a² + b²)^½, the
   fitted sources' choice in that section) is shown beside them.
2. *SDPA on Hopper* (the "Which backend PyTorch's SDPA runs" section, branch h84sdpa): per case the backend the
   dispatcher chose, each backend's forward + backward milliseconds, the app's prediction at its flash rate and at
   cuDNN's (``attention:<family>/fused``), and the coefficient each backend's time implies.

    python -m tools.measure.time_report OUT/time          # gemm.jsonl and sdpa.jsonl in that folder
    python -m tools.measure.time_report FILE.jsonl ...    # any of them
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

GEMM_TOOL: Final = "gemm_timing"
SDPA_TOOL: Final = "sdpa_timing"
RULES: Final = {"sum": 1.0, "p 2": 2.0, "max": math.inf}
SMALL_MAX_ROWS: Final = 2048  # docs/TRAINING_TIME.md, h84roof: "256-2,048 rows x 4,096²", the open shapes
# A rule "fits better" when its fitted median error is under the other's by this much, both absolute (percentage
# points) and relative: a smaller gap is inside what repeated runs of one kernel move (NVIDIA's guide puts run-to-run
# GEMM variation at a few per cent; the tool's own median-of-N spread is printed with each row).
CLEAR_POINTS: Final = 1.0
CLEAR_SHARE: Final = 0.2
# Kernels this short are left out of the fits: their time is mostly the launch and the tail, which neither rule
# counts (torchao's roofline floors every GEMM at 2 µs, pytorch/ao@05980129 torchao/testing/training/roofline_utils.py
# get_individual_gemm_time_sympy); 2.5 × that keeps the fits to kernels whose terms dominate. They stay in the table.
LATENCY_FLOOR_S: Final = 2.5 * 2e-6
# The grid the two coefficients are searched on: log-spaced, then refined around the best point.
_GRID_LOW, _GRID_HIGH, _GRID_STEPS, _REFINE = 0.05, 20.0, 25, 3


class ReportError(Exception):
    """Input the report cannot read; the message is one line."""


def roof(a: float, b: float, power: float) -> float:
    """(a^p + b^p)^(1/p): p 1 the sum, p inf the larger (benchmarks/realgpu/gemm_roofline.roof's rule)."""
    return max(a, b) if math.isinf(power) else (a**power + b**power) ** (1 / power)


def read_lines(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every JSON record in ``paths`` (files of JSON lines, or folders of them); a missing path is an error."""
    records: list[dict[str, Any]] = []
    for path in paths:
        # A run stopped before its end leaves its lines in NAME.jsonl.partial (gemm_timing.Output): read them too.
        files = sorted([*path.glob("*.jsonl"), *path.glob("*.jsonl.partial")]) if path.is_dir() else [path]
        if not path.exists():
            raise ReportError(f"{path}: no such file or folder")
        if not files:
            raise ReportError(f"{path}: no .jsonl file there")
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except OSError as error:
                raise ReportError(f"{file}: {error.strerror or error}") from None
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    raise ReportError(f"{file}:{number}: not valid JSON") from None
                if not isinstance(record, dict):
                    raise ReportError(f"{file}:{number}: a record must be a JSON object")
                records.append(record)
    return records


# ---- matmuls --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One timed matmul kernel: its measured seconds and the app's two terms before their coefficients."""

    label: str
    group: str  # the coefficients it shares: "16-bit dense", "16-bit LoRA", "fp8 dense"
    measured: float  # seconds (the median of the card's runs)
    compute: float  # padded FLOPs at the peak, seconds
    moved: float  # operand bytes at the bandwidth, seconds
    k_compute: float  # the app's coefficients
    k_bytes: float
    small: bool = False  # a dense kernel of 256-2,048 rows: the shapes the question is about

    def predicted(self, power: float, k_compute: float | None = None, k_bytes: float | None = None) -> float:
        kc = self.k_compute if k_compute is None else k_compute
        kb = self.k_bytes if k_bytes is None else k_bytes
        return roof(kc * self.compute, kb * self.moved, power)


def gemm_kernels(records: Sequence[Mapping[str, Any]]) -> list[Kernel]:
    """The timed matmul kernels among ``records`` (a dry run's have no time and are skipped)."""
    out = []
    for r in records:
        if r.get("tool") != GEMM_TOOL or r.get("median_ms") is None:
            continue
        p = r["predicted"]
        kind = "fp8" if r["dtype"] == "fp8" else "16-bit"
        out.append(
            Kernel(
                f"{r['case']} {r['dtype']} {r['pass']} {r['m']}x{r['k']}x{r['n']}",
                f"{kind} {'LoRA' if r['case'] == 'lora' else 'dense'}",
                r["median_ms"] / 1e3,
                p["compute_at_peak_ms"] / 1e3,
                p["bytes_at_bandwidth_ms"] / 1e3,
                p["k_compute"],
                p["k_bytes"],
                r["case"] == "dense" and r["m"] <= SMALL_MAX_ROWS,
            )
        )
    return out


def _errors(kernels: Sequence[Kernel], predict: Callable[[Kernel], float]) -> list[float]:
    return [predict(k) / k.measured - 1 for k in kernels]


def _log_loss(kernels: Sequence[Kernel], power: float, kc: float, kb: float) -> float:
    return sum(math.log(k.predicted(power, kc, kb) / k.measured) ** 2 for k in kernels)


def fit(kernels: Sequence[Kernel], power: float) -> tuple[float, float]:
    """The coefficients (compute, bytes) that fit ``kernels`` best under the combination ``power``: least squares
    of the log error on a log-spaced grid, refined three times around the best point."""
    low, high = math.log(_GRID_LOW), math.log(_GRID_HIGH)
    box = ((low, high), (low, high))
    best = (1.0, 1.0)
    for _ in range(_REFINE + 1):
        (c0, c1), (b0, b1) = box
        axis_c = [c0 + (c1 - c0) * i / (_GRID_STEPS - 1) for i in range(_GRID_STEPS)]
        axis_b = [b0 + (b1 - b0) * i / (_GRID_STEPS - 1) for i in range(_GRID_STEPS)]
        scored = min((_log_loss(kernels, power, math.exp(c), math.exp(b)), c, b) for c in axis_c for b in axis_b)
        _, c, b = scored
        best = (math.exp(c), math.exp(b))
        step_c, step_b = (c1 - c0) / (_GRID_STEPS - 1), (b1 - b0) / (_GRID_STEPS - 1)
        box = ((c - 2 * step_c, c + 2 * step_c), (b - 2 * step_b, b + 2 * step_b))
    return best


@dataclass(frozen=True)
class RuleScore:
    rule: str
    shipped_median: float  # median |error| at the app's coefficients
    fitted: tuple[float, float]  # the rule's own best coefficients on these kernels
    fitted_median: float  # median |error| with them
    fitted_worst: float
    small_median: float | None  # of which the 256-2,048-row dense kernels' (None: the group has none)


def score_rules(kernels: Sequence[Kernel]) -> list[RuleScore]:
    scores = []
    for rule, power in RULES.items():
        kc, kb = fit(kernels, power)
        shipped = [abs(e) for e in _errors(kernels, lambda k, p=power: k.predicted(p))]
        fitted = [abs(e) for e in _errors(kernels, lambda k, p=power, c=kc, b=kb: k.predicted(p, c, b))]
        small = [e for e, k in zip(fitted, kernels, strict=True) if k.small]
        scores.append(
            RuleScore(
                rule,
                statistics.median(shipped),
                (kc, kb),
                statistics.median(fitted),
                max(fitted),
                statistics.median(small) if small else None,
            )
        )
    return scores


def _clearly_under(a: float, b: float) -> bool:
    return (b - a) * 100 >= CLEAR_POINTS and b - a >= CLEAR_SHARE * b


def verdict(scores: Sequence[RuleScore]) -> str:
    """'sum fits', 'max fits' or 'neither clearly', from the fitted medians of the sum and the max; and where p 2
    fits clearly better than both, that said after it."""
    by = {s.rule: s.fitted_median for s in scores}
    total, larger, between = by["sum"], by["max"], by["p 2"]
    said = "sum fits" if _clearly_under(total, larger) else "max fits" if _clearly_under(larger, total) else ""
    said = said or "neither clearly"
    if _clearly_under(between, min(total, larger)):
        said += " (p 2 fits better than both)"
    return said


def gemm_groups(kernels: Sequence[Kernel]) -> dict[str, list[Kernel]]:
    """The kernels of LATENCY_FLOOR_S or more by the coefficients they share, and every 16-bit one together (the app
    times dense and LoRA 16-bit matmuls with one pair of coefficients)."""
    groups: dict[str, list[Kernel]] = {}
    timed = [k for k in kernels if k.measured >= LATENCY_FLOOR_S]
    for k in timed:
        groups.setdefault(k.group, []).append(k)
    sixteen = [k for k in timed if k.group.startswith("16-bit")]
    if len(groups) > 1 and sixteen:
        groups["16-bit, all shapes"] = sixteen
    return groups


def render_gemm(kernels: Sequence[Kernel], table: bool = True) -> str:
    """Each kernel's row (``table``), then each group's rule scores and verdict."""
    if not kernels:
        return "matmuls: no timed kernel (a dry run, or none ran)"
    head = f"{'kernel':44} {'card ms':>9} {'sum ms':>9} {'max ms':>9} {'sum err':>8} {'max err':>8}"
    lines = ["Matmuls: the card's median against the app's kernel time (shipped coefficients)", head, "-" * len(head)]
    for k in kernels if table else ():
        total, larger = k.predicted(1.0), k.predicted(math.inf)
        lines.append(
            f"{k.label[:44]:44} {k.measured * 1e3:9.4f} {total * 1e3:9.4f} {larger * 1e3:9.4f} "
            f"{(total / k.measured - 1) * 100:+7.1f}% {(larger / k.measured - 1) * 100:+7.1f}%"
        )
    short = sum(k.measured < LATENCY_FLOOR_S for k in kernels)
    if short:
        lines.append(f"\n{short} kernels under {LATENCY_FLOOR_S * 1e6:.0f} µs (launch-bound) are left out of the fits")
    for name, group in gemm_groups(kernels).items():
        scores = score_rules(group)
        lines.append(f"\n{name} ({len(group)} kernels): median |error| at the app's coefficients, and each rule fitted")
        for s in scores:
            lines.append(
                f"  {s.rule:4}: shipped {s.shipped_median * 100:5.1f} %   fitted {s.fitted_median * 100:5.1f} % "
                f"(worst {s.fitted_worst * 100:5.1f} %"
                + ("" if s.small_median is None else f", 256-2,048 rows {s.small_median * 100:5.1f} %")
                + f") at compute {s.fitted[0]:.3f}, bytes {s.fitted[1]:.3f}"
            )
        lines.append(f"  verdict: {verdict(scores)}")
    return "\n".join(lines)


# ---- SDPA -----------------------------------------------------------------------------------------------------


def sdpa_records(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if r.get("tool") == SDPA_TOOL and r.get("chosen") is not None]


def _total_ms(entry: Mapping[str, Any] | None) -> float | None:
    if not entry or entry.get("forward_ms") is None or entry.get("backward_ms") is None:
        return None
    return float(entry["forward_ms"]) + float(entry["backward_ms"])


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def cudnn_chosen(records: Sequence[Mapping[str, Any]], masked: bool) -> bool | None:
    """Whether the dispatcher chose cuDNN for every timed case with (``masked``) or without a padding mask on an
    sm_90 card; None when no such case ran there."""
    picks = [r["chosen"] == "cudnn" for r in records if r.get("capability") == [9, 0] and bool(r["mask"]) == masked]
    if not picks:
        return None
    return all(picks) if all(picks) or not any(picks) else None


def render_sdpa(records: Sequence[Mapping[str, Any]]) -> str:
    if not records:
        return "SDPA: no timed case (a dry run, or none ran)"
    backends = ("flash", "efficient", "cudnn")
    head = (
        f"{'case':34} {'chosen':>9} {'default':>9} "
        + " ".join(f"{b:>9}" for b in backends)
        + f" {'app':>9} {'app@cuDNN':>9} {'implied k':>9}"
    )
    lines = [
        "SDPA: forward + backward ms per call (card) against the app's per-layer prediction",
        head,
        "-" * len(head),
    ]
    for r in records:
        b = r["backends"]
        default = _total_ms(b.get("default"))
        implied = default / r["predicted"]["at_peak_ms"] if default and r["predicted"]["at_peak_ms"] else None
        lines.append(
            f"{r['label'][:34]:34} {r['chosen']:>9} {_ms(default):>9} "
            + " ".join(f"{_ms(_total_ms(b.get(name))):>9}" for name in backends)
            + f" {_ms(r['predicted']['app_ms']):>9} {_ms(r['predicted']['cudnn_ms']):>9} "
            + ("        —" if implied is None else f"{implied:9.3f}")
        )
    for name in ("default", *backends):
        implied = [
            t / r["predicted"]["at_peak_ms"]
            for r in records
            if not r["mask"] and (t := _total_ms(r["backends"].get(name))) and r["predicted"]["at_peak_ms"]
        ]
        if implied:
            lines.append(f"{name}: coefficient its time implies, no mask, median {statistics.median(implied):.3f}")
    first = records[0]["predicted"]
    lines.append(
        f"implied k: the default call's time over its FLOPs at the peak (the app: {first['k_app']:.3f} for "
        f"{first['app_feature']}, {first['k_cudnn']:.3f} for cuDNN's)"
    )
    for masked in (False, True):
        chosen = cudnn_chosen(records, masked)
        said = {True: "yes", False: "no", None: "mixed or not run"}[chosen]
        lines.append(f"cuDNN chosen on sm90 ({'padding mask' if masked else 'no mask'}): {said}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.measure.time_report", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="JSON-lines files or folders of them")
    args = parser.parse_args(argv)
    try:
        records = read_lines(args.paths)
    except ReportError as error:
        print(f"time_report: {error}", file=sys.stderr)
        return 2
    if not records:
        print(f"time_report: no timing lines in {', '.join(map(str, args.paths))}", file=sys.stderr)
        return 1
    cards = sorted({f"{r.get('card')} (torch {r.get('torch')})" for r in records if r.get("card")})
    print("card: " + ("; ".join(cards) or "unknown"))
    print(render_gemm(gemm_kernels(records)))
    print()
    print(render_sdpa(sdpa_records(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A matmul's compute and its operand traffic: added (today's rule), the larger, or a p-norm of the two?

The time model (core.training.speed) times each matmul kernel as a = its padded FLOPs at the peak × the matmul
coefficient and b = its operand bytes at the bandwidth × ``gemm_bytes``, and adds a + b. This script scores the
alternatives (a^p + b^p)^(1/p) per kernel — p = 1 the sum, p = inf the roofline's max(a, b) — each with its own
coefficients: the throughput benchmark's fit (benchmarks/realgpu/throughput.py, weighted least squares, leave one
source out) run on the combination's Euler split (:func:`roofline_features`) at the previous fit's
coefficients, until the coefficients settle. It prints the leave-one-source-out table of the fitted sources, the
held-out sources (scored with the all-source fit) and PEFT's method-time ratios (benchmarks/realgpu/peft_time.py,
through estimate() with that fit and that combination), one p per run:

    PYTHONPATH=. .venv/bin/python -m benchmarks.realgpu.gemm_roofline --p 1      # today's rule
    PYTHONPATH=. .venv/bin/python -m benchmarks.realgpu.gemm_roofline --p inf    # the roofline
    PYTHONPATH=. .venv/bin/python -m benchmarks.realgpu.gemm_roofline --choose   # p by the fitted sources alone

The results, and why nothing was adopted: docs/TRAINING_TIME.md, "A matmul's compute and its traffic"."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from benchmarks.realgpu import throughput as tput
from core.training import compute as training_compute
from core.training import efficiency
from core.training import speed as training_speed
from core.training.gemm_shape import shape_efficiency
from core.training.speed import Work

OUTER: Final = 5  # refits on the Euler split at the previous coefficients (the coefficients move < 0.1 % by then)
VERBOSE = False  # --verbose: how far the last refit moved the coefficients
CHOICES: Final = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, math.inf)  # the p the --choose run scores on the fitted sources


def roof(a: float, b: float, power: float) -> float:
    """(a^p + b^p)^(1/p): p 1 the sum, p inf the larger."""
    return max(a, b) if math.isinf(power) else (a**power + b**power) ** (1 / power)


def roofline_features(
    features: Mapping[str, float], kernels: tuple[tuple[str, float, float], ...], k: Callable[[str], float], p: float
) -> dict[str, float]:
    """``features`` with each matmul kernel's compute and bytes combined as (a^p + b^p)^(1/p) of their coefficient-
    scaled times a, b (p 1: their sum, today's rule; p inf: the larger), written back as seconds before the
    coefficients: by Euler's theorem t = a·(a/t)^(p-1) + b·(b/t)^(p-1), so Σ k × feature is the combined time."""
    if p == 1 or not kernels:
        return dict(features)
    out = dict(features)
    for name, compute, moved in kernels:
        a, b = k(name) * compute, k("gemm_bytes") * moved
        if math.isinf(p):
            wa, wb = (1.0, 0.0) if a >= b else (0.0, 1.0)
        else:
            t = roof(a, b, p)
            wa, wb = ((a / t) ** (p - 1), (b / t) ** (p - 1)) if t else (0.0, 0.0)
        out[name] -= compute * (1 - wa)
        out["gemm_bytes"] -= moved * (1 - wb)
    return out


def combined(p: tput.Prepared, table: Mapping[str, float], power: float) -> tput.Prepared:
    """``p`` with its matmul features split for the combination ``power`` at coefficients ``table``."""
    work = p.work
    features = roofline_features(work.features, work.kernels, lambda n: efficiency.coefficient(n, table), power)
    return replace(p, work=replace(work, features=features))


def guide_coefficient(kind: str, power: float) -> float:
    """efficiency.guide_coefficient under the combination ``power``: the coefficient c at which the TE GEMM guide's
    H200 NVL layer (its 12 GEMMs, each kernel's (c·a)^p + b^p)^(1/p), the bytes at their prior 1.0) takes its
    measured time; p 1 is the shipped figure."""
    if power == 1:
        return efficiency.guide_coefficient(kind)
    m, inputs = efficiency._GUIDE_M, efficiency._GUIDE_OPERAND_BYTES[kind]
    peak, bandwidth = efficiency._GUIDE_PEAK_TFLOPS[kind] * 1e12, efficiency._GUIDE_BANDWIDTH
    kernels = [  # (seconds at the peak, operand bytes' seconds at the bandwidth) of each pass of each GEMM
        (2.0 * m * k * n / shape_efficiency(rows, cols, efficiency._GUIDE_SMS) / peak, moved / bandwidth)
        for k, n in efficiency._GUIDE_SHAPES
        for moved in [(m * k + k * n) * inputs + m * n * 2.0]
        for rows, cols in ((m, n), (m, k), (k, n))
    ]
    target = efficiency._GUIDE_LAYER_MS[kind] * 1e-3
    low, high = 0.1, 10.0
    for _ in range(100):
        c = (low + high) / 2
        seconds = sum(roof(c * a, b, power) for a, b in kernels)
        low, high = (c, high) if seconds < target else (low, c)
    return (low + high) / 2


def set_guide(power: float) -> None:
    """The coefficients read from the TE GEMM guide through the model's combination, re-read under ``power``: the
    Megatron stack's Hopper matmuls (efficiency.MEGATRON_HOPPER, fixed priors) and TE's fp8 / 16-bit ratio."""
    bf16, fp8 = guide_coefficient("16-bit", power), guide_coefficient("fp8-te", power)
    priors: Any = efficiency.PRIORS
    priors["gemm:hopper/megatron-16-bit"], priors["gemm:hopper/megatron-fp8-te"] = bf16, fp8
    if power != 1:
        ratio = fp8 / bf16
        efficiency.DERIVED.update(  # type: ignore[attr-defined]
            {
                "/fp8-te": ("/16-bit", ratio),
                "/fp8-te-mxfp8": ("/16-bit", ratio * efficiency.MXFP8_OVER_FP8_TE),
                "/fp8-mxfp8": ("/16-bit", ratio * efficiency.MXFP8_OVER_FP8_TE),
            }
        )
    print(f"guide: megatron-16-bit {bf16:.4f}, megatron-fp8-te {fp8:.4f}, fp8-te / 16-bit {fp8 / bf16:.4f}")


def fit_with(prepared: Sequence[tput.Prepared], power: float) -> dict[str, float]:
    table = tput.fit(prepared)  # the sum's fit: the start
    for _ in range(OUTER if power != 1 else 0):
        last, table = table, tput.fit([combined(p, table, power) for p in prepared])
        moved = max(abs(table[n] / last[n] - 1) for n in table if last.get(n))
    if power != 1 and VERBOSE:
        print(f"  last refit moved the coefficients by at most {100 * moved:.3f} %")
    return table


def score(prepared: Sequence[tput.Prepared], table: Mapping[str, float], power: float) -> list[tput.Scored]:
    rows = []
    for p in prepared:
        step = tput.predicted_step(combined(p, table, power), table)
        rows.append(tput.Scored(p.case, p.case.per_gpu(step), p.case.per_gpu(p.case.observed_step)))
    return rows


def loso(prepared: Sequence[tput.Prepared], power: float) -> list[tput.Scored]:
    rows: list[tput.Scored] = []
    for family in sorted({p.case.family for p in prepared}):
        table = fit_with([p for p in prepared if p.case.family != family], power)
        rows += score([p for p in prepared if p.case.family == family], table, power)
    return rows


def prepared_cases() -> tuple[list[tput.Prepared], list[tput.Prepared]]:
    """The fitted sources' figures and the held-out ones, prepared as the throughput benchmark does."""
    fitted, held = [], []
    for record in tput.load()["figures"]:
        try:
            case = tput.case_of(record)
        except tput.NotExpressible:
            continue
        (held if tput.held_out(case) else fitted).append(tput.prepare(case))
    return fitted, held


def _line(name: str, s: Mapping[str, float]) -> str:
    return (
        f"{name:<28}{int(s['n']):>4}  median {s['median']:5.1f} %  worst ≤8k {s['worst_short']:5.1f} %  "
        f"worst >8k {s['worst_long']:5.1f} %  signed {s['median_signed']:+5.1f} %"
    )


def peft_lines(table: Mapping[str, float], power: float) -> list[str]:
    """PEFT's method-time table through estimate() with ``table`` and the combination ``power``."""
    from benchmarks.realgpu import peft_time

    efficiency._shipped = lambda name: efficiency._coefficient(name, table)  # type: ignore[assignment]
    plain = training_compute.step_work

    def step_work(*args: Any) -> Work:
        work = plain(*args)
        split = roofline_features(work.features, work.kernels, lambda n: efficiency.coefficient(n, table), power)
        return replace(work, features=split)

    training_compute.step_work = step_work  # type: ignore[assignment]
    rows = peft_time.rows()
    n, median, worst = peft_time.summary(rows)
    out = [f"  {r.id.removeprefix('peft-time-'):<58}{r.published:6.3f} {r.predicted or 0:6.3f}" for r in rows]
    return [*out, f"PEFT time ratios            {n:>4}  median {100 * median:5.1f} %  worst {100 * worst:5.1f} %"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", default="1", help="the combination's power: 1 (sum), a number, or inf (max)")
    parser.add_argument("--choose", action="store_true", help="score every p of CHOICES on the fitted sources")
    parser.add_argument("--rows", action="store_true", help="print every held-out figure")
    parser.add_argument("--verbose", action="store_true", help="say how far each fit's last refit moved")
    args = parser.parse_args(argv)
    training_speed.RECORD_KERNELS = True  # step_work keeps each matmul kernel only when asked
    global VERBOSE
    VERBOSE = args.verbose
    fitted, held = prepared_cases()
    if args.choose:
        for power in CHOICES:
            set_guide(power)
            print(_line(f"p {power:g}: fitted (loso)", tput.summary(loso(fitted, power))), flush=True)
        return 0
    power = float(args.p)
    set_guide(power)
    rows = loso(fitted, power)
    for family in sorted({r.case.family for r in rows}):
        print(_line(f"  {family}", tput.summary([r for r in rows if r.case.family == family])))
    print(_line(f"p {power:g}: fitted (loso)", tput.summary(rows)), flush=True)
    table = fit_with([p for p in fitted if tput.fitted_on(p.case)], power)
    kept = score(held, table, power)
    for source in sorted(tput.HELD_OUT_SOURCES):
        mine = [r for r in kept if r.case.record["source_id"] == source]
        if mine:
            print(_line(f"  {tput.FAMILIES[source]}", tput.summary(mine)))
    print(_line("held out", tput.summary(kept)))
    print("worst fitted: " + "; ".join(f"{r.case.id} {r.error:+.1f} %" for r in tput.worst(rows, 6)))
    if args.rows:
        for r in kept:
            print(f"  {r.case.id:<64}{r.published:>10,.0f}{r.predicted:>10,.0f} {r.error:+6.1f} %")
    print("coefficients: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(table.items()) if k.startswith("gemm")))
    print("\n".join(peft_lines(table, power)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Accuracy of the detailed estimate against measured training-step peaks.

Reads the committed measurements in benchmarks/accuracy/measured/*.json (made by
``python -m tools.measure``), estimates each case's plan with the detailed accounting, and
prints measured, estimated and error per case, then the median and worst absolute error.
``--check`` exits 1 when the median or the worst error is over its target.

    python benchmarks/accuracy.py [--check] [--markdown] [--twins]

``--twins`` lists each case that names a ``twin_of`` (the same plan without one knob:
fused vs foreach, bf16 vs float32 base, autocast on or off...) beside its twin, measured
and estimated, peak and optimizer-step phase.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.breakdown import StepPhase  # noqa: E402
from core.estimate import Estimate, estimate  # noqa: E402
from core.files.measurement import Measurement, load_measurement, plan_for_case, torch_release  # noqa: E402

MEASURED = ROOT / "benchmarks" / "accuracy" / "measured"
CASE_FILES = (ROOT / "benchmarks" / "accuracy" / "cases.json", ROOT / "benchmarks" / "accuracy" / "cases_holdout.json")
# Percent, over every case old and new (issue 11: training runs as people configure them).
MEDIAN_TARGET = 1.0
WORST_TARGET = 3.0
# Cases in cases_holdout.json (ids "ho-...") were measured only after the model was
# settled and are reported separately as a check that it generalises. The one prefix of the
# measured suites: benchmarks/sac_accuracy.py and benchmarks/parallel.py read it from here.
HOLDOUT_PREFIX = "ho-"


@dataclass(frozen=True)
class Row:
    case_id: str
    measured: int
    estimated: float
    measured_phase: str
    estimated_phase: str

    @property
    def error_pct(self) -> float:
        return (self.estimated - self.measured) / self.measured * 100


def rows(folder: Path = MEASURED) -> list[Row]:
    out = []
    for path in sorted(folder.glob("*.json")):
        m: Measurement = load_measurement(path)
        config = json.loads(path.read_text()).get("model_config")
        plan = plan_for_case(m.case, config, m.torch_version)
        est = estimate(plan)
        out.append(Row(m.case_id, m.peak_allocated_bytes, est.tensor_peak_bytes, m.peak_phase, est.peak_phase))
    return out


def _optimizer_phase(est: Estimate) -> float:
    return max(p.allocated_bytes for p in est.phases if p.kind is StepPhase.OPTIMIZER)


@dataclass(frozen=True)
class Twin:
    case_id: str
    twin_id: str
    knob: str
    measured: tuple[int, int]  # peak of the case, of its twin
    estimated: tuple[float, float]
    measured_step: tuple[int, int]  # the optimizer-step phase's peak
    estimated_step: tuple[float, float]


def twins(folder: Path = MEASURED) -> list[Twin]:
    """Pairs of measured cases that differ in one knob, with both estimates."""
    out = []
    for cases in CASE_FILES:
        for case in json.loads(cases.read_text())["cases"]:
            twin = case.get("twin_of")
            paths = (folder / f"{case['id']}.json", folder / f"{twin}.json")
            if not twin or not all(p.exists() for p in paths):
                continue
            docs = [json.loads(p.read_text()) for p in paths]
            ests = [estimate(plan_for_case(d["case"], d.get("model_config"), torch_release(d))) for d in docs]
            steps = [max(int(v.get("optimizer", 0)) for v in d["phase_peaks"].values()) for d in docs]
            out.append(
                Twin(
                    case["id"],
                    twin,
                    str(case.get("isolates", "")),
                    (docs[0]["peak_allocated_bytes"], docs[1]["peak_allocated_bytes"]),
                    (ests[0].tensor_peak_bytes, ests[1].tensor_peak_bytes),
                    (steps[0], steps[1]),
                    (_optimizer_phase(ests[0]), _optimizer_phase(ests[1])),
                )
            )
    return out


def print_twins() -> None:
    print(
        "| knob (case vs twin) | measured: with / without | estimated: with / without "
        "| optimizer step measured | estimated |"
    )
    print("|---|---:|---:|---:|---:|")
    for t in twins():
        m, e, ms, es = t.measured, t.estimated, t.measured_step, t.estimated_step
        print(
            f"| {t.knob} ({t.case_id} vs {t.twin_id}) | {m[0] / 1e9:.3f} / {m[1] / 1e9:.3f} GB "
            f"| {e[0] / 1e9:.3f} / {e[1] / 1e9:.3f} GB | {ms[0] / 1e9:.3f} / {ms[1] / 1e9:.3f} GB "
            f"| {es[0] / 1e9:.3f} / {es[1] / 1e9:.3f} GB |"
        )


def held_out(table: list[Row]) -> list[Row]:
    """The rows of the held-out cases (HOLDOUT_PREFIX), never tuned on."""
    return [r for r in table if r.case_id.startswith(HOLDOUT_PREFIX)]


def summary(table: list[Row]) -> tuple[float, float]:
    errors = [abs(r.error_pct) for r in table]
    return statistics.median(errors), max(errors)


def against_targets(table: list[Row], noun: str, median_target: float, worst_target: float) -> tuple[str, bool]:
    """ "N cases: median |error| …, worst …" with the targets, and whether both are met."""
    median, worst = summary(table)
    line = (
        f"{len(table)} {noun}: median |error| {median:.2f} % (target ≤ {median_target} %), "
        f"worst {worst:.2f} % (target ≤ {worst_target} %)"
    )
    return line, median <= median_target and worst <= worst_target


def worst_three(table: list[Row]) -> str:
    rows = sorted(table, key=lambda r: -abs(r.error_pct))[:3]
    return "worst three: " + ", ".join(f"{r.case_id} {r.error_pct:+.2f} %" for r in rows)


def print_rows(table: list[Row], markdown: bool) -> None:
    """Measured, estimated and error per case, as text or a Markdown table."""
    if markdown:
        print("| case | measured GB | estimated GB | error | measured peak | estimated peak |")
        print("|---|---:|---:|---:|---|---|")
        for r in table:
            print(
                f"| {r.case_id} | {r.measured / 1e9:.3f} | {r.estimated / 1e9:.3f} | {r.error_pct:+.2f} % "
                f"| {r.measured_phase} | {r.estimated_phase} |"
            )
        return
    width = max(len(r.case_id) for r in table)
    print(f"{'case':<{width}}  {'measured GB':>11}  {'estimated GB':>12}  {'error':>8}  phases (measured / estimated)")
    for r in table:
        print(
            f"{r.case_id:<{width}}  {r.measured / 1e9:>11.3f}  {r.estimated / 1e9:>12.3f}  {r.error_pct:>+7.2f}%  "
            f"{r.measured_phase} / {r.estimated_phase}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when over the targets")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (for the README)")
    parser.add_argument("--twins", action="store_true", help="each one-knob pair, measured and estimated")
    args = parser.parse_args(argv)
    if args.twins:
        print_twins()
        return 0
    table = rows()
    if not table:
        print(f"no measurements in {MEASURED}")
        return 1
    print_rows(table, args.markdown)
    line, met = against_targets(table, "cases", MEDIAN_TARGET, WORST_TARGET)
    print("\n" + line)
    print(worst_three(table))
    kept_out = held_out(table)
    if kept_out:
        h_median, h_worst = summary(kept_out)
        print(
            f"held out ({len(kept_out)} cases measured after the model was settled, never tuned on): "
            f"median {h_median:.2f} %, worst {h_worst:.2f} %"
        )
    if args.check and not met:
        print("accuracy targets missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

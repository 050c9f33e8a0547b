"""Selective activation checkpointing: the detailed estimate against measured phase peaks.

Reads benchmarks/accuracy/measured_sac/*.json (``python -m tools.measure
benchmarks/accuracy/cases_sac.json --out benchmarks/accuracy/measured_sac``: torchtitan's
per-op and per-layer SAC policies on Hugging Face models, see tools/measure/runner.py
``_enable_selective``). The step's overall peak of these cases is often the optimizer step,
which checkpointing does not change, so each case is compared where the activations are:
the second step's forward peak against the estimate's forward phase, and its backward peak
against the largest of the estimate's backward phases (the first step has no optimizer
state yet; the estimate, like the second step, has it).

    python benchmarks/sac_accuracy.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.breakdown import StepPhase  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.files.measurement import load_measurement, plan_for_case  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
# The single-GPU suite's row, summary and held-out cases (HOLDOUT_PREFIX: measured after the model
# was written, never tuned on).
from accuracy import HOLDOUT_PREFIX, Row, against_targets, held_out, summary  # noqa: E402, F401

MEASURED = ROOT / "benchmarks" / "accuracy" / "measured_sac"
# Percent, over every phase row (the targets the SAC work was given).
MEDIAN_TARGET = 2.0
WORST_TARGET = 5.0
_BACKWARD = (StepPhase.BACKWARD_START, StepPhase.BACKWARD_BLOCK, StepPhase.BACKWARD_END)


def rows(folder: Path = MEASURED) -> list[Row]:
    """Two rows per case, forward and backward (``measured_phase`` = ``estimated_phase``)."""
    out = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        m = load_measurement(path)
        est = estimate(plan_for_case(m.case, doc.get("model_config"), m.torch_version))
        step = doc["phase_peaks"]["step2"]
        fwd = max(p.allocated_bytes for p in est.phases if p.kind is StepPhase.FORWARD)
        bwd = max(p.allocated_bytes for p in est.phases if p.kind in _BACKWARD)
        out.append(Row(m.case_id, int(step["forward"]), fwd, "forward", "forward"))
        out.append(Row(m.case_id, int(step["backward"]), bwd, "backward", "backward"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when over the targets")
    args = parser.parse_args(argv)
    table = rows()
    if not table:
        print(f"no measurements in {MEASURED}")
        return 1
    width = max(len(r.case_id) for r in table)
    print(f"{'case':<{width}}  {'phase':<8}  {'measured GB':>11}  {'estimated GB':>12}  {'error':>8}")
    for r in table:
        gbs = f"{r.measured / 1e9:>11.3f}  {r.estimated / 1e9:>12.3f}"
        print(f"{r.case_id:<{width}}  {r.measured_phase:<8}  {gbs}  {r.error_pct:>+7.2f}%")
    line, met = against_targets(table, "phase peaks", MEDIAN_TARGET, WORST_TARGET)
    print("\n" + line)
    kept_out = held_out(table)
    if kept_out:
        print("held out: median {:.2f} %, worst {:.2f} %".format(*summary(kept_out)))
    if args.check and not met:
        print("accuracy targets missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

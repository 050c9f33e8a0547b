"""Accuracy of the per-rank estimate against measured multi-GPU training steps.

Reads benchmarks/parallel/cases.json and the measurements in benchmarks/parallel/measured/
(one rank of a DDP or FSDP2 step with a fake process group, made by
``python -m tools.measure`` — see that folder's README), builds each case's plan with its
``parallel`` fields, and prints the measured peak of the rank beside the estimated peak
of the worst rank, with the error; then the median and worst absolute error of the main
cases, and of the held-out cases apart (flagged holdout in cases.json, not tuned on).

    python benchmarks/parallel.py [--check] [--markdown] [--data FOLDER]

``--check`` exits 1 when the main cases miss a target (median ≤ 2 %, worst ≤ 5 %).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.accuracy import (  # noqa: E402, F401  (summary: read by the CI test)
    HOLDOUT_PREFIX,
    Row,
    against_targets,
    print_rows,
    summary,
    worst_three,
)
from core.dtypes import MpDtype  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.files.measurement import MEASURED_TORCH, plan_for_case, torch_release  # noqa: E402
from core.plan import Offload, PipelineSchedule, Plan, Strategy, TorchVersion  # noqa: E402

DATA = ROOT / "benchmarks" / "parallel"
# Percent, issue 15 item 5.
MEDIAN_TARGET = 2.0
WORST_TARGET = 5.0
HOLDOUT_FILE = "cases_holdout.json"
_ENUMS = {
    "strategy": Strategy,
    "offload": Offload,
    "schedule": PipelineSchedule,
    "fsdp_param_dtype": MpDtype,
    "fsdp_reduce_dtype": MpDtype,
}


def plan_for_parallel_case(
    case: dict[str, Any], model_config: dict[str, Any] | None, torch_version: TorchVersion = MEASURED_TORCH
) -> Plan:
    """The case's single-GPU plan (core.files.measurement) on its ``parallel`` layout, under the release it ran."""
    plan = plan_for_case(case, model_config, torch_version)
    fields = {k: (_ENUMS[k](v) if k in _ENUMS else v) for k, v in dict(case.get("parallel") or {}).items()}
    if "gradient_as_bucket_view" in case:  # a runner key the cases' parallel fields predate
        fields.setdefault("ddp_bucket_view", bool(case["gradient_as_bucket_view"]))
    return plan.with_parallel(**fields)


def _held_out_ids(data: Path) -> set[str]:
    path = data / HOLDOUT_FILE
    if not path.is_file():
        return set()
    return {c["id"] for c in json.loads(path.read_text()).get("cases", [])}


def held_out(data: Path = DATA) -> set[str]:
    """Ids of the held-out cases: marked ``"holdout": true`` (benchmarks/parallel/README.md),
    named ho-..., or listed in a cases_holdout.json."""
    ids = _held_out_ids(data)
    for path in (data / "measured").glob("*.json"):
        case = json.loads(path.read_text())["case"]
        if str(case["id"]).startswith(HOLDOUT_PREFIX) or case.get("holdout"):
            ids.add(str(case["id"]))
    return ids


def rows(data: Path = DATA) -> list[Row]:
    out = []
    for path in sorted((data / "measured").glob("*.json")):
        doc = json.loads(path.read_text())
        case = doc["case"]
        plan = plan_for_parallel_case(case, doc.get("model_config"), torch_release(doc))
        est = estimate(plan)
        case_id = str(case["id"])
        out.append(
            Row(
                case_id,
                int(doc["peak_allocated_bytes"]),
                est.tensor_peak_bytes,
                str(doc.get("peak_phase", "")),
                est.peak_phase,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the main cases miss a target")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables (for the README)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with cases.json and measured/")
    args = parser.parse_args(argv)
    table = rows(args.data)
    if not table:
        print(f"no measurements in {args.data / 'measured'}")
        return 1
    kept_apart = held_out(args.data)
    main_rows = [r for r in table if r.case_id not in kept_apart]
    held = [r for r in table if r.case_id in kept_apart]
    failed = False
    for title, group in (("main cases", main_rows), ("held-out cases (flagged holdout, not tuned on)", held)):
        if not group:
            continue
        print(f"\n{title}:" if not args.markdown else f"\n**{title}**\n")
        print_rows(group, args.markdown)
        line, met = against_targets(group, title.split(" (")[0], MEDIAN_TARGET, WORST_TARGET)
        print("\n" + line)
        print(worst_three(group))
        if group is main_rows and not met:
            failed = True
    if args.check and failed:
        print("per-rank accuracy targets missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

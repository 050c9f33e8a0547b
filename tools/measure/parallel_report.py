"""Print the measured per-rank peaks of benchmarks/parallel as Markdown tables.

    python -m tools.measure.parallel_report [--phases] [DIR]

Reads `<DIR>/cases.json` and `<DIR>/measured/<id>.json` (DIR defaults to
benchmarks/parallel). No torch needed. `--phases` adds, per case, the breakdown at the
peak of each phase of step 2 (what the rank holds then).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


def _engine(case: dict) -> str:
    if case["strategy"] == "ddp":
        cap = case.get("bucket_cap_mb")
        bits = [f"bucket {cap:g} MiB" if cap else "buckets default"]
        if case.get("gradient_as_bucket_view"):
            bits.append("grad view")
        return "DDP, " + ", ".join(bits)
    mp = case.get("mp_param_dtype"), case.get("mp_reduce_dtype")
    policy = f"mp {mp[0] or 'stored'}/{mp[1] or 'stored'}" if any(mp) else "no mp policy"
    reshard = "reshard" if case.get("reshard_after_forward", True) else "no reshard"
    units = ", carved ends" if case.get("fsdp_units") == "carved" else ""  # accelerate >= 1.14's units
    return f"FSDP2, {reshard}{units}, {policy}"


def _training(case: dict) -> str:
    bits = [case["method"], case.get("weight_dtype") or {"bf16": "bf16"}.get(case["precision"], "fp32")]
    if case["precision"] == "bf16-mixed":
        bits[-1] += "+autocast"
    bits.append(f"adamw-{case.get('optimizer_impl', 'foreach')}")
    if case.get("checkpointing"):
        bits.append("ckpt")
    bits.append(f"b{case['micro_batch']} s{case['seq_len']}")
    return " ".join(bits)


def _held(bd: dict) -> str:
    return ", ".join(f"{k} {v / GIB:.2f}" for k, v in bd.items() if v >= GIB / 200)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.measure.parallel_report", description=__doc__)
    ap.add_argument("folder", nargs="?", type=Path, default=REPO / "benchmarks" / "parallel")
    ap.add_argument("--phases", action="store_true")
    args = ap.parse_args(argv)
    cases = json.loads((args.folder / "cases.json").read_text())["cases"]
    print("| id | engine | world | model | training | peak bytes | GiB | at | held at the peak (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for case in cases:
        path = args.folder / "measured" / f"{case['id']}.json"
        if not path.exists():
            cells = (case["id"], _engine(case), case["world_size"], case["model"], _training(case), "not measured")
            print("| " + " | ".join(map(str, cells)) + " | | | |")
            continue
        res = json.loads(path.read_text())
        rows.append((case, res))
        hold = " (held out)" if case.get("holdout") else ""
        print(
            f"| {case['id']}{hold} | {_engine(case)} | {case['world_size']} | {case['model']} | {_training(case)} "
            f"| {res['peak_allocated_bytes']:,} | {res['peak_allocated_bytes'] / GIB:.2f} "
            f"| step {res['peak_step']} {res['peak_phase']} | {_held(res['breakdown_at_peak'])} |"
        )
    if args.phases:
        for case, res in rows:
            print(f"\n{case['id']}  (rank bytes of parameters: {res['rank_parameters']['bytes']:,})")
            for phase, bd in res.get("phase_breakdowns", {}).get("step2", {}).items():
                print(f"  step 2 {phase:9s} {sum(bd.values()) / GIB:7.2f} GiB: {_held(bd)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

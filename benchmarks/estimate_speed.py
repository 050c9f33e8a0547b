"""How long one estimate() takes (target: ≤ 0.5 ms median, issue 22). Prints median, p90 and p95.

    python benchmarks/estimate_speed.py [--rounds 5]

Times every catalogue model × method × accounting with a micro-batch of 4, in this thread's CPU
time (what the estimator costs) and in wall time (which on a busy machine also counts whatever
else runs). The checkout this script sits in goes first on ``sys.path``: a virtual environment's
editable install may point at another checkout, and an A/B between two trees must time each
tree's own ``core``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.catalogue import load_models
from core.errors import PlanError
from core.estimate import estimate
from core.format import sci
from core.plan import Accounting, Method, Plan, Workload


def _quantile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def _line(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    return (
        f"{name:>22}: median {statistics.median(ordered):.3f} ms, p90 {_quantile(ordered, 0.90):.3f} ms, "
        f"p95 {_quantile(ordered, 0.95):.3f} ms, max {ordered[-1]:.3f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="passes over every plan")
    args = parser.parse_args(argv)
    # Each method as the window and the CLI switch to it (IA3 keeps the feedforward modules among the targets);
    # a pair the plan refuses (LN tuning on a family whose norms PEFT does not target) is left out and counted.
    plans, refused = [], 0
    for entry in load_models():
        for method in Method:
            for accounting in Accounting:
                try:
                    plans.append(
                        Plan(model=entry.spec, accounting=accounting, workload=Workload(micro_batch=4)).with_method(
                            method, frozen_layers=1 if method is Method.FROZEN else 0
                        )
                    )
                except PlanError:
                    refused += 1
    for plan in plans:  # warm the catalogue cache and the code paths
        estimate(plan)
    wall: list[float] = []
    cpu: dict[Accounting, list[float]] = {accounting: [] for accounting in Accounting}
    for _ in range(args.rounds):
        sci.cache_clear()  # no help from formatting done for an earlier plan
        for plan in plans:
            start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            estimate(plan)
            cpu[plan.accounting].append((time.thread_time_ns() - start_cpu) / 1e6)
            wall.append((time.perf_counter_ns() - start_wall) / 1e6)
    print(
        f"estimate(): {len(wall)} calls over {len(plans)} plans ({refused} model × method pairs the plan refuses "
        f"left out), from {Path(__file__).resolve().parents[1]}"
    )
    print(_line("thread CPU", [t for samples in cpu.values() for t in samples]))
    for accounting, samples in cpu.items():
        print(_line(f"thread CPU, {accounting.value}", samples))
    print(_line("wall", wall))


if __name__ == "__main__":
    main()

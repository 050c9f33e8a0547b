"""How long one estimate() takes (target: median at most 0.5 ms). Prints median and p95.

Also prints, per accounting (lesson / detailed), the median and p90 of thread CPU time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

# Time this checkout's core/, not whatever an editable install of the package points at.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.catalogue import load_models
from core.estimate import estimate
from core.format import sci
from core.plan import Accounting, Method, Plan, Workload


def _plans() -> list[Plan]:
    plans = []
    for entry in load_models():
        for method in Method:
            for accounting in Accounting:
                plans.append(
                    Plan(
                        model=entry.spec,
                        method=method,
                        accounting=accounting,
                        workload=Workload(micro_batch=4),
                        frozen_layers=1 if method is Method.FROZEN else 0,
                    )
                )
    return plans


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[int(len(ordered) * q)]


def main() -> None:
    plans = _plans()
    for plan in plans:  # warm the catalogue cache and the code paths
        estimate(plan)
    wall: list[float] = []
    cpu: list[float] = []
    by_accounting: dict[str, list[float]] = {a.value: [] for a in Accounting}
    for _ in range(5):
        sci.cache_clear()  # no help from formatting done for an earlier plan
        for plan in plans:
            start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            estimate(plan)
            spent = (time.thread_time_ns() - start_cpu) / 1e6
            wall.append((time.perf_counter_ns() - start_wall) / 1e6)
            cpu.append(spent)
            by_accounting[plan.accounting.value].append(spent)
    print(f"estimate(): {len(wall)} calls over {len(plans)} plans ({sys.modules['core'].__file__})")
    # CPU time of this thread is what the estimator costs; wall time also counts whatever
    # else the machine is doing (on a busy 2-core machine that dominates the tail).
    for name, samples in (("thread CPU", cpu), ("wall", wall)):
        print(
            f"{name:>10}: median {statistics.median(samples):.3f} ms, "
            f"p95 {_quantile(samples, 0.95):.3f} ms, max {max(samples):.3f} ms"
        )
    for name, samples in by_accounting.items():
        print(
            f"{name:>10}: thread CPU median {statistics.median(samples):.3f} ms, "
            f"p90 {_quantile(samples, 0.90):.3f} ms ({len(samples)} calls)"
        )


if __name__ == "__main__":
    main()

"""How long one estimate() takes (target: well under 0.2 ms). Prints median and p95."""

from __future__ import annotations

import statistics
import time

from core.catalogue import load_models
from core.estimate import estimate
from core.format import sci
from core.plan import Accounting, Method, Plan, Workload


def main() -> None:
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
    for plan in plans:  # warm the catalogue cache and the code paths
        estimate(plan)
    wall, cpu = [], []
    for _ in range(5):
        sci.cache_clear()  # no help from formatting done for an earlier plan
        for plan in plans:
            start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            estimate(plan)
            cpu.append((time.thread_time_ns() - start_cpu) / 1e6)
            wall.append((time.perf_counter_ns() - start_wall) / 1e6)
    print(f"estimate(): {len(wall)} calls over {len(plans)} plans")
    # CPU time of this thread is what the estimator costs; wall time also counts whatever
    # else the machine is doing (on a busy 2-core machine that dominates the tail).
    for name, samples in (("thread CPU", cpu), ("wall", wall)):
        samples.sort()
        p95 = samples[int(len(samples) * 0.95)]
        print(f"{name:>10}: median {statistics.median(samples):.3f} ms, p95 {p95:.3f} ms, max {samples[-1]:.3f} ms")


if __name__ == "__main__":
    main()

"""How long one estimate() takes (target: well under 0.2 ms). Prints median and p95."""

from __future__ import annotations

import statistics
import time

from core.catalogue import load_models
from core.estimate import estimate
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
    samples = []
    for _ in range(5):
        for plan in plans:
            start = time.perf_counter_ns()
            estimate(plan)
            samples.append((time.perf_counter_ns() - start) / 1e6)
    samples.sort()
    p95 = samples[int(len(samples) * 0.95)]
    print(f"estimate(): {len(samples)} calls over {len(plans)} plans")
    print(f"median {statistics.median(samples):.3f} ms, p95 {p95:.3f} ms, max {samples[-1]:.3f} ms")


if __name__ == "__main__":
    main()

"""The one "largest n that fits" solver, for every limit the planner reports.

Micro-batch, sequence length, concurrent requests and context length all ask the same
question of a monotone test (more never needs less memory): the largest n in [1, high] for
which ``fits(n)``. Callers with a closed-form estimate pass it as ``guess``; an exact guess
costs two tests, a wrong one a gallop and a bisection from there.
"""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting(fits: Callable[[int], bool], high: int, guess: float | None = None) -> int:
    """Largest n in [1, high] with ``fits(n)`` for a monotone ``fits``; 0 when even 1 fails."""
    if high < 1:
        return 0
    start = 1 if guess is None else int(max(1, min(high, guess)))
    # Bracket the answer: fits(lo) holds (lo = 0 stands for "nothing tried fits"), fits(hi) fails
    # (hi = high + 1 stands for "past the search").
    step = 1
    if fits(start):
        lo, hi = start, high + 1
        while lo < high:
            probe = min(high, lo + step)
            if not fits(probe):
                hi = probe
                break
            lo, step = probe, step * 2
        else:
            return lo
    else:
        lo, hi = 0, start
        while hi > 1:
            probe = max(1, hi - step)
            if fits(probe):
                lo = probe
                break
            hi, step = probe, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo

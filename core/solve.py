"""The one "largest n that fits" solver."""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting(fits: Callable[[int], bool], high: int, low: int = 0) -> int:
    """The largest n in [low, high] with ``fits(n)``, or ``low - 1`` when none fits.

    ``fits`` must be monotone (true up to some n, false after): more requests, more
    tokens or a larger batch never need less memory. Doubling then bisection: about
    2·log2(high) calls, so any cost model stays cheap to invert.
    """
    if high < low or not fits(low):
        return low - 1
    good, step = low, 1
    while good + step <= high and fits(good + step):
        good += step
        step *= 2
    bad = min(high + 1, good + step)
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good

"""The one "largest n that fits" solver."""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting(fits: Callable[[int], bool], high: int, low: int = 0, guess: float | None = None) -> int:
    """The largest n in [low, high] with ``fits(n)``, or ``low - 1`` when none fits.

    ``fits`` must be monotone (true up to some n, false after): more requests, more
    tokens or a larger batch never need less memory. From ``guess`` (or ``low``) it gallops
    up or down, then bisects: a few calls when the guess is close (a closed form that is
    exact up to rounding), about 2·log2(high) without one.
    """
    if high < low:
        return low - 1
    start = low if guess is None else min(max(int(guess), low), high)
    if fits(start):
        good, step = start, 1
        while good + step <= high and fits(good + step):
            good += step
            step *= 2
        bad = min(high + 1, good + step)
    else:
        bad, step = start, 1
        while bad - step >= low and not fits(bad - step):
            bad -= step
            step *= 2
        if bad - step < low:
            if not fits(low):
                return low - 1
            good = low
        else:
            good = bad - step
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good

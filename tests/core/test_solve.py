"""The one "largest n that fits" solver, against a brute-force answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.solve import largest_fitting


@given(
    threshold=st.integers(min_value=0, max_value=5000),
    high=st.integers(min_value=0, max_value=5000),
    guess=st.none() | st.floats(min_value=-10, max_value=10_000, allow_nan=False),
)
def test_answer_is_the_largest_that_fits(threshold: int, high: int, guess: float | None) -> None:
    calls: list[int] = []

    def fits(n: int) -> bool:
        assert 1 <= n <= high, "the solver only asks about [1, high]"
        calls.append(n)
        return n <= threshold

    assert largest_fitting(fits, high, guess) == min(threshold, high)


def test_an_exact_guess_costs_two_tests() -> None:
    calls: list[int] = []

    def fits(n: int) -> bool:
        calls.append(n)
        return n <= 1234

    assert largest_fitting(fits, 10**8, guess=1234.4) == 1234
    assert calls == [1234, 1235]

"""The identity memo a sizing's count-independent terms are kept in."""

from __future__ import annotations

from gpualloc.forecasting import memo
from gpualloc.forecasting.memo import by_identity


def test_it_remembers_by_identity_and_forgets_the_oldest():
    calls: list[object] = []

    @by_identity
    def work(x: tuple[int, ...]) -> int:
        calls.append(x)
        return sum(x)

    a, b = (1, 2), tuple([1, 2])  # equal, distinct objects
    assert work(a) == work(a) == 3 and calls == [a]
    assert work(b) == 3 and len(calls) == 2  # equal values are not taken for the same argument
    for n in range(memo.KEPT):
        work(tuple([n, n]))
    work(a)
    assert len(calls) == 3 + memo.KEPT  # `a` was forgotten, worked out again

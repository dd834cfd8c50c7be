"""How many examples a property test runs in the tier at hand (profiles in tests/conftest.py)."""

from __future__ import annotations

from hypothesis import settings

LEAST = 5  # a quick tier still tries a handful of drawn cases


def examples(full: int) -> int:
    """`full` under the `full` profile (`make test`, CI); under a smaller one (`make check`'s
    `check`) the share of `full` that profile's count is of the full one's, at least `LEAST`, so a
    test asking for ten times the usual count keeps asking for ten times it in every tier."""
    share = settings.default.max_examples / settings.get_profile("full").max_examples
    return min(full, max(LEAST, round(full * share)))

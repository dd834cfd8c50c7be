"""The cold forecasts beside published measured points (benchmarks/measured/points.json)."""

from __future__ import annotations

import pytest

from gpualloc.benchmarks.measured_points import check_all, load_points, table

# A textbook accounting of memory and FLOPs lands within these factors of real runs (the learned
# corrections fit the rest from completions); outside them a formula is broken, not imprecise.
MEMORY_FACTORS = (0.4, 2.5)


@pytest.fixture(scope="module")
def checked():
    return check_all()


def test_every_point_names_its_source_and_configuration() -> None:
    points = load_points()
    assert len({p.id for p in points}) == len(points) >= 12
    assert {p.measure for p in points} == {"peak_gb", "fits", "oom", "hours"}
    assert all(p.url.startswith("https://") and p.source for p in points)


def test_a_configuration_that_ran_out_of_memory_is_not_started_there(checked) -> None:
    oom = [c for c in checked if c.point.measure == "oom"]
    assert oom and all(c.covered for c in oom), [(c.point.id, c.gpus) for c in oom]


def test_a_configuration_that_fitted_is_given_at_most_its_gpus(checked) -> None:
    """Except where the run relied on what the physics does not model (it says what)."""
    fits = [c for c in checked if c.point.measure == "fits"]
    modelled = [c for c in fits if c.point.unmodelled is None]
    assert fits and all(c.covered for c in modelled), [(c.point.id, c.gpus) for c in modelled]


def test_memory_forecasts_are_within_a_formula_error_of_published_peaks(checked) -> None:
    low, high = MEMORY_FACTORS
    ratios = {c.point.id: c.ratio for c in checked if c.point.measure == "peak_gb"}
    assert ratios and all(r is not None and low <= r <= high for r in ratios.values()), ratios


def test_the_table_names_every_point_and_those_forecast_under_it(checked) -> None:
    text = table(checked)
    assert all(c.point.id in text for c in checked)
    under = [c.point.id for c in checked if not c.covered]
    assert text.splitlines()[-1].endswith(", ".join(under) or "none")

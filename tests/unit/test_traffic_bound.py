"""The bound on the project's serving streams: what even a forecaster that knew each hour's level
and the within-hour law must provision, against the forecaster's own figures."""

from __future__ import annotations

import pytest

from gpualloc.benchmarks.traffic_bound import LEVELS, run
from gpualloc.forecasting.backtest import traffic_backtest
from gpualloc.generators.observation_rates import rates_trace
from gpualloc.schemas.events import parse_event


@pytest.mark.slow
def test_the_bound_trades_gpus_for_coverage_and_is_no_worse_than_the_forecaster():
    bound = run(seed=3, rate="hourly", weeks=3)
    ours = traffic_backtest([parse_event(e) for e in rates_trace(3, 3, "hourly")])
    for app, b in bound.items():
        levels = [b["by_level"][f"{q:g}"] for q in LEVELS]
        assert all(a["under_share"] >= c["under_share"] for a, c in zip(levels, levels[1:])), app
        assert all(a["over_share"] <= c["over_share"] for a, c in zip(levels, levels[1:])), app
        best, forecast = b["least_over_at_target"], ours[f"default/{app}"]["quantiles"]["0.95"]
        assert best["under_share"] <= 0.1 and forecast["under_share"] <= 0.1, app
        assert best["over_share"] <= forecast["over_share"], (app, best, forecast)
    # bursts at random minutes: 90% of a small app's hours covered costs far more than 25% over
    assert bound["spiky"]["least_over_at_target"]["over_share"] > 0.25

"""An app's demand over the window reads each hour's forecast once, whatever the steps in it."""

from __future__ import annotations

from gpualloc.solvers.planner.records import AppSpec, AppState, PoolConfig
from gpualloc.solvers.planner.window import demands


class CountingForecasts:
    """A forecaster whose demand at hour h is 10 + h (at every quantile), counting its reads."""

    def __init__(self) -> None:
        self.reads: list[int] = []

    def demands(self, app_id, hour, quantiles, profile=None):
        self.reads.append(hour)
        return [10 + hour + k for k, _ in enumerate(quantiles)]


def test_thirty_minute_steps_read_each_hour_once_and_give_it_to_both_its_steps():
    forecasts = CountingForecasts()
    app = AppState(AppSpec("rt", 5.0, profile=[4] * 24), observed={3: 7})
    cfg = PoolConfig(gpus=64, horizon=8, step_minutes=30)
    curves = demands(app, cfg, 2, forecasts, lambda step: step // 2, (0.5, 0.9))  # type: ignore[arg-type]
    assert forecasts.reads == [1, 2, 3, 4]  # steps 2..9 begin in hours 1..4; step 3 was observed
    assert curves == [
        [11, 7, 12, 12, 13, 13, 14, 14],
        [12, 7, 13, 13, 14, 14, 15, 15],
    ]

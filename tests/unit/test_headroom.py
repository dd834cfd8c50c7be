"""Each app's demand quantile from the objective's prices (the newsvendor's critical ratio)."""

from __future__ import annotations

from support.builders import T0, ev

from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.planner.headroom import HIGHEST, LOWEST, displaced_value, priced
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import AppSpec, JobSpec


def job(priority: float, gpus: int, duration: int) -> JobSpec:
    return JobSpec(f"j{priority}-{gpus}", "training", priority, gpus, duration, 0)


def test_the_quantile_balances_a_short_gpu_step_against_an_idle_one():
    queue = [job(2, 4, 5), job(6, 2, 5)]  # 20 GPU-steps at 2, 10 at 6
    assert displaced_value(queue) == (2 * 20 + 6 * 10) / 30
    room = priced(AppSpec("chat", priority=1), penalty=8.0, displaced=displaced_value(queue))
    assert room.quantile == round(8 / (8 + 10 / 3), 4)
    assert room.why.startswith("planned at demand quantile 0.71: a GPU-step short costs 8")


def test_nothing_waiting_or_nothing_at_stake_take_the_bounds():
    assert priced(AppSpec("a", priority=5), 8.0, displaced_value([])).quantile == HIGHEST
    assert priced(AppSpec("a", priority=0), 8.0, 4.0).quantile == LOWEST
    assert priced(AppSpec("a", priority=5), 8.0, 1e-6).quantile == HIGHEST


def test_commits_say_each_apps_quantile_and_why():
    config = {"gpus": 8, "gpus_per_node": 8, "horizon": 4, "step_minutes": 60}
    for setting, expected in (
        (True, "planned at demand quantile 0.99: a GPU-step short costs 24"),  # nothing waits: the top
        (False, "planned at demand quantile 0.99 (forecast.realtime_quantile)"),
    ):
        pool = Pool(forecast=ForecastSettings(realtime_priced=setting))
        pool.apply([ev("pool.configured", config), ev("app.registered", {"id": "chat", "priority": 3})], T0)
        assert pool.commit().commit.reasons["chat"].startswith(expected)

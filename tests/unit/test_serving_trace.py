"""The serving trace generator: its events are valid contract input, reproducible from the seed,
and carry the features a measurement of real-time serving beside batch work relies on."""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import pytest

from gpualloc.generators.serving import T0, serving_trace
from gpualloc.schemas.events import parse_event

SEED, DAYS, GPUS = 7, 3, 32
Trace = list[dict[str, Any]]


@pytest.fixture(scope="module")
def trace() -> Trace:
    return serving_trace(SEED, days=DAYS, gpus=GPUS)


def hours_in(event: dict[str, Any]) -> float:
    return (datetime.fromisoformat(event["occurred_at"]) - T0) / timedelta(hours=1)


def of_type(trace: Trace, kind: str) -> list[dict[str, Any]]:
    return [e for e in trace if e["type"] == kind]


def hourly_gpus(trace: Trace) -> dict[str, list[float]]:
    """Per app, the median GPUs its observations ask for in each hour (robust to one glitch)."""
    rps = {e["payload"]["id"]: e["payload"]["rps_per_gpu"] for e in of_type(trace, "app.registered")}
    seen: dict[tuple[str, int], list[float]] = defaultdict(list)
    for e in of_type(trace, "traffic.observed"):
        seen[e["payload"]["app"], int(hours_in(e))].append(e["payload"]["requests_per_s"] / rps[e["payload"]["app"]])
    return {app: [statistics.median(seen[app, h]) for h in range(DAYS * 24)] for app in rps}


def test_every_event_parses_as_contract_input(trace: Trace) -> None:
    for event in trace:
        envelope, _ = parse_event(event)
        assert envelope.pool == "default" and envelope.schema_version == 1
        assert envelope.occurred_at.utcoffset() is not None
    assert len({e["event_id"] for e in trace}) == len(trace)
    pool = trace[0]
    assert pool["type"] == "pool.configured" and datetime.fromisoformat(pool["occurred_at"]) == T0
    assert pool["payload"].items() >= {"gpus": GPUS, "gpus_per_node": 8, "horizon": 24, "gpu_type": "h100-80gb"}.items()
    apps = [e["payload"] for e in trace[1:4]]
    assert all(e["type"] == "app.registered" for e in trace[1:4]) and len(of_type(trace, "app.registered")) == 3
    for app in apps:
        assert 4 <= app["priority"] <= 9 and app["min_gpus"] in (1, 2) and 2 <= app["swap_cap"] <= 4
        assert 50 <= app["rps_per_gpu"] <= 200 and len(app["profile"]) == 24


def test_events_are_in_time_order_within_the_trace(trace: Trace) -> None:
    times = [hours_in(e) for e in trace]
    assert times == sorted(times)
    assert times[0] == 0 and times[-1] < DAYS * 24


def test_the_seed_reproduces_the_trace(trace: Trace) -> None:
    assert serving_trace(SEED, days=DAYS, gpus=GPUS) == trace
    assert serving_trace(SEED + 1, days=DAYS, gpus=GPUS) != trace


def test_traffic_is_observed_several_times_an_hour_at_irregular_minutes(trace: Trace) -> None:
    observed = of_type(trace, "traffic.observed")
    minutes = {datetime.fromisoformat(e["occurred_at"]).minute for e in observed}
    assert 0 not in minutes and len(minutes) > 30
    per_hour: dict[tuple[str, int], int] = defaultdict(int)
    for e in observed:
        per_hour[e["payload"]["app"], int(hours_in(e))] += 1
    assert len(per_hour) == 3 * DAYS * 24 and set(per_hour.values()) <= {3, 4, 5, 6}


def test_traffic_has_one_observation_spikes(trace: Trace) -> None:
    series: dict[str, list[float]] = defaultdict(list)
    for e in of_type(trace, "traffic.observed"):
        series[e["payload"]["app"]].append(e["payload"]["requests_per_s"])
    for app, values in series.items():
        spikes = [k for k in range(1, len(values) - 1) if values[k] >= 3 * max(values[k - 1], values[k + 1])]
        assert spikes, f"{app} has no one-observation spike"


def test_traffic_has_multi_hour_bursts(trace: Trace) -> None:
    """Some app runs at 1.4x or more its usual level for that hour of day for two hours on end."""
    longest = 0
    for hourly in hourly_gpus(trace).values():
        usual = [statistics.median(hourly[d * 24 + h] for d in range(DAYS)) for h in range(24)]
        run = 0
        for h, gpus in enumerate(hourly):
            run = run + 1 if gpus >= 1.4 * usual[h % 24] else 0
            longest = max(longest, run)
    assert longest >= 2


def test_apps_peak_near_half_the_pool_and_batch_oversubscribes_the_rest(trace: Trace) -> None:
    """On a usual day (the median of the days, hour by hour) the apps together peak near half the
    pool; the batch work asks 1.2-2x the GPU-hours they leave within the trace."""
    hourly = hourly_gpus(trace)
    usual_day = [
        sum(statistics.median(app[d * 24 + h] for d in range(DAYS)) for app in hourly.values()) for h in range(24)
    ]
    assert 0.4 * GPUS <= max(usual_day) <= 0.65 * GPUS  # a flash crowd on one day lifts it no more
    together = [sum(app[h] for app in hourly.values()) for h in range(DAYS * 24)]
    left_over = sum(max(0.0, GPUS - t) for t in together)
    jobs = of_type(trace, "job.submitted")
    work = sum(e["payload"]["gpus"] * min(e["payload"]["actual_duration"], DAYS * 24 - hours_in(e)) for e in jobs)
    assert 1.2 <= work / left_over <= 2.0


def test_batch_jobs_arrive_by_day_in_power_of_two_blocks(trace: Trace) -> None:
    jobs = of_type(trace, "job.submitted")
    assert {e["payload"]["gpus"] for e in jobs} <= {1, 2, 4, 8, 16}
    assert {e["payload"]["kind"] for e in jobs} == {"training", "batch_inference", "quantization"}
    assert {e["payload"]["priority"] for e in jobs} <= set(range(1, 10))
    night = sum(hours_in(e) % 24 < 6 for e in jobs) / 6
    day = sum(9 <= hours_in(e) % 24 < 17 for e in jobs) / 8
    assert night < day / 3


def test_actual_durations_are_heavy_tailed(trace: Trace) -> None:
    ratios = [e["payload"]["actual_duration"] / e["payload"]["duration"] for e in of_type(trace, "job.submitted")]
    assert sum(0.7 <= r <= 1.3 for r in ratios) > len(ratios) / 2
    assert any(r >= 3 for r in ratios) and any(r <= 0.5 for r in ratios)


def test_some_jobs_are_cancelled_after_submission(trace: Trace) -> None:
    submitted = {e["payload"]["id"]: hours_in(e) for e in of_type(trace, "job.submitted")}
    cancelled = of_type(trace, "job.cancelled")
    assert 0.03 * len(submitted) <= len(cancelled) <= 0.08 * len(submitted)
    assert all(hours_in(e) > submitted[e["payload"]["id"]] for e in cancelled)


def test_a_node_goes_down_on_day_two_and_comes_back(trace: Trace) -> None:
    status = [(hours_in(e), e["payload"]["node"], e["payload"]["state"]) for e in of_type(trace, "node.status")]
    (down_at, node), *others = [(t, n) for t, n, state in status if state == "down"]
    assert not others and 24 <= down_at < 48
    back = [t for t, n, state in status if n == node and state == "up" and t > down_at]
    assert back and 3 <= back[0] - down_at <= 8

"""The synthetic ground-truth generators (generators/synthetic*.py, docs/synthetic-data.md):
deterministic, contract-valid, and true to the documented formulas and noise."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from datetime import datetime

import pytest

from gpualloc.generators import synthetic_jobs as sj
from gpualloc.generators import synthetic_traffic as st
from gpualloc.generators.synthetic import (
    duration_noise_floor,
    forecast_trace,
    job_trace,
    noise_floor_last,
    traffic_trace,
)
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.features import FEATURES, QUANT_ALGORITHMS, TRAINING_VARIANTS

GENERATORS = {
    "jobs": lambda seed: job_trace(seed, jobs=80)[0],
    "traffic": lambda seed: traffic_trace(seed, weeks=1),
    "forecast": lambda seed: forecast_trace(seed, weeks=1),
}


@pytest.fixture(scope="module")
def jobs() -> tuple[list[dict], dict[str, dict]]:
    return job_trace()


@pytest.fixture(scope="module")
def traffic() -> tuple[list[dict], st.TrafficPlan]:
    return traffic_trace(), st.traffic_plan()


def _when(event: dict) -> datetime:
    return datetime.fromisoformat(event["occurred_at"])


def _step(event: dict, step_minutes: int = 60) -> int:
    return int((_when(event) - st.T0).total_seconds() // (step_minutes * 60))


@pytest.mark.parametrize("name", GENERATORS)
def test_deterministic_by_seed(name):
    make = GENERATORS[name]
    assert json.dumps(make(5)) == json.dumps(make(5))
    assert json.dumps(make(5)) != json.dumps(make(6))


@pytest.mark.parametrize("name", GENERATORS)
def test_events_parse_unique_and_sorted(name):
    events = GENERATORS[name](2)
    for event in events:
        parse_event(event)
    assert len({e["event_id"] for e in events}) == len(events)
    times = [_when(e) for e in events]
    assert times == sorted(times)
    assert events[0]["type"] == "pool.configured" and times[0] == st.T0


def test_job_trace_covers_every_variant_and_algorithm(jobs):
    events, truth = jobs
    assert {t["variant"] for t in truth.values() if "variant" in t} == set(TRAINING_VARIANTS)
    assert {t["algorithm"] for t in truth.values() if "algorithm" in t} == set(sj.GENERATED_ALGORITHMS)
    assert set(sj.GENERATED_ALGORITHMS) <= set(QUANT_ALGORITHMS)
    pools = {e["pool"]: e["payload"]["gpu_type"] for e in events if e["type"] == "pool.configured"}
    assert len(set(pools.values())) == 3
    submitted = [e for e in events if e["type"] == "job.submitted"]
    assert len(submitted) == 600
    assert 0.65 < sum(e["payload"]["kind"] == "training" for e in submitted) / 600 < 0.85
    for e in submitted:
        assert "gpus" not in e["payload"] and "duration" not in e["payload"]
        assert "gpus" not in e["payload"]["features"]


def test_completion_reports_the_truth(jobs):
    events, truth = jobs
    submitted = {e["payload"]["id"]: e for e in events if e["type"] == "job.submitted"}
    completed = [e for e in events if e["type"] == "job.completed"]
    assert len(completed) == len(submitted)
    for done in completed:
        job = submitted[done["payload"]["id"]]
        used, t = done["payload"]["used"], truth[done["payload"]["id"]]
        assert done["pool"] == job["pool"]
        assert used == {
            "gpus": t["gpus"],
            "peak_memory_gb": t["peak_memory_gb"],
            "duration": job["payload"]["actual_duration"],
        }
        ran = (_when(done) - _when(job)).total_seconds() / (30 * 60)
        assert ran >= used["duration"]


def test_true_gpus_is_the_smallest_power_of_two_that_fits(jobs):
    events, truth = jobs
    memory = {e["pool"]: e["payload"]["gpu_memory_gb"] for e in events if e["type"] == "pool.configured"}
    halves_checked = 0
    for e in events:
        if e["type"] != "job.submitted":
            continue
        p, t = e["payload"], truth[e["payload"]["id"]]
        f = FEATURES[p["kind"]].model_validate(p["features"])
        n = t["gpus"]
        assert n & (n - 1) == 0 and 1 <= n <= 64
        peak = sj.peak_memory_gb(p["kind"], f, t["gpu_type"], n, t["memory_noise"])
        assert peak <= memory[e["pool"]]
        assert peak == pytest.approx(t["peak_memory_gb"], abs=1e-3)
        floor = f.tensor_parallel * f.pipeline_parallel if p["kind"] == "training" else 1
        if n // 2 >= floor:
            assert sj.peak_memory_gb(p["kind"], f, t["gpu_type"], n // 2, t["memory_noise"]) > memory[e["pool"]]
            halves_checked += 1
        if p["kind"] == "quantization" and f.algorithm == "gguf_k":
            assert n == 1
    assert halves_checked > 50


def test_expected_steps_follow_the_documented_formula(jobs):
    events, truth = jobs
    for e in events[:200]:
        if e["type"] == "job.submitted":
            p, t = e["payload"], truth[e["payload"]["id"]]
            f = FEATURES[p["kind"]].model_validate(p["features"])
            hours = sj.expected_hours(p["kind"], f, t["gpu_type"], t["gpus"])
            assert t["expected_steps"] == pytest.approx(hours * 2)


def test_duration_noise_has_the_documented_sigma(jobs):
    events, truth = jobs
    logs = [
        math.log(e["payload"]["actual_duration"] / truth[e["payload"]["id"]]["expected_steps"])
        for e in events
        if e["type"] == "job.submitted" and truth[e["payload"]["id"]]["expected_steps"] >= 20
    ]
    assert len(logs) > 100
    assert abs(statistics.pstdev(logs) - sj.DURATION_SIGMA) < 0.025
    assert abs(statistics.mean(logs)) < 0.05  # ceil adds at most 1/20


def test_durations_mostly_in_range(jobs):
    _, truth = jobs
    steps = sorted(t["expected_steps"] for t in truth.values())
    assert steps[0] >= sj.HOURS[0] * 2 and steps[-1] <= sj.HOURS[1] * 2
    assert sum(2 <= x <= 150 for x in steps) / len(steps) > 0.85


def test_noise_floor(jobs):
    events, truth = jobs
    floor = duration_noise_floor(events, truth)
    assert 0.10 <= floor <= 0.14  # sigma 0.15: 0.674 x 0.15 = 0.10, rounding adds the rest
    assert 0.08 <= noise_floor_last(events, truth) <= 0.17
    hand = [
        {
            "type": "job.submitted",
            "occurred_at": f"2026-01-05T0{i}:00:00Z",
            "payload": {"id": f"j{i}", "actual_duration": 10},
        }
        for i in range(3)
    ]
    expected = {"j0": {"expected_steps": 9.0}, "j1": {"expected_steps": 12.0}, "j2": {"expected_steps": 10.0}}
    assert duration_noise_floor(hand, expected) == pytest.approx(0.1)
    assert noise_floor_last(hand, expected, share=0.34) == pytest.approx(0.0)


def _observed(events: list[dict]) -> dict[str, dict[int, float]]:
    """Per app, step -> GPUs observed (the contract's ceil(rps / rps_per_gpu)) and rps."""
    rate = {e["payload"]["id"]: e["payload"]["rps_per_gpu"] for e in events if e["type"] == "app.registered"}
    out: dict[str, dict[int, float]] = {a: {} for a in rate}
    for e in events:
        if e["type"] == "traffic.observed":
            out[e["payload"]["app"]][_step(e)] = e["payload"]["requests_per_s"] / rate[e["payload"]["app"]]
    return out


def _by_hour(seen: dict[int, float], plan: st.TrafficPlan, app_id: str, weekend: bool) -> list[float]:
    """Median observed GPUs by hour of day over weekdays or weekend days (holidays, bursts and
    glitches left out)."""

    def ordinary(s: int) -> bool:
        return (
            s // 24 not in plan.holidays
            and (app_id, s) not in plan.outliers
            and not any(b[0] == app_id and b[1] <= s < b[1] + b[2] for b in plan.bursts)
        )

    return [
        statistics.median(v for s, v in seen.items() if s % 24 == h and (s // 24 % 7 >= 5) == weekend and ordinary(s))
        for h in range(24)
    ]


def test_weekday_and_weekend_differ(traffic):
    events, plan = traffic
    seen = _observed(events)
    for app in plan.apps:
        weekday, weekend = (_by_hour(seen[app.id], plan, app.id, w) for w in (False, True))
        assert max(abs(a - b) / a for a, b in zip(weekday, weekend)) > 0.2
        assert max(weekend) < max(weekday)
        if app.archetype == "business":  # the weekend is lower and later
            assert sum(weekend[9:17]) < 0.5 * sum(weekday[9:17])
            assert weekend.index(max(weekend)) >= weekday.index(max(weekday)) + 2


def test_holidays_are_at_weekend_level(traffic):
    events, plan = traffic
    assert len(plan.holidays) == 2 and all(d % 7 < 5 and d >= 7 for d in plan.holidays)
    business = next(a for a in plan.apps if a.archetype == "business")
    seen = _observed(events)[business.id]
    for day in plan.holidays:
        holiday = statistics.median(seen[s] for s in range(day * 24 + 10, day * 24 + 16) if s in seen)
        before = statistics.median(seen[s] for s in range((day - 7) * 24 + 10, (day - 7) * 24 + 16) if s in seen)
        assert holiday < 0.5 * before


def test_bursts_outliers_and_noise(traffic):
    events, plan = traffic
    seen = _observed(events)
    by_id = {a.id: a for a in plan.apps}
    assert len(plan.bursts) >= len(plan.apps)
    for app_id, first, length, factor in plan.bursts:
        assert 2 <= length <= 6 and 1.5 <= factor <= 2.5
        app = by_id[app_id]
        lifted = [
            seen[app_id][s] / (st.expected_level(plan, app, s) / factor)
            for s in range(first, first + length)
            if s in seen[app_id] and (app_id, s) not in plan.outliers
        ]
        assert not lifted or statistics.median(lifted) > 1.3
    for (app_id, step), factor in plan.outliers.items():
        assert seen[app_id][step] / st.expected_level(plan, by_id[app_id], step) > 3
    logs = [
        math.log(v / st.expected_level(plan, by_id[a], s))
        for a, steps in seen.items()
        for s, v in steps.items()
        if (a, s) not in plan.outliers
    ]
    assert abs(statistics.pstdev(logs) - st.NOISE_SIGMA) < 0.01


def test_gaps_and_outage(traffic):
    events, plan = traffic
    seen = _observed(events)
    first, length = plan.outage
    assert 6 <= length <= 12
    for app in plan.apps:
        assert not any(first <= s < first + length for s in seen[app.id])
        assert first - 1 in seen[app.id] or (app.id, first - 1) in plan.gaps
    assert len(plan.gaps) == 2 * 5 * len(plan.apps)
    assert all(s not in seen[a] for a, s in plan.gaps)
    missing = {(a.id, s) for a in plan.apps for s in range(plan.steps) if plan.missing(a.id, s)}
    assert sum(len(v) for v in seen.values()) == plan.steps * len(plan.apps) - len(missing)


def test_demand_levels_and_profiles(traffic):
    events, plan = traffic
    calm = st.expected_demand(replace(plan, bursts=()))
    total = [sum(v[s] for v in calm.values()) for s in range(plan.steps)]
    assert 64 / 4 <= max(total) <= 64 / 2
    seen = _observed(events)
    for app in plan.apps:
        gpus = sorted(math.ceil(v) for v in seen[app.id].values())
        assert 1 <= gpus[len(gpus) // 20] and gpus[19 * len(gpus) // 20] <= 25
        week0 = [st.expected_level(plan, app, h) for h in range(24)]  # Monday, week 0
        assert not 0.88 < sum(app.profile) / sum(week0) < 1.12
    registered = [e["payload"] for e in events if e["type"] == "app.registered"]
    assert all(50 <= r["rps_per_gpu"] <= 200 and len(r["profile"]) == 24 for r in registered)
    drifts = sorted(a.drift for a in plan.apps)
    assert drifts[0] < 0 < drifts[-1]


def test_forecast_trace_jobs_carry_their_truth():
    events = forecast_trace(seed=1, weeks=1)
    assert {e["pool"] for e in events} == {"default"}
    assert not [e for e in events if e["type"] == "job.completed"]
    pool = events[0]["payload"]
    assert pool["gpu_type"] == "h100-80gb" and pool["gpu_memory_gb"] == 80 and pool["horizon"] == 24
    submitted = [e for e in events if e["type"] == "job.submitted"]
    for e in submitted:
        p = e["payload"]
        assert p["duration"] == p["actual_duration"] == p["actual_used"]["duration"]
        assert p["gpus"] == p["actual_used"]["gpus"] <= pool["gpus"] // 2 and p["gpus"] & (p["gpus"] - 1) == 0
        assert p["features"]
    office = sum(_when(e).weekday() < 5 and 9 <= _when(e).hour < 18 for e in submitted)
    assert office / len(submitted) > 0.5
    plan = st.traffic_plan(1, 1, 3, 60, 64)
    levels = st.expected_demand(plan)
    free = sum(max(0, 64 - sum(math.ceil(v[s]) for v in levels.values())) for s in range(plan.steps))
    offered = sum(e["payload"]["gpus"] * e["payload"]["duration"] for e in submitted)
    assert 1.2 <= offered / free <= 1.5


def test_default_forecast_trace_size():
    submitted = [e for e in forecast_trace() if e["type"] == "job.submitted"]
    assert 300 <= len(submitted) <= 3000
    gpus = [e["payload"]["gpus"] for e in submitted]
    assert sum(g <= 16 for g in gpus) / len(gpus) > 0.9
    assert {e["payload"]["kind"] for e in submitted} == {"training", "quantization"}

"""The held-out serving traffic generator (issue 42): pure and seeded, contract-valid events,
reports at the rate asked, and the launch, holidays and gaps it promises, seen in the data."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import datetime

import numpy as np
import pytest

from gpualloc.generators.heldout_serving import DAY, generate, generate_with_truth, main, plan_stream
from gpualloc.schemas.events import parse_event


def _observations(events: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per app: seconds since the epoch, GPUs needed (before rounding up)."""
    rps_per_gpu = {e["payload"]["id"]: e["payload"]["rps_per_gpu"] for e in events if e["type"] == "app.registered"}
    seen: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["type"] == "traffic.observed":
            p = e["payload"]
            at = datetime.fromisoformat(e["occurred_at"].replace("Z", "+00:00")).timestamp()
            seen[p["app"]].append((at, p["requests_per_s"] / rps_per_gpu[p["app"]]))
    return {app: (np.array([t for t, _ in rows]), np.array([g for _, g in rows])) for app, rows in seen.items()}


def _median_within(times: np.ndarray, gpus: np.ndarray, begin: float, end: float) -> float:
    inside = (times >= begin) & (times < end)
    assert inside.sum() >= 10, "too few observations to judge"
    return float(np.median(gpus[inside]))


def test_same_seed_same_stream_and_no_global_randomness():
    random.seed(1)
    np.random.seed(1)
    state, np_state = random.getstate(), np.random.get_state()[1].copy()
    a = generate(5, weeks=3, rate_seconds=900)
    b = generate(5, weeks=3, rate_seconds=900)
    assert a == b
    assert random.getstate() == state
    assert (np.random.get_state()[1] == np_state).all()
    assert generate(6, weeks=3, rate_seconds=900) != a


@pytest.mark.slow
def test_same_seed_same_traffic_at_every_rate():
    """The rate changes when traffic is looked at, not the traffic: the hourly medians agree."""
    slow = _observations(generate(4, weeks=3, rate_seconds=900, jitter=0.1))
    fast = _observations(generate(4, weeks=3, rate_seconds=120, jitter=0.1))
    for app in slow:
        t, g = slow[app]
        tf, gf = fast[app]
        ratios = []
        for day in range(3, 18):
            begin = t[0] + day * DAY
            ratios.append(_median_within(t, g, begin, begin + DAY) / _median_within(tf, gf, begin, begin + DAY))
        assert 0.85 < float(np.median(ratios)) < 1.15, app


@pytest.mark.parametrize("rate, jitter", [(3600.0, 0.1), (450.0, 0.3), pytest.param(60.0, 0.3, marks=pytest.mark.slow)])
def test_every_event_is_contract_valid_and_in_order(rate, jitter):
    events = generate(2, weeks=3, rate_seconds=rate, jitter=jitter)
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == len(ids)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "pool.configured"
    apps = kinds.count("app.registered")
    assert apps == 3 and kinds[1 : 1 + apps] == ["app.registered"] * apps
    assert set(kinds[1 + apps :]) == {"traffic.observed"}
    parsed = [parse_event(e) for e in events]
    assert all(env.pool == "default" and env.schema_version == 1 for env, _ in parsed)
    assert all(e["occurred_at"].endswith("Z") for e in events)
    pool = parsed[0][1]
    assert pool.step_minutes == 60 and pool.horizon >= 24
    registered = [p for _, p in parsed[1 : 1 + apps]]
    assert pool.gpus >= sum(p.max_gpus for p in registered)
    for p in registered:
        assert 1 <= p.min_gpus < p.max_gpus and p.rps_per_gpu > 0 and len(p.profile) == 24
    times = [env.occurred_at for env, _ in parsed[1 + apps :]]
    assert times == sorted(times) and times[0] >= parsed[0][0].occurred_at


@pytest.mark.parametrize(
    "rate, jitter",
    [
        (3600.0, 0.1),
        (3600.0, 0.3),
        (450.0, 0.3),
        *(pytest.param(*c, marks=pytest.mark.slow) for c in [(15.0, 0.3), (60.0, 0.5)]),
    ],
)
def test_the_observation_rate_is_respected(rate, jitter):
    weeks = 3
    events = generate(3, weeks=weeks, rate_seconds=rate, jitter=jitter)
    for app, (times, _) in _observations(events).items():
        assert abs(float(np.median(np.diff(times))) / rate - 1) <= 0.2, app
        # no more reports than the rate allows, and not many fewer (gaps take some)
        assert 0.7 < len(times) * rate / (weeks * 7 * DAY) < 1.1, app


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2))])
def test_gaps_a_launch_holidays_and_glitches_are_in_the_data(seed):
    weeks = 8
    events, truth = generate_with_truth(seed, weeks=weeks, rate_seconds=450)
    plan = plan_stream(seed, weeks)
    seen = _observations(events)
    start = plan.start_epoch

    # gaps: every app has hours without a report, and some hours no app reports
    for app, (times, _) in seen.items():
        assert np.diff(times).max() >= 3 * 3600, app
    everyone = np.sort(np.concatenate([t for t, _ in seen.values()]))
    assert np.diff(everyone).max() >= 3 * 3600
    assert any(len(o.apps) == len(plan.apps) for o in plan.outages)

    # a launch: the launched app's level a week after its ramp, against the week before it
    launch = plan.launch
    times, gpus = seen[plan.apps[launch.app].id]
    before = _median_within(times, gpus, start + launch.start - 7 * DAY, start + launch.start)
    after_begin = start + launch.start + launch.ramp + DAY
    after = _median_within(times, gpus, after_begin, after_begin + 7 * DAY)
    assert after > 1.25 * before, (before, after)

    # a holiday in each app's region: its local day(s) well below the same weekdays a week either side
    assert plan.holidays and all(app.zone.name in plan.holidays for app in plan.apps)
    for app in plan.apps:
        days = plan.holidays[app.zone.name]
        times, gpus = seen[app.id]

        def local(day: int, span: int = len(days), zone=app.zone) -> float:
            begin = day * DAY - zone.std_minutes * 60
            return _median_within(times, gpus, begin, begin + span * DAY)

        holiday = local(days[0])
        usual = (local(days[0] - 7) + local(days[0] + 7)) / 2
        assert holiday < 0.85 * usual, (app.id, holiday, usual)

    # glitches: readings of zero and about ten times the traffic around them
    kinds = {g["kind"] for g in truth["glitches"]}
    assert {"zero", "x10"} <= kinds
    by_id = {e["event_id"]: e for e in events}
    for g in truth["glitches"]:
        if g["kind"] == "zero":
            assert by_id[g["event_id"]]["payload"]["requests_per_s"] == 0.0


def test_the_command_writes_jsonl(tmp_path):
    out, truth = tmp_path / "s.jsonl", tmp_path / "truth.json"
    argv = ["--seed", "7", "--weeks", "3", "--rate-seconds", "1800", "--jitter", "0.2", "--apps", "5"]
    assert main([*argv, "--out", str(out), "--truth", str(truth)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == generate(7, weeks=3, rate_seconds=1800, jitter=0.2, apps=5)
    assert sum(e["type"] == "app.registered" for e in lines) == 5
    assert json.loads(truth.read_text())["launch"]["app"].startswith("svc-")
    for e in lines:
        parse_event(e)

"""The catalogue ground-truth generator (generators/truth_catalogue.py) keeps the interface
of docs/ground-truth.md: contract events, sorted and unique, a truth that covers them, determinism."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from gpualloc.generators.truth_catalogue import T0, trace
from gpualloc.schemas.events import parse_event

Trace = tuple[list[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def seed0() -> Trace:
    return trace(0)


def _when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["occurred_at"].replace("Z", "+00:00"))


def _by_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_every_event_passes_the_contract(seed0: Trace) -> None:
    events, _ = seed0
    for event in events:
        parse_event(event)
    kinds = Counter(e["type"] for e in events)
    assert kinds["pool.configured"] == 4
    assert kinds["app.registered"] == 3
    assert kinds["job.submitted"] > 4 * 4 * 100
    assert kinds["traffic.observed"] > 3 * 672 * 0.9


def test_sorted_and_unique(seed0: Trace) -> None:
    events, _ = seed0
    times = [_when(e) for e in events]
    assert times == sorted(times)
    assert times[0] == T0
    assert times[-1] <= T0 + timedelta(weeks=4)
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))


def test_deterministic_and_seeded(seed0: Trace) -> None:
    again = trace(0)
    assert json.dumps(again, sort_keys=True) == json.dumps(seed0, sort_keys=True)
    assert json.dumps(trace(1), sort_keys=True) != json.dumps(seed0, sort_keys=True)


def test_truth_covers_jobs_and_apps(seed0: Trace) -> None:
    events, truth = seed0
    assert truth["generator"] == "truth_catalogue" and truth["seed"] == 0
    submitted = {e["payload"]["id"]: e for e in _by_type(events, "job.submitted")}
    assert set(submitted) == set(truth["jobs"])
    for job_id, event in submitted.items():
        job = truth["jobs"][job_id]
        payload = event["payload"]
        assert job["pool"] == event["pool"] and job["kind"] == payload["kind"]
        assert job["group"] == payload["features"].get("variant", payload["features"].get("algorithm"))
        assert isinstance(payload["actual_duration"], int) and payload["actual_duration"] >= 1
        assert "gpus" not in payload and "duration" not in payload
        assert job["median_steps"] > 0
    apps = {e["payload"]["id"]: e["pool"] for e in _by_type(events, "app.registered")}
    assert set(apps) == set(truth["apps"])
    for app_id, pool in apps.items():
        assert truth["apps"][app_id]["pool"] == pool
        demand = truth["apps"][app_id]["demand"]
        assert set(demand) == {str(step) for step in range(4 * 168)}
        assert all(v > 0 for v in demand.values())


def test_completions_report_the_truth(seed0: Trace) -> None:
    events, truth = seed0
    submitted = {e["payload"]["id"]: e for e in _by_type(events, "job.submitted")}
    completed = _by_type(events, "job.completed")
    assert len(completed) > 0.9 * len(submitted)
    for event in completed:
        job_id = event["payload"]["id"]
        used = event["payload"]["used"]
        assert used["gpus"] == truth["jobs"][job_id]["gpus"]
        assert used["peak_memory_gb"] == truth["jobs"][job_id]["peak_memory_gb"]
        assert used["duration"] == submitted[job_id]["payload"]["actual_duration"]
        assert _when(event) > _when(submitted[job_id])


def test_noise_floor_is_moderate(seed0: Trace) -> None:
    for events, truth in (seed0, trace(1, weeks=2)):
        actual = {e["payload"]["id"]: e["payload"]["actual_duration"] for e in _by_type(events, "job.submitted")}
        floor = statistics.median(abs(j["median_steps"] - actual[k]) / actual[k] for k, j in truth["jobs"].items())
        assert 0.03 <= floor <= 0.4


def test_groups_have_enough_jobs(seed0: Trace) -> None:
    _, truth = seed0
    groups = Counter(j["group"] for j in truth["jobs"].values())
    assert sum(1 for n in groups.values() if n >= 20) >= 5
    by_pool = Counter((j["pool"], j["group"]) for j in truth["jobs"].values())
    assert sum(1 for n in by_pool.values() if n >= 20) >= 5


def test_peak_fits_the_gpu_at_the_true_count(seed0: Trace) -> None:
    events, truth = seed0
    pools = {e["pool"]: e["payload"] for e in _by_type(events, "pool.configured")}
    for job in truth["jobs"].values():
        pool = pools[job["pool"]]
        assert job["gpu_type"] == pool["gpu_type"]
        assert 0 < job["peak_memory_gb"] <= pool["gpu_memory_gb"]
        gpus = job["gpus"]
        assert gpus & (gpus - 1) == 0 and 1 <= gpus <= pool["gpus"]


def test_traffic_tracks_the_demand(seed0: Trace) -> None:
    events, truth = seed0
    rps_per_gpu = {e["payload"]["id"]: e["payload"]["rps_per_gpu"] for e in _by_type(events, "app.registered")}
    ratios: dict[str, list[float]] = {app: [] for app in rps_per_gpu}
    seen: set[tuple[str, int]] = set()
    for event in _by_type(events, "traffic.observed"):
        app = event["payload"]["app"]
        step = int((_when(event) - T0).total_seconds() // 3600)
        assert (app, step) not in seen  # one observation a step
        seen.add((app, step))
        load = event["payload"]["requests_per_s"] / rps_per_gpu[app]
        ratios[app].append(load / truth["apps"][app]["demand"][str(step)])
    for app, values in ratios.items():
        assert 0.95 < statistics.median(values) < 1.05, app
        assert len(values) < 672  # some hours are missing

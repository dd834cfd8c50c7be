"""The held-out ground-truth generator (generators/truth_heldout.py) keeps the interface
of docs/ground-truth.md: valid, ordered, deterministic events and a truth that covers them."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from datetime import datetime
from functools import lru_cache
from typing import Any

import pytest

from gpualloc.generators.truth_heldout import trace
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.features import GPU_TYPES


@lru_cache(maxsize=None)
def _trace(seed: int) -> tuple[str, str]:
    events, truth = trace(seed)
    return json.dumps(events, sort_keys=True), json.dumps(truth, sort_keys=True)


def _load(seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events, truth = _trace(seed)
    return json.loads(events), json.loads(truth)


def _submitted(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["payload"]["id"]: e["payload"] for e in events if e["type"] == "job.submitted"}


def test_every_event_parses() -> None:
    events, _ = _load()
    for event in events:
        parse_event(event)


def test_sorted_with_unique_ids() -> None:
    events, _ = _load()
    times = [datetime.fromisoformat(e["occurred_at"].replace("Z", "+00:00")) for e in events]
    assert times == sorted(times)
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))


@pytest.mark.slow
def test_deterministic_per_seed() -> None:
    first = trace(0)
    again = trace(0)
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert _trace(0) != _trace(1)


def test_pools_configured() -> None:
    events, _ = _load()
    pools = [e for e in events if e["type"] == "pool.configured"]
    types = {e["payload"]["gpu_type"] for e in pools}
    assert len(types) >= 3 and types <= set(GPU_TYPES)
    assert types & {"a10-24gb", "v100-32gb"} and types & {"mi300x-192gb", "b200-192gb", "h200-141gb"}
    for e in pools:
        assert e["payload"]["gpus"] == 64 and e["payload"]["horizon"] == 48
        assert e["payload"]["gpus_per_node"] in (4, 8) and e["payload"]["step_minutes"] in (30, 60)
        assert e["occurred_at"] == "2026-01-05T00:00:00Z"


def test_truth_covers_jobs_and_apps() -> None:
    events, truth = _load()
    submitted = _submitted(events)
    assert set(submitted) == set(truth["jobs"])
    apps = {e["payload"]["id"] for e in events if e["type"] == "app.registered"}
    observed = {e["payload"]["app"] for e in events if e["type"] == "traffic.observed"}
    assert 3 <= len(apps) <= 4 and observed == apps == set(truth["apps"])
    for app in truth["apps"].values():
        assert set(app["demand"]) == {str(s) for s in range(4 * 168)}
    assert truth["generator"] and truth["seed"] == 0


def test_completions_match_truth() -> None:
    events, truth = _load()
    submitted = _submitted(events)
    completed = {e["payload"]["id"]: e for e in events if e["type"] == "job.completed"}
    assert set(completed) == set(submitted)
    arrival = {e["payload"]["id"]: e["occurred_at"] for e in events if e["type"] == "job.submitted"}
    for job_id, event in completed.items():
        used, true = event["payload"]["used"], truth["jobs"][job_id]
        assert used["gpus"] == true["gpus"]
        assert used["peak_memory_gb"] == true["peak_memory_gb"]
        assert used["duration"] == submitted[job_id]["actual_duration"] >= 1
        assert event["occurred_at"] > arrival[job_id]
        assert true["gpus"] & (true["gpus"] - 1) == 0


def test_features_have_no_size() -> None:
    events, truth = _load()
    for job_id, job in _submitted(events).items():
        assert "gpus" not in job and "duration" not in job
        assert job["kind"] == truth["jobs"][job_id]["kind"] in ("training", "quantization")
        features = job["features"]
        group = features["variant"] if job["kind"] == "training" else features["algorithm"]
        assert group == truth["jobs"][job_id]["group"]
        if job["kind"] == "training":
            layout = features.get("tensor_parallel", 1) * features.get("pipeline_parallel", 1)
            assert truth["jobs"][job_id]["gpus"] % layout == 0


def test_duration_noise_floor() -> None:
    events, truth = _load()
    submitted = _submitted(events)
    errors = [
        abs(truth["jobs"][j]["median_steps"] - job["actual_duration"]) / job["actual_duration"]
        for j, job in submitted.items()
    ]
    assert 0.03 <= statistics.median(errors) <= 0.4


def test_groups_and_volume() -> None:
    events, truth = _load()
    groups = Counter(job["group"] for job in truth["jobs"].values())
    assert sum(1 for n in groups.values() if n >= 20) >= 5
    per_pool = Counter(job["pool"] for job in truth["jobs"].values())
    for pool, n in per_pool.items():
        assert 100 * 4 * 0.8 <= n <= 200 * 4 * 1.2, (pool, n)
    assert any(job["kind"] == "quantization" for job in truth["jobs"].values())


def test_peak_fits_the_gpu() -> None:
    events, truth = _load()
    memory = {e["pool"]: e["payload"]["gpu_memory_gb"] for e in events if e["type"] == "pool.configured"}
    kinds = {e["pool"]: e["payload"]["gpu_type"] for e in events if e["type"] == "pool.configured"}
    for job in truth["jobs"].values():
        assert 0 < job["peak_memory_gb"] <= memory[job["pool"]]
        assert job["gpu_type"] == kinds[job["pool"]]
        assert job["median_steps"] > 0


def test_traffic_is_hourly_with_a_gap() -> None:
    events, truth = _load()
    steps = {e["pool"]: e["payload"]["step_minutes"] for e in events if e["type"] == "pool.configured"}
    observed = Counter(e["payload"]["app"] for e in events if e["type"] == "traffic.observed")
    for app, info in truth["apps"].items():
        assert steps[info["pool"]] == 60
        assert all(v > 0 for v in info["demand"].values())
        assert observed[app] <= 4 * 168
    assert min(observed.values()) < 4 * 168  # missing observations somewhere

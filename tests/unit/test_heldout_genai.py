"""The independent GenAI-like generator (`generators.heldout_genai`): its traces are valid contract
input, the same for a seed, and hold what they are used to judge: apps with gaps in their
observations and a spike, heavy-tailed jobs, cancellations, and a node down that comes back up."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime

import pytest

from gpualloc.generators.heldout_genai import generate
from gpualloc.schemas.events import parse_event

SEEDS = (1, 5)


@pytest.fixture(scope="module", params=SEEDS)
def trace(request: pytest.FixtureRequest) -> list[dict]:
    return generate(request.param)[0]


def test_every_event_parses_in_time_order_with_unique_ids(trace: list[dict]) -> None:
    times = [parse_event(e)[0].occurred_at for e in trace]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert len({e["event_id"] for e in trace}) == len(trace)
    assert trace[0]["type"] == "pool.configured" and trace[0]["payload"]["gpus"] == 32


def test_a_seed_gives_the_same_trace() -> None:
    assert generate(3) == generate(3)
    assert generate(3)[0] != generate(4)[0]


def test_the_trace_holds_gaps_a_spike_heavy_tailed_jobs_cancellations_and_an_outage(trace: list[dict]) -> None:
    kinds = Counter(e["type"] for e in trace)
    assert 1 <= kinds["app.registered"] <= 3 and 100 <= kinds["job.submitted"] <= 200
    assert kinds["job.cancelled"] >= 1
    states = [e["payload"]["state"] for e in trace if e["type"] == "node.status"]
    assert states == ["down", "up"]
    durations = [e["payload"]["actual_duration"] for e in trace if e["type"] == "job.submitted"]
    assert max(durations) >= 5 * statistics.median(durations)  # a heavy tail
    spikes = 0
    for app in (e["payload"]["id"] for e in trace if e["type"] == "app.registered"):
        seen = [
            (datetime.fromisoformat(e["occurred_at"]), e["payload"]["requests_per_s"])
            for e in trace
            if e["type"] == "traffic.observed" and e["payload"]["app"] == app
        ]
        gaps = [(b[0] - a[0]).total_seconds() for a, b in zip(seen, seen[1:])]
        assert max(gaps) >= 3600  # an hour or more without observations
        for i, (_, r) in enumerate(seen):
            around = seen[max(0, i - 12) : i + 13]
            unbroken = all(gap <= 600 for gap in gaps[max(0, i - 12) : i + 12])
            spikes += unbroken and r >= 2.5 * statistics.median(v for _, v in around)
    assert spikes >= 1  # an observation 2.5x the median of the two unbroken hours of reports around it

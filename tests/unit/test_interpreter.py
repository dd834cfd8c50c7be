"""The one event interpreter: what each event means, the same for the agent and the simulator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.builders import T0, ev
from support.feature_jobs import LORA_7B

from gpualloc.schemas.events import parse_event
from gpualloc.solvers.planner.effects import Decided, Ended, Event, Failed, Rejected
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.simulation.simulator import SimOptions, simulate

POOL = {"gpus": 16, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}


def job(n: int, gpus: int = 2, duration: int = 3) -> Event:
    return ev(
        "job.submitted",
        {"id": f"j{n}", "kind": "training", "priority": 5, "gpus": gpus, "duration": duration},
        ref=f"j{n}",
    )


def configured() -> Pool:
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    return pool


def test_events_before_the_configuration_wait_and_arrivals_share_a_pass():
    pool = Pool()
    assert pool.apply([job(1)], T0) == [] and pool.planner is None
    effects = pool.apply([job(2), job(3), ev("pool.configured", POOL)], T0)
    decided = [e for e in effects if isinstance(e, Decided)]
    assert [(d.ref, d.pass_seq, d.pass_size) for d in decided] == [("j1", 1, 3), ("j2", 1, 3), ("j3", 1, 3)]
    assert pool.origin == T0 and pool.next_boundary() == T0


def test_an_event_naming_a_waiting_arrival_is_applied_after_its_pass():
    pool = configured()
    effects = pool.apply([job(1), ev("job.cancelled", {"id": "j1"}), job(2)], T0)
    assert [type(e).__name__ for e in effects] == ["Decided", "Ended", "Decided"]  # j1 started, then left
    assert effects[0].pass_seq != effects[2].pass_seq and "j1" not in pool.planner.queued
    assert "j1" not in pool.planner.running


FEATURES = LORA_7B  # valid; this pool names no GPU type to size them for


def test_what_the_pool_cannot_act_on_is_rejected_with_the_field():
    pool = configured()
    effects = pool.apply(
        [
            ev("traffic.observed", {"app": "nobody", "gpus": 2}, ref=1),
            ev("node.status", {"node": 5, "state": "down"}, ref=2),
            ev("app.registered", {"id": "a", "priority": 3, "current": [99]}, ref=3),
            ev("job.submitted", {"id": "f", "kind": "training", "priority": 1, "features": FEATURES}, ref=5),
        ],
        T0,
    )
    reasons = [e.reason for e in effects if isinstance(e, Rejected)]
    assert [r.split(":")[0] for r in reasons] == ["node", "app", "current"]  # node states first
    unsized = [e.decision for e in effects if isinstance(e, Decided)]  # a valid job the pool cannot size: decided
    assert [(d.job_id, d.action) for d in unsized] == [("f", "rejected")]
    assert unsized[0].reason.startswith("features.gpu_type: give it, or the pool's gpu_type")
    with pytest.raises(ValueError, match=r"max_gpus: must be >= min_gpus \(2 < 4\)"):  # the contract's own rule
        ev("app.registered", {"id": "b", "priority": 3, "min_gpus": 4, "max_gpus": 2})


def test_failures_by_gpualloc_and_by_upstream():
    pool = configured()
    pool.apply([job(1, gpus=8), job(2, gpus=8)], T0)
    pool.commit()
    assert set(pool.planner.running) == {"j1", "j2"}
    node = min(pool.planner.running["j1"].mask.bit_length() - 1, 15) // 8
    down = pool.apply([ev("node.status", {"node": node, "state": "down", "detail": "psu"})], T0)
    assert down == [Failed("j1", f"node {node} is down: psu", by_gpualloc=True)]
    bound = pool.apply(
        [ev("binding.reported", {"node": 1 - node, "job_id": "j2", "gpus": [], "status": "failed", "detail": "busy"})],
        T0,
    )
    assert bound == [Failed("j2", f"binding failed on node {1 - node}: busy", by_gpualloc=True)]
    notice = pool.apply([ev("job.failed", {"id": "j2", "source": "agent"})], T0)
    upstream = pool.apply([ev("job.failed", {"id": "j2", "detail": "oom"})], T0)
    assert notice == [] and upstream == [Failed("j2", "oom", by_gpualloc=False)]


def test_completion_ends_a_running_job_once():
    pool = configured()
    pool.apply([job(1)], T0)
    pool.commit()
    assert pool.apply([ev("job.completed", {"id": "j1"})], T0) == [Ended("j1")]
    again = pool.apply([ev("job.completed", {"id": "j1"})], T0)  # a second completion under a new event id
    assert [type(e) for e in again] == [Rejected] and again[0].reason.startswith("id: job 'j1' is neither queued")
    assert pool.apply([ev("job.cancelled", {"id": "never"})], T0)[0].reason.startswith("id: job 'never'")


def test_traffic_counts_for_the_step_its_time_falls_in():
    pool = configured()
    pool.apply([ev("app.registered", {"id": "chat", "priority": 4, "rps_per_gpu": 10})], T0)
    pool.apply([ev("traffic.observed", {"app": "chat", "requests_per_s": 25}, minutes=130)], T0)
    assert pool.planner.apps["chat"].observed == {2: 3}


def test_the_simulator_reads_events_through_the_same_interpreter():
    """A trace event the agent would dead-letter (traffic of an unknown app) is refused in the
    simulator too, with the same reason, and changes nothing."""
    base = [
        ("pool.configured", POOL, 0),
        ("job.submitted", {"id": "a", "kind": "training", "priority": 2, "gpus": 4, "duration": 2}, 5),
    ]
    extra = [("traffic.observed", {"app": "ghost", "gpus": 3}, 10)]

    def run(items):
        events = [
            parse_event(
                {"event_id": f"x{k}", "type": t, "occurred_at": (T0 + timedelta(minutes=m)).isoformat(), "payload": p}
            )
            for k, (t, p, m) in enumerate(items)
        ]
        return simulate(events, SimOptions(policies=("heuristic",), days=1)).runs["heuristic"]

    plain, noisy = run(base), run(base + extra)
    assert noisy.rejected == [(0, "app: 'ghost' is not registered (app.registered comes first)")]
    assert noisy.commits == plain.commits


def test_a_job_the_pool_cannot_size_completes_without_teaching_the_forecasters():
    """A pool with no GPU type and a job with features but given sizes: its completion frees its
    GPUs and says the forecasters learnt nothing; its failure at running out of memory re-queues it."""
    pool = Pool()
    pool.apply([ev("pool.configured", {"gpus": 1024})], T0)
    sized = {"kind": "training", "priority": 1, "gpus": 8, "duration": 3, "features": FEATURES}
    pool.apply([ev("job.submitted", {"id": "f", **sized}), ev("job.submitted", {"id": "g", **sized})], T0)
    pool.commit()
    untaught = pool.planner.forecasts.jobs.dump()
    (ended,) = pool.apply([ev("job.completed", {"id": "f", "used": {"gpus": 8, "duration": 2}})], T0)
    assert ended.job_id == "f" and ended.detail.startswith("the forecasters were not taught by it: features.gpu_type")
    assert "f" not in pool.planner.running and pool.planner.forecasts.jobs.dump() == untaught
    (failed,) = pool.apply([ev("job.failed", {"id": "g", "reason": "out_of_memory", "detail": "oom"})], T0)
    assert failed.detail.startswith("oom; the forecasters were not taught by it") and "g" in pool.planner.queued

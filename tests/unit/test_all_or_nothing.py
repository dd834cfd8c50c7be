"""A pass is all or nothing: one that raises leaves the pool (planner, forecasters, waiting events)
and the dispatcher (de-duplication window, frontier, the transaction's log) as it found them, so
the same inputs handed in again decide exactly as if the failure never happened."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.builders import T0, ev
from support.examples import examples
from support.feature_jobs import training_features

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.effects import Effect, Event
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import JobSpec
from gpualloc.solvers.planner.snapshot import dump_pool
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Problem

POOL = {"gpus": 32, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60, "gpu_type": "a100-80gb"}
APP = {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 8, "profile": [2] * 24}


class Boom(RuntimeError):
    pass


class Faulty(Pool):
    """A pool whose `fuse`-th event handler (or pass decision) raises, once."""

    fuse: int | None = None

    def _tick(self) -> None:
        if self.fuse is not None:
            self.fuse -= 1
            if self.fuse < 0:
                self.fuse = None
                raise Boom("a handler failed")

    def _apply(self, event: Event, now):  # type: ignore[no-untyped-def]
        self._tick()
        return super()._apply(event, now)

    def _decide(self, arrivals: list[Event], now: datetime) -> list[Effect]:
        self._tick()
        return super()._decide(arrivals, now)


def state(pool: Pool) -> tuple:
    """Everything a pass may change, comparable."""
    return (orjson.dumps(dump_pool(pool)), pool.passes, [(e.type, e.payload) for e in pool.pending])


def passes(seed: int, count: int) -> list[list[Event]]:
    """`count` passes of mixed events (arrivals, some given by their features, completions with
    what they used, cancellations, traffic, a node going down and up, a resize), ten minutes apart."""
    rng, out, made = random.Random(seed), [], 0
    for k in range(count):
        minutes, events = 10 * k + 1, []
        for _ in range(rng.randint(1, 5)):
            made += 1
            job = {"id": f"j{made}", "kind": "training", "priority": rng.randint(1, 9)}
            if rng.random() < 0.4:
                job["features"] = training_features(rng)
            else:
                job |= {"gpus": rng.choice([1, 2, 4, 8]), "duration": rng.randint(1, 6)}
            events.append(ev("job.submitted", job, minutes, ref=f"j{made}"))
        for _ in range(rng.randint(0, 2)):
            victim = f"j{rng.randint(1, made)}"
            kind = rng.choice(["job.completed", "job.cancelled"])
            payload = {"id": victim} | ({"used": {"steps": rng.randint(1, 5)}} if kind == "job.completed" else {})
            events.append(ev(kind, payload, minutes, ref=f"{kind}:{victim}"))
        if rng.random() < 0.5:
            events.append(ev("traffic.observed", {"app": "chat", "gpus": rng.randint(1, 6)}, minutes, ref="t"))
        if rng.random() < 0.15:
            state_ = rng.choice(["down", "up", "drained"])
            events.append(ev("node.status", {"node": rng.randint(0, 3), "state": state_}, minutes, ref="n"))
        if rng.random() < 0.1:
            events.append(ev("pool.configured", POOL | {"gpus": rng.choice([32, 40])}, minutes, ref="c"))
        rng.shuffle(events)
        out.append(events)
    return out


def run(pool: Pool, plan: list[list[Event]], commits: set[int]) -> list[list[Effect]]:
    out = []
    for k, events in enumerate(plan):
        now = T0 + timedelta(minutes=10 * k + 1)
        out.append(pool.apply(events, now))
        if k in commits and pool.planner is not None:
            pool.commit()
    return out


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000), failing=st.integers(0, 7), fuse=st.integers(0, 12), commits=st.sets(st.integers(0, 7))
)
def test_a_failed_pass_changes_nothing_and_its_retry_decides_as_if_it_never_failed(seed, failing, fuse, commits):
    setup = [ev("pool.configured", POOL), ev("app.registered", APP)]
    plan = [setup] + passes(seed, 8)
    twin, faulty = Pool(), Faulty()
    expected = run(twin, plan, commits)
    got = []
    for k, events in enumerate(plan):
        now = T0 + timedelta(minutes=10 * k + 1)
        effects = None
        if k == failing + 1:
            before = state(faulty)
            faulty.fuse = fuse
            try:
                effects = faulty.apply(events, now)  # a pass with fewer handlers than `fuse` succeeds
            except Boom:
                assert state(faulty) == before  # nothing of the failed pass is left
            faulty.fuse = None
        got.append(faulty.apply(events, now) if effects is None else effects)
        if k in commits and faulty.planner is not None:
            faulty.commit()
    assert got == expected and state(faulty) == state(twin)


def failing_once(problem: Problem) -> Schedule:
    if not failing_once.armed:
        return heuristic_schedule(problem)
    failing_once.armed = False
    raise Boom("the scheduler failed")


failing_once.armed = False


def test_a_scheduler_that_raises_leaves_no_job_queued_undecided():
    """The pool's first arrivals are planned by the scheduler (no current plan yet): it raises,
    and no arrival is left queued without a decision; the pass handed in again decides them all."""
    pool = Pool(scheduler=failing_once)
    pool.apply([ev("pool.configured", POOL)], T0)
    arrivals = [
        ev("job.submitted", {"id": f"a{k}", "kind": "training", "priority": k + 1, "gpus": 4, "duration": 2}, ref=k)
        for k in range(3)
    ]
    before = state(pool)
    failing_once.armed = True
    with pytest.raises(Boom):
        pool.apply(arrivals, T0)
    assert state(pool) == before and not pool.planner.queued and not pool.planner.running
    decided = pool.apply(arrivals, T0)
    assert [e.decision.action for e in decided] == ["start", "start", "start"]


def record(n: int, kind: str, payload: dict) -> Record:
    body = {"event_id": f"e{n}", "type": kind, "occurred_at": T0.isoformat(), "payload": payload}
    return Record("gpualloc.jobs" if kind.startswith("job") else "gpualloc.config", 0, n, None, orjson.dumps(body))


def test_the_dispatcher_keeps_no_trace_of_a_failed_pass():
    """Neither the event ids (a retry would take them for redeliveries), nor the frontier, nor
    the transaction's log keep anything of a pass that raised."""
    runs = {"policy": "heuristic", "effort": 0.05, "step_seconds": None, "every": 0}
    faulty, twin = Dispatcher("default", interpreter=Faulty()), Dispatcher("default", interpreter=Pool())
    for d in (faulty, twin):
        d.use(runs)
        d.handle([record(0, "pool.configured", POOL)], T0)
    jobs = [
        record(k, "job.submitted", {"id": f"d{k}", "kind": "training", "priority": 3, "gpus": 2, "duration": 2})
        for k in range(1, 4)
    ]
    seen, frontier, log = len(faulty.seen), dict(faulty.frontier), faulty._log
    faulty.interpreter.fuse = 0
    with pytest.raises(Boom):
        faulty.handle(jobs, T0)
    assert (len(faulty.seen), faulty.frontier, faulty._log) == (seen, frontier, log)
    assert faulty.handle(jobs, T0) == twin.handle(jobs, T0)
    assert faulty.seal(runs) == twin.seal(runs)


def test_a_failed_pass_at_the_contracts_limits_changes_nothing():
    """4,096 GPUs, a 336-step window, 10,000 queued jobs with 200-character ids and 64 apps with a
    week of traffic each: a pass of traffic for every app, a completion and arrivals that fails at
    its decisions leaves the pool as it was."""
    gpus, horizon = 4096, 336
    pool = Faulty()
    pool.apply([ev("pool.configured", {"gpus": gpus, "gpus_per_node": 8, "horizon": horizon, "step_minutes": 60})], T0)
    planner = pool.planner
    for a in range(64):
        pool.apply([ev("app.registered", {"id": f"app-{a}", "priority": 5, "min_gpus": 1, "max_gpus": 16})], T0)
        for h in range(0, 168, 24):
            planner.realtime.observe_traffic(f"app-{a}", h, 2, 2.5)
    rng = random.Random(0)
    for k in range(10_000):
        job_id = f"{'q' * 190}{k:010d}"
        planner.queued[job_id] = JobSpec(job_id, "training", rng.randint(1, 9), rng.choice([8, 16]), 5, 0)
    planner.busy = [0] * horizon
    events = [ev("traffic.observed", {"app": f"app-{a}", "gpus": 3}, 30, ref=a) for a in range(64)]
    events += [ev("job.cancelled", {"id": f"{'q' * 190}{7:010d}"}, 30, ref="c")]
    events += [
        ev("job.submitted", {"id": f"new-{k}", "kind": "training", "priority": 3, "gpus": 8, "duration": 4}, 30, ref=k)
        for k in range(5)
    ]
    before = state(pool)
    pool.fuse = 65  # after every app's traffic and the cancellation: at the arrivals' decisions
    with pytest.raises(Boom):
        pool.apply(events, T0 + timedelta(minutes=30))
    assert state(pool) == before
    assert len(pool.apply(events, T0 + timedelta(minutes=30))) == 5  # and the pass, again, decides them

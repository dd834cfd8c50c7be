"""The planner's role parts act on the state the planner holds: after a failed pass has put the
state back (`state.restore`), and on a copy of the planner, never on a state left behind."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import orjson
import pytest
from support.builders import T0, ev

from gpualloc.solvers.planner.effects import Effect, Event
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.records import JobSpec
from gpualloc.solvers.planner.snapshot import dump_pool

POOL = {"gpus": 16, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60, "gpu_type": "a100-80gb"}
ROLES = ("admission", "realtime", "pool_changes", "boundary", "adoption")


class Boom(RuntimeError):
    pass


class FailsAfterDeciding(Pool):
    """A pool whose arrivals are decided (the planner changed) and whose pass then raises, while `failing`."""

    failing = False  # not a field: no part of the state

    def _decide(self, arrivals: list[Event], now: datetime) -> list[Effect]:
        out = super()._decide(arrivals, now)
        if self.failing:
            raise Boom("the pass failed after deciding its arrivals")
        return out


def job(job_id: str, gpus: int = 4) -> JobSpec:
    return JobSpec(job_id, "training", 3, gpus, 2, 0)


def states(part: Any) -> list[Any]:
    """Every state a role part (and the parts it was handed) acts on."""
    out = []
    for name in part.__slots__:
        value = getattr(part, name)
        out += [value] if isinstance(value, PlannerState) else states(value)
    return out


def configured() -> FailsAfterDeciding:
    pool = FailsAfterDeciding()
    pool.apply([ev("pool.configured", POOL), ev("app.registered", {"id": "chat", "priority": 5, "min_gpus": 1})], T0)
    pool.apply([ev("job.submitted", {"id": "a", "kind": "training", "priority": 3, "gpus": 4, "duration": 3})], T0)
    return pool


def test_every_role_part_acts_on_the_planner_itself():
    planner = configured().planner
    for role in ROLES:
        found = states(getattr(planner, role))
        assert found and all(state is planner for state in found), role


def test_role_parts_taken_before_a_failed_pass_act_on_the_state_it_put_back():
    pool = configured()
    planner = pool.planner
    admission, boundary, realtime = planner.admission, planner.boundary, planner.realtime
    before = orjson.dumps(dump_pool(pool))
    pool.failing = True
    with pytest.raises(Boom):
        pool.apply([ev("job.submitted", {"id": "b", "kind": "training", "priority": 3, "gpus": 8, "duration": 2})], T0)
    pool.failing = False
    assert pool.planner is planner and orjson.dumps(dump_pool(pool)) == before
    assert "b" not in planner.queued and "b" not in planner.running

    decision = admission.submit(job("c"))
    assert decision.action in ("start", "planned")
    assert "c" in (pool.planner.running if decision.action == "start" else pool.planner.queued)
    realtime.observe_traffic("chat", 0, 2)
    assert pool.planner.apps["chat"].observed == {0: 2}
    commit = boundary.tick()
    assert commit.step == 0 and pool.planner.now == 1 and pool.view is not None and pool.view.now == 1
    assert orjson.dumps(dump_pool(pool)) != before


def test_a_copied_planners_parts_act_on_the_copy():
    pool = configured()
    planner = pool.planner
    before = orjson.dumps(dump_pool(pool))
    twin = copy.deepcopy(planner)
    assert isinstance(twin, Planner) and all(s is twin for role in ROLES for s in states(getattr(twin, role)))
    twin.admission.submit(job("c"))
    twin.boundary.tick()
    twin.pool_changes.node_status(1, "down")
    assert twin.now == 1 and planner.now == 0 and "c" not in planner.queued and not planner.down
    assert orjson.dumps(dump_pool(pool)) == before
    pool.apply([ev("job.submitted", {"id": "d", "kind": "training", "priority": 3, "gpus": 2, "duration": 1})], T0)
    assert "d" not in twin.queued and "d" not in twin.running
    assert pool.commit().commit.step == 0 and twin.now == 1

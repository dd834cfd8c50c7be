"""The rule that makes a pass all or nothing (`gpualloc.solvers.planner.state`): every part of the
pool's state holds only immutable values, containers of them that `fork` copies, or further
parts; the forecasters' learned models, changed in place, are copied at a pass's first lesson."""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from support.builders import T0, ev
from support.feature_jobs import training_features

from gpualloc.forecasting.kind_model import KindModel
from gpualloc.forecasting.traffic import AppTraffic
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import FrozenDict
from gpualloc.solvers.planner.state import fork, is_part, restore

POOL = {"gpus": 32, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60, "gpu_type": "a100-80gb"}

# entries changed in place, each copied before its first change in a pass by the part holding it
COPIED_ON_WRITE = (KindModel, AppTraffic)
# values by rule: a plan, never changed once its scheduler made it
PLANS = (Schedule,)


def immutable(value: Any) -> bool:
    """Can `value` not be changed in place (nor anything it holds)?"""
    if value is None or isinstance(value, (bool, int, float, str, bytes, datetime)) or callable(value):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(immutable(v) for v in value)
    if isinstance(value, FrozenDict):
        return all(immutable(v) for v in value.values())
    if isinstance(value, BaseModel):
        return bool(value.model_config.get("frozen"))
    if isinstance(value, PLANS):
        return True
    if dataclasses.is_dataclass(value) and not is_part(value):
        return all(immutable(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def breaches(state: Any, path: str = "pool") -> Iterator[str]:
    """Where a part of the state holds what `fork` would leave shared and a pass could change."""
    for f in dataclasses.fields(state):
        value, where = getattr(state, f.name), f"{path}.{f.name}"
        if is_part(value):
            yield from breaches(value, where)
        elif isinstance(value, (dict, list, set)):
            entries = value.values() if isinstance(value, dict) else value
            for entry in entries:
                if not (immutable(entry) or isinstance(entry, COPIED_ON_WRITE)):
                    yield f"{where}: holds a {type(entry).__name__}, which a pass could change in place"
        elif not immutable(value):
            yield f"{where}: a {type(value).__name__}, which fork does not copy"


def busy_pool() -> Pool:
    """A pool with something in every part of its state: queued, running and forecast jobs, an
    app with traffic, a plan, a cut waiting for its plan, lessons learned."""
    rng, pool = random.Random(3), Pool()
    pool.apply([ev("pool.configured", POOL), ev("app.registered", {"id": "chat", "priority": 5, "min_gpus": 1})], T0)
    for k in range(12):
        job = {"id": f"j{k}", "kind": "training", "priority": 1 + k % 5}
        job |= {"features": training_features(rng)} if k % 3 == 0 else {"gpus": 4, "duration": 3}
        pool.apply([ev("job.submitted", job, 1, ref=k)], T0 + timedelta(minutes=1))
    pool.apply([ev("traffic.observed", {"app": "chat", "gpus": 3}, 2, ref="t")], T0 + timedelta(minutes=2))
    pool.commit()
    done = [
        ev("job.completed", {"id": job_id, "used": {"steps": 2}}, 70) for job_id in sorted(pool.planner.running)[::2]
    ]
    pool.apply(done, T0 + timedelta(minutes=70))
    pool.cut()
    return pool


def test_every_part_of_a_pools_state_holds_what_a_fork_copies():
    pool = busy_pool()
    assert pool.planner.queued and pool.planner.running and pool.planner.apps and pool.planner.ahead
    assert list(breaches(pool)) == []


def test_a_field_fork_would_leave_shared_is_found():
    """A new field a pass could change in place, were it forgotten by the rule, fails the test above."""

    @dataclasses.dataclass
    class Part:
        log: deque[int] = dataclasses.field(default_factory=deque)
        apps: dict[str, list[int]] = dataclasses.field(default_factory=lambda: {"a": [1]})
        kept: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=lambda: {"a": (1,)})

    assert sorted(breaches(Part(), "part")) == [
        "part.apps: holds a list, which a pass could change in place",
        "part.log: a deque, which fork does not copy",
    ]


def test_a_fork_changed_and_restored_is_the_state_it_found():
    pool = busy_pool()
    planner, before = pool.planner, repr(pool)
    found = fork(pool)
    planner.queued.clear()
    planner.running.clear()
    planner.busy[0] = -1
    planner.apps.clear()
    planner.forecasts.observed("chat", 5, 9.0)
    pool.pending.append(ev("job.cancelled", {"id": "x"}))
    restore(pool, found)
    assert pool.planner is planner and repr(pool) == before

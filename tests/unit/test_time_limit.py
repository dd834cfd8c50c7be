"""A job's time limit: failed at the boundary its limit is up, its GPUs free in that commit, one
`job.failed` notice (reason `time_limit`), the same on a replay of the ledger and after a restore."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError
from support.builders import T0, ev
from test_ledger import fresh, live, message, replay

from gpualloc.bus.topics import Record
from gpualloc.schemas.events import JobSubmitted
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.published import PoolSnapshot
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.effects import Decided, Failed
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import dump_pool, load_pool

POOL = {"gpus": 16, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}


def job(id: str, time_limit: int | None = 3, duration: int = 10, gpus: int = 4, requeue: bool = True) -> dict:
    limit = {} if time_limit is None else {"time_limit": time_limit}
    return {
        "id": id,
        "kind": "training",
        "priority": 5,
        "gpus": gpus,
        "duration": duration,
        "requeue": requeue,
        **limit,
    }


def at_step(step: int) -> Pool:
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    for _ in range(step):
        pool.commit()
    return pool


def test_a_job_is_failed_at_the_boundary_its_time_limit_is_up():
    pool = at_step(5)
    (decided,) = pool.apply([ev("job.submitted", job("t", requeue=True), ref="t")], T0)
    assert isinstance(decided, Decided) and decided.decision.action == "start"
    assert decided.decision.reason.endswith(
        "; time limit 3 steps: failed that long after it starts, unless it ends first"
    )
    spec, mask, start = pool.planner.running["t"]
    assert start == 5 and spec.duration == 3  # planned to hold its GPUs no longer than its limit
    for step in (5, 6, 7):  # it runs steps 5, 6 and 7
        committed = pool.commit()
        assert committed.commit.step == step and "t" in committed.commit.assignments and committed.expired == ()
    committed = pool.commit()  # the boundary of step 8: 5 + 3
    assert committed.commit.step == 8
    assert committed.expired == (Failed("t", "its time limit of 3 steps is up", True, "time_limit"),)
    assert "t" not in committed.commit.assignments and "t" not in committed.commit.schedule.batch
    assert "t" not in pool.planner.running and "t" not in pool.planner.queued  # not re-queued, `requeue` or not
    assert not mask & pool.planner.committed  # its GPUs free in that commit
    assert pool.commit().expired == ()  # failed once


def test_the_plan_holds_a_limited_job_at_most_its_limit_and_stays_legal():
    pool = at_step(0)
    pool.apply(
        [
            ev("job.submitted", job("a", time_limit=2, duration=6, gpus=16), ref="a"),
            ev("job.submitted", job("b", time_limit=None, duration=2, gpus=16), ref="b"),
        ],
        T0,
    )
    commit = pool.commit().commit
    assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
    first, second = sorted(commit.schedule.batch.items(), key=lambda kv: kv[1][0])
    assert first[0] == "a" and second[1][0] == 2  # b planned from a's limit, not its 6-step forecast
    assert [pool.commit().expired for _ in range(2)][1][0].job_id == "a"


def test_upstream_time_limit_failures_are_not_requeued():
    pool = at_step(1)
    pool.apply([ev("job.submitted", job("u", time_limit=None, requeue=True), ref="u")], T0)
    effects = pool.apply([ev("job.failed", {"id": "u", "reason": "time_limit", "detail": "slurm TIMEOUT"})], T0)
    assert effects == [Failed("u", "slurm TIMEOUT", by_gpualloc=False)]
    assert "u" not in pool.planner.running and "u" not in pool.planner.queued


@pytest.mark.parametrize("bad", [0, LIMITS.duration + 1, 2.5, "3"])
def test_a_time_limit_out_of_bounds_names_the_field(bad):
    with pytest.raises(ValidationError, match="time_limit"):
        JobSubmitted.model_validate(job("x", time_limit=bad))
    assert JobSubmitted.model_validate(job("x", time_limit=LIMITS.duration)).time_limit == LIMITS.duration


def records() -> list[Record]:
    """A pool, a job with a 2-step limit that never completes and one without a limit."""
    config = message("pool.configured", POOL, 0, T0)
    jobs = [message("job.submitted", job("t", time_limit=2), 1, T0), message("job.submitted", job("f", None), 2, T0)]
    return [Record("gpualloc.config", 0, 0, "default", config)] + [
        Record("gpualloc.jobs", 0, k, "default", body) for k, body in enumerate(jobs)
    ]


def test_the_notice_is_published_once_and_replayed_alike_from_the_ledger_and_a_snapshot():
    recs = records()
    d, outputs, entries, snapshots = live(recs, cuts=[1, 2, 3], commits=[2])
    notices = [m for m in outputs if m["type"] == "job.failed"]
    assert [(m["payload"]["id"], m["payload"]["reason"], m["payload"]["source"]) for m in notices] == [
        ("t", "time_limit", "agent")
    ]
    again, replayed = replay(entries, recs)
    assert replayed == outputs and dump_pool(again.interpreter) == dump_pool(d.interpreter)
    restored = fresh()  # from the snapshot after the pass that started it, before its limit
    restored.restore(snapshots[1])
    assert restored.interpreter.planner.running["t"].spec.time_limit == 2
    tail, out = replay(entries[2:], recs, restored)
    assert [m for m in out if m["type"] == "job.failed"] == notices
    assert dump_pool(tail.interpreter) == dump_pool(d.interpreter)


def test_a_snapshot_written_without_time_limits_still_restores():
    d = fresh()
    d.handle(records()[:1] + [records()[2]], T0)
    payload = d.snapshot(T0 + timedelta(seconds=1), 0, 0, 0)[0].message["payload"]
    restored = fresh()
    restored.restore(PoolSnapshot.model_validate(payload))  # its jobs' fields carry no limit
    assert restored.interpreter.planner.running["f"].spec.time_limit is None


def test_the_pools_default_limits_jobs_that_give_none_and_a_snapshot_keeps_it():
    pool = Pool()
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 2})], T0)
    pool.apply([ev("job.submitted", job("d", None, gpus=4), ref="d"), ev("job.submitted", job("o", 5), ref="o")], T0)
    assert {j: r.spec.time_limit for j, r in pool.planner.running.items()} == {"d": 2, "o": 5}  # its own wins
    restored = load_pool(dump_pool(pool), Pool())
    assert restored.planner.config.time_limit == 2 and dump_pool(restored) == dump_pool(pool)
    assert [[f.job_id for f in pool.commit().expired] for _ in range(3)] == [[], [], ["d"]]


def test_a_job_submitted_before_a_new_default_keeps_the_one_in_force_in_the_same_pass():
    """The configuration comes first in its pass; a job submitted before it occurred still gets
    the default of its own time, one submitted after it the new one."""
    pool = Pool()
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 8})], T0)
    pool.apply(
        [
            ev("job.submitted", job("before", None, gpus=1), minutes=1, ref="before"),
            ev("pool.configured", {**POOL, "time_limit": 2}, minutes=2),
            ev("job.submitted", job("after", None, gpus=1), minutes=3, ref="after"),
        ],
        T0 + timedelta(minutes=3),
    )
    assert {j: r.spec.time_limit for j, r in pool.planner.running.items()} == {"before": 8, "after": 2}


def test_a_late_job_gets_the_default_of_its_time_and_an_unchanged_default_keeps_the_history():
    pool = Pool()
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 8})], T0)
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 2}, minutes=10)], T0 + timedelta(minutes=10))
    pool.apply([ev("pool.configured", {**POOL, "gpus": 8, "time_limit": 2}, minutes=20)], T0 + timedelta(minutes=20))
    pool.apply(
        [
            ev("job.submitted", job("early", None, gpus=1), minutes=5, ref="early"),  # delivered late
            ev("job.submitted", job("between", None, gpus=1), minutes=15, ref="between"),
        ],
        T0 + timedelta(minutes=25),
    )
    assert {j: r.spec.time_limit for j, r in pool.planner.running.items()} == {"early": 8, "between": 2}


def test_jobs_that_waited_for_the_first_configuration_take_its_default():
    pool = Pool()
    pool.apply([ev("job.submitted", job("w", None, gpus=1), ref="w")], T0)
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 4}, minutes=1)], T0 + timedelta(minutes=1))
    assert pool.planner.running["w"].spec.time_limit == 4


def test_a_restored_pool_keeps_when_its_default_changed():
    """The default a change replaced, and when, survive a snapshot: a job submitted before the
    change and delivered after a restart still gets the default of its time."""
    pool = Pool()
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 8})], T0)
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 2}, minutes=10)], T0 + timedelta(minutes=10))
    restored = load_pool(dump_pool(pool), Pool())
    assert restored.planner.config == pool.planner.config and restored.planner.config.time_limit_since is not None
    restored.apply(
        [ev("job.submitted", job("early", None, gpus=1), minutes=5, ref="early")], T0 + timedelta(minutes=11)
    )
    assert restored.planner.running["early"].spec.time_limit == 8


def test_a_replay_of_rules_1_gives_the_default_of_the_configuration_it_holds():
    """Entries written by rules 1 replay as they were decided: a job without a limit got the
    default of the configuration the pool held when it decided the job."""
    pool = Pool()
    pool.use("heuristic", 0.05, None, 0, ForecastSettings(), rules=1)
    pool.apply([ev("pool.configured", {**POOL, "time_limit": 8})], T0)
    pool.apply(
        [
            ev("job.submitted", job("before", None, gpus=1), minutes=1, ref="before"),
            ev("pool.configured", {**POOL, "time_limit": 2}, minutes=2),
        ],
        T0 + timedelta(minutes=3),
    )
    assert pool.planner.running["before"].spec.time_limit == 2

"""A live pool resized by a second `pool.configured`: more GPUs take queued work at the next
step; fewer fail the jobs running on the GPUs that leave (re-queued, as for a node going down) and
drop the queued jobs that no longer fit; a shape the running work cannot take is refused with the
field and the reason. Every commit around the change passes the online rules."""

from __future__ import annotations

from support.builders import T0, ev

from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.planner.effects import Failed, Rejected
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import JobSpec, Running
from gpualloc.solvers.problem import mask_of


def pool_of(gpus: int, node: int = 8) -> Pool:
    pool = Pool()
    pool.apply([ev("pool.configured", {"gpus": gpus, "gpus_per_node": node, "horizon": 8, "step_minutes": 60})], T0)
    return pool


def submit(pool: Pool, name: str, gpus: int, duration: int = 6, priority: int = 5) -> None:
    pool.apply(
        [
            ev(
                "job.submitted",
                {"id": name, "kind": "training", "priority": priority, "gpus": gpus, "duration": duration},
                ref=name,
            )
        ],
        T0,
    )


def resize(pool: Pool, gpus: int, node: int = 8) -> list:
    return pool.apply(
        [ev("pool.configured", {"gpus": gpus, "gpus_per_node": node, "horizon": 8, "step_minutes": 60}, ref="resize")],
        T0,
    )


def test_more_gpus_take_the_queue_at_the_next_step():
    pool = pool_of(16)
    for k in range(4):
        submit(pool, f"j{k}", 8)
    commits = [pool.commit().commit]
    assert sorted(commits[0].assignments) == ["j0", "j1"]
    assert resize(pool, 32) == []
    commits.append(pool.commit().commit)
    assert sorted(commits[1].assignments) == ["j0", "j1", "j2", "j3"]
    assert commits[1].assignments["j0"] == commits[0].assignments["j0"]  # running work stays where it is
    assert online_violations(commits, {}, set(), node_size=8) == []


def test_fewer_gpus_fail_the_jobs_on_the_gpus_that_leave_and_drop_what_no_longer_fits():
    pool = pool_of(32)
    for k, gpus in enumerate([8, 4, 8, 8]):
        submit(pool, f"j{k}", gpus, priority=9)
    submit(pool, "whole", 32, priority=1)  # queued behind: no 32-GPU block before the others end
    pool.apply([ev("app.registered", {"id": "rt", "priority": 9, "min_gpus": 2, "max_gpus": 24})], T0)
    commits = [pool.commit().commit]
    lost = sorted(j for j, r in pool.planner.running.items() if r.mask >> 16)
    assert lost  # running on the half that leaves
    effects = resize(pool, 16)
    failed = {e.job_id: e for e in effects if isinstance(e, Failed)}
    assert set(failed) == set(lost) | {"whole"} and all(e.by_gpualloc for e in failed.values())
    assert "no longer fit the pool of 16 GPUs" in failed["whole"].detail and "whole" not in pool.planner.queued
    assert all(j in pool.planner.queued for j in lost)  # re-queued, as for a node going down
    assert pool.planner.apps["rt"].held >> 16 == 0
    commits.append(pool.commit().commit)
    assert all(g < 16 for gpus in commits[1].assignments.values() for g in gpus)
    assert len(commits[1].assignments["rt"]) >= 2
    assert (
        online_violations(
            commits, {"rt": (2, 24, pool.planner.config.swap_cap)}, {"rt"}, failed={j: [1] for j in lost}, node_size=8
        )
        == []
    )


def test_too_few_gpus_for_the_apps_floors_are_refused_with_the_reason():
    pool = pool_of(32)
    submit(pool, "a", 8)
    pool.apply([ev("app.registered", {"id": "rt", "priority": 9, "min_gpus": 8})], T0)
    effects = resize(pool, 4, node=4)
    assert [type(e) for e in effects] == [Rejected]
    assert effects[0].reason.startswith("gpus: 4 GPUs cannot hold the registered apps' floors (8 GPUs)")
    assert pool.planner.config.gpus == 32 and "a" in pool.planner.running


def test_a_node_size_change_is_refused_only_when_a_running_block_would_cross_a_node():
    pool = pool_of(16, node=8)
    submit(pool, "a", 8)
    pool.commit()
    assert resize(pool, 16, node=4) == [] and pool.planner.config.node_size == 4  # two whole nodes of 4
    pool = pool_of(16, node=8)
    spec = JobSpec("mid", "training", 5, 4, 6, 0)
    pool.planner.running["mid"] = Running(spec, mask_of(range(2, 6)), 0)  # legal in a node of 8, across two of 4
    effects = resize(pool, 16, node=4)
    assert [type(e) for e in effects] == [Rejected]
    assert effects[0].reason.startswith("gpus_per_node: running job 'mid' holds GPUs 2-5, across nodes of 4 GPUs")
    assert resize(pool, 32, node=8) == [] and pool.planner.config.gpus == 32  # whole nodes more: fine


def test_a_running_job_too_large_for_the_smaller_pool_is_failed_once_and_not_requeued():
    pool = pool_of(64)
    submit(pool, "big", 32)
    pool.commit()
    assert "big" in pool.planner.running
    effects = resize(pool, 16)
    assert [(e.job_id, e.detail) for e in effects] == [("big", "the pool shrank to 16 GPUs and its GPUs left it")]
    assert "big" not in pool.planner.queued and "big" not in pool.planner.running

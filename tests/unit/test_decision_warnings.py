"""What a decision warns of: a job whose forecast runs past its time limit (it is admitted, and
its reason says it will, or may, be failed at the limit), and a job of an explicit size that the
pool's real-time floors leave no room for (refused, as one sized from its features is) or that
nodes out of service keep from fitting now (it waits, and its reason says how many GPUs the
pool can give it at most now, and why)."""

from __future__ import annotations

from support.builders import T0, ev
from support.feature_jobs import LORA_7B

from gpualloc.solvers.planner.effects import Decided
from gpualloc.solvers.planner.interpreter import Pool

SIZED = {"gpus": 32, "gpus_per_node": 8, "horizon": 96, "step_minutes": 15, "gpu_type": "h100-80gb"}


def decided(pool: Pool, job: dict) -> Decided:
    (out,) = pool.apply([ev("job.submitted", job, ref=job["id"])], T0)
    assert isinstance(out, Decided)
    return out


def featured(id: str, tokens: int) -> dict:
    return {"id": id, "kind": "training", "priority": 3, "features": {**LORA_7B, "dataset_tokens_m": tokens}}


def test_a_forecast_past_the_pools_time_limit_is_admitted_with_a_warning_in_its_reason():
    pool = Pool()
    pool.apply([ev("pool.configured", {**SIZED, "time_limit": 40})], T0)
    long = decided(pool, featured("long", 500)).decision  # forecast median 44.9 steps
    assert long.action == "start" and long.forecast is not None and long.forecast.median > 40
    assert long.reason.endswith(
        "; warning: its forecast median 44.9 steps exceeds its time limit of 40 steps; it will be failed at the limit"
    )
    short = decided(pool, featured("short", 50)).decision  # median 4.5, planned 7: within the limit
    assert short.reason.endswith("; time limit 40 steps: failed that long after it starts, unless it ends first")
    assert "warning" not in short.reason


def test_a_forecast_whose_planned_quantile_alone_runs_past_the_limit_may_be_failed():
    pool = Pool()
    pool.apply([ev("pool.configured", SIZED)], T0)
    job = {**featured("edge", 50), "time_limit": 5}  # median 4.5 steps, 7 planned at the 70% quantile
    reason = decided(pool, job).decision.reason
    assert reason.endswith(
        "; warning: its forecast 70% quantile, 7 steps, exceeds its time limit of 5 steps; it may be failed at the limit"
    )


def test_a_given_duration_gets_no_forecast_warning():
    pool = Pool()
    pool.apply([ev("pool.configured", {**SIZED, "time_limit": 40})], T0)
    job = {"id": "given", "kind": "training", "priority": 3, "gpus": 8, "duration": 30}
    assert "warning" not in decided(pool, job).decision.reason


def floored(*nodes: tuple[int, str]) -> Pool:
    """32 GPUs in nodes of 8, two apps keeping 4 GPUs each, `nodes` (index, state) set."""
    pool = Pool()
    events = [ev("pool.configured", {"gpus": 32, "gpus_per_node": 8, "horizon": 12})]
    events += [ev("app.registered", {"id": app, "priority": 5, "min_gpus": 4}) for app in ("chat", "search")]
    events += [ev("node.status", {"node": node, "state": state}) for node, state in nodes]
    assert pool.apply(events, T0) == []
    return pool


def test_an_explicit_size_the_floors_leave_no_room_for_is_refused_with_the_room_the_pool_has():
    pool = floored((3, "down"))
    d = decided(pool, {"id": "all", "kind": "training", "priority": 9, "gpus": 32, "duration": 4}).decision
    assert d.action == "rejected"
    assert d.reason == (
        "job.gpus: 32 GPUs can never fit beside the real-time apps' floors: the pool can give it at most 16 GPUs now "
        "(the pool's 32, less app floors 8 (chat: 4, search: 4), less 8 on down or drained nodes); refused, as a job "
        "sized from its features is (a smaller job, lower floors or a larger pool would fit)"
    )
    assert "all" not in pool.planner.queued  # not left to wait forever


def test_an_explicit_size_nodes_out_keep_from_fitting_now_waits_saying_so_and_starts_when_they_return():
    pool = floored((3, "down"), (2, "drained"))
    d = decided(pool, {"id": "half", "kind": "training", "priority": 9, "gpus": 16, "duration": 4}).decision
    assert d.action == "queued"
    assert d.reason == (
        "its 16 GPUs cannot fit now: the pool can give it at most 8 GPUs now (the pool's 32, less app floors 8 "
        "(chat: 4, search: 4), less 16 on down or drained nodes); it waits, replanned at every step boundary"
    )
    pool.apply([ev("node.status", {"node": 2, "state": "up"}), ev("node.status", {"node": 3, "state": "up"})], T0)
    commit = pool.commit().commit
    assert "half" in commit.assignments  # it fits once they are back


def test_a_size_within_the_room_now_is_decided_as_before():
    pool = floored((3, "down"))
    d = decided(pool, {"id": "fits", "kind": "training", "priority": 9, "gpus": 16, "duration": 4}).decision
    assert d.action == "start" and "cannot fit" not in d.reason

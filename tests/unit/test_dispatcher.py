"""The agent's logic without a broker: records in, messages out (the Kafka shell only moves
bytes). Decisions, commits and dead letters as the events contract defines them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import orjson
from support.feature_jobs import LORA_7B

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.schemas.commits import commit_grid
from gpualloc.schemas.published import AllocationDecided, InputRejected, PlanCommitted
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.interpreter import Pool

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
POOL = {"gpus": 16, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60, "swap_cap": 2}


def rec(kind: str, payload: dict, n: int, topic: str = "gpualloc.jobs", **env) -> Record:
    message = {
        "event_id": f"e{n}",
        "type": kind,
        "occurred_at": env.pop("at", T0.isoformat()),
        "pool": env.pop("pool", "default"),
        "schema_version": 1,
        "payload": payload,
    }
    return Record(topic, 0, n, payload.get("id"), orjson.dumps(message))


def job(n: int, gpus: int = 2, duration: int = 3, priority: float = 5) -> Record:
    return rec(
        "job.submitted",
        {"id": f"j{n}", "kind": "training", "priority": priority, "gpus": gpus, "duration": duration},
        n,
    )


def payloads(outputs, model):
    kind = {AllocationDecided: "allocation.decided", PlanCommitted: "plan.committed", InputRejected: "input.rejected"}[
        model
    ]
    return [model.model_validate(o.message["payload"]) for o in outputs if o.message["type"] == kind]


def configured() -> Dispatcher:
    d = Dispatcher("default", interpreter=Pool(step_seconds=10))
    d.handle([rec("pool.configured", POOL, 0, "gpualloc.config")], T0)
    return d


def test_one_decision_per_arrival_from_one_pass_and_jobs_before_the_config_wait_for_it():
    d = Dispatcher("default")
    early = d.handle([job(1)], T0)
    assert early == [] and d.interpreter.planner is None
    out = d.handle([rec("pool.configured", POOL, 0, "gpualloc.config")] + [job(n) for n in range(2, 6)], T0)
    decided = payloads(out, AllocationDecided)
    assert sorted(x.job_id for x in decided) == ["j1", "j2", "j3", "j4", "j5"]
    assert all(x.action == "start" for x in decided)
    assert {x.pass_size for x in decided} == {5}  # the job that waited is decided with the pass's own
    owned = [set(x.gpus) for x in decided]
    assert all(not (a & b) for i, a in enumerate(owned) for b in owned[i + 1 :])


def test_redelivered_and_other_pools_events_are_ignored():
    d = configured()
    assert len(d.handle([job(1)], T0)) == 1
    assert d.handle([job(1)], T0) == []
    assert (
        d.handle(
            [
                rec(
                    "job.submitted",
                    {"id": "x", "kind": "training", "priority": 1, "gpus": 1, "duration": 1},
                    9,
                    pool="other",
                )
            ],
            T0,
        )
        == []
    )


FEATURES = LORA_7B  # valid; this pool names no GPU type to size them for


def test_bad_messages_are_dead_lettered_with_the_field_and_the_rule():
    d = configured()
    bad = [
        Record("gpualloc.jobs", 0, 7, "k", b"{not json"),
        rec("job.submitted", {"id": "j", "kind": "training", "priority": 0, "gpus": 1, "duration": 1}, 8),
        rec("traffic.observed", {"app": "ghost", "gpus": 2}, 9, "gpualloc.traffic"),
        rec("job.submitted", {"id": "f", "kind": "training", "priority": 1, "features": FEATURES}, 10),
    ]
    out = d.handle(bad + [job(11)], T0)
    rejected = payloads(out, InputRejected)
    assert [r.offset for r in rejected] == [7, 8, 9]
    assert "not JSON" in rejected[0].reason and "priority" in rejected[1].reason
    assert "'ghost' is not registered" in rejected[2].reason
    assert rejected[0].original == "{not json" and out[0].key == "k"
    decided = payloads(out, AllocationDecided)
    assert [(x.job_id, x.action) for x in decided] == [("f", "rejected"), ("j11", "start")]  # the good one goes through
    assert decided[0].reason.startswith("features.gpu_type:")  # valid, but nothing says what to size it for


def test_commits_every_step_are_legal_and_running_jobs_stay_put():
    d = configured()
    d.handle(
        [
            rec(
                "app.registered",
                {"id": "chat", "priority": 6, "min_gpus": 1, "max_gpus": 6, "profile": [2] * 12 + [5] * 12},
                1,
                "gpualloc.traffic",
            )
        ],
        T0,
    )
    outputs, windows, n = [], [], 100
    for step in range(8):
        now = T0 + timedelta(seconds=10 * step)
        d.handle([job(n + k, gpus=[1, 2, 4][k % 3], duration=1 + k % 4) for k in range(3)], now)
        n += 3
        outputs += d.commit(now)
        windows.append(d.last_commit.window)
    published = [PlanCommitted.model_validate(o.message["payload"]) for o in outputs]
    assert [c.step for c in published] == list(range(8)) and [c.seq for c in published] == list(range(1, 9))
    assert published[1].step_start - published[0].step_start == timedelta(seconds=10)
    for window, c in zip(windows, published):
        assert not check_plan(window, commit_grid(c.model_dump()))
    held: dict[str, tuple[int, list[int]]] = {}
    for c in published:  # a started job keeps its GPUs at every step until it ends
        for owner, gpus in c.assignments.items():
            if owner.startswith("j"):
                assert held.get(owner, (c.step - 1, gpus)) == (c.step - 1, gpus), owner
                held[owner] = (c.step, gpus)


def test_apps_sent_at_set_up_keep_their_floors_whichever_topic_a_poll_read_first():
    """Jobs polled before the configuration wait for it; the apps that follow it in the next
    pass register before those jobs are decided, and their floors hold in the first commit."""
    apps = [
        rec(
            "app.registered", {"id": f"rt-{k}", "priority": 6, "min_gpus": 2, "max_gpus": 4}, 20 + k, "gpualloc.traffic"
        )
        for k in range(3)
    ]
    adverse = [job(n) for n in range(8)] + [rec("pool.configured", POOL, 10, "gpualloc.config")] + apps
    adverse += [job(n) for n in range(30, 34)]  # 12 jobs of 2 GPUs: the pool's 16 GPUs, twice over
    for passes in (adverse[:8], adverse[8:]), (adverse,):
        d = Dispatcher("default", interpreter=Pool(step_seconds=10))
        out = [o for events in passes for o in d.handle(list(events), T0)]
        assert payloads(out, InputRejected) == []
        assert d.interpreter.planner is not None and sorted(d.interpreter.planner.apps) == ["rt-0", "rt-1", "rt-2"]
        started = {x.job_id for x in payloads(out, AllocationDecided) if x.action == "start"}
        assert len(started) == (16 - 3 * 2) // 2  # the jobs take what the floors leave
        commit = payloads(d.commit(T0), PlanCommitted)[0]
        assert all(len(commit.assignments[f"rt-{k}"]) >= 2 for k in range(3))
        assert not check_plan(d.last_commit.window, commit_grid(commit.model_dump()))


def test_a_node_drained_under_a_running_job_gets_no_new_work_in_decisions_or_plans():
    """pretrain-b runs on a node that is then drained: the jobs decided next, and every commit's
    tentative plan, keep new work off that node's GPUs at every step, before and after
    pretrain-b ends; pretrain-b runs on there until it does."""
    d = Dispatcher("default", interpreter=Pool(step_seconds=10))
    pool = {"gpus": 32, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60, "swap_cap": 2}
    d.handle([rec("pool.configured", pool, 0, "gpualloc.config")], T0)
    durations = {"long-0": 40, "pretrain-b": 4, "long-2": 40, "long-3": 6}
    first = [
        rec("job.submitted", {"id": k, "kind": "training", "priority": 9, "gpus": 8, "duration": n}, i + 1)
        for i, (k, n) in enumerate(durations.items())
    ]
    decided = {x.job_id: x for x in payloads(d.handle(first, T0), AllocationDecided)}
    assert all(x.action == "start" for x in decided.values())
    node = decided["pretrain-b"].gpus[0] // 8
    drained = set(range(8 * node, 8 * node + 8))
    out = d.commit(T0)
    now = T0 + timedelta(seconds=10)
    later = [rec("node.status", {"node": node, "state": "drained", "detail": "maintenance"}, 10, "gpualloc.config")]
    later += [
        rec("job.submitted", {"id": f"sft-{k}", "kind": "training", "priority": 5, "gpus": 8, "duration": 2}, 11 + k)
        for k in range(3)
    ]
    news = payloads(d.handle(later, now), AllocationDecided)
    assert len(news) == 3 and all(not drained & set(x.gpus) for x in news), news
    assert any(x.action == "planned" for x in news)  # they wait for a node that is not drained
    for step in range(1, 8):
        ending = {4: "pretrain-b", 6: "long-3"}.get(step)  # at their planned ends
        if ending:
            done = rec("job.completed", {"id": ending, "detail": "ok"}, 20 + step)
            d.handle([done], T0 + timedelta(seconds=10 * step - 5))
        out += d.commit(T0 + timedelta(seconds=10 * step))
    commits = payloads(out, PlanCommitted)
    assert [c.step for c in commits] == list(range(8))
    for c in commits[1:]:
        grid = commit_grid(c.model_dump())
        for g in drained:
            assert set(grid[g]) <= {"pretrain-b", None}, (c.step, g, grid[g])
    assert all(set(c.assignments["pretrain-b"]) == drained for c in commits[:4])
    assert all(not drained & {g for gpus in c.assignments.values() for g in gpus} for c in commits[4:])
    assert any(c.started for c in commits[4:]), "the queued jobs start elsewhere"


def test_a_commit_carries_the_reservations_and_only_where_a_pool_asks_for_them():
    """Two jobs hold the pool for 3 steps; a whole-pool job arrives behind them. Past the bound of
    one step it holds a reservation from step 3, which every commit names until it starts there;
    a pool without `reserved_jobs` commits none (the field null, as before it was added)."""
    for reserved in (1, None):
        d = Dispatcher("default", interpreter=Pool(step_seconds=10))
        config = {**POOL, "starvation_steps": 1, **({"reserved_jobs": reserved} if reserved else {})}
        d.handle([rec("pool.configured", config, 0, "gpualloc.config")], T0)
        d.handle([job(1, gpus=8, duration=3), job(2, gpus=8, duration=3)], T0)
        commits = payloads(d.commit(T0), PlanCommitted)
        d.handle([job(3, gpus=16, duration=2)], T0 + timedelta(seconds=5))
        for step in range(1, 4):
            at = T0 + timedelta(seconds=10 * step)
            if step == 3:
                d.handle([rec("job.completed", {"id": f"j{n}"}, 10 + n) for n in (1, 2)], at)
            commits += payloads(d.commit(at), PlanCommitted)
        assert commits[0].started == ["j1", "j2"] and "j3" in commits[3].started
        if reserved is None:
            assert all(c.reservations is None for c in commits)
            continue
        assert commits[1].reservations is None  # at step 1 it has waited less than a step
        for c in commits[2:3]:
            assert c.reservations is not None
            assert c.reservations["j3"].model_dump() == {"start_step": 3, "first_gpu": 0, "gpus": 16}
        assert commits[3].reservations is None


def test_a_configuration_with_an_unknown_value_model_or_too_many_reservations_is_dead_lettered():
    for bad, field in (({"value_model": "fastest"}, "value_model"), ({"reserved_jobs": 65}, "reserved_jobs")):
        d = Dispatcher("default", interpreter=Pool(step_seconds=10))
        out = d.handle([rec("pool.configured", {**POOL, **bad}, 0, "gpualloc.config")], T0)
        [rejected] = payloads(out, InputRejected)
        assert field in rejected.reason and d.interpreter.planner is None
    d = configured()
    d.handle(
        [rec("pool.configured", {**POOL, "value_model": "completion", "reserved_jobs": 64}, 1, "gpualloc.config")], T0
    )
    assert d.interpreter.planner is not None
    assert (d.interpreter.planner.config.value_model, d.interpreter.planner.config.reserved_jobs) == ("completion", 64)

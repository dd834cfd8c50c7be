"""Node agents known alive (`node_watch`): a pool whose node agents report places new work only on
nodes it hears, keeps running work on a node gone silent, and re-queues, once, a start no agent
bound in time; a pool no node agent reports to plans as before."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.builders import T0, ev
from support.examples import examples

from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.planner.effects import Decided, Event, Failed, Granted, Rejected, Requeued
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import dump_planner, load_planner

POOL = {"gpus": 32, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}  # 4 nodes
S = timedelta(seconds=1)
POOL_CAP = 2  # the pool's swap cap, the app's (`PoolDefaults.swap_cap`)


def job(name: str, gpus: int = 8, duration: int = 6) -> Event:
    return ev(
        "job.submitted",
        {"id": name, "kind": "training", "priority": 5, "gpus": gpus, "duration": duration},
        ref=name,
    )


def beat(node: int, interval: float = 10.0, holders: list[str] | None = None) -> Event:
    return ev("node.heartbeat", {"node": node, "interval_seconds": interval, "holders": holders or []}, ref=node)


def bound(node: int, job_id: str) -> Event:
    return ev("binding.reported", {"node": node, "job_id": job_id, "gpus": [], "status": "bound"})


def nodes_of(pool: Pool, job_id: str) -> set[int]:
    mask = pool.planner.running[job_id].mask
    return {g // 8 for g in range(32) if mask >> g & 1}


def configured(**extra: object) -> Pool:
    pool = Pool()
    pool.apply([ev("pool.configured", {**POOL, **extra})], T0)
    return pool


def test_a_pool_no_node_agent_reports_to_places_work_on_every_node_and_tracks_nothing():
    pool = configured()
    pool.apply([job(f"j{n}") for n in range(4)], T0 + S)
    assert {n for j in pool.planner.running for n in nodes_of(pool, j)} == {0, 1, 2, 3}
    assert pool.planner.unbound == {} and pool.planner.closed == 0
    pool.apply([], T0 + 3600 * S)  # an hour later nothing is re-queued: no agent was ever expected
    assert len(pool.planner.running) == 4


def test_once_node_agents_report_a_node_not_heard_within_a_silence_bound_takes_no_new_work():
    pool = configured()
    pool.apply([beat(0), beat(1), beat(2)], T0 + S)
    assert pool.planner.closed == 0  # node 3's agent may still be starting: it has the silence bound to report
    pool.apply([beat(0), beat(1), beat(2)], T0 + 32 * S)
    assert pool.planner.closed == 0xFF << 24
    effects = pool.apply([job(f"j{n}") for n in range(4)], T0 + 33 * S)
    actions = [e.decision.action for e in effects if isinstance(e, Decided)]
    assert actions.count("start") == 3  # node 3 has no agent: the fourth waits
    assert all(3 not in nodes_of(pool, j) for j in pool.planner.running)
    commit = pool.commit(now=T0 + 34 * S).commit
    assert all(g < 24 for gpus in commit.assignments.values() for g in gpus)
    pool.apply([beat(3)], T0 + 35 * S)  # its agent starts: the node takes work
    assert pool.planner.closed == 0


def test_a_silent_node_takes_no_new_work_keeps_its_running_jobs_and_only_down_fails_them():
    pool = configured()
    pool.apply([beat(n) for n in range(4)], T0)
    pool.apply([job("a", gpus=32, duration=2)], T0 + S)
    pool.apply([bound(n, "a") for n in range(4)], T0 + 2 * S)
    assert pool.planner.unbound == {}
    # node 3's agent stops; the others keep beating: at 40 s it is past the 30 s bound
    pool.apply([beat(0), beat(1), beat(2)], T0 + 40 * S)
    assert pool.planner.unheard == 0xFF << 24
    assert "a" in pool.planner.running  # bound there, still running: unconfirmed, never failed for silence
    pool.apply([ev("job.completed", {"id": "a"})], T0 + 41 * S)
    pool.commit(now=T0 + 42 * S)
    effects = pool.apply([job("b", gpus=32), job("c", gpus=8), job("d"), job("e"), job("f")], T0 + 43 * S)
    decided = {e.decision.job_id: e.decision for e in effects if isinstance(e, Decided)}
    assert decided["b"].action != "start"  # the whole pool is not open: node 3 is silent
    assert all(3 not in nodes_of(pool, j) for j in pool.planner.running)
    assert [d.action for d in decided.values()].count("start") == 3  # nodes 0-2 only
    on_zero = {j for j in pool.planner.running if 0 in nodes_of(pool, j)}
    down = pool.apply([ev("node.status", {"node": 0, "state": "down"})], T0 + 44 * S)
    assert {e.job_id for e in down if isinstance(e, Failed)} == on_zero and len(on_zero) == 1


def test_a_start_no_agent_binds_is_requeued_once_as_never_run_and_a_bound_one_stays():
    pool = configured(bind_requeue_seconds=60)
    pool.apply([beat(n) for n in range(4)], T0)
    pool.apply([job("kept"), job("lost", duration=4)], T0 + S)
    kept, lost = nodes_of(pool, "kept").pop(), nodes_of(pool, "lost").pop()
    pool.apply([bound(kept, "kept")], T0 + 2 * S)
    assert set(pool.planner.unbound) == {"lost"}
    beats = [beat(n) for n in range(4)]
    assert not [e for e in pool.apply(beats, T0 + 59 * S) if isinstance(e, Requeued)]  # not yet: 58 s
    effects = pool.apply(beats, T0 + 62 * S)
    requeued = [e for e in effects if isinstance(e, Requeued)]
    assert [e.job_id for e in requeued] == ["lost"]
    assert "re-queued as never run" in requeued[0].reason and f"node {lost}" in requeued[0].reason
    assert "lost" in pool.planner.queued and "lost" not in pool.planner.running and "kept" in pool.planner.running
    assert pool.planner.queued["lost"].submitted == 0  # it waits from its first submission
    commit = pool.commit(now=T0 + 63 * S).commit
    assert "lost" not in commit.assignments or "lost" in commit.started  # planned anew, never held as running
    again = pool.apply(beats, T0 + 64 * S)
    assert not [e for e in again if isinstance(e, Requeued)]  # once


def test_a_heartbeat_listing_a_start_confirms_it_and_a_job_across_nodes_needs_every_node():
    pool = configured()
    pool.apply([beat(n) for n in range(4)], T0)
    pool.apply([job("wide", gpus=16), job("one")], T0 + S)
    wide = sorted(nodes_of(pool, "wide"))
    pool.apply([bound(wide[0], "wide")], T0 + 2 * S)
    assert "wide" in pool.planner.unbound
    pool.apply([beat(wide[1], holders=["wide"]), beat(nodes_of(pool, "one").pop(), holders=["one"])], T0 + 3 * S)
    assert pool.planner.unbound == {}


def test_a_boundary_requeues_too_when_no_heartbeat_comes_at_all():
    pool = configured(bind_requeue_seconds=20, bind_confirm_seconds=5, node_silence_seconds=10)
    pool.apply([beat(n, interval=1) for n in range(4)], T0)
    pool.apply([job("x")], T0 + S)
    committed = pool.commit(now=T0 + 30 * S)  # every agent has died: the boundary sees it
    assert [r.job_id for r in committed.requeued] == ["x"]
    assert "x" not in committed.commit.assignments  # no node has a live agent: nothing starts
    assert pool.planner.closed == (1 << 32) - 1


def test_the_silence_bound_is_three_of_the_agents_own_intervals_when_longer():
    pool = configured()
    pool.apply([beat(0, interval=20), beat(1), beat(2), beat(3)], T0)
    pool.apply([beat(1), beat(2), beat(3)], T0 + 50 * S)
    assert pool.planner.unheard == 0  # node 0 beats every 20 s: silent after 60
    pool.apply([beat(1), beat(2), beat(3)], T0 + 61 * S)
    assert pool.planner.unheard == 0xFF


def test_a_heartbeat_of_a_node_the_pool_has_not_is_rejected_naming_the_field():
    pool = configured()
    (effect,) = pool.apply([beat(9)], T0)
    assert isinstance(effect, Rejected) and effect.reason.startswith("node: must be below 4")
    assert pool.planner.heard == {}


def test_a_snapshot_keeps_what_the_pool_knows_of_its_node_agents():
    pool = configured(node_silence_seconds=45)
    pool.apply([beat(0), beat(1, interval=5)], T0)
    pool.apply([job("x")], T0 + S)
    pool.apply([beat(0), beat(1, interval=5)], T0 + 46 * S)  # nodes 2 and 3 never reported: closed
    restored = load_planner(dump_planner(pool.planner), pool.scheduler)
    assert restored.heard == pool.planner.heard and restored.unbound == pool.planner.unbound
    assert restored.unheard == pool.planner.unheard == 0xFFFF << 16 and restored.config.node_silence_seconds == 45
    assert restored.watched_since == pool.planner.watched_since == T0.timestamp()


def test_a_node_reopened_by_its_agent_falls_silent_again_when_it_stops_even_after_every_node_was_silent():
    pool = configured()
    pool.apply([beat(0)], T0)
    pool.apply([], T0 + 40 * S)
    assert pool.planner.closed == (1 << 32) - 1  # node 0 silent, the others never heard
    pool.apply([beat(0)], T0 + 41 * S)
    assert pool.planner.closed == ((1 << 32) - 1) & ~0xFF
    pool.apply([], T0 + 80 * S)
    assert pool.planner.closed == (1 << 32) - 1


def test_at_the_contracts_limits_a_pass_of_4096_heartbeats_and_4096_unbound_starts_plans_and_requeues_them():
    pool = Pool()
    pool.apply([ev("pool.configured", {"gpus": 4096, "gpus_per_node": 1, "horizon": 336})], T0)
    pool.apply([beat(n) for n in range(4096)], T0)
    jobs = [job(f"j{n}", gpus=1, duration=10) for n in range(4096)]
    pool.apply(jobs, T0 + S)
    assert len(pool.planner.running) == len(pool.planner.unbound) == 4096
    committed = pool.commit(now=T0 + 65 * S)  # every agent silent, no start bound: all back in the queue
    assert len(committed.requeued) == 4096 and not pool.planner.running and len(pool.planner.queued) == 4096
    assert committed.commit.assignments == {}


@settings(max_examples=examples(40), deadline=None)
@example(seed=904, passes=4)  # a grant beside an app's GPUs on a node down within the step (R3: past its ceiling)
@given(
    seed=st.integers(0, 10_000),
    passes=st.integers(4, 30),
)
def test_drawn_streams_commit_legal_steps_and_start_nothing_on_a_node_without_a_live_agent(seed, passes):
    """Heartbeats from some nodes (agents stopping and starting), arrivals, bindings of some starts,
    an app with traffic, completions and a node going down, at drawn times: every commit is legal
    (R1-R5 with the closed nodes as unavailable) and no job starts, by decision or commit, on a node
    whose agent was not live then."""
    rng = random.Random(seed)
    pool = configured(bind_requeue_seconds=20, node_silence_seconds=12)
    pool.apply([ev("app.registered", {"id": "rt", "priority": 6, "min_gpus": 2, "max_gpus": 12})], T0)
    alive = {n for n in range(4) if rng.random() < 0.7}
    commits, down, at, n = [], [], T0, 0
    failed: dict[str, list[int]] = {}  # job -> steps it left its GPUs at without ending (re-queued)
    grants: dict[int, dict[str, tuple[int, ...]]] = {}  # step -> apps' sets granted within it
    for k in range(passes):
        at += timedelta(seconds=rng.choice([1, 4, 9, 15]))
        if rng.random() < 0.2:
            alive ^= {rng.randrange(4)}  # an agent stops, or starts
        events = [beat(node) for node in sorted(alive)]
        for _ in range(rng.randint(0, 3)):
            n += 1
            events.append(job(f"j{n}", gpus=rng.choice([1, 2, 4, 8, 16]), duration=rng.randint(1, 6)))
        running = sorted(pool.planner.running)
        for job_id in rng.sample(running, min(len(running), rng.randint(0, 2))):
            node = next(iter(nodes_of(pool, job_id)))
            events.append(bound(node, job_id) if node in alive else ev("job.completed", {"id": job_id}))
        if rng.random() < 0.3:
            events.append(ev("traffic.observed", {"app": "rt", "gpus": rng.randint(0, 14)}, ref=k))
        if rng.random() < 0.05:
            events.append(ev("node.status", {"node": rng.randrange(4), "state": rng.choice(["up", "down"])}))
        for effect in pool.apply(events, at):  # its heartbeats come first: the nodes they open may take its arrivals
            if isinstance(effect, Granted):  # a reactive commit: the app's set for the rest of its step
                grants.setdefault(effect.grant.step, {}).update(effect.grant.sets)
            if isinstance(effect, (Requeued, Failed)):
                failed.setdefault(effect.job_id, []).append(pool.planner.now)
            if isinstance(effect, Decided) and effect.decision.action == "start":
                gpus = sum(1 << g for g in effect.decision.gpus)
                assert not gpus & pool.planner.closed, (k, effect.decision)
        if rng.random() < 0.4:
            step, before = pool.planner.now, set(pool.planner.running)
            committed = pool.commit(now=at)
            for requeued in committed.requeued:
                failed.setdefault(requeued.job_id, []).append(step)
            closed = pool.planner.closed
            for job_id in set(committed.commit.started) - before:  # started by this commit's plan
                assert not pool.planner.running[job_id].mask & closed, (k, job_id)
            commits.append(committed.commit)
            down.append(closed)
    limits = {"rt": (2, 12, POOL_CAP)}
    steps = [replace(c, assignments={**c.assignments, **grants.get(c.step, {})}) for c in commits]
    assert online_violations(steps, limits, {"rt"}, down, failed, node_size=8, pool=(32, {"rt": 6.0})) == []


def test_a_replay_of_older_rules_dead_letters_heartbeats_as_their_release_did():
    pool = Pool(rules=2)
    pool.apply([ev("pool.configured", POOL)], T0)
    (effect,) = pool.apply([beat(0)], T0 + S)
    assert isinstance(effect, Rejected) and "not an input event type of planning rules 2" in effect.reason
    assert pool.planner.heard == {} and pool.planner.closed == 0

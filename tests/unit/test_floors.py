"""Floors first: registered apps keep `min_gpus` at every commit, whatever order their
registrations and the arrivals come in (the same pass, either order, across boundaries, with
plans made ahead), because work that starts before a boundary's replan never takes the GPUs an
app's floor needs; an app whose floor cannot fit beside running work is refused with the reason."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.builders import T0, ev
from support.examples import examples

from gpualloc.solvers.legality import R3_REALTIME, lowered_floors, online_violations
from gpualloc.solvers.planner.effects import Decided, Rejected
from gpualloc.solvers.planner.interpreter import Pool

STEP = timedelta(minutes=60)


def configured(gpus: int, horizon: int, node: int = 8) -> Pool:
    pool = Pool()
    pool.apply(
        [ev("pool.configured", {"gpus": gpus, "gpus_per_node": node, "horizon": horizon, "step_minutes": 60})], T0
    )
    return pool


APP = st.tuples(st.integers(0, 6), st.integers(1, 9), st.integers(0, 9), st.booleans())  # floor, priority,
# GPUs it says it holds now (`current`, new apps), registered again (an app already known, with new bounds)
JOB = st.tuples(st.integers(1, 9), st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 8))
PASS = st.tuples(
    st.lists(APP, max_size=4),
    st.lists(JOB, max_size=12),
    st.booleans(),
    st.integers(0, 3),
    st.sampled_from(["none", "commit", "ahead"]),
)


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(
    st.sampled_from([16, 32, 64, 128]),
    st.sampled_from([4, 8]),
    st.integers(2, 12),
    st.lists(PASS, min_size=1, max_size=8),
    st.randoms(),
)
def test_every_commit_keeps_every_registered_floor(gpus, node, horizon, passes, rnd):
    """Passes of app registrations (new apps holding GPUs or not, known apps with new bounds)
    and arrivals shuffled together (completions now and then), boundaries between some of them,
    the next boundary's plan made ahead before some: every commit keeps each app the pool
    accepted within the bounds in force then, and the swap caps and one owner per GPU across
    commits; what the pool refuses, it refuses with the field."""
    pool = configured(gpus, horizon, node)
    planner, commits, limits, bounds, n = pool.planner, [], {}, [], 0
    for apps, jobs, leave, order, boundary in passes:
        now = T0 + planner.now * STEP
        events = []
        for floor, priority, holds, again in apps:
            name = rnd.choice(sorted(limits)) if again and limits else f"rt-{n}"
            taken = [m for _, m, _ in planner.running.values()] + [a.held for a in planner.apps.values() if a.held > 0]
            free = [g for g in range(gpus) if not any(m >> g & 1 for m in taken)]
            payload = {"id": name, "priority": priority, "min_gpus": floor, "max_gpus": max(floor, 8)}
            if holds and free and name not in limits:
                payload["current"] = free[-min(len(free), holds) :]
            events.append(ev("app.registered", payload, minutes=planner.now * 60, ref=("app", name, floor)))
            n += 1
        events += [
            ev(
                "job.submitted",
                {"id": f"j{n}-{k}", "kind": "training", "priority": p, "gpus": g, "duration": d},
                minutes=planner.now * 60,
                ref=f"j{n}-{k}",
            )
            for k, (p, g, d) in enumerate(jobs)
        ]
        n += 1
        if leave and planner.running:
            events.append(ev("job.completed", {"id": rnd.choice(sorted(planner.running))}, minutes=planner.now * 60))
        events = events if order == 0 else events[::-1] if order == 1 else rnd.sample(events, len(events))
        effects = pool.apply(events, now)
        refused = {e.ref: e.reason for e in effects if isinstance(e, Rejected)}
        assert all(r.split(":")[0] in ("min_gpus", "max_gpus", "current") for r in refused.values()), refused
        for e in events:
            if e.type == "app.registered" and e.ref not in refused:
                limits[e.ref[1]] = (e.ref[2], max(e.ref[2], 8), planner.config.swap_cap)
        floors = sum(a.spec.min_gpus for a in planner.apps.values())
        for e in effects:  # refused only where the floors leave no room for it (`reasons.Room.refused`)
            if isinstance(e, Decided) and e.decision.action == "rejected":
                assert "can never fit beside the real-time apps' floors" in e.decision.reason, e.decision
                assert int(e.decision.reason.split()[1]) > gpus - floors, (e.decision, floors)
        if boundary == "ahead":
            problem = planner.boundary.cut()
            planner.boundary.planned_ahead(planner.scheduler(problem))
        if boundary != "none":
            commits.append(pool.commit().commit)
            bounds.append(dict(limits))
    commits.append(pool.commit().commit)
    bounds.append(dict(limits))
    assert online_violations(commits, limits, set(limits), node_size=node, exempt={R3_REALTIME}) == []
    for commit, limit in zip(commits, bounds):
        for app, (lo, hi, _) in limit.items():
            assert lo <= len(commit.assignments[app]) <= hi, (commit.step, app, commit.assignments[app], lo, hi)


def test_an_app_registered_after_the_backlog_gets_its_floor_at_the_next_commit():
    pool = configured(64, 24)
    pool.apply(
        [
            ev("job.submitted", {"id": f"j{k}", "kind": "training", "priority": 9, "gpus": 8, "duration": 10}, ref=k)
            for k in range(4)
        ],
        T0,
    )  # running now, on 32 GPUs, and a plan without apps
    pool.apply(
        [ev("app.registered", {"id": "rt", "priority": 1, "min_gpus": 4, "max_gpus": 8}, ref="rt")]
        + [
            ev("job.submitted", {"id": f"k{k}", "kind": "training", "priority": 9, "gpus": 8, "duration": 10}, ref=k)
            for k in range(8)
        ],
        T0,
    )
    started = [job for job, r in pool.planner.running.items() if r.start == 0]
    assert len(started) == 7  # 56 of the 64 GPUs: 8 stay free, 4 of them for rt's floor
    commit = pool.commit().commit
    assert len(commit.assignments["rt"]) >= 4


def test_an_app_whose_floor_cannot_fit_beside_running_work_is_refused_with_the_reason():
    pool = configured(16, 8)
    pool.apply(
        [ev("job.submitted", {"id": "big", "kind": "training", "priority": 5, "gpus": 16, "duration": 4}, ref="big")],
        T0,
    )
    effects = pool.apply([ev("app.registered", {"id": "rt", "priority": 5, "min_gpus": 2}, ref="rt")], T0)
    assert [type(e) for e in effects] == [Rejected]
    assert (
        effects[0].reason.startswith("min_gpus: 2 GPUs cannot be kept") and "16 of the pool's 16" in effects[0].reason
    )
    assert "rt" not in pool.planner.apps
    effects = pool.apply([ev("app.registered", {"id": "lean", "priority": 5, "min_gpus": 0, "max_gpus": 4})], T0)
    assert effects == [] and "lean" in pool.planner.apps


def test_an_app_cannot_claim_gpus_a_running_job_holds():
    pool = configured(16, 8)
    pool.apply(
        [ev("job.submitted", {"id": "a", "kind": "training", "priority": 5, "gpus": 8, "duration": 4}, ref="a")], T0
    )
    held = sorted(g for g in range(16) if pool.planner.running["a"].mask >> g & 1)
    effects = pool.apply([ev("app.registered", {"id": "rt", "priority": 5, "min_gpus": 1, "current": [held[0]]})], T0)
    assert [type(e) for e in effects] == [Rejected] and effects[
        0
    ].reason == f"current: GPU {held[0]} is held by running job 'a'"


def test_no_job_starts_now_on_the_gpus_a_new_app_holds_before_the_first_commit():
    """An app registering the GPUs it holds now (`current`) before the pool's first commit keeps
    them: arrivals are planned beside them (a job may be planned there for the boundary, never
    started there now), so a floor it registers later still finds them at the commit."""
    pool = configured(16, 2, node=4)
    app = {"id": "rt", "priority": 1, "min_gpus": 0, "max_gpus": 8, "current": [12, 13, 14, 15]}
    jobs = [{"id": f"j{k}", "kind": "training", "priority": 1, "gpus": 1, "duration": 1} for k in range(9)]
    jobs.append({"id": "wide", "kind": "training", "priority": 1, "gpus": 4, "duration": 1})
    effects = pool.apply([ev("app.registered", app)] + [ev("job.submitted", j, ref=j["id"]) for j in jobs], T0)
    started = [e.decision for e in effects if isinstance(e, Decided) and e.decision.action == "start"]
    assert started and all(max(d.gpus) < 12 for d in started)
    assert pool.apply([ev("app.registered", app | {"min_gpus": 3})], T0) == []
    assert len(pool.commit().commit.assignments["rt"]) >= 3


def test_floors_a_down_node_leaves_no_room_for_are_lowered_and_the_check_lowers_them_alike():
    """A node going down while running work holds the rest of the pool: the apps on it hold
    nothing until GPUs come back (running work is never moved). The online check lowers those
    floors as the planner does, least valuable app first, and only while no job starts there."""
    pool = configured(16, 4)
    apps = [("gold", 9, 2, [8, 9]), ("tin", 1, 1, [10])]
    pool.apply([ev("app.registered", {"id": a, "priority": p, "min_gpus": m, "current": c}) for a, p, m, c in apps], T0)
    pool.apply(
        [ev("job.submitted", {"id": "j", "kind": "training", "priority": 5, "gpus": 8, "duration": 9}, ref="j")], T0
    )
    commits = [pool.commit().commit]
    assert len(commits[0].assignments["j"]) == 8 and set(commits[0].assignments["j"]) <= set(range(8))
    pool.apply([ev("node.status", {"node": 1, "state": "down", "detail": "fenced"}, minutes=70)], T0 + STEP)
    commits.append(pool.commit().commit)
    assert commits[1].assignments["gold"] == () and commits[1].assignments["tin"] == ()
    limits = {"gold": (2, 8, 4), "tin": (1, 8, 4)}
    down = [0, 0xFF00]
    priorities = {"gold": 9.0, "tin": 1.0}
    assert online_violations(commits, limits, set(limits), down, node_size=8, pool=(16, priorities)) == []
    unlowered = online_violations(commits, limits, set(limits), down, node_size=8)
    assert unlowered == [
        "step 1: gold holds 0 GPUs, outside [2, 8] (R3)",
        "step 1: tin holds 0 GPUs, outside [1, 8] (R3)",
    ]
    # GPUs left idle beside the down node: the floors stand
    idle = [commits[0], replace(commits[1], assignments={k: v for k, v in commits[1].assignments.items() if k != "j"})]
    assert "step 1: gold holds 0 GPUs, outside [2, 8] (R3)" in online_violations(
        idle, limits, set(limits), down, node_size=8, pool=(16, priorities)
    )
    assert lowered_floors({"gold": 2, "tin": 1}, priorities, 2) == {"gold": 2, "tin": 0}
    # what a swap cap makes an app keep of its set stays, and others' floors give way to it
    assert lowered_floors({"gold": 2, "tin": 1}, priorities, 6, kept={"tin": 5}) == {"gold": 1, "tin": 1}


def test_a_boundary_where_kept_sets_and_floors_overfill_what_a_down_node_leaves_lowers_floors():
    """An app's swap cap makes it keep most of its set; a node going down takes the other app's
    set and running work holds the rest: the floors give way (least valuable first) to what the
    cap keeps, instead of the boundary failing."""
    pool = configured(16, 4)
    apps = [("big", 1, 1, 2, list(range(8, 14))), ("small", 9, 4, 8, [0, 1, 2, 3])]
    pool.apply(
        [
            ev("app.registered", {"id": a, "priority": p, "min_gpus": m, "swap_cap": c, "current": cur})
            for a, p, m, c, cur in apps
        ],
        T0,
    )
    pool.apply([ev("traffic.observed", {"app": "big", "gpus": 6}, ref="t0")], T0)
    jobs = [("j1", 4), ("j2", 2)]
    pool.apply(
        [
            ev("job.submitted", {"id": j, "kind": "training", "priority": 5, "gpus": n, "duration": 9}, ref=j)
            for j, n in jobs
        ],
        T0,
    )
    commits = [pool.commit().commit]
    assert commits[0].assignments["j2"] == (14, 15) and commits[0].assignments["j1"] == (4, 5, 6, 7)
    assert len(commits[0].assignments["big"]) == 6
    down_now = [
        ev("node.status", {"node": 0, "state": "down", "detail": "fenced"}, minutes=70),
        ev("traffic.observed", {"app": "big", "gpus": 6}, minutes=71, ref="t1"),
    ]
    pool.apply(down_now, T0 + STEP)
    commits.append(pool.commit().commit)
    assert len(commits[1].assignments["big"]) >= 4 and len(commits[1].assignments["small"]) == 6 - len(
        commits[1].assignments["big"]
    )
    limits = {"big": (1, 16, 2), "small": (4, 16, 8)}
    down = [0, 0xFF]
    assert (
        online_violations(commits, limits, set(limits), down, node_size=8, pool=(16, {"big": 1.0, "small": 9.0})) == []
    )


def test_a_new_app_holding_gpus_another_floor_was_held_on_leaves_that_floor_room():
    """An app registers the GPUs it holds now (`current`) where the plan held another app's
    floor: that floor is held again on free GPUs, so arrivals of the same pass do not start on
    the GPUs the floors need at the commit."""
    pool = configured(32, 2, node=4)
    pool.apply(
        [ev("app.registered", {"id": "big", "priority": 1, "max_gpus": 8, "current": list(range(23, 32))})]
        + [
            ev("job.submitted", {"id": f"a{k}", "kind": "training", "priority": 1, "gpus": g, "duration": 1})
            for k, g in enumerate([1, 1, 4, 8])
        ],
        T0,
    )
    free = [g for g in range(32) if not any(r.mask >> g & 1 for r in pool.planner.running.values())][:-9]
    jobs = [
        ev("job.submitted", {"id": f"b{k}", "kind": "training", "priority": 1, "gpus": g, "duration": 1})
        for k, g in enumerate([1, 1, 2])
    ]
    apps = [
        ev("app.registered", {"id": "six", "priority": 1, "min_gpus": 6, "max_gpus": 8}, ref="six"),
        ev("app.registered", {"id": "one", "priority": 1, "min_gpus": 1, "max_gpus": 8}, ref="one"),
        ev("app.registered", {"id": "late", "priority": 1, "max_gpus": 8, "current": free[-3:]}, ref="late"),
    ]
    effects = pool.apply(jobs[::-1] + apps, T0)
    accepted = {e.ref for e in apps} - {e.ref for e in effects if isinstance(e, Rejected)}
    commit = pool.commit().commit
    floors = {"six": 6, "one": 1, "late": 1}  # `late` keeps all but its swap cap of its 3
    assert accepted == set(floors) and all(len(commit.assignments[a]) >= n for a, n in floors.items())

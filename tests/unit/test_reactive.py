"""Reactive grants: demand observed in the committed step above what an app holds there is met at
once from GPUs idle in the step, within the app's ceiling and its swap cap across the step."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from support.builders import T0, ev
from support.examples import examples

from gpualloc.schemas.commits import current
from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.planner.effects import Granted
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import Commit
from gpualloc.solvers.problem import bits_of

STEP = timedelta(minutes=60)


def pool_with_app(gpus: int = 16, swap_cap: int = 4, max_gpus: int | None = None, floor: int = 2) -> Pool:
    pool = Pool()
    pool.apply(
        [
            ev("pool.configured", {"gpus": gpus, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60}),
            ev(
                "app.registered",
                {"id": "rt", "priority": 5, "min_gpus": floor, "max_gpus": max_gpus, "swap_cap": swap_cap},
            ),
        ],
        T0,
    )
    return pool


def two_apps(gpus: int, names: tuple[str, str], swap_cap: int, low_demand: int, more: list = ()) -> Pool:
    """A pool of `gpus` with a valuable app and a less valuable one (`names`), the second's demand
    `low_demand` known at the first commit, and `more` events."""
    high, low = names
    pool = Pool()
    pool.apply(
        [
            ev("pool.configured", {"gpus": gpus, "gpus_per_node": 8, "horizon": 4, "step_minutes": 60}),
            ev("app.registered", {"id": high, "priority": 9, "min_gpus": 1, "max_gpus": gpus, "swap_cap": swap_cap}),
            ev("app.registered", {"id": low, "priority": 2, "min_gpus": 1, "max_gpus": gpus, "swap_cap": swap_cap}),
            ev("traffic.observed", {"app": low, "gpus": low_demand}, ref=f"{low}0"),
            *more,
        ],
        T0,
    )
    return pool


def observe(pool: Pool, gpus: int, minute: float) -> list:
    """`gpus` needed by app rt, observed `minute` minutes into the step last committed."""
    step = pool.planner.now - 1
    at = step * 60 + minute
    return pool.apply([ev("traffic.observed", {"app": "rt", "gpus": gpus}, minutes=at, ref=at)], T0 + at * STEP / 60)


def test_demand_above_the_committed_set_is_granted_idle_gpus_at_once():
    pool = pool_with_app()
    pool.commit()  # step 0: the app's set from its floor
    pool.commit()  # step 1: `before` is step 0's set
    held = pool.planner.apps["rt"].held
    effects = observe(pool, held.bit_count() + 3, 5)
    [granted] = [e for e in effects if isinstance(e, Granted)]
    g = granted.grant
    assert g.step == 1 and len(g.added) == 3 and not set(g.added) & set(bits_of(held))
    assert pool.planner.apps["rt"].held == held | sum(1 << x for x in g.added)
    assert "3 idle GPUs granted" in g.reason


def test_no_grant_when_the_app_holds_enough_or_the_step_is_not_the_committed_one():
    pool = pool_with_app()
    pool.commit()
    pool.commit()
    held = pool.planner.apps["rt"].held.bit_count()
    assert not [e for e in observe(pool, held, 5) if isinstance(e, Granted)]
    later = pool.planner.now * 60 + 5  # the step not committed yet: the next commit plans for it
    effects = pool.apply([ev("traffic.observed", {"app": "rt", "gpus": 12}, minutes=later, ref=later)], T0)
    assert not [e for e in effects if isinstance(e, Granted)]


def test_a_grant_never_takes_a_running_jobs_gpus_and_stops_at_the_ceiling():
    pool = pool_with_app(gpus=16, max_gpus=6)
    pool.apply(
        [ev("job.submitted", {"id": "j", "kind": "training", "priority": 9, "gpus": 8, "duration": 9}, ref="j")], T0
    )
    pool.commit()
    pool.commit()
    job = pool.planner.running["j"].mask
    effects = observe(pool, 15, 10)
    [granted] = [e for e in effects if isinstance(e, Granted)]
    assert not sum(1 << x for x in granted.grant.gpus) & job
    assert len(granted.grant.gpus) == 6  # its ceiling, not the 15 observed


def test_the_swap_cap_counts_the_boundary_and_the_grants_of_a_step_together():
    pool = pool_with_app(swap_cap=2, floor=2)
    pool.commit()
    pool.commit()
    app = pool.planner.apps["rt"]
    spent = (app.held ^ app.before).bit_count()
    [granted] = [e for e in observe(pool, 12, 1) if isinstance(e, Granted)]
    assert len(granted.grant.added) == 2 - spent
    assert "still short" in granted.grant.reason
    app = pool.planner.apps["rt"]  # a value: the pass replaced it
    assert (app.held ^ app.before).bit_count() <= 2


def test_an_app_short_with_nothing_idle_takes_what_another_holds_above_its_own_demand():
    job = {"id": "j", "kind": "training", "priority": 9, "gpus": 2, "duration": 9}
    pool = two_apps(8, ("rt", "low"), 4, 5, [ev("job.submitted", job, ref="j")])
    pool.commit()
    pool.commit()
    planner = pool.planner
    had = planner.apps["low"].held.bit_count()
    assert had >= 3
    pool.apply([ev("traffic.observed", {"app": "low", "gpus": 1}, minutes=62, ref="low1")], T0 + 62 * STEP / 60)
    [granted] = [e for e in observe(pool, 8, 30) if isinstance(e, Granted)]
    g = granted.grant
    assert set(g.given) == {"low"} and len(g.given["low"]) >= 1  # it keeps its observed demand
    assert len(g.gpus) == planner.apps["rt"].held.bit_count() and not set(g.gpus) & set(g.given["low"])
    assert had - len(g.given["low"]) > 0 and "from low above their observed demand" in g.reason
    low, rt = planner.apps["low"], planner.apps["rt"]
    assert (low.held ^ low.before).bit_count() <= 4 and (rt.held ^ rt.before).bit_count() <= 4


def _folded(commits: list[Commit], grants: list) -> list[Commit]:
    by_step: dict[int, dict] = {}
    for g in grants:
        by_step.setdefault(g.step, {}).update(g.sets)
    return [replace(c, assignments={**c.assignments, **by_step.get(c.step, {})}) for c in commits]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(0, 3),
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(1, 9), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4)), max_size=3),
            st.integers(0, 16),
            st.integers(1, 59),
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_steps_with_reactive_grants_keep_the_online_rules(cap, steps):
    """Arrivals, then a commit, then an observation within the step (granted or not): every step
    as it ended (its commit with its grants) keeps one owner per GPU, the app within its bounds
    and the swap cap between consecutive steps' final sets, jobs unmoved."""
    pool = pool_with_app(gpus=16, swap_cap=cap, max_gpus=12, floor=1)
    other = {"id": "side", "priority": 2, "min_gpus": 1, "max_gpus": 6, "swap_cap": max(cap, 1)}
    pool.apply([ev("app.registered", other)], T0)
    commits, grants = [], []
    for k, (jobs, demand, minute) in enumerate(steps):
        now = T0 + pool.planner.now * STEP
        pool.apply(
            [
                ev(
                    "job.submitted",
                    {"id": f"j{k}-{i}", "kind": "training", "priority": p, "gpus": g, "duration": d},
                    minutes=pool.planner.now * 60,
                    ref=f"j{k}-{i}",
                )
                for i, (p, g, d) in enumerate(jobs)
            ],
            now,
        )
        commits.append(pool.commit().commit)
        at = (pool.planner.now - 1) * 60 + minute / 2
        side = pool.apply(
            [ev("traffic.observed", {"app": "side", "gpus": k % 3}, minutes=at, ref=at)], T0 + at * STEP / 60
        )
        grants += [e.grant for e in side + observe(pool, demand, minute) if isinstance(e, Granted)]
    limits = {"rt": (1, 12, cap), "side": (1, 6, max(cap, 1))}
    assert online_violations(_folded(commits, grants), limits, {"rt", "side"}) == []


def test_readers_fold_reactive_commits_into_their_steps_commit():
    base = {"step": 4, "seq": 7, "assignments": {"j": [0, 1], "rt": [8]}, "reasons": {}}
    grant = {"step": 4, "seq": 8, "reactive": True, "assignments": {"rt": [8, 9, 10]}, "reasons": {"rt": "why"}}
    stale = {"step": 3, "seq": 6, "reactive": True, "assignments": {"rt": [15]}}
    now = current([grant, base, stale])
    assert now is not None and now["seq"] == 8
    assert now["assignments"] == {"j": [0, 1], "rt": [8, 9, 10]} and now["reasons"] == {"rt": "why"}
    assert current([grant]) is None  # no step's commit to apply it to


def test_registering_again_mid_step_keeps_the_swap_cap_of_the_step():
    pool = pool_with_app(swap_cap=1)
    pool.commit(), pool.commit(), pool.commit()
    app = {"id": "rt", "priority": 7, "min_gpus": 2, "max_gpus": None, "swap_cap": 1}
    pool.apply([ev("app.registered", app, minutes=pool.planner.now * 60 - 50)], T0)
    [granted] = [e for e in observe(pool, 12, 20) if isinstance(e, Granted)]
    rt = pool.planner.apps["rt"]
    assert (rt.held ^ rt.before).bit_count() <= 1 and len(granted.grant.added) <= 1


def test_a_job_started_and_gone_within_the_step_keeps_its_gpus_out_of_grants():
    pool = pool_with_app(gpus=8, floor=1)
    pool.commit(), pool.commit()
    now = pool.planner.now * 60 - 59
    job = {"id": "j", "kind": "training", "priority": 9, "gpus": 4, "duration": 3}
    [decided] = [e for e in pool.apply([ev("job.submitted", job, minutes=now, ref="j")], T0) if hasattr(e, "decision")]
    assert decided.decision.action == "start"
    pool.apply([ev("job.cancelled", {"id": "j"}, minutes=now + 1)], T0)
    granted = [e.grant for e in observe(pool, 8, 30) if isinstance(e, Granted)]
    assert all(not set(g.added) & set(decided.decision.gpus) for g in granted)


def test_no_gpu_of_a_drained_node_is_granted_or_given():
    pool = two_apps(16, ("hi", "lo"), 8, 6)
    pool.commit(), pool.commit()
    lo = pool.planner.apps["lo"]
    node = 0 if lo.held & 0xFF else 1
    pool.apply([ev("node.status", {"node": node, "state": "drained"}, minutes=65)], T0)
    pool.apply([ev("traffic.observed", {"app": "lo", "gpus": 1}, minutes=66, ref="lo1")], T0)
    drained = set(range(8 * node, 8 * node + 8))
    for g in [e.grant for e in observe(pool, 16, 30) if isinstance(e, Granted)]:
        assert not set(g.added) & drained


def test_a_grant_leaves_every_floor_room_at_the_next_commit():
    """A floor registered mid-step was accepted on what the apps must keep next step; a grant
    that would make an app keep more then is cut so the next commit can still keep the floor."""
    pool = Pool()
    pool.apply(
        [
            ev("pool.configured", {"gpus": 8, "gpus_per_node": 8, "horizon": 4, "step_minutes": 60}),
            ev("app.registered", {"id": "rt", "priority": 9, "min_gpus": 1, "max_gpus": 8, "swap_cap": 1}),
            ev("traffic.observed", {"app": "rt", "gpus": 6}, ref="rt0"),
        ],
        T0,
    )
    pool.commit()
    pool.apply([ev("traffic.observed", {"app": "rt", "gpus": 1}, minutes=60, ref="rt1")], T0)
    pool.commit()  # rt shrinks by its cap: 6 -> 5
    assert pool.planner.apps["rt"].held.bit_count() == 5
    effects = pool.apply([ev("app.registered", {"id": "b", "priority": 1, "min_gpus": 4}, minutes=61)], T0)
    assert effects == []  # accepted: rt keeps at least 4 next step, b gets the other 4
    observe(pool, 8, 30)
    assert (pool.planner.apps["rt"].held ^ pool.planner.apps["rt"].before).bit_count() <= 1
    commit = pool.commit().commit  # raises when no plan can keep the floors
    assert len(commit.assignments["b"]) >= 4


def test_at_the_contracts_limits_64_apps_react_in_one_pass_and_every_step_stays_legal():
    """4,096 GPUs, 64 apps and 480 running 8-GPU jobs: half the apps fall to 1 GPU within a
    step while the other half rise to 60; the risers take idle GPUs and the fallers' surplus, and
    the steps as they ended keep the online rules."""
    pool = Pool()
    apps = [{"id": f"a{k}", "priority": 1 + k % 9, "min_gpus": 1, "max_gpus": 64, "swap_cap": 16} for k in range(64)]
    jobs = [{"id": f"j{k}", "kind": "training", "priority": 1 + k % 9, "gpus": 8, "duration": 6} for k in range(480)]
    pool.apply(
        [ev("pool.configured", {"gpus": 4096, "gpus_per_node": 8, "horizon": 24, "step_minutes": 60})]
        + [ev("app.registered", a, ref=a["id"]) for a in apps]
        + [ev("traffic.observed", {"app": a["id"], "gpus": 8}, ref=f"t{a['id']}") for a in apps]
        + [ev("job.submitted", j, ref=j["id"]) for j in jobs],
        T0,
    )
    commits = [pool.commit().commit, pool.commit().commit]
    within = [ev("traffic.observed", {"app": f"a{k}", "gpus": 1}, minutes=65, ref=f"d{k}") for k in range(0, 64, 2)]
    within += [ev("traffic.observed", {"app": f"a{k}", "gpus": 60}, minutes=70, ref=f"u{k}") for k in range(1, 64, 2)]
    grants = [e.grant for e in pool.apply(within, T0 + 70 * STEP / 60) if isinstance(e, Granted)]
    commits.append(pool.commit().commit)
    assert grants and any(g.given for g in grants)  # until the idle GPUs and the surplus run out
    limits = {a["id"]: (1, 64, 16) for a in apps}
    assert online_violations(_folded(commits, grants), limits, set(limits), node_size=8) == []


def test_demand_seen_before_the_boundary_holds_into_the_step_and_the_plan_meets_it():
    """A day of an app needing 2 GPUs, then 9 late in a step: the forecast alone would plan the
    next step low, but the latest observation holds until the next one, so the boundary's plan
    needs it in its first step and gives it the idle GPUs (within the swap cap), and takes none a
    running job holds."""
    pool = pool_with_app(gpus=16, swap_cap=8, floor=1)
    for _ in range(26):
        observe(pool, 2, 30)
        pool.commit()
    forecast_only = pool.planner.window_problem()
    observe(pool, 9, 50)
    planned = pool.planner.window_problem()
    [before] = [r for r in forecast_only.realtime if r.id == "rt"]
    [rt] = [r for r in planned.realtime if r.id == "rt"]
    commit = pool.commit().commit
    assert before.demand[0] < 9 and rt.demand[0] == 9 and rt.demand[1:] == before.demand[1:]
    assert len(commit.assignments["rt"]) == 9 and commit.schedule.realtime["rt"][0].bit_count() == 9
    busy = pool_with_app(gpus=8, swap_cap=8, floor=1)
    busy.apply(
        [ev("job.submitted", {"id": "j", "kind": "training", "priority": 5, "gpus": 4, "duration": 40}, ref="j")], T0
    )
    commits = [busy.commit().commit]
    for _ in range(26):
        observe(busy, 2, 30)
        commits.append(busy.commit().commit)
    observe(busy, 9, 50)
    commits.append(busy.commit().commit)
    assert len(commits[-1].assignments["rt"]) == 4 and commits[-1].assignments["j"] == commits[0].assignments["j"]
    assert online_violations(commits, {"rt": (1, 8, 8)}, {"rt"}, node_size=8) == []


def test_gpus_granted_in_the_step_go_back_idle_when_demand_falls_and_come_again_when_it_rises():
    pool = pool_with_app()
    pool.commit()
    pool.commit()
    own = pool.planner.apps["rt"].held  # the commit's set
    [up] = [e.grant for e in observe(pool, own.bit_count() + 3, 5) if isinstance(e, Granted)]
    assert len(up.added) == 3 and not up.released
    [down] = [e.grant for e in observe(pool, own.bit_count() + 1, 20) if isinstance(e, Granted)]
    assert len(down.released) == 2 and set(down.released) <= set(up.added) and not down.added
    assert pool.planner.apps["rt"].held.bit_count() == own.bit_count() + 1 and not pool.planner.committed & sum(
        1 << g for g in down.released
    )
    assert "2 GPUs granted in the step handed back idle" in down.reason
    [below] = [e.grant for e in observe(pool, 0, 30) if isinstance(e, Granted)]
    assert pool.planner.apps["rt"].held == own  # the commit's own set stays: only what the step granted goes back
    assert below.gpus == tuple(bits_of(own))
    assert not [e for e in observe(pool, 0, 35) if isinstance(e, Granted)]  # nothing more to give back
    [again] = [e.grant for e in observe(pool, own.bit_count() + 2, 40) if isinstance(e, Granted)]
    assert len(again.added) == 2 and pool.planner.apps["rt"].held.bit_count() == own.bit_count() + 2


def test_a_grant_after_a_node_under_the_app_goes_down_stops_at_its_ceiling():
    """The app's GPUs on a node that went down within the step stay in its set until the boundary
    moves it: a grant beside them stops at its ceiling (it gave 7 more: 16 GPUs for a ceiling of
    12), and the next commit holds its need on live nodes."""
    pool = Pool()
    config = {"gpus": 32, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60}
    pool.apply([ev("pool.configured", config)], T0)
    pool.apply([ev("app.registered", {"id": "rt", "priority": 6, "min_gpus": 2, "max_gpus": 12})], T0)
    pool.commit()
    seen = ev("traffic.observed", {"app": "rt", "gpus": 9}, minutes=1)
    [first] = [e.grant for e in pool.apply([seen], T0 + timedelta(minutes=1)) if isinstance(e, Granted)]
    node = first.added[0] // 8
    pool.apply([ev("node.status", {"node": node, "state": "down"})], T0 + timedelta(minutes=2))
    again = ev("traffic.observed", {"app": "rt", "gpus": 9}, minutes=3)
    [second] = [e.grant for e in pool.apply([again], T0 + timedelta(minutes=3)) if isinstance(e, Granted)]
    held = second.sets["rt"]
    assert len(held) == 12 and len([g for g in held if g // 8 != node]) == 5, held
    moved = pool.commit().commit.assignments["rt"]
    assert len(moved) >= 5 and not [g for g in moved if g // 8 == node], moved  # live ones, within its swap cap

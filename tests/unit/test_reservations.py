"""Reservations that bind (`pool.configured.reserved_jobs`): the oldest starving jobs hold a block
from their earliest start by planned durations, even past the window, and nothing placed later
delays it; committed, and told by status and explain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.agent.operator.words import reserved_words
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.solvers import compile_scenario
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan, online_violations
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig, Running, is_blocker
from gpualloc.solvers.planner.reservations import apps_keep_their_rules, pinned, released, reservations
from gpualloc.solvers.planner.snapshot import dump_planner, load_planner
from gpualloc.solvers.policies.heuristic import heuristic_schedule

FULL = 0xFFFF


def held(gpus: int = 16, horizon: int = 12, until: tuple[int, int] = (3, 8), k: int = 1) -> Planner:
    """16 GPUs in two nodes, each held by a running job until `until` (steps from now, 2); a
    whole-pool job queued since step 0 (past the bound of 1) and two one-node jobs of 4 steps."""
    planner = Planner(
        PoolConfig(gpus=gpus, gpus_per_node=8, horizon=horizon, starvation_steps=1, reserved_jobs=k), now=2
    )
    for name, first, left in (("a", 0, until[0]), ("b", 8, until[1])):
        spec = JobSpec(name, "training", 1, 8, left + 2, 0)
        planner.running[name] = Running(spec, 0xFF << first, 0)
    planner.queued["big"] = JobSpec("big", "training", 1, 16, 5, 0)
    for name in ("s1", "s2"):
        planner.queued[name] = JobSpec(name, "training", 1, 8, 4, 2)
    return planner


def test_the_oldest_starving_job_is_reserved_where_the_running_work_frees_its_block():
    planner = held()
    [r] = reservations(planner.window_problem(), list(planner.starving()))
    assert (r.job_id, r.start, r.mask) == ("big", 8, FULL)


def test_backfill_runs_only_where_it_ends_before_the_reservation():
    planner = held()
    problem, schedule = planner.plan()
    assert schedule.batch["big"] == (8, FULL)  # at its reservation, though smaller work waits
    ends = {j: s + 4 for j, (s, _) in schedule.batch.items() if j in ("s1", "s2")}
    assert all(end <= 8 for end in ends.values())  # one backfills on node 0 from step 3, the other waits
    assert len(ends) == 1 and not any(is_blocker(j) for j in schedule.batch)
    assert check_plan(problem, to_grid(problem, schedule)) == []


def test_a_reservation_past_the_window_keeps_its_block_free_of_new_work():
    planner = held(horizon=4, until=(1, 8))  # node 1 frees at step 8, past the window's 4 steps
    problem, schedule = planner.plan()
    assert "big" not in schedule.batch
    assert not any(j in schedule.batch for j in ("s1", "s2"))  # node 0 frees at 1, yet takes none of them
    commit = planner.boundary.tick()
    assert commit.reserved == {"big": (2 + 8, FULL)}
    assert check_plan(problem, to_grid(problem, schedule)) == []


def test_without_reserved_jobs_the_plan_is_the_raised_priority_one():
    planner = held(k=1)
    plain = held(k=1)
    plain.config = PoolConfig(gpus=16, gpus_per_node=8, horizon=12, starvation_steps=1)
    assert plain.reservations() == [] and planner.reservations() != []
    assert plain.boundary.tick().reserved == {}


def test_a_snapshot_keeps_the_value_model_and_the_reserved_jobs():
    planner = held(k=3)
    planner.config = PoolConfig(**{**planner.config.__dict__, "value_model": "completion"})
    loaded = load_planner(dump_planner(planner), heuristic_schedule)
    assert loaded.config == planner.config
    plain = load_planner(dump_planner(held()), heuristic_schedule)
    assert plain.config.value_model == "gpu_steps" and plain.config.reserved_jobs == 1
    assert len(dump_planner(Planner(PoolConfig(gpus=8)))["config"]) == 16  # as before the fields were added


def test_status_and_explain_tell_a_reservation_with_its_time():
    commit = {
        "step": 10,
        "seq": 4,
        "step_start": datetime(2026, 12, 7, 12, tzinfo=UTC).isoformat(),
        "reservations": {"big": {"start_step": 14, "first_gpu": 8, "gpus": 8}},
    }
    words = reserved_words("big", commit, timedelta(hours=1))
    assert words is not None and words.startswith("reserved from step 14 (16:00:00 UTC")
    assert "on GPUs 8-15: no work placed later may delay its start" in words
    assert reserved_words("other", commit, timedelta(hours=1)) is None


@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(
    st.sampled_from([(8, 8), (16, 8), (32, 8), (16, 4)]),
    st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16, 32]), st.integers(1, 9)), min_size=4, max_size=30),
    st.sampled_from([1, 2, 3]),
    st.sampled_from(["gpu_steps", "completion"]),
    st.sampled_from([4, 12]),
)
def test_once_a_job_holds_the_reservation_nothing_placed_later_delays_it(pool, jobs, k, value_model, horizon):
    """Jobs arrive two a step behind one that takes the whole pool, and run exactly their planned durations (no overrun, no app, no
    node lost: none of the exemptions): a reservation's start never moves later, and the job
    starts by it."""
    gpus, node = pool
    planner = Planner(
        PoolConfig(
            gpus=gpus,
            gpus_per_node=node,
            horizon=horizon,
            starvation_steps=1,
            reserved_jobs=k,
            value_model=value_model,
        )
    )
    sized = [(gpus, 3)] + [(min(n, gpus), d) for n, d in jobs]  # the first holds the pool: the rest starve
    first_held: dict[str, int] = {}
    commits = []
    for step in range(len(sized) // 2 + 60):
        for job_id, r in list(planner.running.items()):
            if planner.now >= r.start + r.spec.duration:
                planner.admission.complete(job_id)
        for n, (size, duration) in enumerate(sized[2 * step : 2 * step + 2]):
            planner.admission.submit(JobSpec(f"j{2 * step + n}", "training", 1, size, duration, planner.now))
        commit = planner.boundary.tick()
        commits.append(commit)
        assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
        for job_id, (start, _) in commit.reserved.items():
            assert start <= first_held.setdefault(job_id, start), (job_id, start, first_held[job_id])
        for job_id, start in first_held.items():
            if job_id in commit.started:
                assert commit.step <= start
            elif job_id in planner.queued:
                assert commit.step < start  # still waiting, its time not yet come
    assert first_held  # every job behind the first waits past the bound of 1 step
    assert online_violations(commits, {}, set(), node_size=node) == []


@settings(max_examples=examples(40), deadline=None, derandomize=True)
@given(
    st.sampled_from([(16, 8), (32, 8), (16, 4)]),
    st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 6)), min_size=4, max_size=20),
    st.lists(st.integers(0, 12), min_size=4, max_size=30),
    st.sampled_from([0, 1, 2]),
)
def test_beside_apps_reservations_keep_every_commit_legal(pool, jobs, demand, floor):
    """An app whose demand moves (its growth may move a reservation: apps rank above batch work):
    every commit is legal, the apps keep their floors, and a reservation no plan could keep
    beside the app's curve is not made (the planners never meet a pinned job they cannot plan
    around)."""
    gpus, node = pool
    planner = Planner(PoolConfig(gpus=gpus, gpus_per_node=node, horizon=6, starvation_steps=1, reserved_jobs=2))
    planner.realtime.register_app(AppSpec("chat", 8.0, min_gpus=floor, max_gpus=gpus // 2, swap_cap=2))
    sized = [(gpus // 2, 3)] + [(min(n, gpus // 2), d) for n, d in jobs]
    commits = []
    for step, need in enumerate(demand):
        for job_id, r in list(planner.running.items()):
            if planner.now >= r.start + r.spec.duration:
                planner.admission.complete(job_id)
        planner.realtime.observe_traffic("chat", planner.now, need)
        for n, (size, duration) in enumerate(sized[2 * step : 2 * step + 2]):
            planner.admission.submit(JobSpec(f"j{2 * step + n}", "training", 1, size, duration, planner.now))
        commit = planner.boundary.tick()
        commits.append(commit)
        assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
        assert len(commit.assignments.get("chat", ())) >= floor
    assert online_violations(commits, {"chat": (floor, gpus // 2, 2)}, {"chat"}, node_size=node) == []


@pytest.mark.slow
def test_reservations_at_the_contract_limits():
    """4,096 GPUs, 336 steps, 64 apps, 10,000 queued jobs, 64 reserved: the reservations never
    share a GPU at a step, each block obeys the node rule, and the plan around them, released onto
    the window, is legal."""
    sc = generate_scenario(gpus=4096, jobs=10_000, horizon=336, realtime=64, seed=0, gpus_per_node=8)
    window = compile_scenario(Scenario.model_validate({**sc, "value_model": "completion"}))
    queued = {j.id: j for j in window.batch if not j.running_mask}
    held = reservations(window, list(queued)[:64])
    assert held  # the apps can follow their curves around at least the oldest
    for k, r in enumerate(held):
        n = queued[r.job_id].gpus
        assert r.mask == window.block((r.mask & -r.mask).bit_length() - 1, n) and r.mask.bit_count() == n
        for other in held[:k]:
            end = other.start + queued[other.job_id].duration
            assert not (r.mask & other.mask) or r.start >= end  # made around the older ones
    pinned_problem = pinned(window, held)
    schedule = heuristic_schedule(pinned_problem)
    assert apps_keep_their_rules(window, schedule)
    plan = released(window, schedule)
    assert check_plan(window, to_grid(window, plan)) == []

"""The starvation bound (`pool.configured.starvation_steps`): a job queued B steps is planned ahead
of every job that has waited less, by the hot path and full mode; the contract's objective and
legality are untouched."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan, online_violations
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import FullModePlan, JobSpec, PoolConfig


def flooded(bound: int | None, steps: int = 30) -> tuple[Planner, list]:
    """An 8-GPU pool held for a step, a low-priority whole-pool job behind it, then every step a
    high-priority one."""
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=8, horizon=12, starvation_steps=bound))
    planner.admission.submit(JobSpec("first", "training", 9, 8, 1, 0))
    planner.admission.submit(JobSpec("low", "training", 1, 8, 2, 0))
    commits = []
    for step in range(steps):
        finish(planner)
        planner.admission.submit(JobSpec(f"high-{step}", "training", 9, 8, 1, planner.now))
        commits.append(planner.boundary.tick())
    return planner, commits


def finish(planner: Planner) -> None:
    """Complete the running jobs whose time is up, as their platform would."""
    for job_id, r in list(planner.running.items()):
        if planner.now >= r.start + r.spec.duration:
            planner.admission.complete(job_id)


def starved() -> Planner:
    """`low` has waited 3 steps (bound 2) with nothing committed; three high ones just joined the queue."""
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=8, horizon=12, starvation_steps=2), now=3)
    planner.queued["low"] = JobSpec("low", "training", 1, 8, 2, 0)
    for step in range(3):
        planner.queued[f"high-{step}"] = JobSpec(f"high-{step}", "training", 9, 8, 1, planner.now)
    return planner


def started_at(commits, job: str) -> int | None:
    return next((c.step for c in commits if job in c.started), None)


def test_without_the_bound_a_low_priority_job_waits_while_higher_ones_keep_coming():
    _, commits = flooded(None)
    assert started_at(commits, "low") is None


@pytest.mark.parametrize("bound", [1, 3, 6])
def test_with_the_bound_it_starts_once_it_has_waited_that_long(bound):
    planner, commits = flooded(bound)
    start = started_at(commits, "low")
    assert start is not None and start <= bound + 1  # its block frees at the next boundary
    assert online_violations(commits, {}, set(), node_size=8) == []
    for commit in commits:
        assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
    waits = [started_at(commits, f"high-{k}") - k for k in range(20)]  # the ones it delayed catch up
    assert max(waits) <= 2 + 1  # low's two steps, and the boundary


def test_the_window_keeps_the_contracts_priorities_and_objective():
    planner = starved()
    assert planner.starving() == {"low": 1}
    problem, schedule = planner.plan()
    low = next(b for b in problem.batch if b.id == "low")
    assert low.priority == 1  # the contract's priority in the committed window...
    boosted = next(b for b in planner.scheduling_problem(problem).batch if b.id == "low")
    assert boosted.priority > 9  # ...the boost only in what the planner plans on
    assert schedule.batch["low"][0] == 0  # and it goes first
    assert objective_of(problem, schedule) > 0


def test_full_mode_may_not_start_a_starving_job_later_than_the_hot_path():
    planner = starved()
    _, hot = planner.plan()
    assert hot.batch["low"][0] == 0
    later = Schedule({"high-0": (0, 0xFF), "low": (1, 0xFF)}, {})  # legal, and worth more to the contract
    adoption = planner.adoption.adopt(FullModePlan(planner.now, later, objective=1e9))
    assert adoption.schedule is None and "starving job 'low'" in adoption.reason


@settings(max_examples=examples(25), deadline=None)
@given(
    st.integers(1, 6),
    st.lists(st.tuples(st.integers(1, 9), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4)), min_size=1, max_size=12),
    st.integers(0, 2**16),
)
def test_plans_with_the_bound_are_legal_and_every_job_runs(bound, jobs, seed):
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=4, horizon=8, starvation_steps=bound))
    commits = []
    for k, (priority, gpus, duration) in enumerate(jobs):
        planner.admission.submit(JobSpec(f"j{k}", "training", priority, gpus, duration, planner.now))
        if (seed >> k) & 1:
            commits.append(planner.boundary.tick())
    while (planner.queued or planner.running) and len(commits) < 200:
        finish(planner)
        commits.append(planner.boundary.tick())
    assert not planner.queued
    for commit in commits:
        assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []
    assert online_violations(commits, {}, set(), node_size=4) == []


def test_only_the_oldest_starving_jobs_that_fit_the_pool_go_first():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=8, horizon=12, starvation_steps=2))
    for k, gpus in enumerate([4, 4, 2, 8]):
        planner.queued[f"old-{k}"] = JobSpec(f"old-{k}", "training", 1, gpus, 1, k)
    planner.now = 10
    assert planner.starving() == {"old-0": 8, "old-1": 7}  # 4 + 4 GPUs fill the pool once; the rest wait their turn
    del planner.queued["old-0"], planner.queued["old-1"]
    assert planner.starving() == {"old-2": 6}  # 2 + 8 > 8: the next in age alone
    planner.queued = {"huge": JobSpec("huge", "training", 1, 8, 1, 0), "next": JobSpec("next", "training", 1, 1, 1, 1)}
    assert planner.starving() == {"huge": 8}  # at least one, however large


def test_the_bound_defaults_to_five_days_and_is_given_in_steps_or_minutes():
    from gpualloc.schemas.events import PoolConfigured

    assert PoolConfigured(gpus=8).starvation_bound == 120  # hours
    assert PoolConfigured(gpus=8, step_minutes=10).starvation_bound == 720
    assert PoolConfigured(gpus=8, starvation_minutes=90).starvation_bound == 2  # rounded up to steps
    assert PoolConfigured(gpus=8, starvation_minutes=0).starvation_bound is None
    assert PoolConfigured(gpus=8, starvation_minutes=0, starvation_steps=3).starvation_bound == 3
    with pytest.raises(ValueError, match="starvation_minutes"):
        PoolConfigured(gpus=8, starvation_minutes=-1)


def test_simulate_with_bound_zero_runs_without_one():
    from gpualloc.agent.traces import read_trace
    from gpualloc.benchmarks import DATA_DIR
    from gpualloc.solvers.simulation.simulator import SimOptions, simulate

    events = read_trace(DATA_DIR / "traces" / "week-64gpu-1000jobs.jsonl")[:60]
    assert simulate(events, SimOptions(policies=("heuristic",), starvation_steps=0)).config.starvation_steps is None
    assert simulate(events, SimOptions(policies=("heuristic",))).config.starvation_steps == 120  # five days of hours
    assert simulate(events, SimOptions(policies=("heuristic",), starvation_steps=7)).config.starvation_steps == 7

"""Adopting a full-mode plan at a step boundary: reconciled with what happened since its
snapshot, validated, and taken only when it beats the hot path. The plans offered here come
from other schedulers (the heuristic offered to a FIFO hot path), so no solver is needed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.planner_states import CONFIG
from support.planner_states import loaded_planner as loaded

from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.reconcile import reconcile
from gpualloc.solvers.planner.records import FullModePlan, JobSpec
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule


def offer(planner: Planner, effort: float = 0.25) -> FullModePlan:
    """The heuristic's plan of the planner's current window, as full mode would hand it over."""
    problem = planner.window_problem()
    schedule = heuristic_schedule(problem, effort)
    return FullModePlan(planner.now, schedule, objective_of(problem, schedule))


def test_an_unchanged_window_gets_the_plan_back():
    planner = loaded()
    plan = offer(planner)
    problem = planner.window_problem()
    candidates = reconcile(problem, plan.schedule, 0)
    assert candidates and candidates[0].batch == plan.schedule.batch
    assert candidates[0].realtime == plan.schedule.realtime


def test_a_better_plan_is_adopted_over_a_weaker_hot_path():
    planner = loaded(scheduler=fifo_schedule)
    plan = offer(planner)
    adoption = planner.adoption.adopt(plan)
    assert adoption.schedule is not None, adoption.reason
    assert adoption.objective > adoption.hot_objective
    commit = planner.boundary.tick(adoption.schedule)
    assert commit.source == "milp"
    assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))


def test_a_plan_no_better_than_the_hot_path_is_declined():
    planner = loaded()
    adoption = planner.adoption.adopt(offer(planner))
    assert adoption.schedule is None and "no better than the hot path" in adoption.reason


def test_a_stale_plan_is_declined():
    planner = loaded(scheduler=fifo_schedule)
    plan = offer(planner)
    for _ in range(CONFIG.horizon):
        planner.boundary.tick()
    adoption = planner.adoption.adopt(plan)
    assert adoption.schedule is None and "window is at step" in adoption.reason


def test_arrivals_and_departures_since_the_snapshot_are_reconciled():
    planner = loaded(scheduler=fifo_schedule)
    plan = offer(planner)
    gone = sorted(planner.queued)[0]
    planner.admission.cancel(gone)
    planner.admission.submit(JobSpec("late", "training", 9, 2, 2, planner.now))
    adoption = planner.adoption.adopt(plan)
    assert adoption.schedule is not None, adoption.reason
    assert gone not in adoption.schedule.batch
    assert "late" in adoption.schedule.batch  # the new arrival is packed around the kept blocks


@settings(max_examples=examples(60), deadline=None)
@given(
    jobs=st.integers(4, 20),
    seed=st.integers(0, 50),
    ticks=st.integers(0, 3),
    arrivals=st.integers(0, 4),
    traffic=st.integers(0, 8),
)
def test_reconciled_candidates_that_pass_are_legal_commits(jobs, seed, ticks, arrivals, traffic):
    """Whatever happened since the snapshot (steps committed by the hot path, arrivals, a
    traffic jump), an adopted plan commits a legal step, and every later step stays legal."""
    planner = loaded(jobs=jobs, seed=seed)
    plan = offer(planner, effort=1.0)
    for _ in range(ticks):
        planner.boundary.tick()
    for k in range(arrivals):
        planner.admission.submit(JobSpec(f"new{k}", "training", 2 + k, [1, 2, 4][k % 3], 1 + k, planner.now))
    planner.realtime.observe_traffic("chat", planner.now, traffic)
    adoption = planner.adoption.adopt(plan)
    commits = [planner.boundary.tick(adoption.schedule)] + [planner.boundary.tick() for _ in range(3)]
    for commit in commits:
        assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))
    chat = [set(c.assignments["chat"]) for c in commits]
    assert all(len(a ^ b) <= CONFIG.swap_cap for a, b in zip(chat, chat[1:]))

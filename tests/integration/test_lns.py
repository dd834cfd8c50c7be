"""Full mode as a large-neighbourhood search (`FullModeOptions.lns`): exact sub-models over
windows of two nodes, apps' sets kept; its plans are legal, never below their warm start, and it
re-places work a poor warm start left out."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import FullModeOptions, SolveOptions
from gpualloc.solvers import check_plan, compile_scenario
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.policies import policy
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.backends import solver_available
from gpualloc.solvers.policies.milp.lns import _windows, solve_lns

WORK_LIMITED = FullModeOptions(time_limit=None, node_limit=200)  # no clock: reproducible


@pytest.fixture(autouse=True)
def highs() -> None:
    if not solver_available("highs"):
        if os.environ.get("CI") == "true":
            pytest.fail("highs is not installed (pip install highspy)")
        pytest.skip("highs is not installed (pip install highspy)")


def scenario(gpus: int, jobs: int, seed: int, **kwargs):
    return compile_scenario(Scenario.model_validate(generate_scenario(gpus, jobs, seed, gpus_per_node=8, **kwargs)))


def test_windows_are_two_adjacent_nodes_one_node_apart():
    problem = scenario(32, 4, 0)
    assert _windows(problem) == [0xFFFF, 0xFFFF << 8, 0xFFFF << 16]
    assert _windows(scenario(8, 4, 0)) == [0xFF]  # a pool smaller than a window is one window


@pytest.mark.slow
def test_it_places_the_work_a_poor_warm_start_left_out():
    problem = scenario(32, 30, 3, horizon=12)
    good = heuristic_schedule(problem)
    queued = sorted(
        job_id for job_id in good.batch if not next(j for j in problem.batch if j.id == job_id).running_mask
    )
    poor = Schedule({k: v for k, v in good.batch.items() if k not in queued[::2]}, good.realtime)  # half dropped
    result = solve_lns(problem, WORK_LIMITED, poor)
    assert check_plan(problem, to_grid(problem, result.schedule)) == []
    assert result.source == "milp" and result.objective > objective_of(problem, poor) + 1
    assert result.objective >= objective_of(problem, good) - 0.05 * abs(objective_of(problem, good))
    assert "sub-models" in result.notes[0] and result.bound is None
    assert solve_lns(problem, WORK_LIMITED, poor).schedule == result.schedule  # a work limit: the same plan


def test_the_registry_runs_it_as_full_mode():
    problem = scenario(24, 20, 5, horizon=12)
    solution = policy("full-mode").solve(problem, SolveOptions(full_mode=WORK_LIMITED.model_copy(update={"lns": True})))
    assert check_plan(problem, to_grid(problem, solution.schedule)) == []
    assert solution.certificate["bound_source"] == "capacity"  # the search proves none of its own
    assert solution.certificate["bound"] >= objective_of(problem, solution.schedule) - 1e-6
    assert objective_of(problem, solution.schedule) >= solution.certificate["warm_objective"] - 1e-6


@pytest.mark.slow
@settings(max_examples=examples(20), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpus=st.sampled_from([8, 16, 24, 32]),
    jobs=st.integers(2, 24),
    seed=st.integers(0, 10_000),
    horizon=st.sampled_from([4, 8, 12]),
    cap=st.integers(0, 3),
)
def test_its_plans_are_legal_and_never_below_the_warm_start(gpus, jobs, seed, horizon, cap):
    problem = scenario(gpus, jobs, seed, horizon=horizon, swap_cap=cap)
    warm = heuristic_schedule(problem)
    result = solve_lns(problem, FullModeOptions(time_limit=5), warm)
    assert check_plan(problem, to_grid(problem, result.schedule)) == []
    assert result.objective >= objective_of(problem, warm) - 1e-6
    assert result.objective == pytest.approx(objective_of(problem, result.schedule))

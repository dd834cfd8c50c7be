"""Full mode safe at any size: its model's size estimated without building it, a snapshot whose
model cannot be built in time or memory not started (and no process spent on it), and a time
limit that covers building the model."""

from __future__ import annotations

from dataclasses import replace

import pyomo.environ as pyo
import pytest
from support.planner_states import PROFILE

from gpualloc.agent.service.full_mode_worker import FullModeWorker
from gpualloc.schemas.settings import FullModeOptions, SolveOptions
from gpualloc.solvers.planner.full_mode import SETUP_SHARE, full_mode_window, not_worth_starting, snapshot
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig
from gpualloc.solvers.policies.milp import solve
from gpualloc.solvers.policies.milp.backends import solve_model
from gpualloc.solvers.policies.milp.data import SETUP_S_PER_NONZERO, milp_data, model_size
from gpualloc.solvers.policies.milp.formulation import build_model
from gpualloc.solvers.problem import Problem


def planner(gpus: int, jobs: int, horizon: int) -> Planner:
    """An app, a few running jobs and a queue (as `planner_states.loaded_planner`, on any pool)."""
    p = Planner(PoolConfig(gpus=gpus, gpus_per_node=8, horizon=horizon, swap_cap=2))
    p.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=8, profile=PROFILE))
    for k in range(jobs):
        p.admission.submit(
            JobSpec(
                f"j{k}", "training", 1 + (k * 5 + 2) % 9, [1, 2, 4, 8, 2, 1, 4][(k * 7 + 2) % 7], 1 + (k * 3 + 2) % 7, 0
            )
        )
        if k % 5 == 4:
            p.boundary.tick()
    return p


def window(gpus: int = 64, jobs: int = 20, horizon: int = 24) -> Problem:
    return snapshot(planner(gpus, jobs, horizon), jobs)


@pytest.mark.parametrize("gpus,jobs,horizon", [(16, 12, 12), pytest.param(64, 60, 24, marks=pytest.mark.slow)])
def test_the_size_estimate_bounds_the_model_it_would_build(gpus, jobs, horizon):
    """An upper bound, within a factor of two where queued jobs make the model."""
    problem = window(gpus, jobs, horizon)
    size = model_size(problem)
    m = build_model(milp_data(problem))
    variables = sum(len(v) for v in m.component_objects(ctype=pyo.Var))
    cover = sum(len(options) for options in milp_data(problem).cover.values())
    assert variables <= size.variables <= 2 * variables + 1000
    assert cover <= size.nonzeros <= 2 * cover + 10 * gpus * horizon


def test_the_estimate_grows_with_the_pool_and_the_horizon():
    small, wide, long = model_size(window(64, 12, 12)), model_size(window(128, 12, 12)), model_size(window(64, 12, 24))
    assert wide.nonzeros > small.nonzeros and long.nonzeros > small.nonzeros


def test_a_model_that_would_take_its_time_limit_to_build_is_not_started():
    problem = window(64, 20, 24)
    nonzeros = model_size(problem).nonzeros
    enough = nonzeros * SETUP_S_PER_NONZERO / SETUP_SHARE
    assert not_worth_starting(problem, FullModeOptions(time_limit=2 * enough)) is None
    said = not_worth_starting(problem, FullModeOptions(time_limit=enough / 2))
    assert said.startswith(f"model of ~{model_size(problem).variables:,} variables, ~{nonzeros:,} nonzeros")
    assert "time limit" in said
    assert not_worth_starting(problem, FullModeOptions(time_limit=None)) is None  # no clock: only memory bounds it
    assert not_worth_starting(problem, FullModeOptions(time_limit=enough / 2, lns=True)) is None  # two nodes at a time


def test_a_model_above_the_size_where_full_mode_pays_is_not_started():
    problem = window(64, 20, 24)
    nonzeros = model_size(problem).nonzeros
    assert not_worth_starting(problem, FullModeOptions(time_limit=None), max_nonzeros=nonzeros) is None
    said = not_worth_starting(problem, FullModeOptions(time_limit=None), max_nonzeros=nonzeros - 1)
    assert said.endswith(f"nonzeros, more than agent.full_mode_max_nonzeros ({nonzeros - 1:,})")


def test_a_model_that_would_not_fit_the_process_memory_is_not_started():
    problem = window(64, 20, 24)
    assert not_worth_starting(problem, FullModeOptions(time_limit=None), memory_bytes=8 << 30) is None
    said = not_worth_starting(problem, FullModeOptions(time_limit=None), memory_bytes=256 << 20)
    assert "MB, more than the solver process's 256 MB" in said


async def test_the_worker_skips_such_a_snapshot_without_starting_a_process():
    worker = FullModeWorker(FullModeOptions(time_limit=0.01), max_jobs=20)
    try:
        assert not worker.launch(full_mode_window(planner(64, 20, 24), 20))
        assert worker.skipped is not None and "time limit" in worker.skipped
        assert worker.pid is None and not worker.busy
    finally:
        worker.close()


def test_the_time_limit_covers_building_the_model():
    """A model that would take longer to build than the time limit is not built: the warm start
    stands, at once."""
    problem = window(64, 20, 24)
    limit = model_size(problem).nonzeros * SETUP_S_PER_NONZERO / 2
    solution = solve(problem, SolveOptions(full_mode=FullModeOptions(time_limit=limit)))
    c = solution.certificate
    assert not solution.improved and c["source"] == "heuristic" and c["status"] == "time limit"
    assert c["build_seconds"] == c["solve_seconds"] == 0.0


def test_a_problem_without_queued_jobs_is_small():
    problem = window(64, 20, 24)
    idle = replace(problem, batch=tuple(j for j in problem.batch if j.running_mask))
    assert model_size(idle).nonzeros < model_size(problem).nonzeros


def test_a_solver_left_less_than_a_second_after_taking_the_model_is_not_run():
    problem = window(64, 20, 24)
    data = milp_data(problem)
    assert solve_model(build_model(data), FullModeOptions(time_limit=0.5)) == ("time limit", None, None)

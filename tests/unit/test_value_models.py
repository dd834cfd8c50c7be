"""The value models (`value_model`): `gpu_steps` pays per GPU-step held in the window; `completion`
pays each job by when it completes, so at equal priorities the shortest goes first and a job
completing past the window is worth its completion."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.agent.traces import read_trace
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import FullModeOptions, SolveOptions
from gpualloc.solvers import check_plan, compile_scenario
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.metrics import compute_metrics, objective_of
from gpualloc.solvers.planner.headroom import displaced_value
from gpualloc.solvers.planner.records import JobSpec
from gpualloc.solvers.policies import policy
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.bound import capacity_bound
from gpualloc.solvers.simulation.report import whole_run
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.trace_events import planned_at
from gpualloc.solvers.value_models import completion_value, latest_completion

ROOT = Path(__file__).resolve().parents[2]


def two_jobs(value_model: str | None, decay: float = 0.99) -> Scenario:
    """Two jobs at step 0 on 8 GPUs, horizon 24: 4 GPUs for 1 step, and 8 GPUs for 30 steps."""
    return Scenario.model_validate(
        {
            "name": "two",
            "gpus": 8,
            "horizon": 24,
            "time_decay": decay,
            "value_model": value_model,
            "jobs": [
                {"kind": "training", "id": "short", "gpus": 4, "duration": 1, "priority": 1},
                {"kind": "training", "id": "long", "gpus": 8, "duration": 30, "priority": 1},
            ],
        }
    )


def test_per_gpu_step_the_long_job_takes_the_window_and_the_short_one_waits_outside_it():
    problem = compile_scenario(two_jobs(None))
    plan = heuristic_schedule(problem)
    assert plan.batch == {"long": (0, 0xFF)}
    assert objective_of(problem, plan) == pytest.approx(171.457487)


@pytest.mark.parametrize("native", [False, True])
def test_by_completion_the_short_job_goes_first(native):
    problem = compile_scenario(two_jobs("completion"))
    try:
        plan = heuristic_schedule(problem, native=native)
    except RuntimeError:
        pytest.skip("the compiled heuristic is not built here (`make native`)")
    assert plan.batch["short"][0] == 0 and plan.batch["long"][0] == 1
    # 100 x 0.99^1 for the short job, 100 x 0.99^31 for the long one, completing past the window
    assert objective_of(problem, plan) == pytest.approx(100 * 0.99 + 100 * 0.99**31, abs=1e-6)


def test_a_completion_past_the_window_is_worth_its_completion():
    problem = compile_scenario(two_jobs("completion"))
    long = next(j for j in problem.batch if j.id == "long")
    assert problem.start_value(long, 0) == pytest.approx(100 * 0.99**30)
    assert problem.start_value(long, 23) == pytest.approx(100 * 0.99**53)  # 53 steps, 29 of them past the window


def test_without_a_discount_each_step_of_delay_costs_the_priority():
    problem = compile_scenario(two_jobs("completion", decay=1.0))
    long = next(j for j in problem.batch if j.id == "long")
    assert problem.start_value(long, 0) - problem.start_value(long, 1) == 1.0
    assert problem.start_value(long, 0) == latest_completion(24) - 30 > 0
    assert completion_value(2.0, latest_completion(24) + 5, 1.0, 24) == 0.0  # never below nothing


@settings(max_examples=examples(100), deadline=None, derandomize=True)
@given(
    st.sampled_from([8, 16, 32, 64]),
    st.integers(2, 30),
    st.integers(0, 2**16),
    st.sampled_from([0.9, 0.95, 0.99, 1.0]),
    st.sampled_from([4, 12, 24]),
)
def test_the_metrics_and_the_objective_agree_by_completion(gpus, jobs, seed, decay, horizon):
    """The grid's metrics, the schedule's objective, the capacity bound and the MILP agree on
    any generated scenario under `completion`; every plan is legal."""
    sc = Scenario.model_validate(
        generate_scenario(gpus, jobs, seed, horizon=horizon, time_decay=decay, value_model="completion")
    )
    problem = compile_scenario(sc)
    plan = heuristic_schedule(problem)
    grid = to_grid(problem, plan)
    assert check_plan(problem, grid) == []
    assert compute_metrics(problem, grid).objective == pytest.approx(objective_of(problem, plan), rel=1e-9, abs=1e-6)
    bound = capacity_bound(problem)
    assert bound is None or bound >= objective_of(problem, plan) - 1e-6 * max(1.0, abs(bound))


def test_full_mode_plans_by_completion_at_least_as_well_as_the_heuristic_it_starts_from():
    sc = Scenario.model_validate(generate_scenario(16, 10, 3, horizon=8, value_model="completion"))
    problem = compile_scenario(sc)
    hot = heuristic_schedule(problem)
    solution = policy("milp").solve(problem, SolveOptions(full_mode=FullModeOptions(time_limit=20)))
    assert check_plan(problem, to_grid(problem, solution.schedule)) == []
    assert objective_of(problem, solution.schedule) >= objective_of(problem, hot) - 1e-6
    bound = solution.certificate.get("bound")
    assert bound is not None and bound >= objective_of(problem, solution.schedule) - 1e-6


def test_priced_headroom_prices_a_gpu_step_by_the_value_model():
    queue = [JobSpec("a", "training", 4.0, 8, 10, 0), JobSpec("b", "training", 1.0, 1, 10, 0)]
    assert displaced_value(queue) == pytest.approx((4 * 80 + 1 * 10) / 90)
    assert displaced_value(queue, "completion") == pytest.approx((4 / 8 * 80 + 1 * 10) / 90)


def test_by_completion_the_whole_trace_counts_each_finished_job_at_its_jct():
    """The simulator's timely value under `completion`: each finished job's completion value at
    its JCT (no apps in this trace); the same trace's jobs planned at 1.5x their true durations run
    their true ones."""
    events = read_trace(ROOT / "benchmarks" / "traces" / "pollux-workload-1.jsonl")
    sim = simulate(events, SimOptions(policies=("heuristic",), value_model="completion"))
    run = sim.runs["heuristic"]
    assert sim.config.value_model == "completion" and len(run.finished) == 160
    expected = sum(
        completion_value(sim.priorities[j], run.finished[j] - run.submitted[j], sim.config.time_decay, 0)
        for j in run.finished
    )
    assert whole_run(sim, run).timely_value == pytest.approx(expected, abs=0.01)
    timed = [(0, env, p) for env, p in events if env.type == "job.submitted"]
    for (_, _, before), (_, _, after) in zip(timed, planned_at(timed, 1.5)):
        true = before.actual_duration or before.duration
        assert after.duration == math.ceil(1.5 * true) and after.actual_duration == true

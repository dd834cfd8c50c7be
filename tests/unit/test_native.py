"""The compiled heuristic (solvers/native) against the Python reference: the same plans, bit
for bit, on generated scenarios (2,000 small ones drawn by hypothesis across pool shapes,
horizons, swap caps, penalties and efforts; pools of 1,024 and 4,096 GPUs), the corpus and the
bundled scenarios. Skipped with a message where the extension is not built; a failure in CI."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.scenario_args import generator_args

from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.solvers import check_plan, compile_scenario
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.policies.heuristic import heuristic_schedule, knobs_for
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_schedule
from gpualloc.solvers.policies.heuristic.kernels import PythonKernels
from gpualloc.solvers.policies.heuristic.layouts import layouts
from gpualloc.solvers.policies.heuristic.native import AVAILABLE, NativeKernels
from gpualloc.solvers.policies.heuristic.realtime import floor_curves, target_curves
from gpualloc.solvers.problem import Problem

ROOT = Path(__file__).resolve().parents[2]

if not AVAILABLE:
    if os.environ.get("CI") == "true":
        pytest.fail("the compiled heuristic (gpualloc_native) is not installed: `make native` builds it", pytrace=False)
    pytest.skip(
        "the compiled heuristic is not built here (`make native`; needs a Rust toolchain)", allow_module_level=True
    )


def _same_plan(problem: Problem, effort: float = 1.0) -> None:
    reference = heuristic_schedule(problem, effort, native=False)
    compiled = heuristic_schedule(problem, effort, native=True)
    assert compiled.batch == reference.batch
    assert compiled.realtime == reference.realtime
    assert check_plan(problem, to_grid(problem, compiled)) == []


SMALL_POOLS = [1, 2, 3, 4, 6, 8, 12, 14, 16, 24, 32, 48, 64, 65, 96, 128]


def small_scenarios() -> st.SearchStrategy[tuple[dict, float]]:
    """Generator arguments (pools up to 128 GPUs, nodes up to 16) and an effort."""
    return st.tuples(
        generator_args(SMALL_POOLS, 30, [1, 2, 4, 8, 12, 24, 48], max_node=16), st.sampled_from([0.25, 1.0, 4.0])
    )


@pytest.mark.slow
@settings(max_examples=examples(2000), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_generated_scenarios_get_the_same_plan_compiled(drawn):
    args, effort = drawn
    _same_plan(compile_scenario(Scenario.model_validate(generate_scenario(**args))), effort)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("gpus", "jobs", "seed", "effort"), [(1024, 1000, 0, 2.0), (1024, 1000, 1, 1.0), (4096, 4000, 0, 1.0)]
)
def test_pools_of_thousands_of_gpus_get_the_same_plan_compiled(gpus, jobs, seed, effort):
    """At effort 2 the local searches run at 1,024 GPUs; at effort 1 they are skipped there."""
    scenario = Scenario.model_validate(generate_scenario(gpus, jobs, seed, horizon=24))
    _same_plan(compile_scenario(scenario), effort)


def _bundled() -> list[Path]:
    return sorted((ROOT / "benchmarks" / "scenarios").glob("*.json")) + sorted(
        (ROOT / "benchmarks" / "corpus" / "scenarios").glob("*.json")
    )


@pytest.mark.slow
def test_the_corpus_and_the_bundled_scenarios_get_the_same_plans_compiled():
    paths = _bundled()
    assert len(paths) >= 300  # the corpus and the seven
    for path in paths:
        _same_plan(compile_scenario(Scenario.model_validate_json(path.read_text())))


def test_a_contended_scenario_with_trades_gets_the_same_plan_compiled_at_every_effort():
    """Trades, repairs and screening all on the path: the reserving layout trades here."""
    problem = compile_scenario(Scenario.model_validate(generate_scenario(32, 24, 7, horizon=12)))
    assert any(layout.reservation.trade is not None for layout in layouts(problem, target_curves(problem)))
    for effort in (0.25, 1.0, 4.0):
        _same_plan(problem, effort)


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_the_greedy_plan_is_the_same_compiled(drawn):
    """The greedy (`greedy_plan`, also the heuristic's last candidate) in one compiled call."""
    args, _ = drawn
    problem = compile_scenario(Scenario.model_validate(generate_scenario(**args)))
    reference = greedy_schedule(problem, PythonKernels(problem))
    compiled = greedy_schedule(problem, NativeKernels(problem))
    assert compiled.batch == reference.batch
    assert compiled.realtime == reference.realtime
    assert check_plan(problem, to_grid(problem, compiled)) == []


def test_the_greedy_plan_is_the_same_compiled_on_a_pool_of_thousands():
    problem = compile_scenario(Scenario.model_validate(generate_scenario(1024, 1000, 3, horizon=24)))
    compiled = greedy_schedule(problem, NativeKernels(problem))
    assert compiled == greedy_schedule(problem, PythonKernels(problem))
    assert len(compiled.batch) > 100


def test_every_knob_reaches_both_implementations():
    """Knobs away from the defaults (homes for apps that can swap, no repair rounds, one
    search, one layout screened) give the same plans too."""
    for k in range(24):
        problem = compile_scenario(Scenario.model_validate(generate_scenario(8 + 5 * k, 10, k, horizon=12)))
        knobs = replace(knobs_for(problem, 1.0), home_cap=4, reserving_repairs=0, searched=1, screened=1)
        compiled, reference = NativeKernels(problem).solve(knobs), PythonKernels(problem).solve(knobs)
        assert (compiled.batch, compiled.realtime) == (reference.batch, reference.realtime)


def test_a_negative_effort_plans_as_no_effort_on_both_paths():
    problem = compile_scenario(Scenario.model_validate(generate_scenario(16, 12, 2)))
    _same_plan(problem, -1.0)
    assert heuristic_schedule(problem, -1.0) == heuristic_schedule(problem, 0.0)


def test_a_bad_order_is_refused_with_the_field_named():
    problem = compile_scenario(Scenario.model_validate(generate_scenario(8, 4, 1, horizon=4)))
    compiled = NativeKernels(problem)
    with pytest.raises(ValueError, match="order: job position 99"):
        compiled.native.greedy([99], floor_curves(problem), target_curves(problem))
    with pytest.raises(ValueError, match="floors, targets: one value a step for every app"):
        compiled.native.greedy([0], [], [])


def test_the_native_bench_reports_the_same_plans_and_a_speed_up(capsys):
    from gpualloc.agent.cli import main

    code = main(["bench", "native", "--repeat", "1", "--generated", "64x30", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["name"] for r in rows][-1] == "gen-g64-j30-s7" and len(rows) == 8
    assert all(r["same_plan"] and r["native_ms"] > 0 and r["python_ms"] > 0 for r in rows)


@pytest.mark.slow
def test_the_compiled_heuristic_and_polish_work_at_the_contract_limits():
    # 4,096 GPUs, 336 steps, 64 apps and a queue near 10,000 jobs: the greedy's plan polished
    # with the heuristic's largest polish budget stays legal and loses nothing, and the whole
    # compiled heuristic plans legally and never below the greedy.
    from gpualloc.solvers.metrics import objective_of
    from gpualloc.solvers.policies.heuristic import MAX_POLISH

    sc = generate_scenario(gpus=4096, jobs=10_000, horizon=336, realtime=64, seed=0, gpus_per_node=8)
    problem = compile_scenario(Scenario.model_validate(sc))
    assert len(problem.realtime) == 64 and len(problem.batch) > 9_000
    kernels = NativeKernels(problem)
    plan = greedy_schedule(problem, kernels)
    polished = kernels.polish(plan, MAX_POLISH)
    assert check_plan(problem, to_grid(problem, polished)) == []
    assert objective_of(problem, polished) >= objective_of(problem, plan)
    # and the whole compiled heuristic there (every layout, repairs, the greedy, the polish)
    solved = kernels.solve(knobs_for(problem, 1.0))
    assert check_plan(problem, to_grid(problem, solved)) == []
    assert objective_of(problem, solved) >= objective_of(problem, plan)

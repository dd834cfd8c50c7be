"""The seven bundled scenarios: heuristic plans are legal, beat FIFO on value, and repeat exactly."""

from __future__ import annotations

import pytest

from gpualloc import benchmarks
from gpualloc.schemas import Scenario
from gpualloc.solvers import check_plan, compile_scenario, solve
from gpualloc.solvers.policies import policy

PATHS = benchmarks.scenario_paths()


def test_seven_bundled_scenarios_and_their_best_known_entries():
    names = sorted(p.stem for p in PATHS)
    assert names == [
        "large_mixed",
        "mixed_control",
        "oversubscribed",
        "realtime_contention",
        "scale",
        "training_heavy",
        "uniform_priority",
    ]
    assert set(benchmarks.best_known()) == set(names)


@pytest.fixture(scope="module", params=PATHS, ids=[p.stem for p in PATHS])
def solved(request):
    problem = compile_scenario(Scenario.model_validate_json(request.param.read_text()))
    return problem, solve(problem, "fifo"), solve(problem, "heuristic")


def test_heuristic_plan_is_legal(solved):
    problem, _, heuristic = solved
    assert [str(v) for v in check_plan(problem, heuristic.grid)] == []


def test_fifo_plan_is_legal_under_its_exemptions(solved):
    problem, fifo, _ = solved
    assert [str(v) for v in policy("fifo").check(problem, fifo.grid)] == []


def test_heuristic_value_is_at_least_fifo_value(solved):
    _, fifo, heuristic = solved
    assert heuristic.metrics.value >= fifo.metrics.value - 1e-9


def test_solving_twice_gives_identical_grids(solved):
    problem, fifo, heuristic = solved
    assert solve(problem, "heuristic").grid == heuristic.grid
    assert solve(problem, "fifo").grid == fifo.grid


def test_heuristic_objective_does_not_exceed_the_proven_bound(solved):
    problem, _, heuristic = solved
    bound = benchmarks.best_known()[problem.name]["bound"]
    assert heuristic.metrics.objective <= bound + 1e-3

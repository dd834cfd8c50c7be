"""The capacity relaxation's bound (`solvers/policies/milp/bound.py`): never below a legal plan,
never below the best plans known for the bundled scenarios, exact where nothing competes, and the
certificate full mode gives when it is the tighter bound."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.benchmarks import DATA_DIR
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import FullModeOptions, SolveOptions
from gpualloc.solvers import check_plan, compile_scenario
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.policies import policy
from gpualloc.solvers.policies.milp.backends import solver_available
from gpualloc.solvers.policies.milp.bound import capacity_bound

BEST_KNOWN = json.loads((DATA_DIR / "best-known.json").read_text())


def bundled(name: str):
    return compile_scenario(Scenario.model_validate_json((DATA_DIR / "scenarios" / f"{name}.json").read_text()))


@pytest.mark.parametrize("name", sorted(BEST_KNOWN))
def test_it_is_never_below_the_best_known_plan(name):
    assert capacity_bound(bundled(name)) >= BEST_KNOWN[name]["objective"] - 1e-4  # stored to 4 decimals


@settings(max_examples=examples(40), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpus=st.sampled_from([8, 16, 24, 32]),
    jobs=st.integers(1, 30),
    seed=st.integers(0, 10_000),
    horizon=st.sampled_from([4, 8, 12, 24]),
    cap=st.integers(0, 3),
)
def test_it_bounds_every_legal_plan_of_generated_scenarios(gpus, jobs, seed, horizon, cap):
    problem = compile_scenario(
        Scenario.model_validate(generate_scenario(gpus, jobs, seed, gpus_per_node=8, horizon=horizon, swap_cap=cap))
    )
    bound = capacity_bound(problem)
    for name in ("heuristic", "greedy"):
        schedule = policy(name).solve(problem, SolveOptions()).schedule
        assert check_plan(problem, to_grid(problem, schedule)) == []
        assert bound >= objective_of(problem, schedule) - 1e-6, name


def test_it_is_exact_where_nothing_competes_for_gpus():
    problem = bundled("scale")  # 64 GPUs, at 45% utilization: every job starts at its arrival
    plan = policy("heuristic").solve(problem, SolveOptions()).schedule
    assert capacity_bound(problem) == pytest.approx(objective_of(problem, plan), rel=1e-7)


def test_a_window_with_nothing_to_place_is_bounded_by_its_running_jobs():
    problem = compile_scenario(
        Scenario.model_validate(
            {
                "name": "idle",
                "gpus": 8,
                "horizon": 4,
                "jobs": [
                    {
                        "id": "a",
                        "kind": "training",
                        "priority": 1,
                        "gpus": 2,
                        "duration": 9,
                        "running": {"gpus": [0, 1], "remaining": 2},
                    }
                ],
            }
        )
    )
    assert capacity_bound(problem) == pytest.approx(2 * (1 + 0.95))  # priority 1, two steps at decay 0.95


def test_a_window_no_legal_plan_fits_has_no_bound_and_keeps_the_solvers():
    """The contract's input rules keep such windows out; should one reach full mode, it gets no
    capacity bound rather than an error."""
    from gpualloc.solvers.policies.milp.bound import tightened
    from gpualloc.solvers.policies.milp.model import MilpResult

    problem = bundled("realtime_contention")
    app = problem.realtime[0]
    floors_too_high = dataclasses.replace(
        problem, realtime=(dataclasses.replace(app, min_gpus=problem.gpus + 1), *problem.realtime[1:])
    )
    assert capacity_bound(floors_too_high) is None
    result = MilpResult(None, 1.0, 2.0, 0.5, "feasible", 0.0, 0.0, 1.0, "heuristic")
    assert tightened(result, floors_too_high, 1e-4) is result


def test_it_leaves_out_fragmentation_so_it_can_be_loose():
    problem = bundled("training_heavy")  # big blocks on 8-GPU nodes: the relaxation packs them freely
    assert capacity_bound(problem) > 1.05 * BEST_KNOWN["training_heavy"]["bound"]


@pytest.fixture
def highs() -> None:
    if not solver_available("highs"):
        if os.environ.get("CI") == "true":
            pytest.fail("highs is not installed (pip install highspy)")
        pytest.skip("highs is not installed (pip install highspy)")


def test_it_proves_a_large_neighbourhood_plan_optimal(highs):
    problem = bundled("realtime_contention")
    options = SolveOptions(full_mode=FullModeOptions(lns=True, time_limit=None, node_limit=200))
    certificate = policy("full-mode").solve(problem, options).certificate
    assert certificate["bound_source"] == "capacity" and certificate["status"] == "optimal"
    assert certificate["gap"] <= options.full_mode.mip_gap


@pytest.mark.slow
def test_full_mode_keeps_the_solvers_bound_when_it_is_the_tighter(highs):
    problem = bundled("training_heavy")
    certificate = policy("full-mode").solve(problem, SolveOptions(full_mode=FullModeOptions(time_limit=30))).certificate
    assert certificate["bound_source"] == "solver"
    assert certificate["bound"] < capacity_bound(problem)


def test_highs_banner_stays_off_stdout():
    """HiGHS prints a banner on descriptor 1 at a process's first instance: a plan on stdout
    (`solve`, `simulate --json`) would no longer parse."""
    code = (
        "from gpualloc.benchmarks import DATA_DIR; from gpualloc.schemas import Scenario; "
        "from gpualloc.solvers import compile_scenario; "
        "from gpualloc.solvers.policies.milp.bound import capacity_bound; "
        "p = compile_scenario(Scenario.model_validate_json((DATA_DIR / 'scenarios' / 'scale.json').read_text())); "
        "print(round(capacity_bound(p), 2))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "1535.03\n"
    assert "HiGHS" in done.stderr

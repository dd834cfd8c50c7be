"""Property test: on generated scenarios, every heuristic, greedy and FIFO plan is legal and the
heuristic and the greedy are deterministic.

Scenarios come from `gpualloc.generators.scenarios` with hypothesis drawing the shape: pool sizes
including non-powers of two, node layouts (any divisor of the pool), horizons, swap caps 0-4,
the real-time penalty (low ones make the heuristic hold apps at their floors), and which
features appear (running jobs, late arrivals, min/max floors, `current`, per-app caps).
`derandomize=True` makes CI runs identical; a failure prints the generator arguments, and
`scenario_json` of them is the scenario to report.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import scenario_args
from support.examples import examples

from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.solvers import check_plan, compile_scenario, solve
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.metrics import compute_metrics, objective_of
from gpualloc.solvers.planner.keep_held import keep_held
from gpualloc.solvers.policies import policy
from gpualloc.solvers.policies.greedy import greedy_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule

POOLS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 20, 24, 32]


def generator_args():  # the property tests' shapes
    return scenario_args.generator_args(POOLS, 14, [1, 2, 3, 4, 6, 8, 12, 16, 24])


def scenario_json(args: dict) -> str:
    """The scenario of some generator arguments, as a one-line JSON (for bug reports)."""
    return json.dumps(generate_scenario(**args), separators=(",", ":"))


@pytest.mark.slow
@settings(max_examples=examples(1000), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(generator_args())
def test_generated_plans_are_legal_and_the_heuristic_is_deterministic(args):
    scenario = Scenario.model_validate(generate_scenario(**args))  # the generator's own promise
    problem = compile_scenario(scenario)
    fifo = solve(problem, "fifo")
    assert [str(v) for v in policy("fifo").check(problem, fifo.grid)] == []
    heuristic = solve(problem, "heuristic")
    assert [str(v) for v in check_plan(problem, heuristic.grid)] == []
    assert solve(problem, "heuristic").grid == heuristic.grid
    greedy = solve(problem, "greedy")
    assert [str(v) for v in check_plan(problem, greedy.grid)] == []
    assert solve(problem, "greedy").grid == greedy.grid


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def drawn_scenarios(draw) -> dict:
    """Small scenarios drawn field by field (so hypothesis shrinks them to minimal cases),
    with floors, `current` sets and running jobs pushed up to the contract's limits."""
    from gpualloc.generators.scenarios import block_sizes

    G = draw(st.integers(1, 12))
    N = draw(st.sampled_from(_divisors(G)))
    T = draw(st.integers(1, 8))
    cap = draw(st.integers(0, 4))
    sizes = block_sizes(G, N)
    free = list(range(G))
    jobs: list[dict] = []
    for i in range(draw(st.integers(0, 2))):
        n = draw(st.sampled_from(sizes))
        if n > len(free):
            break
        gpus = sorted(draw(st.permutations(free))[:n])
        free = [g for g in free if g not in gpus]
        remaining = draw(st.integers(1, T + 2))
        jobs.append(
            {
                "id": f"run{i}",
                "kind": "training",
                "priority": draw(st.sampled_from([1, 3, 8])),
                "gpus": n,
                "duration": remaining + draw(st.integers(0, 3)),
                "running": {"gpus": gpus, "remaining": remaining},
            }
        )
    budget = len(free)  # GPUs left beside the running jobs at step 0, where they are most
    for i in range(draw(st.integers(0, 3))):
        app = {
            "id": f"rt{i}",
            "kind": "realtime",
            "priority": draw(st.sampled_from([1, 4, 10])),
            "demand": draw(st.lists(st.integers(0, G), min_size=T, max_size=T)),
        }
        c = cap
        if draw(st.booleans()):
            c = app["swap_cap"] = draw(st.integers(0, 4))
        lo = draw(st.integers(0, budget))
        hi = draw(st.none() | st.integers(lo, G))
        if lo:
            app["min_gpus"] = lo
        if hi is not None:
            app["max_gpus"] = hi
        keep = lo
        if draw(st.booleans()):
            k_lo, k_hi = max(0, lo - c), min(len(free), (G if hi is None else hi) + c, budget + c)
            if k_lo <= k_hi:
                k = draw(st.integers(k_lo, k_hi))
                app["current"] = sorted(draw(st.permutations(free))[:k])
                free = [g for g in free if g not in app["current"]]
                keep = max(lo, k - c)
        budget -= keep
        jobs.append(app)
    for i in range(draw(st.integers(0, 6))):
        jobs.append(
            {
                "id": f"b{i}",
                "kind": draw(st.sampled_from(["training", "batch_inference", "quantization"])),
                "priority": draw(st.sampled_from([1, 2, 5, 9])),
                "gpus": draw(st.sampled_from(sizes)),
                "duration": draw(st.integers(1, T + 2)),
                "arrival": draw(st.integers(0, T)),
            }
        )
    data = {"name": "drawn", "gpus": G, "horizon": T, "swap_cap": cap, "jobs": jobs}
    if N != G:
        data["gpus_per_node"] = N
    return data


@pytest.mark.slow
@settings(max_examples=examples(1000), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_scenarios())
def test_drawn_plans_are_legal_and_the_heuristic_is_deterministic(data):
    scenario = Scenario.model_validate(data)
    problem = compile_scenario(scenario)
    fifo = solve(problem, "fifo")
    assert [str(v) for v in policy("fifo").check(problem, fifo.grid)] == []
    heuristic = solve(problem, "heuristic")
    assert [str(v) for v in check_plan(problem, heuristic.grid)] == [], json.dumps(data)
    assert solve(problem, "heuristic").grid == heuristic.grid
    greedy = solve(problem, "greedy")
    assert [str(v) for v in check_plan(problem, greedy.grid)] == [], json.dumps(data)
    assert solve(problem, "greedy").grid == greedy.grid


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(generator_args())
def test_the_objective_of_a_schedule_is_its_grids(args):
    """`objective_of` weighs blocks and app sets without building the grid: the same figure."""
    problem = compile_scenario(Scenario.model_validate(generate_scenario(**args)))
    for schedule in (heuristic_schedule(problem), greedy_schedule(problem)):
        grid = to_grid(problem, schedule)
        assert objective_of(problem, schedule) == pytest.approx(compute_metrics(problem, grid).objective, abs=1e-5)


def _swaps(problem, schedule) -> list[tuple[str, int, int]]:
    """(app, step, GPUs its set changes by into that step): from its `current` into step 0, then
    between consecutive steps."""
    out = []
    for app in problem.realtime:
        masks = schedule.realtime.get(app.id, [])
        sets = ([app.current_mask] if app.current_mask >= 0 else []) + list(masks)
        first = 0 if app.current_mask >= 0 else 1
        out += [(app.id, t + first, (a ^ b).bit_count()) for t, (a, b) in enumerate(zip(sets, sets[1:]))]
    return out


def _moved_current(problem, plan, data) -> object:
    """`problem` with each app's `current` drawn anew, of its size, among the GPUs nothing holds at
    step 0 of `plan` (first) and those the app holds there: the plan then moves apps where it need
    not."""
    taken = 0
    for job_id, (start, mask) in plan.batch.items():
        if start == 0:
            taken |= mask
    for masks in plan.realtime.values():
        taken |= masks[0] if masks else 0
    apps = []
    for app in problem.realtime:
        masks = plan.realtime.get(app.id)
        if app.current_mask < 0 or not masks:
            apps.append(app)
            continue
        free = [g for g in range(problem.gpus) if not taken >> g & 1]
        own = [g for g in range(problem.gpus) if masks[0] >> g & 1]
        n = min(app.current_mask.bit_count(), len(free) + len(own))
        chosen = (data.draw(st.permutations(free)) + data.draw(st.permutations(own)))[:n]  # free ones first
        current = sum(1 << g for g in chosen)
        taken |= current
        apps.append(dataclasses.replace(app, current_mask=current))
    return dataclasses.replace(problem, realtime=tuple(apps))


@settings(max_examples=examples(500), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_scenarios(), st.data())
def test_apps_kept_on_their_gpus_leave_a_plan_no_less_legal_its_objective_unchanged_and_swap_no_more(data, draw):
    """`keep_held` on the heuristic's plan, against `current` sets drawn anew so the plan moves
    apps: no violation (rule, holder, step) it did not have (a legal plan stays legal), the same objective and
    blocks, no app's swaps into the committed step or over the window raised (a move deferred to
    the step work takes the GPU adds swaps there only), the same set sizes, idempotent (a
    replayed commit renames the same)."""
    drawn = compile_scenario(Scenario.model_validate(data))
    plan = heuristic_schedule(drawn)
    problem = _moved_current(drawn, plan, draw)
    kept = keep_held(problem, plan)
    before = {(v.rule, v.job, v.step) for v in check_plan(problem, to_grid(problem, plan))}
    assert {(v.rule, v.job, v.step) for v in check_plan(problem, to_grid(problem, kept))} <= before, json.dumps(data)
    assert objective_of(problem, kept) == objective_of(problem, plan) and kept.batch == plan.batch
    swaps_before, swaps_after = _swaps(problem, plan), _swaps(problem, kept)
    for app in problem.realtime:
        before = [n for a, _, n in swaps_before if a == app.id]
        after = [n for a, _, n in swaps_after if a == app.id]
        assert sum(after) <= sum(before) and after[:1] <= before[:1], app.id
    assert {a: [m.bit_count() for m in ms] for a, ms in kept.realtime.items()} == {
        a: [m.bit_count() for m in ms] for a, ms in plan.realtime.items()
    }
    assert keep_held(problem, kept) == kept

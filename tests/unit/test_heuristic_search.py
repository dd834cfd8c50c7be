"""The heuristic's search mechanisms on hand-made cases whose optimum is known by hand: real-time
service traded against the batch value it displaces, apps nested where they break no node,
and curves held at the floors served from what batch work leaves."""

from __future__ import annotations

from support.builders import app, batch, make

from gpualloc.solvers import check_plan, solve
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.policies.heuristic.compose import curve_sets
from gpualloc.solvers.policies.heuristic.extras import grow_to_demand
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, floor_curves, target_curves


def _plan(problem):
    plan = solve(problem, "heuristic")
    assert [str(v) for v in check_plan(problem, plan.grid)] == []
    return plan


def test_an_app_worth_less_than_the_batch_work_it_displaces_is_held_at_its_floor():
    # Serving the app (penalty 1 x priority 1 a GPU-step) would keep the 4-GPU block (5 a
    # GPU-step) out for the whole horizon; the optimum runs the block and leaves the app short.
    _, problem = make(
        4,
        4,
        [app("rt", [1, 1, 1, 1], priority=1), batch("big", 4, 4, priority=5)],
        realtime_penalty=1.0,
        time_decay=1.0,
    )
    plan = _plan(problem)
    assert plan.metrics.objective == 5 * 4 * 4 - 1 * 4
    assert [row[0] for row in plan.grid] == ["big"] * 4


def test_one_step_of_demand_does_not_push_a_whole_block_back():
    # The app is worth more than the block a GPU-step (2 x 6 > 9), but its one step of demand
    # falls inside the block's run: serving it would move the block past the horizon's end.
    _, problem = make(
        4,
        4,
        [app("rt", [0, 0, 1, 0], priority=2), batch("big", 4, 4, priority=9)],
        realtime_penalty=6.0,
        time_decay=1.0,
    )
    plan = _plan(problem)
    assert plan.metrics.objective == 9 * 4 * 4 - 6 * 2
    assert plan.metrics.realtime_shortfall == 1


def test_an_app_worth_more_than_any_batch_gpu_step_keeps_its_demand():
    _, problem = make(
        4,
        4,
        [app("rt", [1, 1, 1, 1], priority=10), batch("small", 1, 4, priority=1), batch("other", 2, 4, priority=1)],
        realtime_penalty=1.0,
        time_decay=1.0,
    )
    plan = _plan(problem)
    assert plan.metrics.realtime_shortfall == 0
    sets = curve_sets(problem, list(problem.batch), target_curves(problem), floor_curves(problem))
    assert [lowered is None for _, lowered in sets] == [True, False]  # demand first, and all at floors


def test_a_cap_zero_app_nests_beside_a_running_job_and_leaves_a_whole_node():
    # Node 0 is broken by a running job on GPU 2; an app that can never move (swap cap 0)
    # belongs beside it, so node 1 stays whole for the 4-GPU job from step 0.
    _, problem = make(
        8,
        6,
        [
            app("rt", [1] * 6, priority=9, min_gpus=1, max_gpus=1, swap_cap=0),
            batch("run", 1, 9, priority=1, running=([2], 3)),
            batch("big", 4, 6, priority=5),
        ],
        gpus_per_node=4,
        realtime_penalty=8.0,
        time_decay=1.0,
    )
    plan = _plan(problem)
    assert all(plan.grid[g][0] == "big" for g in range(4, 8))
    assert plan.metrics.objective == 5 * 4 * 6 + 1 * 3


def test_apps_held_at_floors_take_the_gpus_batch_work_leaves():
    _, problem = make(
        4,
        4,
        [app("rt", [2, 2, 2, 2], priority=1, min_gpus=0), batch("job", 2, 2, priority=5)],
        realtime_penalty=1.0,
        time_decay=1.0,
    )
    floors, _ = assign_realtime(problem, floor_curves(problem), [0] * 4)
    busy = [0b0011, 0b0011, 0, 0]
    grown = grow_to_demand(problem, floors, busy)
    assert [m.bit_count() for m in grown["rt"]] == [2, 2, 2, 2]
    assert all(m & busy[t] == 0 for t, m in enumerate(grown["rt"]))


def test_a_trade_buys_an_earlier_start_and_the_plan_realizes_its_price():
    # Demand-first, the 4-GPU block must wait for the app's one step of demand (step 1) to pass
    # and then runs 2 of its 4 steps before the horizon ends; cutting the demand costs 6 x 2 = 12
    # and starts the block at step 0 (2 more steps of 9 x 4 = 72): the trade pays, and the
    # finished plan's objective is the packing's value.
    from gpualloc.solvers.policies.heuristic.compose import _finish
    from gpualloc.solvers.policies.heuristic.layouts import Layout
    from gpualloc.solvers.policies.heuristic.packing import PackState, place
    from gpualloc.solvers.policies.heuristic.realtime import target_curves

    _, problem = make(
        4,
        4,
        [app("rt", [0, 1, 0, 0], priority=2, swap_cap=4), batch("big", 4, 4, priority=9)],
        realtime_penalty=6.0,
        time_decay=1.0,
    )
    curves = target_curves(problem)
    plain, traded = Layout.reserving(problem, curves), Layout.reserving(problem, curves, trade=True)
    job = problem.batch[0]
    without = PackState.empty(problem, plain.reservation)
    place(problem, plain.reservation, without, job)
    assert without.packing().starts["big"][0] == 2
    state = PackState.empty(problem, traded.reservation)
    place(problem, traded.reservation, state, job)
    packing = state.packing()
    assert packing.starts["big"][0] == 0 and packing.traded == 12.0
    assert packing.curves[0] == [0, 0, 0, 0]
    schedule, objective = _finish(problem, traded, [job], packing)
    assert objective == packing.value == 9 * 4 * 4 - 12.0
    assert check_plan(problem, to_grid(problem, schedule)) == []


def test_the_local_search_runs_only_where_its_budget_pays_for_enough_packings_of_the_queue():
    from gpualloc.generators.scenarios import generate_scenario
    from gpualloc.schemas import Scenario
    from gpualloc.solvers import compile_scenario
    from gpualloc.solvers.policies.heuristic import MAX_BUDGET, SEARCH_PACKINGS, SEARCHED, knobs_for

    small = compile_scenario(Scenario.model_validate(generate_scenario(16, 12, 1)))
    queue = sum(1 for j in small.batch if not j.running_mask)
    assert knobs_for(small, 1.0).searched == SEARCHED  # each search's 40 placements a job pay for 12 packings
    assert knobs_for(small, 0.5).searched == SEARCHED
    assert knobs_for(small, 0.25).searched == 0 and knobs_for(small, 0.25).budget == 10 * queue
    assert knobs_for(small, -1.0) == knobs_for(small, 0.0)  # a negative effort counts as none
    large = compile_scenario(Scenario.model_validate(generate_scenario(1024, 1000, 7)))
    queue = sum(1 for j in large.batch if not j.running_mask)
    assert MAX_BUDGET < SEARCH_PACKINGS * queue  # the capped budget packs this queue fewer times
    assert knobs_for(large, 1.0).searched == 0
    assert knobs_for(large, 2.0).searched == SEARCHED

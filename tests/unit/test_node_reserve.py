"""A node's worth held against a node's loss (`planner.node_reserve`, `forecast.realtime_node_reserve`):
the apps' planned demand is lifted so that losing any one node leaves them their medians, only
into room that running work and the apps' demands leave, within the ceilings; FIFO's static
reservations read the demand without it; plans of lifted problems are legal."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from support.builders import T0, ev
from support.examples import examples
from support.realtime_pools import realtime_pools, realtime_problem

from gpualloc.benchmarks.serving_targets import Trace
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.node_reserve import reserved
from gpualloc.solvers.planner.records import FULL_MODE, FullModePlan
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Batch, Realtime
from gpualloc.solvers.simulation.report import executed_violations, whole_run
from gpualloc.solvers.simulation.simulator import SimOptions, simulate


def _app(i: int, demand: int, median: int, priority: float = 5.0, hi: int = 16, T: int = 3) -> Realtime:
    return Realtime(i, f"app{i}", priority, (demand,) * T, 1, hi, 4, -1, (median,) * T)


def test_the_apps_can_lose_a_node_and_keep_their_medians():
    """32 GPUs, two apps planned at 6 and 4 GPUs (medians 4 and 3): they could lose 8 GPUs and
    hold 3 above their medians, so 5 more are held, shared by planned demand (3 and 2)."""
    out = reserved(realtime_problem("reserve", 32, 3, [_app(0, 6, 4), _app(1, 4, 3)]))

    assert [app.demand for app in out.realtime] == [(9,) * 3, (6,) * 3]
    assert [app.reserve for app in out.realtime] == [(3,) * 3, (2,) * 3]
    assert sum(app.demand[0] for app in out.realtime) - 8 >= 4 + 3


def test_apps_on_less_than_a_node_hold_what_they_could_lose_and_the_room_bounds_it():
    """Apps planned at 3 GPUs in all (no headroom above their medians) could lose all 3: 3 more
    are held. With a running job leaving 4 GPUs, only the 1 left after their demand is."""
    apps = [_app(0, 2, 2), _app(1, 1, 1)]
    assert sum(a.demand[0] for a in reserved(realtime_problem("reserve", 32, 3, apps)).realtime) == 6
    running = Batch(2, "big", 3.0, 28, 9, 0, (1 << 28) - 1, 3)
    assert sum(a.demand[0] for a in reserved(realtime_problem("reserve", 32, 3, apps, [running])).realtime) == 4


def test_ceilings_bound_the_lift_and_the_rest_goes_highest_priority_first():
    """An app at its ceiling takes none of the lift; the other takes it all."""
    out = reserved(realtime_problem("reserve", 32, 3, [_app(0, 8, 8, priority=9.0, hi=8), _app(1, 2, 2, priority=1.0)]))
    assert [app.reserve[0] for app in out.realtime] == [0, 8]


def test_a_pool_of_one_node_holds_nothing_against_losing_it():
    """Losing the only node loses every GPU: a lift would protect nothing."""
    one_node = realtime_problem("reserve", 8, 3, [_app(0, 2, 2), _app(1, 1, 1)])  # nodes of 8
    assert reserved(one_node) is one_node


def test_nothing_is_lifted_twice_and_fifo_reserves_the_demand_without_the_lift():
    problem = realtime_problem("reserve", 32, 3, [_app(0, 6, 4), _app(1, 4, 3)])
    once = reserved(problem)
    assert reserved(once) is once
    assert fifo_schedule(once) == fifo_schedule(problem)


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(realtime_pools())
def test_the_lift_covers_a_lost_node_within_room_and_ceilings_and_plans_stay_legal(problem):
    """At every step: no app's demand falls, none passes its ceiling, the lift fits the room the
    demands leave, and the apps hold their medians after losing a node's worth unless the room or
    the ceilings stop them. The heuristic's plan of the lifted problem is legal on the window
    itself, and FIFO's is the window's own."""
    out = reserved(problem)
    for t, busy in enumerate(problem.running_busy):
        want = [min(max(app.demand[t], app.min_gpus), app.max_gpus) for app in problem.realtime]
        got = [app.demand[t] for app in out.realtime]
        lift = sum(app.reserve[t] for app in out.realtime) if out is not problem else 0
        assert all(g >= d for g, d in zip(got, (app.demand[t] for app in problem.realtime)))
        assert all(g <= app.max_gpus or g == app.demand[t] for g, app in zip(got, problem.realtime))
        room = problem.gpus - busy.bit_count() - sum(want)
        assert 0 <= lift <= max(0, room)
        at_ceilings = all(max(g, w) >= app.max_gpus for g, w, app in zip(got, want, problem.realtime))
        medians = sum(min(app.median[t], w) for app, w in zip(problem.realtime, want))
        if problem.gpus <= problem.node_size:
            assert lift == 0
        elif lift < room and not at_ceilings:
            assert sum(want) + lift - min(problem.node_size, sum(want)) >= medians
    plan = heuristic_schedule(out)
    assert check_plan(problem, to_grid(problem, plan)) == []
    assert fifo_schedule(out) == fifo_schedule(problem)


@pytest.mark.slow
def test_at_the_limits_every_step_is_lifted():
    """4,096 GPUs, 336 steps, 64 apps planned at 32 GPUs with medians of 31: 64 GPUs above their
    medians, so a node's 8 are covered and nothing is lifted; with medians of 32, 8 GPUs are held
    at every step: no app's share of them reaches a whole GPU, so one each goes to the 8 apps
    first by priority. Nodes of half the pool: the remainder goes where the ceilings leave room."""
    G, T, n = LIMITS.gpus, LIMITS.horizon, LIMITS.apps
    covered = [Realtime(a, f"app{a}", 1.0 + a % 9, (32,) * T, 1, 64, 64, -1, (31,) * T) for a in range(n)]
    assert reserved(realtime_problem("reserve", G, T, covered)).realtime == tuple(covered)
    exposed = [Realtime(a, f"app{a}", 1.0 + a % 9, (32,) * T, 1, 64, 64, -1, (32,) * T) for a in range(n)]
    out = reserved(realtime_problem("reserve", G, T, exposed))
    assert all(sum(app.reserve[t] for app in out.realtime) == 8 for t in range(T))
    first = sorted(range(n), key=lambda a: (-(1.0 + a % 9), a))[:8]
    assert {app.id for app in out.realtime if app.reserve[0]} == {f"app{a}" for a in first}
    # two nodes of 2,048: the lift is 2,048 GPUs and 63 apps sit at their ceilings, so the one
    # below its own takes the whole remainder (in rounds counted, not handed out one by one)
    full = [replace(app, max_gpus=32) for app in exposed[:-1]] + [replace(exposed[-1], max_gpus=G)]
    out = reserved(replace(realtime_problem("reserve", G, T, full), node_size=G // 2))
    assert all(app.reserve == (0,) * T for app in out.realtime[:-1])
    assert out.realtime[-1].reserve == (G // 2,) * T


@pytest.mark.slow
def test_a_serving_run_with_the_reserve_is_legal_and_leaves_fifo_as_it_was():
    """A three-day, 32-GPU serving trace with a node down: with the reserve on, neither run
    breaks an online rule, FIFO's run is the default's, and the heuristic's apps are short fewer
    GPU-steps than without it."""
    events = [parse_event(e) for e in Trace("serving", 32, 7).events()]
    runs = {}
    for on in (False, True):
        sim = simulate(events, SimOptions(forecast_settings=ForecastSettings(realtime_node_reserve=on)))
        assert executed_violations(sim, sim.runs["heuristic"]) == []
        runs[on] = (whole_run(sim, sim.runs["fifo"]), whole_run(sim, sim.runs["heuristic"]))
    assert runs[True][0] == runs[False][0]
    assert runs[True][1].realtime_shortfall < runs[False][1].realtime_shortfall


def _adopted(reserve: bool) -> float | None:
    """The bound published with a full-mode plan adopted over a hot path that starts nothing, the
    setting on or off."""
    idle = lambda problem: fifo_schedule(replace(problem, batch=()))  # noqa: E731 (legal: no work started)
    pool = Pool(scheduler=idle, forecast=ForecastSettings(realtime_node_reserve=reserve))
    pool.apply(
        [
            ev("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60}),
            ev("app.registered", {"id": "rt", "priority": 5, "min_gpus": 1, "max_gpus": 8, "swap_cap": 4}),
            ev("traffic.observed", {"app": "rt", "gpus": 2}),
            *(
                ev("job.submitted", {"id": f"j{k}", "kind": "training", "priority": p, "gpus": n, "duration": d}, ref=k)
                for k, (p, n, d) in enumerate([(1, 8, 6), (1, 4, 6), (9, 8, 3)])
            ),
        ],
        T0,
    )
    problem = pool.planner.window_problem()
    better = heuristic_schedule(problem)
    committed = pool.commit(plan=FullModePlan(pool.planner.now, better, objective_of(problem, better), bound=1e6))
    assert committed.commit.source == FULL_MODE
    return committed.bound


def test_full_modes_bound_is_not_published_for_a_plan_made_on_lifted_demand():
    """The bound is on the lifted objective: it does not bound the window's, which commits weigh."""
    assert _adopted(reserve=False) == 1e6
    assert _adopted(reserve=True) is None

"""Contested room shared medians first (`heuristic.contention`): where the apps' planned demands
exceed what running jobs and lost nodes leave, each app's median comes before another's GPUs
above its own median, highest priority first; FIFO's static reservations do not read medians."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from support.examples import examples
from support.realtime_pools import realtime_pools, realtime_problem

from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.heuristic.contention import shared
from gpualloc.solvers.problem import Batch, Problem, Realtime


def _two_apps(median: bool) -> Problem:
    """16 GPUs, 8 of them held by a running job for the whole window: a spiky priority-7 app
    planned at 8 GPUs (median 2) beside a priority-5 app planned at 6 (median 5), each holding 4."""
    T = 4
    running = Batch(0, "long", 3.0, 8, 20, 0, 0xFF, 20)
    spiky = Realtime(1, "spiky", 7.0, (8,) * T, 1, 11, 4, 0xF00, (2,) * T if median else ())
    steady = Realtime(2, "steady", 5.0, (6,) * T, 1, 11, 4, 0xF000, (5,) * T if median else ())
    return realtime_problem("contention", 16, T, [spiky, steady], [running])


def test_a_lower_priority_apps_median_comes_before_a_higher_ones_spike_headroom():
    """Room 8: the steady app's median (5) is kept and the spiky one gets what is left (3),
    where cutting lowest priority first would hold the spiky one at 8 and the steady one at its
    floor of 1 (the plan without medians)."""
    with_median, without = _two_apps(True), _two_apps(False)

    plan, old = heuristic_schedule(with_median), heuristic_schedule(without)

    counts = {app: [m.bit_count() for m in masks] for app, masks in plan.realtime.items()}
    assert counts == {"spiky": [3] * 4, "steady": [5] * 4}
    assert [m.bit_count() for m in old.realtime["steady"]] < counts["steady"]
    assert check_plan(with_median, to_grid(with_median, plan)) == []


def test_uncontested_steps_and_problems_without_medians_are_planned_as_given():
    """Room for every app's planned demand: nothing changes; no medians: the same problem."""
    roomy = dataclasses.replace(_two_apps(True), gpus=32)
    assert shared(roomy) is roomy
    plain = _two_apps(False)
    assert shared(plain) is plain


def test_fifo_reserves_the_planned_peak_whatever_the_medians():
    """FIFO's static reservations (the contract's baseline) are the same with or without medians."""
    assert fifo_schedule(_two_apps(True)) == fifo_schedule(_two_apps(False))


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(realtime_pools())
def test_shared_demand_stays_within_planned_demand_fills_the_room_and_plans_stay_legal(problem):
    """At a contested step whose floors fit, the apps' demands sum to the room, none above its
    planned demand or below the floor it wanted; elsewhere the demand is as planned. The
    heuristic's plan of the problem is legal and deterministic."""
    out = shared(problem)
    for t, busy in enumerate(problem.running_busy):
        room = problem.gpus - busy.bit_count()
        want = [max(min(app.demand[t], app.max_gpus), 0) for app in problem.realtime]
        got = [app.demand[t] for app in out.realtime]
        floors = [min(app.min_gpus, w) for app, w in zip(problem.realtime, want)]
        if sum(want) <= room or sum(floors) > room:
            assert got == [app.demand[t] for app in problem.realtime]
        else:
            assert sum(got) == room and all(f <= g <= w for f, g, w in zip(floors, got, want))
            for a, app in enumerate(problem.realtime):  # a median is short only where every higher one is met
                if got[a] < min(app.median[t], want[a]):
                    later = [b for b in range(len(got)) if (problem.realtime[b].priority, -b) < (app.priority, -a)]
                    assert all(got[b] <= floors[b] for b in later)
    plan = heuristic_schedule(problem)
    assert check_plan(problem, to_grid(problem, plan)) == []
    assert heuristic_schedule(problem) == plan


@pytest.mark.slow
def test_at_the_limits_the_room_is_shared_every_step():
    """4,096 GPUs, 336 steps, 64 apps planned at 32 GPUs (median 16), half of priority 9 and
    half of priority 1, with running jobs leaving 1,536 GPUs: at every step each app gets its
    median, and the priority-9 apps the 512 left."""
    G, T, n = LIMITS.gpus, LIMITS.horizon, LIMITS.apps
    held = G - 1536
    running = [Batch(0, "held", 1.0, held, 999, 0, (1 << held) - 1, T)]
    apps = [Realtime(1 + a, f"app{a}", 9.0 if a % 2 else 1.0, (32,) * T, 1, 64, 64, -1, (16,) * T) for a in range(n)]

    out = shared(realtime_problem("contention", G, T, apps, running))

    for app in out.realtime:
        assert set(app.demand) == {32 if app.priority == 9 else 16}, app.id

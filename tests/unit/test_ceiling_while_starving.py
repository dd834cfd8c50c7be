"""An app's ceiling holds while batch jobs starve (R3): a trade that cuts an app's curve for a
starving job leaves a dip, and what grows it back to its curve there (`grow_to_demand`) holds
each GPU it adds until the GPU is taken or the app is at its ceiling, never past it, even where
the app's demand is above its ceiling and a GPU more would serve it."""

from __future__ import annotations

import pytest
from support.realtime_pools import realtime_problem

from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.starvation import raised
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.heuristic.extras import grow_to_demand
from gpualloc.solvers.policies.heuristic.native import AVAILABLE
from gpualloc.solvers.problem import Batch, Problem, Realtime

PATHS = [False, pytest.param(True, marks=pytest.mark.skipif(not AVAILABLE, reason="gpualloc_native not built"))]


def _window() -> Problem:
    """24 GPUs, 8 held two more steps by a running job; a 16-GPU job and an 8-GPU one queued; a
    priority-8 app at 5 GPUs and a priority-5 app asking 3 GPUs above its ceiling of 2."""
    T = 4
    jobs = [
        Batch(0, "running", 6.0, 8, 6, 0, 0xFF00, 2),
        Batch(1, "old", 4.0, 16, 6, 0, 0, 0),
        Batch(2, "waiting", 6.0, 8, 2, 0, 0, 0),
    ]
    apps = [
        Realtime(3, "chat", 8.0, (5,) * T, 2, 12, 3, 0b11001000),
        Realtime(4, "search", 5.0, (3,) * T, 1, 2, 3, 0b110000),
    ]
    return realtime_problem("window", 24, T, apps, jobs)


@pytest.mark.parametrize("native", PATHS)
def test_a_plan_made_with_starving_jobs_first_keeps_every_app_within_its_ceiling(native):
    """Both queued jobs starving (the planner's `scheduling_problem`): the plan of the raised
    problem is legal on the window it is committed on, as the window's own plan is."""
    window = _window()
    scheduling = raised(window, {"old": 4, "waiting": 2})
    assert [b.priority for b in scheduling.batch] == [6.0, 31.0, 28.5]

    for problem in (window, scheduling):
        plan = heuristic_schedule(problem, native=native)
        assert check_plan(window, to_grid(window, plan)) == []
        assert max(m.bit_count() for m in plan.realtime["search"]) <= 2


def test_a_gpu_grown_into_a_dip_is_left_where_the_app_is_back_at_its_ceiling():
    """Floor sets at the ceiling (2) but for a dip to 1 at step 2: the GPU that fills the dip stays
    free to the end, yet is left at step 3, where the floor set is back at 2."""
    app = Realtime(0, "rt", 5.0, (3,) * 4, 1, 2, 3, 0b11)
    problem = realtime_problem("dip", 8, 4, [app])
    floors = {"rt": [0b11, 0b11, 0b01, 0b11]}

    grown = grow_to_demand(problem, floors, [0] * 4, [[2] * 4])

    assert [m.bit_count() for m in grown["rt"]] == [2, 2, 2, 2]
    assert check_plan(problem, to_grid(problem, Schedule({}, grown))) == []

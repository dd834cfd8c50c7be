"""Apps kept on the GPUs they hold (`keep_held`) at the contract's limits: 4,096 GPUs, a horizon
of 336 steps, 64 apps and 10,000 queued jobs."""

from __future__ import annotations

import pytest

from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.keep_held import keep_held
from gpualloc.solvers.problem import Batch, Problem, Realtime


def _block(first: int, n: int) -> int:
    return ((1 << n) - 1) << first


@pytest.mark.slow
def test_at_the_limits_apps_go_back_to_their_gpus_where_nothing_needs_them_and_stay_where_work_does():
    """64 apps, each holding 16 GPUs and planned on the 16 beside them for the whole window; on
    the odd apps' held GPUs a batch block starts at step 3, so only the even apps go back. 10,000
    one-GPU jobs fill the other half of the pool over the window."""
    G, T, apps, jobs = LIMITS.gpus, LIMITS.horizon, LIMITS.apps, LIMITS.queued_jobs
    realtime, sets = [], {}
    for i in range(apps):
        held, planned = _block(32 * i, 16), _block(32 * i + 16, 16)
        realtime.append(Realtime(i, f"rt{i}", 5.0, (16,) * T, 16, 16, 32, held))  # a move of all 16: 32 swaps
        sets[f"rt{i}"] = [planned] * T
    batch, placed = [], {}
    for k in range(jobs):
        job = Batch(apps + k, f"j{k}", 1.0, 1, 1, 0, 0, 0)
        batch.append(job)
        placed[job.id] = (k // 2048, 1 << (2048 + k % 2048))
    for i in range(1, apps, 2):
        job = Batch(apps + jobs + i, f"w{i}", 1.0, 16, 1, 0, 0, 0)
        batch.append(job)
        placed[job.id] = (3, _block(32 * i, 16))
    weights = tuple(0.99**t for t in range(T))
    problem = Problem("limits", G, 8, T, 0.99, 1.0, weights, tuple(batch), tuple(realtime))
    plan = Schedule(placed, sets)
    assert check_plan(problem, to_grid(problem, plan)) == []

    kept = keep_held(problem, plan)

    assert check_plan(problem, to_grid(problem, kept)) == []
    assert objective_of(problem, kept) == objective_of(problem, plan) and kept.batch == plan.batch
    for app in problem.realtime:
        i = int(app.id[2:])
        expected = app.current_mask if i % 2 == 0 else sets[app.id][0]
        assert kept.realtime[app.id] == [expected] * T, app.id

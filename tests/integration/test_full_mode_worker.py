"""Full mode in a solver process while the hot path keeps deciding arrivals on the event loop."""

from __future__ import annotations

import asyncio

import pytest
from support.planner_states import loaded_planner
from test_solve_process import children, gone

from gpualloc.agent.service.full_mode_worker import FullModeWorker
from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.full_mode import full_mode_window
from gpualloc.solvers.planner.records import JobSpec
from gpualloc.solvers.policies.fifo import fifo_schedule


@pytest.mark.slow
async def test_arrivals_are_decided_while_full_mode_solves_and_its_plan_is_adopted_at_the_boundary():
    planner = loaded_planner(scheduler=fifo_schedule)  # a weak hot path, so full mode's plan is better
    worker = FullModeWorker(FullModeOptions(time_limit=30, node_limit=50), max_jobs=12)
    try:
        assert worker.launch(full_mode_window(planner, 12)) and not worker.launch(
            full_mode_window(planner, 12)
        )  # one solve at a time
        decided_while_busy = 0
        for k in range(40):
            if not worker.busy:
                break
            decision = planner.admission.submit(JobSpec(f"late{k}", "training", 3, 1, 2, planner.now))
            decided_while_busy += decision.job_id == f"late{k}"
            await asyncio.sleep(0.01)
        await worker.wait()
        plan, ended = worker.collect()
        assert worker.collect() == (None, None) and worker.last_error is None  # taken once
    finally:
        worker.close()
    assert decided_while_busy > 0
    assert plan is not None and plan.made_at == planner.now
    assert ended is not None and ended.step == planner.now and ended.seconds > 0
    adoption = planner.adoption.adopt(plan)
    assert adoption.schedule is not None, adoption.reason
    commit = planner.boundary.tick(adoption.schedule)
    assert commit.source == "milp"
    assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))


@pytest.mark.slow
async def test_a_skipped_window_leaves_no_idle_solver_process():
    """A solve keeps its process for the next one; a window the size gate skips ends it (its
    memory with it) rather than holding it idle, and the next solve starts a new one."""
    planner = loaded_planner(jobs=8)
    worker = FullModeWorker(FullModeOptions(time_limit=30, node_limit=50), max_jobs=8)
    try:
        assert worker.launch(full_mode_window(planner, 8))
        await worker.wait()
        first = worker.pid
        assert worker.collect()[1] is not None and first in children()  # kept, idle, for the next solve
        worker.max_nonzeros = 1  # every window is now above the size gate
        assert not worker.launch(full_mode_window(planner, 8))
        assert worker.skipped is not None and "agent.full_mode_max_nonzeros" in worker.skipped
        assert worker.pid is None and await gone(first)  # ended at once, reaped in a thread
        worker.max_nonzeros = None
        assert worker.launch(full_mode_window(planner, 8)) and worker.pid not in (None, first)
    finally:
        worker.close()
    assert not children()


@pytest.mark.slow
async def test_release_ends_an_idle_process_and_leaves_a_running_solve_alone():
    planner = loaded_planner(jobs=8)
    worker = FullModeWorker(FullModeOptions(time_limit=30, node_limit=50), max_jobs=8)
    try:
        assert worker.launch(full_mode_window(planner, 8))
        worker.release()  # solving: kept
        assert worker.busy and worker.pid is not None
        await worker.wait()
        worker.release()  # its result not taken yet: kept
        pid = worker.pid
        assert pid is not None and worker.collect()[1] is not None
        worker.release()
        assert worker.pid is None and await gone(pid)
    finally:
        worker.close()

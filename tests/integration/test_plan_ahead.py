"""A boundary's plan made ahead of it (cut before the boundary, made in another process, carried
onto the window the boundary finds): legal whatever happened since the cut, the same plan as a
replan when nothing did, and the same in a solver process as in the agent's."""

from __future__ import annotations

import asyncio
import copy
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.planner_states import loaded_planner

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.plan_ahead import LEAD_SHARE, PlanAhead, hot_plan
from gpualloc.agent.service.solve_process import NICENESS, PARENT_CHECK_S, SolveProcess
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.ahead import carry_over
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec
from gpualloc.solvers.release import RULES

RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0, "rules": RULES}


def cut_and_plan(planner: Planner) -> None:
    """What the agent does before a boundary, the plan made here rather than in its process."""
    planner.boundary.planned_ahead(hot_plan(planner.boundary.cut(), "heuristic", 0.05))


def test_with_nothing_since_the_cut_the_boundary_commits_the_plan_a_replan_would_make():
    planner = loaded_planner(lambda problem: hot_plan(problem, "heuristic", 0.05), jobs=30)  # replans as the cut plans
    replanned = copy.deepcopy(planner)
    cut_and_plan(planner)
    assert planner.boundary.ahead_ready()
    carried, fresh = planner.boundary.tick(), replanned.boundary.tick()
    assert carried.schedule == fresh.schedule and carried.assignments == fresh.assignments
    assert planner.ahead is None  # a plan made ahead serves one boundary


EVENT = st.tuples(
    st.sampled_from(
        ["arrive", "arrive", "arrive", "complete", "cancel", "down", "drain", "up", "traffic", "register", "limit"]
    ),
    st.integers(0, 10_000),
)


def after_the_cut(planner: Planner, events: list[tuple[str, int]]) -> set[str]:
    """Apply `events` (as the agent does between a cut and its boundary); the jobs started."""
    for n, (kind, x) in enumerate(events):
        rng = random.Random(x)
        if kind == "arrive":
            planner.admission.submit(
                JobSpec(
                    f"late{n}", "training", rng.randint(1, 9), rng.choice([1, 2, 4, 8]), rng.randint(1, 6), planner.now
                )
            )
        elif kind in ("complete", "cancel") and (planner.running or planner.queued):
            ids = sorted(planner.running) + sorted(planner.queued)
            job_id = ids[x % len(ids)]
            planner.admission.complete(job_id) if kind == "complete" else planner.admission.cancel(job_id)
        elif kind in ("down", "drain", "up"):
            planner.pool_changes.node_status(x % 2, {"drain": "drained"}.get(kind, kind))
        elif kind == "traffic" and "chat" in planner.apps:
            planner.realtime.observe_traffic("chat", planner.now, 1 + x % 6)
        elif kind == "register":
            planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1 + x % 2, max_gpus=8))
        elif kind == "limit" and planner.running:  # a running job whose time limit is up at the boundary
            job_id = sorted(planner.running)[x % len(planner.running)]
            r = planner.running[job_id]
            if r.start < planner.now:
                planner.running[job_id] = r._replace(spec=replace(r.spec, time_limit=planner.now - r.start))
    return {job_id for job_id, r in planner.running.items() if r.start == planner.now}


@settings(max_examples=examples(60), deadline=None)
@given(jobs=st.integers(0, 40), seed=st.integers(0, 50), events=st.lists(EVENT, max_size=25), app=st.booleans())
def test_the_carried_plan_is_legal_and_keeps_every_start_whatever_happened_since_the_cut(jobs, seed, events, app):
    planner = loaded_planner(jobs=jobs, seed=seed)
    if not app:  # no app rules to change: the plan is carried over more often, clashes and all
        planner.apps.clear()
        planner.busy = None
    cut_and_plan(planner)
    running = dict(planner.running)
    started = after_the_cut(planner, events)
    # the boundary fails them before it plans (`Pool.commit`)
    expired = {spec.id for spec in planner.admission.expire()}
    held = {job_id: r.mask for job_id, r in planner.running.items()}
    commit = planner.boundary.tick()
    assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))
    for job_id in held:  # every start given, before the cut or after, runs on as decided
        assert commit.schedule.batch[job_id] == (0, held[job_id])
    assert started <= set(commit.assignments) and not expired & set(commit.assignments)
    assert all(
        commit.assignments[job_id] == tuple(b for b in range(16) if held[job_id] >> b & 1)
        for job_id in running
        if job_id in held
    )


def test_jobs_that_arrived_after_the_cut_are_inserted_into_the_carried_plan():
    planner = loaded_planner(jobs=6)
    cut_and_plan(planner)
    for k in range(4):
        planner.admission.submit(JobSpec(f"late{k}", "training", 9, 1, 1, planner.now))
    problem, carried = planner.boundary.boundary_plan()
    assert {f"late{k}" for k in range(4)} <= set(carried.batch)
    assert not check_plan(problem, to_grid(problem, carried))


def test_an_app_changed_since_the_cut_makes_the_boundary_replan():
    planner = loaded_planner(jobs=10)
    cut_and_plan(planner)
    ahead = planner.ahead
    planner.realtime.register_app(AppSpec("search", priority=4, min_gpus=2, max_gpus=4))
    assert carry_over(planner.window_problem(), ahead) is None  # the plan made ahead cannot be carried...
    assert planner.ahead is None and not planner.boundary.ahead_ready()  # ...so the cut is dropped: nothing to wait for
    commit = planner.boundary.tick()  # a fresh plan, with the new app's floor
    assert len(commit.assignments["search"]) >= 2


def test_a_node_down_since_the_cut_takes_none_of_the_boundary_plan():
    planner = loaded_planner(jobs=30)
    cut_and_plan(planner)
    node = (1 << 16) - (1 << 8)
    assert any(mask & node for job_id, (_, mask) in planner.ahead.schedule.batch.items() if job_id in planner.queued)
    planner.pool_changes.node_status(1, "down")
    queued = set(planner.queued)
    commit = planner.boundary.tick()
    assert not check_plan(commit.window, to_grid(commit.window, commit.schedule))
    assert not any(mask & node for job_id, (_, mask) in commit.schedule.batch.items() if job_id in queued)


def test_a_plan_made_in_a_solver_process_is_the_one_made_here():
    planner = loaded_planner(lambda problem: hot_plan(problem, "heuristic", 0.05), jobs=40)
    problem = planner.boundary.cut()

    async def made_elsewhere():
        process = SolveProcess()
        try:
            assert process.submit(hot_plan, problem, "heuristic", 0.05) and not process.submit(hot_plan, problem)
            await process.wait()
            return process.take()
        finally:
            process.close()

    assert asyncio.run(made_elsewhere()) == planner.scheduler(problem) == hot_plan(problem, "heuristic", 0.05)


def test_a_solver_process_runs_below_the_agents_priority():
    async def niceness():
        process = SolveProcess()
        try:
            process.submit(os.nice, 0)
            await process.wait()
            return process.take()
        finally:
            process.close()

    assert asyncio.run(niceness()) == min(19, os.nice(0) + NICENESS)


T0 = datetime(2026, 12, 2, tzinfo=timezone.utc)


def configured() -> Dispatcher:
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)
    d.interpreter.planner, d.interpreter.origin = loaded_planner(jobs=20), T0
    return d


def test_the_agent_cuts_once_a_lead_before_the_boundary_and_drops_a_plan_made_too_late():
    async def run():
        ahead, d = PlanAhead("heuristic", 0.05), configured()
        try:
            step = timedelta(seconds=10)
            assert ahead.cut_time(T0, step) == T0 - timedelta(seconds=min(ahead.lead_s, LEAD_SHARE * 10))
            assert (
                not ahead.launch(d, T0) and d.interpreter.planner.ahead is None
            )  # the process starts first: no cut yet
            await ahead.process.wait()
            ahead.deliver(d)  # the warm-up, dropped
            assert d.interpreter.planner.ahead is None and (ahead.made, ahead.late) == (0, 0)
            assert ahead.launch(d, T0) and not ahead.launch(d, T0)  # one plan at a time
            await ahead.process.wait()
            d.commit(T0)  # the boundary came first: it replanned
            ahead.deliver(d)
            assert d.interpreter.planner.ahead is None and (ahead.made, ahead.late) == (0, 1)
            assert ahead.launch(d, T0)
            await ahead.process.wait()
            ahead.deliver(d)
            assert d.interpreter.planner.boundary.ahead_ready() and (ahead.made, ahead.late) == (1, 1)
            assert 0.05 <= ahead.lead_s < 60  # a few times the plan's own wall time
        finally:
            ahead.close()

    asyncio.run(run())


def test_before_a_plan_has_been_timed_the_cut_comes_a_quarter_step_ahead():
    """A window's first plan, of a size never timed, is given the most time a cut may: at the
    contract's limits it takes seconds, and one cut half a second ahead came after its boundary,
    which then replanned in a pass that held up every arrival."""

    async def run():
        ahead = PlanAhead("heuristic", 0.05)
        try:
            assert ahead.cut_time(T0, timedelta(seconds=60)) == T0 - timedelta(seconds=15)
        finally:
            ahead.close()

    asyncio.run(run())


def warmed(body: Callable[[PlanAhead, Dispatcher], Awaitable[None]]) -> None:
    """`body` run with a plan-ahead process past its warm-up and a loaded pool's dispatcher."""

    async def run():
        ahead, d = PlanAhead("heuristic", 0.05), configured()
        try:
            await ahead.process.wait()
            ahead.deliver(d)  # the warm-up
            await body(ahead, d)
        finally:
            ahead.close()

    asyncio.run(run())


def test_a_boundary_waits_for_its_plan_while_it_is_made_and_a_quarter_step_at_most():
    async def body(ahead: PlanAhead, d: Dispatcher) -> None:
        step, boundary = timedelta(seconds=10), d.reads.next_boundary()
        assert not ahead.awaited(d, boundary, step, boundary)  # nothing cut: nothing to wait for
        assert ahead.launch(d, boundary - timedelta(seconds=1))
        assert ahead.awaited(d, boundary, step, boundary)  # being made: the boundary waits
        assert ahead.awaited(d, boundary, step, boundary + LEAD_SHARE * step - timedelta(milliseconds=1))
        assert not ahead.awaited(d, boundary, step, boundary + LEAD_SHARE * step)  # then it replans
        await ahead.process.wait()
        ahead.deliver(d)
        assert d.interpreter.ahead_ready() and not ahead.awaited(d, boundary, step, boundary)  # made: commit

    warmed(body)


def test_a_cut_replayed_without_its_plan_is_planned_by_the_live_agent_and_carried():
    async def body(ahead: PlanAhead, d: Dispatcher) -> None:
        assert not ahead.resume(d)  # no cut
        d.cut(T0)  # as a replay leaves it: the cut, not its plan
        assert d.interpreter.planner.ahead.problem is not None and not d.interpreter.planner.boundary.ahead_ready()
        assert ahead.resume(d) and not ahead.resume(d)  # one plan at a time
        await ahead.process.wait()
        ahead.deliver(d)
        assert d.interpreter.planner.boundary.ahead_ready() and ahead.made == 1 and ahead.plan_s > 0

    warmed(body)


@pytest.mark.slow
def test_a_solver_process_ends_when_its_agent_dies_without_closing_it(tmp_path):
    script = (
        "import asyncio, os, sys\n"
        "from gpualloc.agent.service.solve_process import NICENESS, PARENT_CHECK_S, SolveProcess\n"
        "async def main():\n"
        "    p = SolveProcess()\n"
        "    p.submit(os.getpid)\n"
        "    await p.wait()\n"
        "    print(p.take(), flush=True)\n"
        "    os._exit(0)\n"  # no shutdown: as when the agent is killed
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    worker = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 10 * PARENT_CHECK_S + 5
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.2)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

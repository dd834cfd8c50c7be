"""The next boundary's plan, made ahead of it in a process of its own.

A boundary's replan (tens of milliseconds at 64 GPUs) would hold up every arrival behind its
pass. Instead the pass that comes `lead` before the boundary cuts the window (`Dispatcher.cut`,
recorded in the ledger), the hot path plans it in a `SolveProcess` while arrivals go on being
inserted, and the boundary carries that plan onto its window (`gpualloc.solvers.planner.ahead`).
A boundary whose plan is still being made waits for it (up to a quarter of a step), deciding
arrivals meanwhile; a plan not made by then is dropped and the boundary replans, as it would
without this; the commit records which, so a replay does the same. The lead follows the plans' own wall time
(a few times the last), so the cut stays close to the boundary: what happens after the cut is
inserted, not planned.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta
from typing import Protocol

from gpualloc.agent.service.reads import PoolReads, step_of
from gpualloc.agent.service.solve_process import SolveProcess
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.records import Cut
from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.problem import Problem

# before a plan has been timed, the cut comes as early as it may (LEAD_SHARE of a step): the
# first plan of a window of unknown size may take seconds (10,000 queued jobs at 4,096 GPUs)
LEAD_FIRST_S = math.inf
LEAD_TIMES = 3.0  # the cut comes this many times the last plan's wall time before the boundary,
LEAD_FLOOR_S = 0.05  # at least this long,
LEAD_SHARE = 0.25  # and at most this share of a step


def hot_plan(problem: Problem, policy: str, effort: float) -> Schedule:
    """The plan the agent's hot path makes of `problem` (as `Dispatcher.use` binds it)."""
    return online_policy(policy).hot.schedule(problem, SolveOptions(effort=effort))


def _warm(policy: str) -> None:
    """Start the solver process and import the planners there, so the first plan is in time
    (a start-up call: at the agent's priority)."""
    online_policy(policy)


class Cuts(Protocol):
    """What plans made ahead need of a pool: its cuts, and where their plans go (the dispatcher,
    which records each cut in the ledger)."""

    @property
    def reads(self) -> PoolReads: ...

    def cut(self, now: datetime) -> Problem | None: ...

    def planned_ahead(self, step: int, schedule: Schedule) -> None: ...


class PlanAhead:
    def __init__(self, policy: str, effort: float):
        self.policy, self.effort = policy, effort
        self.process = SolveProcess()
        self.lead_s = LEAD_FIRST_S
        self.made = self.late = 0  # plans made in time for their boundary, and too late
        self.plan_s = 0.0  # the last plan's wall time (a replay of its boundary makes it again)
        self._launched: tuple[int, float] | None = None  # the running plan's step and start
        self.process.submit(_warm, policy, start_up=True)

    def cut_time(self, boundary: datetime, step_length: timedelta) -> datetime:
        return boundary - timedelta(seconds=min(self.lead_s, LEAD_SHARE * step_length.total_seconds()))

    def awaited(self, pool: Cuts, boundary: datetime, step_length: timedelta, now: datetime) -> bool:
        """Should the boundary at `boundary` wait for the plan being made for it? Yes while it is
        being made and the boundary is less than `LEAD_SHARE` of a step past: replanning in the
        pass instead would hold up every arrival behind it for the whole replan (seconds at
        thousands of GPUs), while waiting keeps deciding arrivals, inserted into the current
        plan, and commits the step a little late. The commit is the one a replay makes: the cut,
        the inputs after it, then the commit carrying its plan, in the ledger's order."""
        waiting = pool.reads.waiting_cut()
        return (
            self._launched is not None
            and waiting is not None
            and self._launched[0] == waiting.step
            and now < boundary + LEAD_SHARE * step_length
        )

    def launch(self, pool: Cuts, now: datetime) -> bool:
        """Cut the window and start its plan (not while one is still being made)."""
        if self.process.busy:
            return False
        problem = pool.cut(now)
        if problem is None:
            return False
        step = step_of(pool.reads)
        assert step is not None  # a pool that cut its window is configured
        return self._start(Cut(step, problem))

    def resume(self, pool: Cuts) -> bool:
        """Start the plan of a cut the pool holds without one (a cut replayed by recovery, its
        boundary still to come), so that boundary carries it over as the first agent's would
        have; the replay itself does not wait for it."""
        waiting = pool.reads.waiting_cut()
        if self.process.busy or self._launched is not None or waiting is None:
            return False
        return self._start(waiting)

    def _start(self, cut: Cut) -> bool:
        """Make the plan of `cut`, timed from now."""
        self._launched = (cut.step, time.perf_counter())
        return self.process.submit(hot_plan, cut.problem, self.policy, self.effort)

    def deliver(self, pool: Cuts) -> None:
        """Hand a plan that has been made to the pool (kept there for its boundary; one made too
        late, after its boundary, is dropped) and time it for the next lead."""
        if not self.process.done:
            return
        if self._launched is None:  # the warm-up
            self.process.take()
            return
        (step, began), self._launched = self._launched, None
        schedule = self.process.take()
        self.plan_s = time.perf_counter() - began
        self.lead_s = max(LEAD_FLOOR_S, LEAD_TIMES * self.plan_s)
        if schedule is None:
            return
        in_time = step_of(pool.reads) == step
        self.made, self.late = self.made + in_time, self.late + (not in_time)
        pool.planned_ahead(step, schedule)

    def close(self) -> None:
        self.process.close()

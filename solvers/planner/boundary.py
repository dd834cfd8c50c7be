"""The planner's boundary role: the window cut ahead of the step boundary for a plan made
elsewhere, the commit of its first step (starting its jobs through admission, then meeting the
demand observed before it through real time's grants), and the plan, one step on, that the next
arrivals are inserted into."""

from __future__ import annotations

from dataclasses import replace

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.admission import Admission
from gpualloc.solvers.planner.ahead import Ahead, app_rules, carry_over, first_needs
from gpualloc.solvers.planner.keep_held import keep_held
from gpualloc.solvers.planner.pool_state import PlannerState, plan_busy
from gpualloc.solvers.planner.realtime import RealTime
from gpualloc.solvers.planner.records import (
    FULL_MODE,
    HOT_PATH,
    Adoption,
    Commit,
    Source,
    is_blocker,
)
from gpualloc.solvers.planner.reservations import apps_keep_their_rules, released
from gpualloc.solvers.problem import Problem, bits_of


class Boundary:
    """Cuts, commits and the plan arrivals are inserted into, over the pool's `state`; a commit
    starts jobs through `admission` and grants apps GPUs through `realtime`."""

    __slots__ = ("state", "admission", "realtime")

    def __init__(self, state: PlannerState, admission: Admission, realtime: RealTime) -> None:
        self.state, self.admission, self.realtime = state, admission, realtime

    def cut(self) -> Problem:
        """Cut the window for the next boundary's plan, made ahead of it (`gpualloc.solvers.planner.ahead`):
        the problem to solve with the hot path's scheduler, its plan handed back by `planned_ahead`."""
        window = self.state.window_problem()
        problem = self.state.scheduling_problem(window)
        self.state.ahead = Ahead(
            self.state.now, frozenset(self.state.queued), app_rules(window), problem, needs=first_needs(window)
        )
        return problem

    def planned_ahead(self, schedule: Schedule) -> None:
        """The plan of the problem `cut` gave, made (ignored when no cut waits for it)."""
        if self.state.ahead is not None and self.state.ahead.schedule is None:
            self.state.ahead = replace(self.state.ahead, schedule=schedule)

    def drop_cut(self) -> None:
        """Forget the cut: the next boundary replans (its plan came too late)."""
        self.state.ahead = None

    def ahead_ready(self) -> bool:
        """Will the next commit carry a plan made ahead onto its window (else it replans)?"""
        return (
            self.state.ahead is not None
            and self.state.ahead.schedule is not None
            and self.state.ahead.now == self.state.now
        )

    def boundary_plan(self) -> tuple[Problem, Schedule]:
        """The hot path's plan at a step boundary: the plan made ahead of it carried onto the
        window (`ahead_ready`), else a fresh one (`plan`), on the same window either way."""
        problem = self.state.window_problem()
        ahead = self.state.ahead if self.ahead_ready() else None  # ready: not None
        if ahead is None:
            return self.state.plan(problem)
        if not self.state.config.reserved_jobs:
            carried = carry_over(problem, ahead, self.state.by_arrival)
        else:  # arrivals since the cut are inserted around the reservations
            pinned = self.state.with_starving(problem)
            carried = carry_over(pinned, ahead, self.state.by_arrival)
            if carried is not None and not apps_keep_their_rules(problem, carried):
                carried = None  # the plan made ahead broke an app's rule around a reservation: replan
            carried = None if carried is None else released(problem, carried)
        return (problem, carried) if carried is not None else self.state.plan(problem)

    def tick(self, adopted: Schedule | None = None) -> Commit:
        """Commit the current step of a fresh plan (or of `adopted`, a plan of this same window
        from `adopt`, or recorded in a commit being replayed), then advance the clock one step."""
        if adopted is not None:
            return self._commit(self.state.window_problem(), adopted, FULL_MODE)
        return self._commit(*self.boundary_plan(), HOT_PATH)

    def tick_after(self, adoption: Adoption) -> Commit:
        """`tick` at the boundary where `adoption` was decided: its plan when adopted, else the
        hot path's plan it was weighed against (made once, not again)."""
        if adoption.hot is None:
            return self.tick()
        problem, hot = adoption.hot
        if adoption.schedule is not None:
            return self._commit(problem, adoption.schedule, FULL_MODE)
        return self._commit(problem, hot, HOT_PATH)

    def _commit(self, problem: Problem, schedule: Schedule, source: Source) -> Commit:
        """Step 0 of `schedule` (a plan of the window `problem`) committed; the clock advances,
        and the plan, one step on, is what the next step's arrivals are inserted into."""
        schedule = keep_held(problem, schedule)  # apps stay on the GPUs they hold where nothing needs them
        reserved = {r.job_id: (self.state.now + r.start, r.mask) for r in self.state.reservations(problem)}
        displaced = self.state.displaced()
        reasons = {
            app_id: self.state.headroom(app.spec, displaced).why for app_id, app in sorted(self.state.apps.items())
        }
        assignments: dict[str, tuple[int, ...]] = {}
        for job_id, (start, mask) in sorted(schedule.batch.items()):
            if is_blocker(job_id) or (job_id not in self.state.running and job_id not in self.state.queued):
                continue
            if job_id in self.state.running:
                assignments[job_id] = tuple(bits_of(self.state.running[job_id].mask))
            elif start == 0:
                self.admission.start(job_id, mask)
                assignments[job_id] = tuple(bits_of(mask))
        started = tuple(
            sorted(
                job_id
                for job_id, entry in self.state.running.items()
                if entry.start == self.state.now and job_id in assignments
            )
        )
        for app_id, masks in sorted(schedule.realtime.items()):
            app = self.state.apps[app_id]
            self.state.apps[app_id] = replace(app, before=app.held, held=masks[0], granted=0)
            assignments[app_id] = tuple(bits_of(masks[0]))
        for app_id, app in self.state.apps.items():  # past observations are no longer planned for: only the latest is
            latest = max(app.observed, default=None)
            observed = {s: g for s, g in app.observed.items() if s > self.state.now or s == latest}
            if len(observed) < len(app.observed):
                self.state.apps[app_id] = replace(app, observed=observed)
        self.state.committed = 0
        for owned in assignments.values():
            for g in owned:
                self.state.committed |= 1 << g
        self.state.now += 1
        self.state.ahead = None
        self.state.busy = plan_busy(self.state, schedule, 1)
        for app_id in sorted(self.state.apps, key=lambda a: (-self.state.apps[a].spec.priority, a)):
            grant = self.realtime.react(app_id)  # demand observed before the boundary holds into the step
            if grant is not None:
                reasons[app_id] = f"{reasons[app_id]}; {grant.reason}"
        for app_id in schedule.realtime:
            assignments[app_id] = tuple(bits_of(self.state.apps[app_id].held))
        reserved = {job_id: r for job_id, r in reserved.items() if job_id not in assignments}  # not those starting now
        return Commit(self.state.now - 1, assignments, started, problem, schedule, source, reasons, reserved)

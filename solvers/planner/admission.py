"""The planner's admission role: a job's decision (a fresh plan of the window, or its earliest
block in the current plan), its start, and what becomes of it after (completion, failure,
cancellation, its time limit, running out of memory)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable

from gpualloc.forecasting.job_forecast import SizeError
from gpualloc.schemas.events import JobUsage
from gpualloc.schemas.scenario import block_size_problems
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.node_watch import started
from gpualloc.solvers.planner.pool_state import PlannerState, plan_busy, steps_held
from gpualloc.solvers.planner.reasons import (
    HELD_NOW,
    SETUP,
    Room,
    holders,
    noted,
    running_holders,
    waiting,
    why_waiting,
)
from gpualloc.solvers.planner.records import (
    Decision,
    JobSpec,
    Running,
)
from gpualloc.solvers.planner.window import overruns
from gpualloc.solvers.problem import Batch, Problem, bits_of, earliest_block
from gpualloc.solvers.value_models import most_valuable_first


class Admission:
    """A job's decision and what becomes of it, over the pool's `state`."""

    __slots__ = ("state",)

    def __init__(self, state: PlannerState) -> None:
        self.state = state

    def submit(self, job: JobSpec, setup: bool = False) -> Decision:
        """A job arrives: it joins the queue and gets its decision (`submit_all`)."""
        return self.submit_all([job], setup)[0]

    def submit_all(self, jobs: list[JobSpec], setup: bool = False) -> list[Decision]:
        """Arrivals taken together (one poll's worth): all join the queue and get their decisions.

        While the queue is small (`replan_work`: queued jobs x GPUs, a count of work, so a
        replay decides the same way) the window is replanned with all of them in the queue, as
        at a step boundary: every started job stays where it is, and jobs only `planned` may
        move, as the boundary's replan would move them. Above it, or with no current plan to
        insert into, the hot path inserts each (most valuable first: priority, then GPU-steps;
        in arrival order for a policy whose order that is) into the current plan (`busy`, made
        at the last step boundary) at its earliest legal block: no decision already given
        moves, nor the committed step, and it costs a scan of the window, not a replan. A
        `start` takes effect at once: the job runs from this step on its GPUs (its node agent
        binds them now), so nothing later in the step moves it. In the pool's set-up window
        (`setup`) none starts: a block free now is `planned` for step 0, whose commit plans every
        job queued then with every app registered in the window."""
        rejected: dict[int, Decision] = {}
        for k, job in enumerate(jobs):
            if job.id in self.state.queued or job.id in self.state.running:
                reason = f"job id {job.id!r} is already queued or running"
            else:
                reason = _unplaceable(self.state, job)
            if reason:
                rejected[k] = Decision(job.id, "rejected", (), None, reason)
            else:
                self.state.queued[job.id] = job
        if len(rejected) == len(jobs):
            return [rejected[k] for k in range(len(jobs))]
        if self.state.busy is not None and len(self.state.queued) * self.state.config.gpus > self.state.replan_work:
            model = self.state.config.value_model
            order = (
                range(len(jobs))
                if self.state.by_arrival
                else sorted(
                    range(len(jobs)),
                    key=lambda k: (*most_valuable_first(model, jobs[k].priority, jobs[k].gpus, jobs[k].duration), k),
                )
            )
            inserted = {k: self._insert(jobs[k], setup) for k in order if k not in rejected}
            return [rejected.get(k) or inserted[k] for k in range(len(jobs))]
        problem, schedule = self.state.plan()
        decisions = [rejected.get(k) or self._decision(problem, schedule, job, setup) for k, job in enumerate(jobs)]
        for decision in decisions:
            if decision.action == "start":
                self.start(decision.job_id, schedule.batch[decision.job_id][1])
        self.state.busy = plan_busy(self.state, schedule, 0)
        return decisions

    def _decision(self, problem: Problem, schedule: Schedule, job: JobSpec, setup: bool) -> Decision:
        """`job`'s decision from a fresh plan of the window (`_placed`; `queued` when the plan
        leaves it out)."""
        placed = schedule.batch.get(job.id)
        if placed is None:
            return waiting(job, _room(self.state).short_now(job.gpus) or why_waiting(problem, schedule, job))
        start, mask = placed
        return self._placed(
            job,
            start,
            mask,
            lambda: holders(
                problem, schedule, mask, start, self.state.now, overruns(self.state.running, self.state.now)
            ),
            setup,
        )

    def _insert(self, job: JobSpec, setup: bool) -> Decision:
        """`job` decided into the current plan: its earliest block free of everything the plan
        holds and of GPUs that may take no new work, lowest GPUs first; `queued` when the window
        has none (the next boundary's replan looks again). A `start` runs from now."""
        busy, T = self.state.busy, self.state.config.horizon
        assert busy is not None  # `submit_all` inserts only into a current plan
        blocked = self.state.closed
        cfg = self.state.config
        placed = earliest_block(
            _geometry(cfg.gpus, cfg.node_size, T),
            Batch(0, job.id, job.priority, job.gpus, job.duration, 0, 0, 0),
            [b | blocked for b in busy],
        )
        if placed is None:
            return waiting(
                job,
                _room(self.state).short_now(job.gpus)
                or f"no {job.gpus}-GPU block is free for {job.duration} steps within the {T}-step window beside "
                "the current plan; it stays queued and is replanned at every step boundary",
            )
        start, mask = placed
        for t in range(start, min(start + job.duration, T)):
            busy[t] |= mask
        decision = self._placed(
            job,
            start,
            mask,
            lambda: running_holders(
                (
                    (job_id, entry.spec.priority, entry.mask, steps_held(self.state, entry))
                    for job_id, entry in sorted(self.state.running.items())
                ),
                mask,
                start,
                self.state.now,
                overruns(self.state.running, self.state.now),
            ),
            setup,
        )
        if decision.action == "start":
            self.start(job.id, mask)
        return decision

    def _placed(self, job: JobSpec, start: int, mask: int, held_by: Callable[[], str], setup: bool) -> Decision:
        """The decision of `job` placed on `mask` from window step `start`: `start` only when its
        block is idle in the committed step too, so a node agent can bind it at once; a block
        still held there (by work ending at this boundary, say) makes it `planned` for the
        boundary, and a later block `planned` with what holds it until then (`held_by`). In the
        pool's set-up window (`setup`) a block free now is `planned` for step 0."""
        gpus = tuple(bits_of(mask))
        if start == 0 and not setup and not mask & self.state.committed:
            return Decision(
                job.id,
                "start",
                gpus,
                self.state.now,
                noted(f"starts now on GPUs {gpus[0]}-{gpus[-1]}", job),
                job.forecast,
            )
        why = held_by() if start else SETUP if setup else HELD_NOW
        return Decision(
            job.id,
            "planned",
            gpus,
            self.state.now + start,
            noted(f"planned at step {self.state.now + start} on GPUs {gpus[0]}-{gpus[-1]}: " + why, job),
            job.forecast,
        )

    def start(self, job_id: str, mask: int) -> None:
        """A `start` decision: the job runs from this step on `mask`, bound in the committed step
        from now on (should it leave before the boundary, its GPUs stay bound until then)."""
        self.state.running[job_id] = Running(self.state.queued.pop(job_id), mask, self.state.now)
        self.state.committed |= mask
        started(self.state, job_id, mask)

    def never_ran(self, job_id: str) -> None:
        """A start no node agent bound in time (`node_watch`): back in the queue as it was, as
        never run, whatever its `requeue`."""
        entry = self._release(job_id)
        if entry is not None:
            self.state.queued[job_id] = entry.spec

    def cancel(self, job_id: str) -> None:
        self.state.queued.pop(job_id, None)
        self._release(job_id)

    def _release(self, job_id: str) -> Running | None:
        """A running job leaves its GPUs: free in the current plan from the next commit (the
        window's step 0), the step they are still bound in being the committed one."""
        entry = self.state.running.pop(job_id, None)
        if entry is not None and self.state.busy is not None:
            for t in range(steps_held(self.state, entry)):
                self.state.busy[t] &= ~entry.mask
        return entry

    def complete(self, job_id: str, used: JobUsage | None = None) -> str:
        """The job exited: its GPUs are free from the next committed step. One that gave its
        features teaches the forecasters what it really took (`used`, else what the pool saw:
        its GPUs and the steps since it started), unless no hardware is known to size it on (no
        GPU type in its features or the pool's configuration): the completion still frees its
        GPUs, and why nothing was taught is returned ("" when it was, or had nothing to teach)."""
        entry = self._release(job_id)
        self.state.queued.pop(job_id, None)
        features = None if entry is None else entry.spec.features
        if entry is None or features is None:
            return ""
        spec, start = entry.spec, entry.start
        try:
            hw = self.state.hardware(features)
        except SizeError as e:
            return f"the forecasters were not taught by it: {e}"
        used = used or JobUsage()
        gpus = used.gpus or spec.gpus
        self.state.forecasts.finished(
            spec.kind, features, hw, gpus, used.duration or max(1, self.state.now - start), used.peak_memory_gb
        )
        return ""

    def fail(self, job_id: str) -> None:
        """The job failed (or could not bind): it goes back to the queue if it allows it."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.state.queued.get(job_id)
        if spec is not None:
            self._requeue(spec)

    def expire(self) -> list[JobSpec]:
        """At a step boundary: the running jobs whose time limit is up (started `time_limit` steps
        before this step or earlier) leave their GPUs, not re-queued (a job that ran out of time
        would again), so this step is planned and committed without them. By id."""
        over = sorted(
            job_id
            for job_id, entry in self.state.running.items()
            if entry.spec.time_limit is not None and entry.start + entry.spec.time_limit <= self.state.now
        )
        specs = [self.state.running[job_id].spec for job_id in over]
        for job_id in over:
            self._release(job_id)
        return specs

    def _requeue(self, spec: JobSpec) -> None:
        """A failed job goes back to the queue if it allows it, else leaves the pool."""
        if spec.requeue:
            self.state.queued[spec.id] = spec
        else:
            self.state.queued.pop(spec.id, None)

    def out_of_memory(self, job_id: str) -> tuple[JobSpec | None, str]:
        """The job ran out of GPU memory at the count it was given. One given by its features
        teaches the forecasters that it needs more there; one whose count was forecast and that
        allows re-queueing is sized again, at least the next count up, and returned (off the
        queue) to be decided anew; one the pool cannot give more GPUs is dropped. Else as `fail`.
        Also what became of it, for the record."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.state.queued.get(job_id)
        if spec is None:
            return None, ""
        ran = entry.mask.bit_count() if entry else spec.gpus
        if spec.features is None:
            self._requeue(spec)
            return None, ""
        try:
            hw = self.state.hardware(spec.features)
        except SizeError as e:
            self._requeue(spec)
            return None, f"the forecasters were not taught by it: {e}"
        self.state.forecasts.out_of_memory(spec.kind, spec.features, hw, ran)
        if spec.forecast is None or "gpus" not in spec.forecast.forecast or not spec.requeue:
            self._requeue(spec)
            return None, ""
        self.state.queued.pop(job_id, None)
        if 2 * ran > hw.max_gpus:
            return None, f"out of memory at {ran} GPUs, the most the pool can give it: dropped"
        try:
            again = self.state.size_job(spec.kind, spec.features, None, None)
        except SizeError as e:
            return None, f"out of memory at {ran} GPUs and no count is forecast to hold it ({e}): dropped"
        gpus = max(again.gpus, 2 * ran)
        sized = again if again.gpus == gpus else self.state.size_job(spec.kind, spec.features, gpus, None)
        made = tuple(dict.fromkeys((*spec.forecast.forecast, *sized.forecast)))  # its count stays a forecast one
        return replace(spec, gpus=gpus, duration=sized.duration, forecast=replace(sized, forecast=made)), (
            f"re-queued at {gpus} GPUs after running out of memory at {ran}"
        )


def _unplaceable(state: PlannerState, job: JobSpec) -> str:
    """Why `job` fits nowhere in the pool, whatever else it holds ("" when it fits): a block the
    pool's shape cannot hold, or more GPUs than the real-time apps' floors leave (`Room.refused`)."""
    problems = list(block_size_problems(job.gpus, state.config.gpus, state.config.node_size, "job"))
    if job.duration < 1:
        problems.append(f"job.duration: must be >= 1 (got {job.duration})")
    return "; ".join(problems) or _room(state).refused(job.gpus)


def _room(state: PlannerState) -> Room:
    """The most GPUs the pool can give a job, its floors and closed nodes counted (`Room`)."""
    floors = tuple((app_id, app.spec.min_gpus) for app_id, app in sorted(state.apps.items()) if app.spec.min_gpus)
    return Room(state.config.gpus, floors, state.closed.bit_count())


@functools.cache
def _geometry(gpus: int, node_size: int, horizon: int) -> Problem:
    """A pool's shape as a Problem with no jobs, for block searches (one a shape: its block
    tables are built once)."""
    return Problem("geometry", gpus, node_size, horizon, 1.0, 0.0, (1.0,) * horizon, (), ())

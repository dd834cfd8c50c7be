"""Admission and the job lifecycle: a job's decision (a fresh plan of the window, or its earliest
block in the current plan), and what becomes of it after (completion, failure, cancellation, its
time limit, running out of memory)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable

from gpualloc.forecasting.job_forecast import SizeError
from gpualloc.schemas.events import JobUsage
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.reasons import HELD_NOW, holders, noted, running_holders, waiting, why_waiting
from gpualloc.solvers.planner.records import (
    Decision,
    JobSpec,
    Running,
)
from gpualloc.solvers.problem import Batch, Problem, bits_of, earliest_block


class Admission(PlannerState):
    """A job's decision and what becomes of it."""

    def submit(self, job: JobSpec) -> Decision:
        """A job arrives: it joins the queue and gets a decision from a fresh plan."""
        return self.submit_all([job])[0]

    def submit_all(self, jobs: list[JobSpec]) -> list[Decision]:
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
        binds them now), so nothing later in the step moves it."""
        rejected: dict[int, Decision] = {}
        for k, job in enumerate(jobs):
            if job.id in self.queued or job.id in self.running:
                reason = f"job id {job.id!r} is already queued or running"
            else:
                reason = self._unplaceable(job)
            if reason:
                rejected[k] = Decision(job.id, "rejected", (), None, reason)
            else:
                self.queued[job.id] = job
        if len(rejected) == len(jobs):
            return [rejected[k] for k in range(len(jobs))]
        if self.busy is not None and len(self.queued) * self.config.gpus > self.replan_work:
            order = (
                range(len(jobs))
                if self.by_arrival
                else sorted(range(len(jobs)), key=lambda k: (-jobs[k].priority, -jobs[k].gpus * jobs[k].duration, k))
            )
            inserted = {k: self._insert(jobs[k]) for k in order if k not in rejected}
            return [rejected.get(k) or inserted[k] for k in range(len(jobs))]
        problem, schedule = self.plan()
        decisions = [rejected.get(k) or self._decision(problem, schedule, job) for k, job in enumerate(jobs)]
        for decision in decisions:
            if decision.action == "start":
                self._start(decision.job_id, schedule.batch[decision.job_id][1])
        self.busy = self._plan_busy(schedule, 0)
        return decisions

    def _decision(self, problem: Problem, schedule: Schedule, job: JobSpec) -> Decision:
        """`job`'s decision from a fresh plan of the window (`_placed`; `queued` when the plan
        leaves it out)."""
        placed = schedule.batch.get(job.id)
        if placed is None:
            return waiting(job, why_waiting(problem, schedule, job))
        start, mask = placed
        return self._placed(job, start, mask, lambda: holders(problem, schedule, mask, start, self.now))

    def _insert(self, job: JobSpec) -> Decision:
        """`job` decided into the current plan: its earliest block free of everything the plan
        holds and of GPUs that may take no new work, lowest GPUs first; `queued` when the window
        has none (the next boundary's replan looks again). A `start` runs from now."""
        busy, T = self.busy, self.config.horizon
        assert busy is not None  # `submit_all` inserts only into a current plan
        blocked = self.down | self.drained
        cfg = self.config
        placed = earliest_block(
            _geometry(cfg.gpus, cfg.node_size, T),
            Batch(0, job.id, job.priority, job.gpus, job.duration, 0, 0, 0),
            [b | blocked for b in busy],
        )
        if placed is None:
            return waiting(
                job,
                f"no {job.gpus}-GPU block is free for {job.duration} steps within the {T}-step window beside "
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
                    (job_id, entry.spec.priority, entry.mask, self._steps_left(entry))
                    for job_id, entry in sorted(self.running.items())
                ),
                mask,
                start,
                self.now,
            ),
        )
        if decision.action == "start":
            self._start(job.id, mask)
        return decision

    def _placed(self, job: JobSpec, start: int, mask: int, held_by: Callable[[], str]) -> Decision:
        """The decision of `job` placed on `mask` from window step `start`: `start` only when its
        block is idle in the committed step too, so a node agent can bind it at once; a block
        still held there (by work ending at this boundary, say) makes it `planned` for the
        boundary, and a later block `planned` with what holds it until then (`held_by`)."""
        gpus = tuple(bits_of(mask))
        if start == 0 and not mask & self.committed:
            return Decision(
                job.id, "start", gpus, self.now, noted(f"starts now on GPUs {gpus[0]}-{gpus[-1]}", job), job.forecast
            )
        why = held_by() if start else HELD_NOW
        return Decision(
            job.id,
            "planned",
            gpus,
            self.now + start,
            noted(f"planned at step {self.now + start} on GPUs {gpus[0]}-{gpus[-1]}: " + why, job),
            job.forecast,
        )

    def _start(self, job_id: str, mask: int) -> None:
        """A `start` decision: the job runs from this step on `mask`, bound in the committed step
        from now on (should it leave before the boundary, its GPUs stay bound until then)."""
        self.running[job_id] = Running(self.queued.pop(job_id), mask, self.now)
        self.committed |= mask

    def cancel(self, job_id: str) -> None:
        self.queued.pop(job_id, None)
        self._release(job_id)

    def _release(self, job_id: str) -> Running | None:
        """A running job leaves its GPUs: free in the current plan from the next commit (the
        window's step 0), the step they are still bound in being the committed one."""
        entry = self.running.pop(job_id, None)
        if entry is not None and self.busy is not None:
            for t in range(self._steps_left(entry)):
                self.busy[t] &= ~entry.mask
        return entry

    def complete(self, job_id: str, used: JobUsage | None = None) -> None:
        """The job exited: its GPUs are free from the next committed step. One that gave its
        features teaches the forecasters what it really took (`used`, else what the pool saw:
        its GPUs and the steps since it started)."""
        entry = self._release(job_id)
        self.queued.pop(job_id, None)
        if entry is None or entry.spec.features is None:
            return
        spec, start = entry.spec, entry.start
        used = used or JobUsage()
        gpus = used.gpus or spec.gpus
        self.forecasts.finished(
            spec.kind,
            spec.features,
            self.hardware(spec.features),
            gpus,
            used.duration or max(1, self.now - start),
            used.peak_memory_gb,
        )

    def fail(self, job_id: str) -> None:
        """The job failed (or could not bind): it goes back to the queue if it allows it."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.queued.get(job_id)
        if spec is not None:
            self._requeue(spec)

    def expire(self) -> list[JobSpec]:
        """At a step boundary: the running jobs whose time limit is up (started `time_limit` steps
        before this step or earlier) leave their GPUs, not re-queued (a job that ran out of time
        would again), so this step is planned and committed without them. By id."""
        over = sorted(
            job_id
            for job_id, entry in self.running.items()
            if entry.spec.time_limit is not None and entry.start + entry.spec.time_limit <= self.now
        )
        specs = [self.running[job_id].spec for job_id in over]
        for job_id in over:
            self._release(job_id)
        return specs

    def _requeue(self, spec: JobSpec) -> None:
        """A failed job goes back to the queue if it allows it, else leaves the pool."""
        if spec.requeue:
            self.queued[spec.id] = spec
        else:
            self.queued.pop(spec.id, None)

    def out_of_memory(self, job_id: str) -> tuple[JobSpec | None, str]:
        """The job ran out of GPU memory at the count it was given. One given by its features
        teaches the forecasters that it needs more there; one whose count was forecast and that
        allows re-queueing is sized again, at least the next count up, and returned (off the
        queue) to be decided anew; one the pool cannot give more GPUs is dropped. Else as `fail`.
        Also what became of it, for the record."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.queued.get(job_id)
        if spec is None:
            return None, ""
        ran = entry.mask.bit_count() if entry else spec.gpus
        if spec.features is None:
            self._requeue(spec)
            return None, ""
        hw = self.hardware(spec.features)
        self.forecasts.out_of_memory(spec.kind, spec.features, hw, ran)
        if spec.forecast is None or "gpus" not in spec.forecast.forecast or not spec.requeue:
            self._requeue(spec)
            return None, ""
        self.queued.pop(job_id, None)
        if 2 * ran > hw.max_gpus:
            return None, f"out of memory at {ran} GPUs, the most the pool can give it: dropped"
        try:
            again = self.size_job(spec.kind, spec.features, None, None)
        except SizeError as e:
            return None, f"out of memory at {ran} GPUs and no count is forecast to hold it ({e}): dropped"
        gpus = max(again.gpus, 2 * ran)
        sized = again if again.gpus == gpus else self.size_job(spec.kind, spec.features, gpus, None)
        made = tuple(dict.fromkeys((*spec.forecast.forecast, *sized.forecast)))  # its count stays a forecast one
        return replace(spec, gpus=gpus, duration=sized.duration, forecast=replace(sized, forecast=made)), (
            f"re-queued at {gpus} GPUs after running out of memory at {ran}"
        )


@functools.cache
def _geometry(gpus: int, node_size: int, horizon: int) -> Problem:
    """A pool's shape as a Problem with no jobs, for block searches (one a shape: its block
    tables are built once)."""
    return Problem("geometry", gpus, node_size, horizon, 1.0, 0.0, (1.0,) * horizon, (), ())

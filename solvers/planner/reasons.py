"""A decision's reason, in words an operator reads: what holds a job's block until it starts,
why it waits, what was forecast of it, and a warning where its forecast runs past its time limit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.records import Decision, JobSpec, is_blocker
from gpualloc.solvers.problem import Problem

HELD_NOW = "its GPUs are held in the current step and free up at the boundary"
SETUP = (
    "the pool's set-up window is open: nothing starts before step 0, whose commit plans every queued job "
    "with every app registered in the window"
)
FREE_AHEAD = "the earliest block the current plan leaves free, no decision already given moving for it"


def holders(
    problem: Problem, schedule: Schedule, mask: int, start: int, now: int, overrun: Mapping[str, int] | None = None
) -> str:
    """Who holds `mask` before `start` in a fresh plan: "held by train-3 (priority 9) until step 12"
    (`overrun`: running jobs past their planned duration, with the step it ended at)."""
    held = []
    for job in problem.batch:
        placed = schedule.batch.get(job.id)
        if is_blocker(job.id) or placed is None:
            continue
        s, m = placed
        end = min(job.remaining, problem.horizon) if job.running_mask else problem.end_of(job, s)
        if m & mask and s < start:
            held.append(_holder(job.id, job.priority, now + end, overrun))
    if not held:
        return "the GPUs go to real-time demand or higher-value work until then"
    return "its block is held by " + ", ".join(held)


def running_holders(
    running: Iterable[tuple[str, float, int, int]],
    mask: int,
    start: int,
    now: int,
    overrun: Mapping[str, int] | None = None,
) -> str:
    """Why a job inserted into the current plan waits for `start`: the running jobs (id,
    priority, GPUs, steps left) on its block until then, and the work planned ahead of it."""
    held = [
        _holder(job_id, priority, now + left, overrun)
        for job_id, priority, gpus, left in running
        if gpus & mask and left <= start
    ]
    return f"its block is held by {', '.join(held)}; {FREE_AHEAD}" if held else FREE_AHEAD


def _holder(job_id: str, priority: float, end: int, overrun: Mapping[str, int] | None) -> str:
    """One holder of a block, in words; a start behind a job that overran its plan depends on
    that job's likely end, and says so."""
    planned = None if overrun is None else overrun.get(job_id)
    if planned is None:
        return f"{job_id} (priority {priority:g}) until step {end}"
    return (
        f"{job_id} (priority {priority:g}; overrunning the plan that ended at step {planned}: "
        f"likely to end by step {end}, and this start depends on it)"
    )


def why_waiting(problem: Problem, schedule: Schedule, job: JobSpec) -> str:
    return (
        f"no {job.gpus}-GPU block is free for {job.duration} steps within the "
        f"{problem.horizon}-step window before higher-value work and real-time demand "
        f"({len(schedule.batch)} jobs placed); it stays queued and is replanned every step"
    )


@dataclass(frozen=True)
class Room:
    """The most GPUs the pool can give one job: its GPUs less the real-time apps' floors (`floors`:
    app id and floor; kept whatever else comes, so only a new registration or configuration
    changes them), and now also less the GPUs of nodes that take no new work (`closed`: down,
    drained or without a live node agent; they may come back)."""

    gpus: int
    floors: tuple[tuple[str, int], ...]
    closed: int

    @property
    def ever(self) -> int:
        return max(0, self.gpus - sum(n for _, n in self.floors))

    @property
    def now(self) -> int:
        return max(0, self.ever - self.closed)

    def _words(self) -> str:
        parts = [f"the pool's {self.gpus}"]
        if self.floors:
            kept = sum(n for _, n in self.floors)
            parts.append(f"less app floors {kept} ({', '.join(f'{app}: {n}' for app, n in self.floors)})")
        if self.closed:
            parts.append(f"less {self.closed} on down or drained nodes")
        return f"the pool can give it at most {self.now} GPUs now ({', '.join(parts)})"

    def refused(self, gpus: int) -> str:
        """Why a job of `gpus` is refused ("" when it is not): more than the floors ever leave,
        the rule a job sized from its features meets too (`PlannerState.hardware`)."""
        if gpus <= self.ever:
            return ""
        return (
            f"job.gpus: {gpus} GPUs can never fit beside the real-time apps' floors: {self._words()}; refused, "
            "as a job sized from its features is (a smaller job, lower floors or a larger pool would fit)"
        )

    def short_now(self, gpus: int) -> str:
        """Why a job of `gpus` cannot start while nodes are out ("" when the count is not why)."""
        if gpus <= self.now:
            return ""
        return f"its {gpus} GPUs cannot fit now: {self._words()}; it waits, replanned at every step boundary"


def waiting(job: JobSpec, why: str) -> Decision:
    """`job` stays queued, saying why."""
    return Decision(job.id, "queued", (), None, noted(why, job), job.forecast)


def noted(reason: str, job: JobSpec) -> str:
    """A decision's reason, with what was forecast of the job when something was, and its time limit."""
    f = job.forecast
    if f is not None:
        reason = (
            f"{reason} (forecast {' and '.join(f.forecast)}: {f.gpus} GPUs, {f.duration} steps planned at the "
            f"{f.quantile:.0%} quantile; median {f.median:.1f}, {f.coverage:.0%} interval {f.low:.1f}-{f.high:.1f})"
        )
    if job.time_limit is None:
        return reason
    warning = past_limit(job)
    if warning:
        return f"{reason}; {warning}"
    return f"{reason}; time limit {job.time_limit} steps: failed that long after it starts, unless it ends first"


def past_limit(job: JobSpec) -> str:
    """A warning where the job's forecast duration runs past its time limit ("" where it does not,
    or its duration was given): the median past it, it will likely be failed at the limit; only
    the planned quantile past it, it may be."""
    f, limit = job.forecast, job.time_limit
    if f is None or limit is None or "duration" not in f.forecast:
        return ""
    if f.median > limit:
        return (
            f"warning: its forecast median {f.median:.1f} steps exceeds its time limit of {limit} steps; "
            "it will be failed at the limit"
        )
    if f.duration > limit:
        return (
            f"warning: its forecast {f.quantile:.0%} quantile, {f.duration} steps, exceeds its time limit of "
            f"{limit} steps; it may be failed at the limit"
        )
    return ""

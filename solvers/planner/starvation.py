"""The starvation bound: which queued jobs have waited past it, and the priorities they are
planned on so every planner places them first without taking a GPU an app needs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.records import JobSpec, is_blocker
from gpualloc.solvers.problem import Problem

STARVING_WEIGHT = 10.0  # without apps: a starving job's priority is raised by this times the top priority, per step
STARVING_CEILING = 0.9  # with apps: raised priorities stay below this share of the cheapest app's shortfall cost


def starving(queued: Mapping[str, JobSpec], now: int, bound: int | None, gpus: int) -> dict[str, int]:
    """The oldest of the `queued` jobs that have waited at least `bound` steps at step `now`,
    with the steps beyond it: oldest first while their GPUs fit the pool's `gpus` once (at least
    one job). The others wait their turn with their own priority and backfill around these, as
    Slurm's backfill reserves for its top jobs only, so a crowd of starving jobs does not turn
    the plan into FIFO; each reaches the front in its turn."""
    if bound is None:
        return {}
    waiting = sorted(
        (spec.submitted, job_id, spec.gpus) for job_id, spec in queued.items() if now - spec.submitted >= bound
    )
    out: dict[str, int] = {}
    taken = 0
    for submitted, job_id, size in waiting:
        if out and taken + size > gpus:
            break
        out[job_id] = now - submitted - bound
        taken += size
    return out


def raised(problem: Problem, starving: dict[str, int]) -> Problem:
    """`problem` with each starving job's priority (`starving`: the oldest past the bound)
    raised above every other job's, the longer it has starved the higher, so every planner
    (the hot path's seed orders and search, full mode's MILP) places it first, at its earliest
    feasible block: an arrival that has waited less cannot delay it. Real-time apps keep their
    floors (hard) and, in the hot path, their service: a raised priority stays below what a
    GPU-step short costs the cheapest app (`starving_priority`)."""
    if not starving:
        return problem
    raise_ = starving_priority(problem)
    batch = tuple(
        replace(b, priority=up)
        if b.id in starving and not b.running_mask and (up := raise_(b.priority, starving[b.id])) > b.priority
        else b
        for b in problem.batch
    )
    return replace(problem, batch=batch)


def starving_priority(problem: Problem) -> Callable[[float, int], float]:
    """`raised(priority, beyond)`: the priority a job of `problem` is planned on after starving
    `beyond` steps past the bound: above every batch job's, rising with `beyond`; below
    `realtime_penalty` x the lowest app priority (what a GPU-step short costs that app), so a
    starving job outranks other batch work but never takes a GPU an app needs. Where that ceiling
    is at or below the top batch priority, the job keeps its own (the pool's weights put apps
    first). The window's top priority and ceiling are read once."""
    top = max([1.0] + [b.priority for b in problem.batch if not is_blocker(b.id)])
    if not problem.realtime:
        return lambda priority, beyond: priority + STARVING_WEIGHT * top * (1 + beyond)
    ceiling = STARVING_CEILING * problem.penalty * min(a.priority for a in problem.realtime)
    if ceiling <= top:
        return lambda priority, beyond: priority
    return lambda priority, beyond: top + (ceiling - top) * (1 - 1 / (2 + beyond))


def delayed(starving: dict[str, int], hot: Schedule, candidate: Schedule) -> str | None:
    """A starving job that `candidate` starts later than the hot path's plan (or not at all):
    the starvation bound holds for full mode too, whatever its objective."""
    for job_id in sorted(starving):
        ours = hot.batch.get(job_id)
        theirs = candidate.batch.get(job_id)
        if ours is not None and (theirs is None or theirs[0] > ours[0]):
            return job_id
    return None

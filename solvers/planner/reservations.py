"""Reservations that bind (EASY backfilling's rule): the oldest queued jobs past the starvation
bound each hold a block from their earliest start by planned durations, even past the window, and
every planner plans around it, so nothing placed later can delay it.

A reservation is made on the window as the planners see it: running jobs hold their GPUs until
their planned ends (past the window too), GPUs of down or drained nodes hold for ever, earlier
reservations hold theirs, and the apps' floors keep their GPUs free. The job's start is the first
step at which a block of its size (the node rule) is free from then on; the block is the lowest
such. In the problem the planners solve, a reservation inside the window is the job pinned there
(held like a running job from its start); one past the window holds its block's GPUs from the
moment each is free to the window's end, so no work started in the window runs into it. Overruns,
an app's growth (apps rank above batch work) and lost nodes move a reservation at the next
boundary; nothing else does, since work placed around it never holds its block.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.records import BLOCKER
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, floor_curves, target_curves
from gpualloc.solvers.problem import Batch, Problem, bits_of, free_block_starts

NEVER = 1 << 62  # the step a GPU of a down or drained node is free from
HELD = BLOCKER + "reserved "  # the ids of what holds a reservation past the window: BLOCKER + this + the job's id


@dataclass(frozen=True)
class Reserved:
    """A queued job's reservation: its block `mask` from window step `start` (may lie past it)."""

    job_id: str
    start: int
    mask: int


def reservations(problem: Problem, oldest: Iterable[str]) -> list[Reserved]:
    """The reservations of the queued jobs `oldest` (oldest first), each made around the ones
    before it; a job no step can hold (larger than what the floors and lost nodes leave) gets none,
    and where the apps cannot follow their curves around them all (`_floors_hold`) the youngest
    are dropped until they can (a binary search: a few checks even for 64)."""
    free_from = [0] * problem.gpus
    for job in problem.batch:
        if job.running_mask:
            end = NEVER if job.id.startswith(BLOCKER) else job.remaining
            for g in bits_of(job.running_mask):
                free_from[g] = max(free_from[g], end)
    by_id = {j.id: j for j in problem.batch if not j.running_mask}
    out: list[Reserved] = []
    for job_id in oldest:
        queued = by_id.get(job_id)
        if queued is None:
            continue
        found = _earliest(problem, free_from, queued)
        if found is None:
            continue
        start, mask = found
        out.append(Reserved(job_id, start, mask))
        for g in bits_of(mask):
            free_from[g] = start + queued.duration
    if not problem.realtime or _floors_hold(pinned(problem, out)):
        return out
    kept, dropped = 0, len(out)  # the longest run of the oldest the apps can follow their curves around
    while dropped - kept > 1:
        mid = (kept + dropped) // 2
        kept, dropped = (mid, dropped) if _floors_hold(pinned(problem, out[:mid])) else (kept, mid)
    return out[:kept]


def _earliest(problem: Problem, free_from: list[int], job: Batch) -> tuple[int, int] | None:
    """(start, block): the first step from the job's arrival at which a block of its size is free
    from then on and the apps can keep their floors beside it (`_apps_fit`); None where none ever is."""
    order = sorted((max(job.arrival, f), g) for g, f in enumerate(free_from) if f < NEVER)
    floors = floor_curves(problem)  # what the apps must hold at each step: falling, so the last holds on
    free = 0
    for k, (t, g) in enumerate(order):
        free |= 1 << g
        if k + 1 < len(order) and order[k + 1][0] == t:
            continue  # every GPU free at t first
        if free.bit_count() - job.gpus < sum(curve[min(t, problem.horizon - 1)] for curve in floors):
            continue
        starts = free_block_starts(problem, problem.full & ~free, job.gpus)
        while starts:
            first = (starts & -starts).bit_length() - 1
            block = problem.block(first, job.gpus)
            if _apps_fit(problem, block, t):
                return t, block
            starts &= starts - 1
    return None


def _floors_hold(problem: Problem) -> bool:
    """Can the apps follow their curves (their demand, and their floors) around the problem's
    fixed work without a move past a swap cap or below a floor? Where they cannot, no planner
    could plan around the reservation (`assign_realtime`'s forced moves with no block to blame),
    so it is not made: the job is planned by raised priority instead."""
    busy = list(problem.running_busy)
    return all(
        not assign_realtime(problem, curves, busy, strict=True)[1]
        for curves in (target_curves(problem), floor_curves(problem))
    )


def _apps_fit(problem: Problem, block: int, t: int) -> bool:
    """Can every app have left the GPUs of `block` it holds now by step t, within its swap cap?"""
    return all(
        (app.current_mask & block).bit_count() <= (t + 1) * app.swap_cap
        for app in problem.realtime
        if app.current_mask > 0
    )


def pinned(problem: Problem, held: list[Reserved]) -> Problem:
    """`problem` with each reservation of `held` fixed (see the module): every planner places the
    rest around them."""
    if not held:
        return problem
    T = problem.horizon
    by_id = {r.job_id: r for r in held}
    batch: list[Batch] = []
    for job in problem.batch:
        r = by_id.get(job.id)
        if r is None:
            batch.append(job)
        elif r.start < T:
            batch.append(replace(job, running_mask=r.mask, held_from=r.start, remaining=r.start + job.duration))
    index = max((j.index for j in problem.batch), default=-1) + 1
    busy_until = _busy_until(problem)
    for r in held:
        if r.start < T:
            continue
        by_start: dict[int, int] = {}
        for g in bits_of(r.mask):
            first = busy_until[g]
            if first < T:
                by_start[first] = by_start.get(first, 0) | 1 << g
        for first, mask in sorted(by_start.items()):
            batch.append(Batch(index, f"{HELD}{r.job_id}@{first}", 1e-9, mask.bit_count(), T, 0, mask, T, first))
            index += 1
    return replace(problem, batch=tuple(batch))


def _busy_until(problem: Problem) -> list[int]:
    """Per GPU, the window step its inherited holders release it."""
    until = [0] * problem.gpus
    for job in problem.batch:
        if job.running_mask:
            for g in bits_of(job.running_mask):
                until[g] = max(until[g], min(job.remaining, problem.horizon))
    return until


def released(window: Problem, schedule: Schedule) -> Schedule:
    """A plan of the pinned problem as a plan of `window`: what holds reservations past the
    window taken out, reserved jobs kept at their starts inside it."""
    ids = {j.id for j in window.batch}
    T = window.horizon
    batch = {k: v for k, v in schedule.batch.items() if k in ids and v[0] < T}
    return schedule if len(batch) == len(schedule.batch) else Schedule(batch=batch, realtime=schedule.realtime)


def apps_keep_their_rules(problem: Problem, schedule: Schedule) -> bool:
    """Does every app of `schedule` keep its floor and its swap cap (R3, R4)?
    A pinned job is work no planner can move: where an app holds its GPUs until the pin's start
    and the cap leaves it no way off them in time, the plan breaks R4; the planner then plans
    without the reservations (`PlannerState.plan`)."""
    for app in problem.realtime:
        prev = app.current_mask
        for mask in schedule.realtime.get(app.id, ()):
            if mask.bit_count() < app.min_gpus:
                return False
            if prev >= 0 and (mask ^ prev).bit_count() > app.swap_cap:
                return False
            prev = mask
    return True

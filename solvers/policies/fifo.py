"""The FIFO baseline exactly as the contract defines it (static peak reservations, then
first-fit with backfill in arrival order). Every report compares against this grid cell by cell.
"""

from __future__ import annotations

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.solution import Solution
from gpualloc.solvers.problem import Problem, Realtime, bits_of, insert_in_order


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point: FIFO takes no options."""
    return Solution(fifo_schedule(problem))


def fifo_schedule(problem: Problem) -> Schedule:
    T = problem.horizon
    schedule = Schedule()
    busy = list(problem.running_busy)
    for job in problem.batch:
        if job.running_mask:
            schedule.batch[job.id] = (job.held_from, job.running_mask)
    held_ever = 0  # GPUs not free at every step: running jobs' GPUs, then reservations
    for mask in busy:
        held_ever |= mask
    reserved_all = 0
    for app in problem.realtime:
        want = min(max(max(unreserved(app), default=0), app.min_gpus), app.max_gpus)
        free = problem.full & ~held_ever
        reserved = free & app.current_mask if app.current_mask > 0 else 0
        for g in bits_of(free & ~reserved):
            if reserved.bit_count() >= want:
                break
            reserved |= 1 << g
        held_ever |= reserved
        reserved_all |= reserved
        schedule.realtime[app.id] = [reserved] * T
    # A running job's GPUs are busy only for its remaining steps; reservations for all steps.
    busy = [b | reserved_all for b in busy]
    order = sorted((j for j in problem.batch if not j.running_mask), key=lambda j: (j.arrival, j.index))
    schedule.batch.update(insert_in_order(problem, order, busy))
    return schedule


def unreserved(app: Realtime) -> tuple[int, ...]:
    """`app`'s demand without a planner's reserve (`Realtime.reserve`): the contract's FIFO
    reserves the peak of the demand itself."""
    if not app.reserve:
        return app.demand
    return tuple(d - r for d, r in zip(app.demand, app.reserve))

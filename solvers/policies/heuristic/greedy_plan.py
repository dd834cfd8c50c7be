"""The greedy plan, what a careful operator would do by hand with no search: the `greedy`
policy, and the heuristic's last candidate (so the heuristic never plans worse than it).

1. Real-time floors first: each app gets GPU sets holding its floor at every step (and what R4
   forbids it to shed from `current`), around the inherited running jobs.
2. Batch jobs by priority (highest first; ties by arrival, then order): each at the earliest
   step from its arrival where a legal block (power of two, node rule) is free for its whole run.
3. Real-time demand above the floors with the GPUs left, within the swap caps (`grow_to_demand`).

Legal by construction (the floors' sets are kept out of every block), deterministic, and one
pass: no local search, no repairs. `greedy_reference` is the Python implementation; the
compiled one (`kernels.Kernels.greedy`) makes the same plan in one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.extras import grow_to_demand
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, floor_curves, target_curves
from gpualloc.solvers.problem import Batch, Problem, insert_in_order

if TYPE_CHECKING:
    from gpualloc.solvers.policies.heuristic.kernels import Kernels


def greedy_order(problem: Problem) -> list[Batch]:
    """The queued jobs by priority, highest first; ties by arrival, then order."""
    return sorted((j for j in problem.batch if not j.running_mask), key=lambda j: (-j.priority, j.arrival, j.index))


def greedy_schedule(problem: Problem, kernels: Kernels) -> Schedule:
    """The greedy plan through `kernels` (compiled or Python, the same plan)."""
    return kernels.greedy(greedy_order(problem), floor_curves(problem), target_curves(problem))


def greedy_reference(
    problem: Problem, order: list[Batch], floors: list[list[int]], targets: list[list[int]]
) -> Schedule:
    """Steps 1-3 in Python, the jobs of `order` placed in turn."""
    running = list(problem.running_busy)
    floor_sets, _ = assign_realtime(problem, floors, running, False, {})
    busy = list(running)
    for masks in floor_sets.values():
        for t, mask in enumerate(masks):
            busy[t] |= mask
    schedule = Schedule()
    for job in problem.batch:
        if job.running_mask:
            schedule.batch[job.id] = (job.held_from, job.running_mask)
    placed = insert_in_order(problem, order, busy)
    schedule.batch.update(placed)
    batch_busy = list(running)  # the batch occupancy alone, for step 3
    jobs = {j.id: j for j in order}
    for job_id, (start, block) in placed.items():
        for t in range(start, problem.end_of(jobs[job_id], start)):
            batch_busy[t] |= block
    schedule.realtime = grow_to_demand(problem, floor_sets, batch_busy, targets)
    return schedule

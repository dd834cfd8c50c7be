"""The greedy plan, what a careful operator would do by hand with no search: the `greedy`
policy, and the heuristic's last candidate (so the heuristic never plans worse than it).

1. Real-time floors first: each app gets GPU sets holding its floor at every step (and what R4
   forbids it to shed from `current`), around the inherited running jobs.
2. Batch jobs by priority (highest first; ties by arrival, then order): each at the earliest
   step from its arrival where a legal block (power of two, node rule) is free for its whole run.
3. Real-time demand above the floors with the GPUs left, within the swap caps (`grow_to_demand`).

Legal by construction (the floors' sets are kept out of every block), deterministic, and one
pass: no local search, no repairs.
"""

from __future__ import annotations

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.kernels import Kernels, kernels_for
from gpualloc.solvers.policies.heuristic.realtime import floor_curves, target_curves
from gpualloc.solvers.problem import Problem, insert_in_order


def greedy_schedule(problem: Problem, kernels: Kernels | None = None) -> Schedule:
    kernels = kernels or kernels_for(problem)
    running = list(problem.running_busy)
    floor_sets, _ = kernels.assign_realtime(floor_curves(problem), running, False, {})
    busy = list(running)
    for masks in floor_sets.values():
        for t, mask in enumerate(masks):
            busy[t] |= mask
    schedule = Schedule()
    for job in problem.batch:
        if job.running_mask:
            schedule.batch[job.id] = (0, job.running_mask)
    queued = sorted((j for j in problem.batch if not j.running_mask), key=lambda j: (-j.priority, j.arrival, j.index))
    placed = insert_in_order(problem, queued, busy)
    schedule.batch.update(placed)
    batch_busy = list(running)  # the batch occupancy alone, for step 3
    jobs = {j.id: j for j in queued}
    for job_id, (start, block) in placed.items():
        for t in range(start, problem.end_of(jobs[job_id], start)):
            batch_busy[t] |= block
    schedule.realtime = kernels.grow_to_demand(floor_sets, batch_busy, target_curves(problem))
    return schedule

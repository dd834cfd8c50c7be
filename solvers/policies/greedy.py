"""A plain greedy baseline between FIFO and the heuristic: what a careful operator would do by
hand, with no search.

1. Real-time floors first: each app gets GPU sets holding its floor at every step (and what R4
   forbids it to shed from `current`), around the inherited running jobs.
2. Batch jobs by priority (highest first; ties by arrival, then order): each at the earliest
   step from its arrival where a legal block (power of two, node rule) is free for its whole run.
3. Real-time demand above the floors with the GPUs left, within the swap caps (`_with_extras`).

Legal by construction (the floors' sets are kept out of every block), deterministic, and
one pass: no local search, no repairs. The heuristic must beat it by its own search.
"""

from __future__ import annotations

from gpualloc.schemas.config import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, floor_curves, target_curves
from gpualloc.solvers.policies.policy import Solution
from gpualloc.solvers.problem import Problem, bits_of, earliest_block


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point: the greedy takes no options."""
    return Solution(greedy_schedule(problem))


def greedy_schedule(problem: Problem) -> Schedule:
    running = list(problem.running_busy)
    floor_sets, _ = assign_realtime(problem, floor_curves(problem), running)
    busy = list(running)
    for masks in floor_sets.values():
        for t, mask in enumerate(masks):
            busy[t] |= mask
    schedule = Schedule()
    for job in problem.batch:
        if job.running_mask:
            schedule.batch[job.id] = (0, job.running_mask)
    batch_busy = list(running)  # the batch occupancy alone, for step 3
    for job in sorted((j for j in problem.batch if not j.running_mask), key=lambda j: (-j.priority, j.arrival, j.index)):
        placed = earliest_block(problem, job, busy)
        if placed is not None:
            start, block = placed
            schedule.batch[job.id] = (start, block)
            for t in range(start, problem.end_of(job, start)):
                busy[t] |= block
                batch_busy[t] |= block
    schedule.realtime = _with_extras(problem, floor_sets, batch_busy)
    return schedule


def _with_extras(problem: Problem, floor_sets: dict[str, list[int]], batch_busy: list[int]) -> dict[str, list[int]]:
    """Step 3: each app (most valuable first) grows its floor sets toward its demand with the
    GPUs left. A GPU joins at step t only if the swap budget (R4) has room at t and at the step
    r it must be left again (when batch work, a floor set or a more valuable app takes it), and
    is then held through [t, r); its leaving is booked at r before it is taken. A GPU the app
    holds in `current` is kept the same way, at no cost at step 0. Swaps are counted on the
    floor sets and the extras apart: an overcount at worst, so the sets stay legal."""
    T = problem.horizon
    taken = list(batch_busy)
    for masks in floor_sets.values():
        for t, mask in enumerate(masks):
            taken[t] |= mask
    curves = target_curves(problem)  # demand ramped within the swap caps, floors and ceilings
    out = {app_id: list(masks) for app_id, masks in floor_sets.items()}
    for k in sorted(range(len(problem.realtime)), key=lambda i: (-problem.realtime[i].priority, i)):
        app, sets = problem.realtime[k], out[problem.realtime[k].id]
        before = [app.current_mask] + sets[:-1]
        used = [(sets[t] ^ before[t]).bit_count() if before[t] >= 0 else 0 for t in range(T)]
        budget = [app.swap_cap if before[t] >= 0 else problem.gpus for t in range(T)]  # step 0 free without `current`
        extras = [0] * T

        def until(g: int, t: int) -> int:
            """The first step from t at which GPU g is taken (T: free to the end)."""
            return next((u for u in range(t, T) if taken[u] >> g & 1), T)

        def claim(g: int, t: int, kept: bool) -> bool:
            """Hold GPU g from step t until it is taken; False when the budget forbids it."""
            r = until(g, t)
            leave = r < T and used[r] >= budget[r]
            if leave or (not kept and used[t] >= budget[t]):
                return False
            used[t] += -1 if kept else 1  # a kept GPU of `current` is a swap the floors counted
            if r < T:
                used[r] += 1
            for u in range(t, r):
                extras[u] |= 1 << g
            return True

        if app.current_mask > 0:  # GPUs of `current` beyond the floor set: kept while free
            for g in sorted(bits_of(app.current_mask & ~sets[0] & ~taken[0]), key=lambda g: (-until(g, 0), g)):
                if (sets[0] | extras[0]).bit_count() >= curves[k][0]:
                    break
                claim(g, 0, kept=True)
        for t in range(T):
            free = bits_of(problem.full & ~taken[t] & ~sets[t] & ~extras[t])
            for g in sorted(free, key=lambda g: (-until(g, t), g)):  # the longest free first: fewest leaves
                if (sets[t] | extras[t]).bit_count() >= curves[k][t] or used[t] >= budget[t]:
                    break
                claim(g, t, kept=False)
        for t in range(T):
            sets[t] |= extras[t]
            taken[t] |= sets[t]
    return out


"""The fast-mode planner: legal by construction, deterministic, planned over the whole queue.

1. Real-time apps get target curves (`solvers.realtime.target_curves`): demand followed within
   the swap cap, troughs lent to batch work, no daily-peak reservation.
2. Batch jobs are packed (`solvers.packing.pack`) in several priority-led orders; the best
   packing by objective seeds a local search over the order (adjacent swaps, moves to the front),
   bounded by a work budget, not a clock, so the same input always gives the same plan.
3. Real-time GPU identities are assigned around the chosen packing. When a batch block would
   force an app past its swap cap, that block is banned at that start and the packing redone;
   every ban removes an option, so the loop ends, at worst with the block elsewhere or later.
"""

from __future__ import annotations

from solvers.grid import Schedule
from solvers.packing import Bans, Packing, pack
from solvers.problem import Batch, Problem
from solvers.realtime import assign_realtime, target_curves

DEFAULT_EFFORT = 1.0


def _seed_orders(jobs: list[Batch]) -> list[list[Batch]]:
    """Priority-led orders with different tie-breaks, plus size-led and arrival orders."""
    keys = (
        lambda j: (-j.priority, -j.gpus * j.duration, j.arrival, j.index),
        lambda j: (-j.priority, j.arrival, -j.gpus, j.index),
        lambda j: (-j.priority, j.gpus * j.duration, j.index),
        lambda j: (-j.priority * j.gpus, -j.duration, j.index),
        lambda j: (-j.gpus, -j.priority, j.index),
        lambda j: (j.arrival, -j.priority, j.index),
    )
    seen, out = set(), []
    for key in keys:
        order = sorted(jobs, key=key)
        sig = tuple(j.index for j in order)
        if sig not in seen:
            seen.add(sig)
            out.append(order)
    return out


def _improve(problem: Problem, order: list[Batch], best: Packing, reserve: list[int], budget: int) -> tuple[list[Batch], Packing]:
    """First-improvement local search over the packing order, at most `budget` packings."""
    improved = True
    while improved and budget > 0:
        improved = False
        for i in range(1, len(order)):
            for cand in (order[:i - 1] + [order[i], order[i - 1]] + order[i + 1:],
                         [order[i]] + order[:i] + order[i + 1:]):
                if budget <= 0:
                    return order, best
                budget -= 1
                trial = pack(problem, cand, reserve)
                if trial.value > best.value + 1e-9:
                    order, best, improved = cand, trial, True
                    break
    return order, best


def heuristic_schedule(problem: Problem, effort: float = DEFAULT_EFFORT) -> Schedule:
    """Plan batch blocks and real-time GPU sets for the whole horizon."""
    curves = target_curves(problem)
    reserve = [sum(c[t] for c in curves) for t in range(problem.horizon)]
    queue = [j for j in problem.batch if not j.running_mask]
    order, best = None, None
    for cand in _seed_orders(queue):
        trial = pack(problem, cand, reserve)
        if best is None or trial.value > best.value + 1e-9:
            order, best = cand, trial
    budget = int(effort * 4 * max(len(queue), 1))
    if order:
        order, best = _improve(problem, order, best, reserve, budget)
    else:
        order, best = [], pack(problem, [], reserve)
    bans: Bans = {}
    while True:
        sets, forced = assign_realtime(problem, curves, best.busy)
        if forced is None:
            return Schedule(batch=best.starts, realtime=sets)
        _ban_culprits(problem, best, forced.step, forced.gpus, bans)
        best = pack(problem, order, reserve, bans)


def _ban_culprits(problem: Problem, packing: Packing, step: int, gpus: int, bans: Bans) -> None:
    """Ban, at `step`, every block starting then on `gpus` (the GPUs an app could not leave)."""
    hit = False
    for job in problem.batch:
        placed = packing.starts.get(job.id)
        if placed and not job.running_mask and placed[0] == step and placed[1] & gpus:
            per_job = bans.setdefault(job.id, {})
            per_job[step] = per_job.get(step, 0) | gpus
            hit = True
    if not hit:
        raise AssertionError(f"forced real-time move at step {step} with no batch block starting there")

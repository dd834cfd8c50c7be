"""The contract's metrics of a grid: utilization, value, objective, shortfall, completion counts."""

from __future__ import annotations

from gpualloc.schemas import Metrics
from gpualloc.solvers.grid import Grid, Schedule, occupancy, step_masks, to_grid
from gpualloc.solvers.problem import Problem


def relative_gap(bound: float, value: float) -> float:
    """(bound - value) / |bound|: how far `value` may be below the optimum `bound` caps."""
    return (bound - value) / max(abs(bound), 1e-9)


def compute_metrics(problem: Problem, grid: Grid) -> Metrics:
    """Metrics of any grid of the right shape (legal or not; R1 is the caller's check)."""
    T, w = problem.horizon, problem.weights
    cells = occupancy(grid)
    batch_value = 0.0
    batch_steps = 0
    completed = scheduled = 0
    unscheduled: list[str] = []
    for job in problem.batch:
        own = cells.get(job.id)
        if not own:
            unscheduled.append(job.id)
            continue
        scheduled += 1
        batch_steps += len(own)
        batch_value += job.priority * sum(w[t] for _, t in own)
        if job.running_mask:
            completed += job.remaining <= T
        else:
            start = min(t for _, t in own)
            completed += start + job.duration <= T
    served_steps = shortfall_steps = 0
    rt_value = rt_penalty = 0.0
    for app in problem.realtime:
        masks = step_masks(cells.get(app.id, ()), T)
        for t in range(T):
            served = min(masks[t].bit_count(), app.demand[t])
            short = app.demand[t] - served
            served_steps += served
            shortfall_steps += short
            rt_value += app.priority * w[t] * served
            rt_penalty += app.priority * w[t] * short
    return Metrics(
        utilization=round((batch_steps + served_steps) / (problem.gpus * T), 6),
        value=round(batch_value + rt_value, 6),
        objective=round(batch_value - problem.penalty * rt_penalty, 6),
        realtime_shortfall=shortfall_steps,
        completed=completed,
        scheduled=scheduled,
        unscheduled=unscheduled,
    )


def objective_of(problem: Problem, schedule: Schedule) -> float:
    """The contract's objective of a schedule (its grid's)."""
    return compute_metrics(problem, to_grid(problem, schedule)).objective

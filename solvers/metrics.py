"""The contract's metrics of a grid: utilization, value, objective, shortfall, completion counts."""

from __future__ import annotations

from collections.abc import Iterable

from gpualloc.schemas import Metrics
from gpualloc.solvers.grid import Grid, Schedule, batch_spans, occupancy, step_masks
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.value_models import COMPLETION


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
        start = 0 if job.running_mask else min(t for _, t in own)
        if problem.value_model == COMPLETION:
            batch_value += problem.placed_value(job, start)
        else:
            batch_value += job.priority * sum(w[t] for _, t in own)
        completed += (job.remaining if job.running_mask else start + job.duration) <= T
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


def app_moves(before: Iterable[int], after: Iterable[int]) -> int:
    """GPUs an app moved between two consecutive sets: each one released while another is bound
    (a release and a bind on the node agents, a model reload); growing or shrinking alone is no
    move."""
    old, new = set(before), set(after)
    return min(len(new - old), len(old - new))


def idle_moves(
    before: Iterable[int], after: Iterable[int], step_sets: Iterable[Iterable[int]], unavailable: int
) -> int:
    """`app_moves` of an app made for nothing: every GPU it left is held by nothing in the new
    step (`step_sets`: that step's sets, every holder's) and on a node up (`unavailable`: the
    GPUs of nodes down or drained); 0 where work or a lost node needed the move."""
    moved = app_moves(before, after)
    if not moved:
        return 0
    left = set(before) - set(after)
    if any(unavailable >> g & 1 for g in left) or any(g in left for held in step_sets for g in held):
        return 0
    return moved


def objective_of(problem: Problem, schedule: Schedule) -> float:
    """The contract's objective of a legal schedule (no GPU held twice in a step), under the
    problem's value model: its grid's,
    computed from its blocks and app sets without building the grid (GPUs x steps cells: 1.4
    million at 4,096 GPUs x 336 steps)."""
    T, w = problem.horizon, problem.weights
    prefix = [0.0]
    for t in range(T):
        prefix.append(prefix[-1] + w[t])
    batch = {j.id: j for j in problem.batch}
    spans = batch_spans(problem, schedule).items()
    if problem.value_model == COMPLETION:
        value = sum(problem.placed_value(batch[job_id], start) for job_id, (start, _, _) in spans)
    else:
        value = sum(
            batch[job_id].priority * mask.bit_count() * (prefix[end] - prefix[start])
            for job_id, (start, end, mask) in spans
        )
    penalty = 0.0
    for app in problem.realtime:
        masks = schedule.realtime.get(app.id, ())
        penalty += app.priority * sum(
            w[t] * (app.demand[t] - min((masks[t] if t < len(masks) else 0).bit_count(), app.demand[t]))
            for t in range(T)
        )
    return round(value - problem.penalty * penalty, 6)

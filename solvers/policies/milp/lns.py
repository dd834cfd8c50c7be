"""Full mode at scale: a large-neighbourhood search (`FullModeOptions.lns`).

At 64 GPUs with a standing queue the whole model does not finish its root within a 10 s budget
(the week's snapshots: no bound, no better plan), so the time goes to small exact sub-models
instead. A neighbourhood is a window of two adjacent nodes: the queued jobs whose blocks lie in
it and the most valuable unplaced jobs that fit in it are freed; every other block and every
app's GPU sets are kept and held as busy cells. Its model is a set packing over the window's
cells (a binary per legal block of a free job, one job per cell), small enough to solve to
optimality in well under a second, warm-started from the best plan so far; a better plan (on the
contract's objective, checked by the validator) is taken at once. Windows are visited in a fixed
order, round after round, until the time is spent or a round improves nothing. Apps keep their
sets, so R3 and R4 hold as they did in the warm start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import cast

import pyomo.environ as pyo

from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.backends import solve_model
from gpualloc.solvers.policies.milp.model import MilpResult
from gpualloc.solvers.problem import Batch, Problem, bits_of, free_block_starts

WINDOW_NODES = 2  # nodes a neighbourhood frees
UNPLACED = 8  # most valuable unplaced jobs offered to each neighbourhood
ROUNDS = 4  # passes over the windows at most (the limit without a time limit)


def solve_lns(
    problem: Problem, options: FullModeOptions = FullModeOptions(), warm: Schedule | None = None
) -> MilpResult:
    """Neighbourhoods of the warm start within the time limit; the best plan found, with a note
    of how many sub-models improved it. No bound: only the whole model proves one."""
    began = time.perf_counter()
    best = heuristic_schedule(problem) if warm is None else warm
    best_objective = warm_objective = objective_of(problem, best)
    windows = _windows(problem)
    solved = improved = 0
    for _ in range(ROUNDS):
        gained = False
        for window in windows:
            left = None if options.time_limit is None else options.time_limit - (time.perf_counter() - began)
            if left is not None and left <= 0:
                break
            limit = cast(float, options.time_limit)  # left is set only under a time limit
            share = None if left is None else min(left, limit / len(windows))  # no window eats the budget
            candidate = _improve(problem, best, window, options.model_copy(update={"time_limit": share}))
            solved += 1
            if candidate is None:
                continue
            objective = objective_of(problem, candidate)
            if objective > best_objective + 1e-6 and not check_plan(problem, to_grid(problem, candidate)):
                best, best_objective, gained = candidate, objective, True
                improved += 1
        if not gained:
            break
    return MilpResult(
        best,
        best_objective,
        None,
        None,
        "feasible",
        0.0,
        time.perf_counter() - began,
        warm_objective,
        "milp" if best_objective > warm_objective + 1e-6 else "heuristic",
        notes=[f"large-neighbourhood search: {solved} sub-models, {improved} improved the plan"],
    )


def _windows(problem: Problem) -> list[int]:
    """GPU masks of `WINDOW_NODES` adjacent nodes, one node apart (the whole pool when smaller)."""
    size = min(problem.gpus, WINDOW_NODES * problem.node_size)
    return [problem.block(first, size) for first in range(0, problem.gpus - size + 1, problem.node_size)]


def _improve(problem: Problem, plan: Schedule, window: int, options: FullModeOptions) -> Schedule | None:
    """`plan` with the blocks of `window`'s neighbourhood re-packed optimally (None when its model
    found nothing)."""
    busy = list(problem.running_busy)
    free: list[Batch] = []
    unplaced: list[Batch] = []
    for job in problem.batch:
        placed = plan.batch.get(job.id)
        if job.running_mask:
            continue
        if placed is None:
            if job.gpus <= window.bit_count():
                unplaced.append(job)
        elif placed[1] & ~window == 0:
            free.append(job)
        else:
            for t in range(placed[0], problem.end_of(job, placed[0])):
                busy[t] |= placed[1]
    for masks in plan.realtime.values():
        for t, mask in enumerate(masks):
            busy[t] |= mask
    unplaced.sort(key=lambda j: (-j.priority * j.gpus * j.duration, j.index))
    free += unplaced[:UNPLACED]
    options_of = [(j, s, block) for j in free for s, block in _blocks(problem, j, window, busy)]
    if not options_of:
        return None
    m = pyo.ConcreteModel("neighbourhood")
    m.O = pyo.Set(initialize=range(len(options_of)))
    m.x = pyo.Var(m.O, within=pyo.Binary)
    by_job: dict[str, list[int]] = {}
    by_cell: dict[tuple[int, int], list[int]] = {}
    for o, (job, s, block) in enumerate(options_of):
        by_job.setdefault(job.id, []).append(o)
        for g in bits_of(block):
            for t in range(s, problem.end_of(job, s)):
                by_cell.setdefault((g, t), []).append(o)
        m.x[o].value = 1 if plan.batch.get(job.id) == (s, block) else 0  # the warm start
    m.once = pyo.Constraint(list(by_job), rule=lambda m, j: sum(m.x[o] for o in by_job[j]) <= 1)
    m.cell = pyo.Constraint(list(by_cell), rule=lambda m, g, t: sum(m.x[o] for o in by_cell[g, t]) <= 1)
    m.value = pyo.Objective(
        expr=sum(problem.start_value(job, s) * m.x[o] for o, (job, s, _) in enumerate(options_of)),
        sense=pyo.maximize,
    )
    _, incumbent, _ = solve_model(m, options)
    if incumbent is None:
        return None
    freed = {job.id for job in free}
    batch = {job_id: placed for job_id, placed in plan.batch.items() if job_id not in freed}
    for o, (job, s, block) in enumerate(options_of):
        if (m.x[o].value or 0) > 0.5:
            batch[job.id] = (s, block)
    return Schedule(batch=batch, realtime=plan.realtime)


def _blocks(problem: Problem, job: Batch, window: int, busy: list[int]) -> Iterator[tuple[int, int]]:
    """Every legal (start, block) of `job` inside `window` and clear of `busy` over its run."""
    outside = problem.full & ~window
    for s in range(job.arrival, problem.horizon):
        held = outside
        for t in range(s, problem.end_of(job, s)):
            held |= busy[t]
        for first in bits_of(free_block_starts(problem, held, job.gpus)):
            yield s, problem.block(first, job.gpus)

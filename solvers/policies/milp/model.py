"""Full mode: the contract's model in Pyomo, solved by HiGHS or CBC, warm-started from the
heuristic, certified by the solver's bound.

Stage 1 is exact for batch work (a binary per legal (start, block) option) and aggregates each
real-time app to a GPU count per step. The aggregation keeps only conditions every legal plan
meets, so stage 1 is a relaxation and its bound is a valid bound on the true optimum:
  - counts within [min_gpus, max_gpus], step-to-step change within the swap cap;
  - per step, batch GPUs plus app counts fit the pool;
  - per step boundary, an app keeps at least ceil((n(t-1) + n(t) - cap) / 2) of its GPUs (leaves
    plus entries are at most cap), and the kept GPUs of all apps fit in the GPUs that no batch
    block holds at t-1 or t; at step 0 the kept ones must be among `current` and free of blocks.
Stage 2 realizes the counts as GPU sets: the heuristic's assignment first, and when it cannot
honour them, an exact per-GPU model with the batch blocks fixed. The realized objective is what
is reported, beside stage 1's bound; a plan worse than the warm start is never returned.

The exact model (`add_exact_realtime`) puts each app's GPU set into stage 1 itself (a binary per
app, GPU and step, R1 per cell and R4 on the sets), so its optimum is a plan and its bound a bound
on plans. It runs when asked (`exact`), and by default on pools of at most EXACT_GPUS where the
count model's stage 2 fell short of its own bound: then a plan is `optimal` only if proven so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import overload

from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of, relative_gap
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.backends import MIN_SEARCH_S, solve_model
from gpualloc.solvers.policies.milp.data import SETUP_S_PER_NONZERO, milp_data, model_size
from gpualloc.solvers.policies.milp.formulation import add_exact_realtime, build_model, warm_exact, warm_start
from gpualloc.solvers.policies.milp.realization import exact_plan, realize
from gpualloc.solvers.problem import Problem

EXACT_GPUS = 16  # pools up to this size get the exact model where stage 2 falls short (binaries: GPUs x steps x apps)


@dataclass
class MilpResult:
    schedule: Schedule
    objective: float  # realized objective of `schedule`
    bound: float | None  # stage 1's proven bound on the optimum
    gap: float | None  # (bound - objective) / |bound|
    status: str
    build_seconds: float
    solve_seconds: float
    warm_objective: float  # the heuristic plan's objective (the warm start)
    source: str  # "milp", or "heuristic" when the warm start was not beaten
    stage2: str = ""  # how real-time GPUs were realized
    bound_source: str = "solver"  # or "capacity": `bound.capacity_bound` was the tighter
    notes: list[str] = field(default_factory=list)


def solve_milp(
    problem: Problem, options: FullModeOptions = FullModeOptions(), warm: Schedule | None = None
) -> MilpResult:
    """Full mode: the better of the model's plan and the warm start. `options.exact` True or
    False picks the model; None runs the count model first and, where its stage 2 falls short
    of its own proven bound on a pool of at most EXACT_GPUS, the exact model next, warm-started
    from the best plan so far and given the time left."""
    if warm is None:
        warm = heuristic_schedule(problem)
    first = _solve_once(problem, options, warm, exact=bool(problem.realtime) and bool(options.exact))
    if options.exact is not None or not problem.realtime or problem.gpus > EXACT_GPUS or first.status != "feasible":
        return first
    spent = first.build_seconds + first.solve_seconds
    left = None if options.time_limit is None else options.time_limit - spent
    if left is not None and left < 1:
        first.notes.append("no time left for the exact model")
        return first
    second = _solve_once(problem, options.model_copy(update={"time_limit": left}), first.schedule, exact=True)
    if first.source == "milp":
        second.source = "milp"  # its warm start was the count model's plan
    second.warm_objective = first.warm_objective
    second.build_seconds += first.build_seconds
    second.solve_seconds += first.solve_seconds
    second.notes = first.notes + ["solved again with the exact model"] + second.notes
    return second


def _solve_once(problem: Problem, options: FullModeOptions, warm: Schedule, exact: bool) -> MilpResult:
    """One model (exact: per-GPU real-time sets inside it; else counts and stage 2), and the
    better of its plan and the warm start. The time limit covers building the model and handing
    it to the solver: the solver gets what is left (none left: the warm start stands)."""
    warm_objective = objective_of(problem, warm)
    t0 = time.perf_counter()
    deadline = None if options.time_limit is None else t0 + options.time_limit
    if options.time_limit is not None:  # the deadline's
        nonzeros = model_size(problem, exact).nonzeros
        if nonzeros * SETUP_S_PER_NONZERO > options.time_limit:
            return _unsolved(
                warm,
                warm_objective,
                0.0,
                f"a model of ~{nonzeros:,} nonzeros takes about "
                f"{nonzeros * SETUP_S_PER_NONZERO:.0f} s to build, more than its {options.time_limit:g} s "
                "time limit: not built",
            )
    data = milp_data(problem)
    m = build_model(data)
    if exact:
        add_exact_realtime(m, data, problem)
    warm_start(m, data, warm)
    if exact:
        warm_exact(m, problem, warm)
    build_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    left = _left(deadline)
    if left is not None and left < MIN_SEARCH_S:
        return _unsolved(
            warm,
            warm_objective,
            build_seconds,
            f"building the model took {build_seconds:.1f} s of its {options.time_limit:g} s time limit: not solved",
        )
    status, incumbent, bound = solve_model(m, options.model_copy(update={"time_limit": left}))
    result = MilpResult(warm, warm_objective, bound, None, status, build_seconds, 0.0, warm_objective, "heuristic")
    if incumbent is not None:
        stage2 = (
            options
            if deadline is None
            else options.model_copy(update={"time_limit": max(MIN_SEARCH_S, _left(deadline))})
        )
        realized, how = exact_plan(problem, data, m) if exact else realize(problem, data, m, stage2)
        result.stage2 = how
        if realized is not None:
            objective = objective_of(problem, realized)
            if objective > warm_objective + 1e-6 and not check_plan(problem, to_grid(problem, realized)):
                result.schedule, result.objective, result.source = realized, objective, "milp"
        if realized is None or result.source == "heuristic":
            result.notes.append("the warm start was not beaten")
    result.solve_seconds = time.perf_counter() - t1
    if bound is not None:
        bound = max(bound, result.objective)  # a bound below a legal plan is a solver's rounding
        result.bound = bound
        result.gap = relative_gap(bound, result.objective)
        if result.status == "optimal" and result.gap > options.mip_gap:
            # the solver proved stage 1's bound, but stage 2 (or the warm start) did not reach it:
            # the plan is not proven optimal, and says so with its true gap
            result.status = "feasible"
            result.notes.append(
                f"stage 1 is optimal but the plan is {result.gap:.2%} below its bound "
                f"({result.objective:.4f} < {bound:.4f})"
            )
    return result


def _unsolved(warm: Schedule, warm_objective: float, build_seconds: float, why: str) -> MilpResult:
    """The warm start, standing for a model the time limit left no search for."""
    return MilpResult(
        warm, warm_objective, None, None, "time limit", build_seconds, 0.0, warm_objective, "heuristic", notes=[why]
    )


@overload
def _left(deadline: float) -> float: ...
@overload
def _left(deadline: None) -> None: ...
def _left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (None: no deadline)."""
    return None if deadline is None else deadline - time.perf_counter()

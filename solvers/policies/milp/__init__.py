"""Full mode: the contract's model as a MILP (`formulation`, from plain data built by `data`), solved
by HiGHS or CBC (`backends`), warm-started from the heuristic (`model`). The registry's entry point
imports Pyomo only when it runs, so the hot path never loads the solver stack."""

from __future__ import annotations

import time

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.solution import Solution
from gpualloc.solvers.problem import Problem


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The MILP warm-started from the heuristic (at `options.effort`); the plan gains its
    certificate (bound, gap, status, ...), its bound the tighter of the solver's and the capacity
    relaxation's (`bound`). `improved` is False when the warm start stood."""
    from gpualloc.solvers.policies.milp.bound import tightened
    from gpualloc.solvers.policies.milp.lns import solve_lns
    from gpualloc.solvers.policies.milp.model import solve_milp

    began = time.perf_counter()
    warm = heuristic_schedule(problem, options.effort)
    full = options.full_mode
    if full.time_limit is not None:  # the time limit covers the warm start too
        full = full.model_copy(update={"time_limit": max(0.0, full.time_limit - (time.perf_counter() - began))})
    solver = solve_lns if full.lns else solve_milp
    result = solver(problem, full, warm=warm)
    result = tightened(result, problem, options.full_mode.mip_gap)
    certificate = {
        "bound": result.bound,
        "gap": result.gap,
        "status": result.status,
        "source": result.source,
        "bound_source": result.bound_source,
        "warm_objective": result.warm_objective,
        "build_seconds": round(result.build_seconds, 3),
        "solve_seconds": round(result.solve_seconds, 3),
    }
    return Solution(result.schedule, certificate, improved=result.source == "milp")

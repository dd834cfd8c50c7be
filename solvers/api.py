"""One signature for every scheduler: Problem -> Schedule; `solve` wraps it into a Plan."""

from __future__ import annotations

from typing import Callable

from gpualloc.schemas import Plan
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.metrics import compute_metrics
from gpualloc.solvers.problem import Problem

Scheduler = Callable[[Problem], Schedule]

def milp_schedule(problem: Problem) -> Schedule:
    """Full mode with its defaults (HiGHS, 60 s); Pyomo is imported only when it is used."""
    from gpualloc.solvers.policies.milp.model import solve_milp

    return solve_milp(problem).schedule


SCHEDULERS: dict[str, Scheduler] = {
    "fifo": fifo_schedule,
    "heuristic": heuristic_schedule,
    "milp": milp_schedule,
}


def build_plan(problem: Problem, scheduler: str, schedule: Schedule, solve_ms: float = 0.0) -> Plan:
    grid = to_grid(problem, schedule)
    return Plan(scenario=problem.name, scheduler=scheduler, grid=grid,
                metrics=compute_metrics(problem, grid), solve_ms=round(solve_ms, 4))


def solve(problem: Problem, scheduler: str) -> Plan:
    """Run a registered scheduler and return the contract's plan (solve_ms left to the caller)."""
    return build_plan(problem, scheduler, SCHEDULERS[scheduler](problem))

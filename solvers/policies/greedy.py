"""A plain greedy baseline between FIFO and the heuristic: real-time floors first, batch jobs by
priority at their earliest legal block, then real-time demand with the GPUs left
(`heuristic.greedy_plan`). The heuristic must beat it by its own search, and takes its plan
when it does not."""

from __future__ import annotations

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic import greedy_plan
from gpualloc.solvers.policies.heuristic.kernels import kernels_for
from gpualloc.solvers.policies.solution import Solution
from gpualloc.solvers.problem import Problem

__all__ = ["greedy_schedule", "solve"]


def greedy_schedule(problem: Problem) -> Schedule:
    """The greedy plan, compiled when the extension is installed (the same plan either way)."""
    return greedy_plan.greedy_schedule(problem, kernels_for(problem))


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point: the greedy takes no options."""
    return Solution(greedy_schedule(problem))

"""A plain greedy baseline between FIFO and the heuristic: real-time floors first, batch jobs by
priority at their earliest legal block, then real-time demand with the GPUs left
(`heuristic.greedy_plan`). The heuristic must beat it by its own search, and takes its plan
when it does not."""

from __future__ import annotations

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_schedule
from gpualloc.solvers.policies.policy import Solution
from gpualloc.solvers.problem import Problem

__all__ = ["greedy_schedule", "solve"]


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point: the greedy takes no options."""
    return Solution(greedy_schedule(problem))

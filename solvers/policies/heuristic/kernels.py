"""The heuristic behind one face, in two implementations that make the same plans:
`PythonKernels` (the reference, and the path without the extension) and
`native.NativeKernels` (compiled, `solvers/native`). Each offers the whole solve and the two
parts that are used on their own: the greedy plan (the `greedy` policy) and the polish."""

from __future__ import annotations

from typing import Protocol

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.compose import compose
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_reference
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.native import AVAILABLE, MAX_GPUS, NativeKernels
from gpualloc.solvers.policies.heuristic.polish import polish
from gpualloc.solvers.problem import Batch, Problem


class Kernels(Protocol):
    """One problem's heuristic."""

    def solve(self, knobs: Knobs) -> Schedule: ...
    def greedy(self, order: list[Batch], floors: list[list[int]], targets: list[list[int]]) -> Schedule: ...
    def polish(self, schedule: Schedule, budget: int) -> Schedule: ...


class PythonKernels:
    """The reference implementation: the Python modules of this package."""

    def __init__(self, problem: Problem):
        self.problem = problem

    def solve(self, knobs: Knobs) -> Schedule:
        return compose(self.problem, knobs)

    def greedy(self, order: list[Batch], floors: list[list[int]], targets: list[list[int]]) -> Schedule:
        return greedy_reference(self.problem, order, floors, targets)

    def polish(self, schedule: Schedule, budget: int) -> Schedule:
        return polish(self.problem, schedule, budget)


def kernels_for(problem: Problem, native: bool | None = None) -> Kernels:
    """Compiled when the extension is installed and holds the pool (`native=None`), or as
    asked; the plans are the same either way."""
    if native is None:
        native = AVAILABLE and problem.gpus <= MAX_GPUS
    return NativeKernels(problem) if native else PythonKernels(problem)

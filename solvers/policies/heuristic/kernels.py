"""The heuristic's inner loops behind one face, in two implementations that make the same plans:
`PythonKernels` (the reference, and the path without the extension) and
`native.NativeKernels` (compiled, `solvers/native`). The composition in `__init__` (curve sets,
layouts, repairs, the choice among candidates) calls only this face; the compiled kernels also
run the whole composition in one call (`solve`), the Python one's twin."""

from __future__ import annotations

from typing import Protocol

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.extras import grow_to_demand
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_reference
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.layouts import app_sets
from gpualloc.solvers.policies.heuristic.native import AVAILABLE, MAX_GPUS, NativeKernels
from gpualloc.solvers.policies.heuristic.packing import Packing, Reservation, pack
from gpualloc.solvers.policies.heuristic.polish import polish
from gpualloc.solvers.policies.heuristic.realtime import ForcedMove, assign_realtime
from gpualloc.solvers.policies.heuristic.search import Search
from gpualloc.solvers.problem import Batch, Problem


class PackSearch(Protocol):
    """Seed orders packed around one reservation, then a local search (`search.Search`)."""

    @property
    def order(self) -> list[Batch]: ...
    def packing(self) -> Packing: ...
    def best_of(self, seeds: list[list[Batch]]) -> bool: ...
    def improve(self) -> bool: ...


class Kernels(Protocol):
    """The inner loops of one problem's solve."""

    def search(self, res: Reservation, budget: int, potential: dict[str, float]) -> PackSearch: ...
    def pack(self, order: list[Batch], res: Reservation) -> Packing: ...
    def assign_realtime(
        self, curves: list[list[int]], busy: list[int], strict: bool, fixed: dict[int, list[int]]
    ) -> tuple[dict[str, list[int]], list[ForcedMove]]: ...
    def grow_to_demand(
        self, floor_sets: dict[str, list[int]], busy: list[int], curves: list[list[int]]
    ) -> dict[str, list[int]]: ...
    def app_sets(self, curves: list[list[int]], homes: dict[int, list[int]], nest: bool) -> dict[int, list[int]]: ...
    def polish(self, schedule: Schedule, budget: int) -> Schedule: ...
    def greedy(self, order: list[Batch], floors: list[list[int]], targets: list[list[int]]) -> Schedule: ...
    def solve(self, knobs: Knobs) -> Schedule | None:
        """The whole heuristic in one call, or None where the composition runs in Python."""
        ...


class PythonKernels:
    """The reference implementation: the Python modules of this package."""

    def __init__(self, problem: Problem):
        self.problem = problem

    def search(self, res: Reservation, budget: int, potential: dict[str, float]) -> Search:
        return Search(self.problem, res, budget, potential)

    def pack(self, order: list[Batch], res: Reservation) -> Packing:
        return pack(self.problem, order, res)

    def assign_realtime(
        self, curves: list[list[int]], busy: list[int], strict: bool, fixed: dict[int, list[int]]
    ) -> tuple[dict[str, list[int]], list[ForcedMove]]:
        return assign_realtime(self.problem, curves, busy, strict, fixed)

    def grow_to_demand(
        self, floor_sets: dict[str, list[int]], busy: list[int], curves: list[list[int]]
    ) -> dict[str, list[int]]:
        return grow_to_demand(self.problem, floor_sets, busy, curves)

    def app_sets(self, curves: list[list[int]], homes: dict[int, list[int]], nest: bool) -> dict[int, list[int]]:
        return app_sets(self.problem, curves, homes, nest)

    def polish(self, schedule: Schedule, budget: int) -> Schedule:
        return polish(self.problem, schedule, budget)

    def greedy(self, order: list[Batch], floors: list[list[int]], targets: list[list[int]]) -> Schedule:
        return greedy_reference(self.problem, order, floors, targets)

    def solve(self, knobs: Knobs) -> None:
        return None  # the reference composes in Python (`heuristic_schedule`)


def kernels_for(problem: Problem, native: bool | None = None) -> Kernels:
    """Compiled when the extension is installed and holds the pool (`native=None`), or as
    asked; the plans are the same either way."""
    if native is None:
        native = AVAILABLE and problem.gpus <= MAX_GPUS
    return NativeKernels(problem) if native else PythonKernels(problem)

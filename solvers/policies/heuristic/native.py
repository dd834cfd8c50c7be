"""The compiled heuristic (`gpualloc_native`, built from solvers/native with maturin) behind
the face of `kernels.Kernels`: the whole solve in one call, the greedy plan and the polish.

It makes the same plans as the Python modules (tests/unit/test_native.py proves it on generated
scenarios and the corpus); only the time differs. Without the extension (a machine with no Rust
toolchain) every solve takes the Python path.
"""

from __future__ import annotations

from functools import cached_property
from itertools import repeat
from typing import Literal

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.problem import Batch, Problem
from gpualloc.solvers.value_models import COMPLETION, latest_completion

try:
    import gpualloc_native

    AVAILABLE = True
except ImportError:  # built without a Rust toolchain: the Python path serves
    AVAILABLE = False
MAX_GPUS = 4096  # the widest pool a native problem holds (64 words)
LITTLE: Literal["little"] = "little"  # the byte order of every GPU set crossing to the extension


class NativeKernels:
    """A problem compiled once per solve: job positions, masks as little-endian bytes."""

    def __init__(self, problem: Problem):
        if not AVAILABLE:
            raise RuntimeError("the compiled heuristic (gpualloc_native) is not installed: `make native` builds it")
        self.problem = problem
        self.width = (problem.gpus + 7) // 8
        jobs = [
            (
                j.priority,
                j.gpus,
                j.duration,
                j.arrival,
                (self.encode(j.running_mask), j.held_from, j.remaining) if j.running_mask else None,
            )
            for j in problem.batch
        ]
        self.native = gpualloc_native.NativeProblem(
            problem.gpus,
            problem.node_size,
            problem.horizon,
            list(problem.cum_weight),
            list(problem.weights),
            problem.penalty,
            jobs,
            [
                (
                    a.priority,
                    a.min_gpus,
                    a.max_gpus,
                    a.swap_cap,
                    self.encode(a.current_mask) if a.current_mask >= 0 else None,
                    list(a.demand),
                )
                for a in problem.realtime
            ],
            [self.encode(m) for m in problem.running_busy],
            (problem.time_decay, latest_completion(problem.horizon)) if problem.value_model == COMPLETION else None,
        )

    def encode(self, mask: int) -> bytes:
        return mask.to_bytes(self.width, LITTLE)

    def positions(self, order: list[Batch]) -> list[int]:
        return [self.position[j.id] for j in order]

    @cached_property
    def position(self) -> dict[str, int]:
        """Job id -> position in the problem: only the greedy's order needs it, not a solve."""
        return {j.id: i for i, j in enumerate(self.problem.batch)}

    def masks(self, raw: list[bytes]) -> list[int]:
        return list(map(int.from_bytes, raw, repeat(LITTLE)))

    def solve(self, knobs: Knobs) -> Schedule:
        starts, sets = self.native.heuristic(
            knobs.budget, knobs.polish_budget, knobs.screened, knobs.searched, knobs.reserving_repairs, knobs.home_cap
        )
        return self._schedule(starts, sets)

    def _schedule(self, starts: list[tuple[int, int] | None], sets: list[list[bytes]]) -> Schedule:
        """Per job position (start, first GPU) or None, and the apps' sets, as a schedule
        (the running jobs where they run)."""
        problem = self.problem
        batch = {j.id: (j.held_from, j.running_mask) for j in problem.batch if j.running_mask}
        for j, placed in zip(problem.batch, starts):
            if placed is not None:
                batch[j.id] = (placed[0], problem.block(placed[1], j.gpus))
        return Schedule(batch=batch, realtime={a.id: self.masks(row) for a, row in zip(problem.realtime, sets)})

    def polish(self, schedule: Schedule, budget: int) -> Schedule:
        problem = self.problem
        starts = [
            None if j.running_mask or j.id not in schedule.batch else _first(schedule.batch[j.id])
            for j in problem.batch
        ]
        T = problem.horizon
        sets = [[self.encode(m) for m in schedule.realtime.get(a.id, [0] * T)] for a in problem.realtime]
        polished, grown = self.native.polish(starts, sets, budget)
        batch = {j.id: schedule.batch[j.id] for j in problem.batch if j.running_mask and j.id in schedule.batch}
        for j, placed in zip(problem.batch, polished):
            if placed is not None:
                batch[j.id] = (placed[0], problem.block(placed[1], j.gpus))
        return Schedule(batch=batch, realtime={a.id: self.masks(row) for a, row in zip(problem.realtime, grown)})

    def greedy(self, order: list[Batch], floors: list[list[int]], targets: list[list[int]]) -> Schedule:
        placed, sets = self.native.greedy(self.positions(order), floors, targets)
        starts: list[tuple[int, int] | None] = [None] * len(self.problem.batch)
        for p, start, first in placed:
            starts[p] = (start, first)
        return self._schedule(starts, sets)


def _first(placed: tuple[int, int]) -> tuple[int, int]:
    """(start, first GPU) of a block given as (start, GPU mask)."""
    start, mask = placed
    return start, (mask & -mask).bit_length() - 1

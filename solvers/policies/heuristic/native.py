"""The compiled inner loops (`gpualloc_native`, built from solvers/native with maturin) behind
the face of `kernels.Kernels`: packing and trades, the search, the apps' GPU sets.

They make the same plans as the Python modules (tests/unit/test_native.py proves it on generated
scenarios and the corpus); only the time differs. Without the extension (a machine with no Rust
toolchain) every solve takes the Python path.
"""

from __future__ import annotations

from itertools import repeat
from typing import Literal

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.packing import Packing, Reservation
from gpualloc.solvers.policies.heuristic.realtime import ForcedMove
from gpualloc.solvers.problem import Batch, Problem

try:
    import gpualloc_native

    AVAILABLE = True
except ImportError:  # built without a Rust toolchain: the Python path serves
    AVAILABLE = False
MAX_GPUS = 4096  # the widest pool a native problem holds (64 words)
LITTLE: Literal["little"] = "little"  # the byte order of every GPU set crossing to the extension


class _Decoded(list[int]):
    """Masks decoded from the extension's bytes, which it keeps (`raw`), so handing them back
    costs no encoding. The composition never changes a list the kernels gave it (it copies
    first), and the differential test would show it if it did."""

    __slots__ = ("raw", "owner")

    def __init__(self, raw: list[bytes], owner: NativeKernels):
        super().__init__(map(int.from_bytes, raw, repeat(LITTLE)))
        self.raw, self.owner = raw, owner


class NativeKernels:
    """A problem compiled once per solve: job positions, masks as little-endian bytes."""

    def __init__(self, problem: Problem):
        if not AVAILABLE:
            raise RuntimeError("the compiled heuristic (gpualloc_native) is not installed: `make native` builds it")
        self.problem = problem
        self.width = (problem.gpus + 7) // 8
        self.position = {j.id: i for i, j in enumerate(problem.batch)}
        jobs = [
            (
                j.priority,
                j.gpus,
                j.duration,
                j.arrival,
                (self.encode(j.running_mask), j.remaining) if j.running_mask else None,
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
        )

    def encode(self, mask: int) -> bytes:
        return mask.to_bytes(self.width, "little")

    def encoded(self, masks: list[int]) -> list[bytes]:
        """Masks as bytes: the bytes they came as when this problem's kernels decoded them."""
        if isinstance(masks, _Decoded) and masks.owner is self:
            return masks.raw
        return [self.encode(m) for m in masks]

    def reservation(self, res: Reservation) -> gpualloc_native.NativeReservation:
        deal = res.trade
        trade = (
            None
            if deal is None
            else (
                deal.curves,
                deal.floors,
                deal.pinned,
                deal.low,
                deal.worth,
                deal.caps,
                [list(d) for d in deal.demand],
                list(deal.weights),
                deal.cheapest,
            )
        )
        return gpualloc_native.NativeReservation(res.reserve, res.keep, self.encoded(res.zone), trade)

    def positions(self, order: list[Batch]) -> list[int]:
        return [self.position[j.id] for j in order]

    def packing(self, raw: gpualloc_native.PackingTuple) -> Packing:
        placed, value, busy, curves, traded = raw
        batch = self.problem.batch
        starts = {batch[p].id: (s, int.from_bytes(m, "little")) for p, s, m in placed}
        return Packing(starts, value, self.masks(busy), curves, traded)

    def masks(self, raw: list[bytes]) -> list[int]:
        return _Decoded(raw, self)

    def search(self, res: Reservation, budget: int, potential: dict[str, float]) -> NativeSearch:
        return NativeSearch(self, res, budget, potential)

    def pack(self, order: list[Batch], res: Reservation) -> Packing:
        return self.packing(self.native.pack(self.reservation(res), self.positions(order)))

    def assign_realtime(
        self, curves: list[list[int]], busy: list[int], strict: bool, fixed: dict[int, list[int]]
    ) -> tuple[dict[str, list[int]], list[ForcedMove]]:
        homes = [(i, self.encoded(masks)) for i, masks in fixed.items()]
        sets, found = self.native.assign_realtime(curves, self.encoded(busy), strict, homes)
        apps = self.problem.realtime
        moves = [ForcedMove(apps[a].id, t, int.from_bytes(m, "little")) for a, t, m in found]
        return {app.id: self.masks(row) for app, row in zip(apps, sets)}, moves

    def grow_to_demand(
        self, floor_sets: dict[str, list[int]], busy: list[int], curves: list[list[int]]
    ) -> dict[str, list[int]]:
        apps = self.problem.realtime
        floors = [self.encoded(floor_sets[app.id]) for app in apps]
        grown = self.native.grow_to_demand(floors, self.encoded(busy), curves)
        return {app.id: self.masks(row) for app, row in zip(apps, grown)}

    def app_sets(self, curves: list[list[int]], homes: dict[int, list[int]], nest: bool) -> dict[int, list[int]]:
        fixed = [(i, self.encoded(masks)) for i, masks in homes.items()]
        sets = self.native.app_sets(curves, fixed, nest)
        return {i: self.masks(row) for i, row in enumerate(sets)}

    def solve(self, knobs: Knobs) -> Schedule:
        starts, sets = self.native.heuristic(
            knobs.budget, knobs.polish_budget, knobs.screened, knobs.searched, knobs.reserving_repairs, knobs.home_cap
        )
        return self._schedule(starts, sets)

    def _schedule(self, starts: list[tuple[int, int] | None], sets: list[list[bytes]]) -> Schedule:
        """Per job position (start, first GPU) or None, and the apps' sets, as a schedule
        (the running jobs where they run)."""
        problem = self.problem
        batch = {j.id: (0, j.running_mask) for j in problem.batch if j.running_mask}
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
        sets = [self.encoded(schedule.realtime.get(a.id, [0] * T)) for a in problem.realtime]
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


class NativeSearch:
    """`search.Search`'s face over the compiled search."""

    def __init__(self, compiled: NativeKernels, res: Reservation, budget: int, potential: dict[str, float]):
        self.compiled = compiled
        values = [potential.get(j.id, 0.0) for j in compiled.problem.batch]
        self._search = gpualloc_native.NativeSearch(compiled.native, compiled.reservation(res), budget, values)

    @property
    def budget(self) -> int:
        return self._search.budget

    @property
    def order(self) -> list[Batch]:
        batch = self.compiled.problem.batch
        return [batch[p] for p in self._search.order()]

    def packing(self) -> Packing:
        return self.compiled.packing(self._search.packing())

    def best_of(self, seeds: list[list[Batch]]) -> bool:
        return self._search.best_of([self.compiled.positions(order) for order in seeds])

    def improve(self) -> bool:
        return self._search.improve()

"""Types of the compiled heuristic (src/lib.rs); `gpualloc.solvers.policies.heuristic.native`
is its one caller. GPU sets are little-endian bytes of the pool's width."""

# (placed (job position, start step, GPU set), value, busy per step, curves or None, traded)
PackingTuple = tuple[list[tuple[int, int, bytes]], float, list[bytes], list[list[int]] | None, float]
TradeTuple = tuple[
    list[list[int]],  # curves
    list[list[int]],  # floors
    list[list[int]],  # pinned
    list[list[int]],  # low
    list[float],  # worth
    list[int],  # caps
    list[list[int]],  # demand
    list[float],  # weights
    list[int],  # cheapest
]

class NativeReservation:
    def __init__(
        self, reserve: list[int], keep: list[int] | None, zone: list[bytes], trade: TradeTuple | None
    ) -> None: ...

class NativeProblem:
    def __init__(
        self,
        gpus: int,
        node_size: int,
        horizon: int,
        cum_weight: list[float],
        weights: list[float],
        penalty: float,
        jobs: list[tuple[float, int, int, int, tuple[bytes, int] | None]],
        apps: list[
            tuple[float, int, int, int, bytes | None, list[int]]
        ],  # priority, min, max, swap cap, current, demand
        running_busy: list[bytes],
    ) -> None: ...
    def pack(self, reservation: NativeReservation, order: list[int]) -> PackingTuple: ...
    def assign_realtime(
        self, curves: list[list[int]], busy: list[bytes], strict: bool, fixed: list[tuple[int, list[bytes]]]
    ) -> tuple[list[list[bytes]], list[tuple[int, int, bytes]]]: ...
    def grow_to_demand(
        self, floor_sets: list[list[bytes]], busy: list[bytes], curves: list[list[int]]
    ) -> list[list[bytes]]: ...
    def app_sets(
        self, curves: list[list[int]], homes: list[tuple[int, list[bytes]]], nest: bool
    ) -> list[list[bytes]]: ...
    def polish(
        self, starts: list[tuple[int, int] | None], sets: list[list[bytes]], budget: int
    ) -> tuple[list[tuple[int, int] | None], list[list[bytes]]]: ...
    def greedy(
        self, order: list[int], floors: list[list[int]], targets: list[list[int]]
    ) -> tuple[list[tuple[int, int, int]], list[list[bytes]]]: ...
    def heuristic(
        self, budget: int, polish_budget: int, screened: int, searched: int, reserving_repairs: int, home_cap: int
    ) -> tuple[list[tuple[int, int] | None], list[list[bytes]]]: ...

class NativeSearch:
    def __init__(
        self, problem: NativeProblem, reservation: NativeReservation, budget: int, potential: list[float]
    ) -> None: ...
    def best_of(self, seeds: list[list[int]]) -> bool: ...
    def improve(self) -> bool: ...
    def order(self) -> list[int]: ...
    def packing(self) -> PackingTuple: ...
    @property
    def budget(self) -> int: ...

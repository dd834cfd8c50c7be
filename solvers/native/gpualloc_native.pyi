"""Types of the compiled heuristic (src/lib.rs); `gpualloc.solvers.policies.heuristic.native`
is its one caller. GPU sets are little-endian bytes of the pool's width."""

class NativeProblem:
    def __init__(
        self,
        gpus: int,
        node_size: int,
        horizon: int,
        cum_weight: list[float],
        weights: list[float],
        penalty: float,
        # per job: priority, gpus, duration, arrival, (GPUs, first step, end step) when inherited
        jobs: list[tuple[float, int, int, int, tuple[bytes, int, int] | None]],
        # per app: priority, min_gpus, max_gpus, swap_cap, current GPUs or None, demand per step
        apps: list[tuple[float, int, int, int, bytes | None, list[int]]],
        running_busy: list[bytes],
        # the `completion` value model's (time_decay, latest completion); None: `gpu_steps`
        completion: tuple[float, int] | None,
    ) -> None: ...
    def polish(
        self, starts: list[tuple[int, int] | None], sets: list[list[bytes]], budget: int
    ) -> tuple[list[tuple[int, int] | None], list[list[bytes]]]: ...
    def greedy(
        self, order: list[int], floors: list[list[int]], targets: list[list[int]]
    ) -> tuple[list[tuple[int, int, int]], list[list[bytes]]]: ...
    def heuristic(
        self, budget: int, polish_budget: int, screened: int, searched: int, reserving_repairs: int, home_cap: int
    ) -> tuple[list[tuple[int, int] | None], list[list[bytes]]]: ...

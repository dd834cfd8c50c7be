"""What the shell may read of a pool's planner: a read-only view (status, explain, audits, metrics).

The shell never writes the planner's state: it hands events and commits to `Pool`, whose verbs
are the only writers. This protocol is what the shell is given to read; the planner satisfies it
as it is, so reading costs nothing, and a type checker refuses a write through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gpualloc.solvers.planner.headroom import Headroom
from gpualloc.solvers.planner.records import AppSpec, AppState, JobSpec, PoolConfig, Running
from gpualloc.solvers.problem import Problem


class PoolView(Protocol):
    @property
    def now(self) -> int: ...  # the step to commit next

    @property
    def config(self) -> PoolConfig: ...

    @property
    def queued(self) -> Mapping[str, JobSpec]: ...

    @property
    def running(self) -> Mapping[str, Running]: ...

    @property
    def apps(self) -> Mapping[str, AppState]: ...

    @property
    def down(self) -> int: ...  # GPUs of nodes that are down (a mask)

    @property
    def drained(self) -> int: ...  # GPUs of drained nodes (a mask)

    @property
    def unheard(self) -> int: ...  # GPUs of nodes without a live agent, in a watched pool (`node_watch`)

    @property
    def closed(self) -> int: ...  # GPUs that take no new work (down, drained, unheard)

    @property
    def heard(self) -> Mapping[int, tuple[float, float]]: ...  # node -> (last heard, interval), seconds

    @property
    def unbound(self) -> Mapping[str, tuple[float, int]]: ...  # starts not yet bound: job -> (since, nodes)

    @property
    def watched_since(self) -> float: ...  # the clock at the pool's first heartbeat

    @property
    def clock(self) -> float: ...  # the caller's clock (Unix seconds) at the last pass a node agent was watched by

    def window_demand(self, app_id: str, displaced: float | None = None) -> list[int]: ...

    def displaced(self) -> float: ...  # what a GPU-step of the waiting work earns (priced headroom's price)

    def headroom(self, app: AppSpec, displaced: float | None = None) -> Headroom: ...

    def window_problem(self) -> Problem: ...

"""What the shell reads of a pool: `Pool`'s read-only verbs and its view, and nothing that writes.

A dispatcher hands its pool out typed as `PoolReads` (`Dispatcher.reads`): the agent's loop,
plans made ahead, status and audits read the clock, the boundary and the planner's view
through it, while every change goes through the dispatcher, which records it in the ledger
(events, commits, cuts). `Pool` satisfies the protocol as it is, so reading costs nothing, and
a type checker refuses a write through it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from gpualloc.solvers.planner.records import Cut
from gpualloc.solvers.planner.view import PoolView


class PoolReads(Protocol):
    @property
    def view(self) -> PoolView | None: ...  # the planner, to read (None before the pool is configured)

    @property
    def origin(self) -> datetime | None: ...  # time of step 0 (None before the pool is configured)

    @property
    def step_length(self) -> timedelta: ...

    def step_at(self, at: datetime) -> int: ...

    def next_boundary(self) -> datetime | None: ...

    @property
    def cut_pending(self) -> bool: ...

    def ahead_ready(self) -> bool: ...

    def waiting_cut(self) -> Cut | None: ...

    @property
    def full_mode_every(self) -> int: ...

    def full_mode_due(self) -> bool: ...

    def full_mode_problem(self, max_jobs: int) -> Cut: ...


def step_of(pool: PoolReads) -> int | None:
    """The step to commit next (None before the pool is configured)."""
    view = pool.view
    return None if view is None else view.now

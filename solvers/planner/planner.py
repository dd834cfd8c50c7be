"""The planner: one pool's state and the roles that change it, composed into one object.

`Planner` is the state (`pool_state.PlannerState`: its fields and the reads every role shares)
with a part for each role, a small class over that same state: `admission` (a job's decision and
its lifecycle), `realtime` (apps' floors, traffic, grants and releases), `pool_changes` (nodes
and the pool's shape), `boundary` (cuts, plans made ahead, commits) and `adoption` (full mode's
plans). A role that needs another's verb is handed that part (the boundary starts jobs through
admission and grants through real time). The parts are made from the planner at each use, so
they always act on the state the planner holds: `state.fork`/`restore` change that state in
place, and a copy of the planner (`copy.deepcopy`) has parts of its own. The event interpreter
(`interpreter.Pool`) is the one caller that changes it for the shell; the simulator and the audit
go through it too.
"""

from __future__ import annotations

from gpualloc.solvers.planner.admission import Admission
from gpualloc.solvers.planner.adoption import FullModeAdoption
from gpualloc.solvers.planner.boundary import Boundary
from gpualloc.solvers.planner.pool_changes import PoolChanges
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.realtime import RealTime
from gpualloc.solvers.planner.records import Commit


class Planner(PlannerState):
    """A pool's planner: its state (`PlannerState`'s fields and reads) and its roles' parts."""

    @property
    def admission(self) -> Admission:
        return Admission(self)

    @property
    def realtime(self) -> RealTime:
        return RealTime(self)

    @property
    def pool_changes(self) -> PoolChanges:
        return PoolChanges(self, Admission(self))

    @property
    def boundary(self) -> Boundary:
        return Boundary(self, Admission(self), RealTime(self))

    @property
    def adoption(self) -> FullModeAdoption:
        return FullModeAdoption(self, self.boundary)


def applied(commits: list[Commit], gpus: int) -> list[list[str | None]]:
    """The executed grid (GPU x committed step) rebuilt from commits, for audits and tests."""
    grid: list[list[str | None]] = [[None] * len(commits) for _ in range(gpus)]
    for k, commit in enumerate(commits):
        for owner, owned in commit.assignments.items():
            for g in owned:
                grid[g][k] = owner
    return grid

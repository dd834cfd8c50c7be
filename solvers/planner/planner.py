"""The planner: one pool's state and the roles that change it, composed into one object.

Each role is a module over the state (`pool_state.PlannerState`): admission and the job lifecycle
(`admission`), real-time apps (`realtime`), the pool's nodes and shape (`pool_changes`), the step
boundary (`boundary`) and full mode's plans (`adoption`). The event interpreter (`interpreter.Pool`)
is the one caller that changes it for the shell; the simulator and the audit go through it too.
"""

from __future__ import annotations

from gpualloc.solvers.planner.adoption import Adopting
from gpualloc.solvers.planner.records import Commit


class Planner(Adopting):
    """A pool's planner: its state (`PlannerState`'s fields) with every role's verbs."""


def applied(commits: list[Commit], gpus: int) -> list[list[str | None]]:
    """The executed grid (GPU x committed step) rebuilt from commits, for audits and tests."""
    grid: list[list[str | None]] = [[None] * len(commits) for _ in range(gpus)]
    for k, commit in enumerate(commits):
        for owner, owned in commit.assignments.items():
            for g in owned:
                grid[g][k] = owner
    return grid

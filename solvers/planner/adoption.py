"""The planner's adoption role: full mode's plans at a step boundary, carried onto the current
window and offered to the commit (`Boundary.tick_after`) only when the validator passes them and
they beat the boundary's hot-path plan."""

from __future__ import annotations

from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.boundary import Boundary
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.reconcile import reconcile
from gpualloc.solvers.planner.records import (
    Adoption,
    FullModePlan,
)
from gpualloc.solvers.planner.starvation import delayed


class FullModeAdoption:
    """Full mode's plans weighed against the hot path's, over the pool's `state`; the hot path's
    plan is the one `boundary` would commit."""

    __slots__ = ("state", "boundary")

    def __init__(self, state: PlannerState, boundary: Boundary) -> None:
        self.state, self.boundary = state, boundary

    def adopt(self, plan: FullModePlan) -> Adoption:
        """At a step boundary: `plan` carried onto the current window (`gpualloc.solvers.planner.reconcile`),
        offered for `tick` only when the validator passes it and it beats the hot path."""
        shift = self.state.now - plan.made_at
        if not 0 <= shift < self.state.config.horizon:
            return Adoption(None, f"made for step {plan.made_at}, the window is at step {self.state.now}")
        problem, hot = self.boundary.boundary_plan()
        hot_objective = objective_of(problem, hot)
        best: tuple[float, Schedule] | None = None
        why = "its blocks force real-time apps past their swap caps once reconciled"
        starving = self.state.starving()
        for candidate in reconcile(problem, plan.schedule, shift):
            violations = check_plan(problem, to_grid(problem, candidate))
            if violations:
                why = f"illegal once reconciled: {violations[0]}"
                continue
            late = delayed(starving, hot, candidate)
            if late:
                why = f"it starts starving job {late!r} later than the hot path does"
                continue
            objective = objective_of(problem, candidate)
            if best is None or objective > best[0] + 1e-9:
                best = (objective, candidate)
        if best is None:
            return Adoption(None, why, None, hot_objective, (problem, hot))
        if best[0] <= hot_objective + 1e-6:
            return Adoption(
                None,
                f"no better than the hot path ({best[0]:.2f} <= {hot_objective:.2f})",
                best[0],
                hot_objective,
                (problem, hot),
            )
        return Adoption(
            best[1],
            f"adopted: {best[0]:.2f} against the hot path's {hot_objective:.2f}",
            best[0],
            hot_objective,
            (problem, hot),
        )

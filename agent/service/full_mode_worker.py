"""Full mode off the event loop: its solver in a process of its own (`SolveProcess`), a
snapshot of the window at a time, the plan taken at a step boundary or not at all."""

from __future__ import annotations

from gpualloc.agent.service.solve_process import SolveProcess
from gpualloc.schemas.config import FullModeOptions, RollingFullMode, SolveOptions
from gpualloc.solvers.planner.full_mode import snapshot, solve_snapshot
from gpualloc.solvers.planner.state import Planner


class FullModeWorker(SolveProcess):
    def __init__(self, options: FullModeOptions, max_jobs: int = RollingFullMode(every=1).max_jobs,
                 policy: str = "full-mode"):
        """Solve with registered policy `policy` under `options` (its time limit should fit
        within a step), on snapshots of at most `max_jobs` queued jobs."""
        super().__init__()
        self.options, self.max_jobs, self.policy = SolveOptions(full_mode=options), max_jobs, policy

    def launch(self, planner: Planner) -> bool:
        """Solve a snapshot of the planner's current window; False while a solve is running.
        `take` gives its FullModePlan (None when it found nothing better)."""
        if self.busy:
            return False
        return self.submit(solve_snapshot, snapshot(planner, self.max_jobs), planner.now, self.policy, self.options)

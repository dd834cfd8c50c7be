"""Full mode off the event loop: its solver in a process of its own (`SolveProcess`), a
snapshot of the window at a time, the plan taken at a step boundary or not at all.

A snapshot whose model could not be built in time or in the process's memory is not solved
(`not_worth_starting`): no process is started for it, and `skipped` says why. A solve still
running DEADLINE_GRACE_S past its time limit (which covers building the model) has its process
killed, and its memory goes with it."""

from __future__ import annotations

from gpualloc.agent.service.solve_process import SolveProcess
from gpualloc.schemas.settings import FullModeOptions, RollingFullMode, SolveOptions
from gpualloc.solvers.planner.full_mode import not_worth_starting, solve_snapshot
from gpualloc.solvers.planner.records import Cut

DEADLINE_GRACE_S = 15.0  # past the time limit: starting the process, the warm start, realizing the plan


class FullModeWorker(SolveProcess):
    def __init__(
        self,
        options: FullModeOptions,
        max_jobs: int = RollingFullMode(every=1).max_jobs,
        policy: str = "full-mode",
        memory_bytes: int | None = None,
        max_nonzeros: int | None = None,
    ):
        """Solve with registered policy `policy` under `options` (its time limit should fit
        within a step), on snapshots of at most `max_jobs` queued jobs whose models have at most
        `max_nonzeros`, in a process of at most `memory_bytes` of address space."""
        super().__init__(memory_bytes)
        self.options, self.max_jobs, self.policy = SolveOptions(full_mode=options), max_jobs, policy
        self.max_nonzeros = max_nonzeros
        self.skipped: str | None = None  # why the last launch did not solve its snapshot

    def launch(self, window: Cut) -> bool:
        """Solve `window` (the pool's current window, its queue cut to `max_jobs`:
        `Pool.full_mode_problem`); False while a solve is running or when it is not worth
        solving (`skipped`). `take` gives its FullModePlan (None when it found nothing better)."""
        self.skipped = None
        if self.busy:
            return False
        self.skipped = not_worth_starting(window.problem, self.options.full_mode, self.memory_bytes, self.max_nonzeros)
        if self.skipped is not None:
            return False
        limit = self.options.full_mode.time_limit
        return self.submit(
            solve_snapshot,
            window.problem,
            window.step,
            self.policy,
            self.options,
            deadline_s=None if limit is None else limit + DEADLINE_GRACE_S,
        )

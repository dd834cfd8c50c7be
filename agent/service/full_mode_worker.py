"""Full mode off the event loop: its solver in a process of its own (`SolveProcess`), a
snapshot of the window at a time, the plan taken at a step boundary or not at all.

A snapshot whose model could not be built in time or in the process's memory is not solved
(`not_worth_starting`): no process is held for it (one left from an earlier solve is ended, its
memory with it: `release`, as the agent does at a boundary where no solve is due), and `skipped`
says why. A solve still running DEADLINE_GRACE_S past its time
limit (which covers building the model) has its process killed, and its memory goes with it.
`collect` says how each solve ended (`FullModeSolve`), for the commit at the next boundary."""

from __future__ import annotations

import time

from gpualloc.agent.service.solve_process import SolveProcess
from gpualloc.schemas.published import FullModeOutcome, FullModeSolve
from gpualloc.schemas.settings import FullModeOptions, RollingFullMode, SolveOptions
from gpualloc.solvers.planner.full_mode import FullModeRun, ended_without_plan, not_worth_starting, run_snapshot
from gpualloc.solvers.planner.records import Cut, FullModePlan

DETAIL_CHARS = 500  # of a failed solve's error, in the commit that says it
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
        self.solving: int | None = None  # the step whose window the running (or last) solve took
        self._began = self._ended = 0.0  # its wall-clock span (monotonic)

    def launch(self, window: Cut) -> bool:
        """Solve `window` (the pool's current window, its queue cut to `max_jobs`:
        `Pool.full_mode_problem`); False while a solve is running or when it is not worth
        solving (`skipped`; its process, if any, is ended). `collect` gives what it found."""
        self.skipped = None
        if self.busy:
            return False
        self.skipped = not_worth_starting(window.problem, self.options.full_mode, self.memory_bytes, self.max_nonzeros)
        if self.skipped is not None:
            self.release()  # nothing to solve: no idle process held until a window is worth it
            return False
        limit = self.options.full_mode.time_limit
        submitted = self.submit(
            run_snapshot,
            window.problem,
            window.step,
            self.policy,
            self.options,
            deadline_s=None if limit is None else limit + DEADLINE_GRACE_S,
        )
        if submitted and self._future is not None:
            self.solving, self._began = window.step, time.monotonic()
            self._future.add_done_callback(self._end)
        return submitted

    def collect(self) -> tuple[FullModePlan | None, FullModeSolve | None]:
        """At a step boundary: the solve that ended since the last one, once: its plan when it
        beat its warm start (to be offered for adoption) and how it ended, else (None, None)."""
        if not self.done or self.solving is None:
            return None, None
        seconds, timed_out = round(self._ended - self._began, 3), self._killed is not None
        run: FullModeRun | None = self.take()
        if run is None:
            error, self.last_error = (self.last_error or "no answer")[:DETAIL_CHARS], None
            outcome: FullModeOutcome = "timed_out" if timed_out else "failed"
            return None, FullModeSolve(step=self.solving, outcome=outcome, detail=error, seconds=seconds)
        if run.plan is None:
            return None, ended_without_plan(run, self.solving, seconds)
        # the outcome is settled where the plan is weighed against the hot path (`settled`)
        return run.plan, FullModeSolve(step=self.solving, outcome="adopted", detail="offered", seconds=seconds)

    def _end(self, _: object) -> None:
        self._ended = time.monotonic()

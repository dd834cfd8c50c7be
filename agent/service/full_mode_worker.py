"""Full mode off the event loop: one solver process, one solve at a time, awaited by the agent.

The hot path keeps deciding arrivals while the solver works in another process (the model
build and the solver both hold a CPU; a thread would stall the loop on the GIL). The result is
collected, never pushed: the agent asks at each step boundary, so a plan is adopted there or
not at all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing

from gpualloc.schemas.config import FullModeOptions, RollingFullMode, SolveOptions
from gpualloc.solvers.planner.full_mode import snapshot, solve_snapshot
from gpualloc.solvers.planner.state import FullModePlan, Planner


class FullModeWorker:
    def __init__(self, options: FullModeOptions, max_jobs: int = RollingFullMode(every=1).max_jobs,
                 policy: str = "full-mode"):
        """Solve with registered policy `policy` under `options` (its time limit should fit
        within a step), on snapshots of at most `max_jobs` queued jobs."""
        self.options, self.max_jobs, self.policy = SolveOptions(full_mode=options), max_jobs, policy
        self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self._future: asyncio.Future | None = None
        self.last_error: str | None = None

    @property
    def busy(self) -> bool:
        return self._future is not None and not self._future.done()

    def launch(self, planner: Planner) -> bool:
        """Solve a snapshot of the planner's current window; False while a solve is running."""
        if self.busy:
            return False
        problem = snapshot(planner, self.max_jobs)
        loop = asyncio.get_running_loop()
        self._future = loop.run_in_executor(self._pool, solve_snapshot, problem, planner.now, self.policy,
                                            self.options)
        return True

    def take(self) -> FullModePlan | None:
        """The finished solve's plan, once (None while running, when it found nothing better,
        or when it failed: `last_error` says why)."""
        if self._future is None or not self._future.done():
            return None
        future, self._future = self._future, None
        try:
            return future.result()
        except Exception as exc:  # a solver crash must not take the agent down
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None

    async def wait(self) -> None:
        """Until the running solve (if any) ends: for tests and for a clean shutdown."""
        if self._future is not None:
            await asyncio.wait([self._future])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

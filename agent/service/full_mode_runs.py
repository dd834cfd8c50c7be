"""Full mode at the step boundaries: its solves launched when due, collected at the next
boundary, and what each commit says of them (`FullModeReport`).

The solver process (`FullModeWorker`) starts with the first due solve and is held while solves
keep coming; a boundary with none due releases it, so its memory is not held meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gpualloc.agent.service.full_mode_worker import FullModeWorker
from gpualloc.agent.service.reads import PoolReads, step_of
from gpualloc.schemas.published import FullModeReport, FullModeSolve
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.planner.full_mode import next_due
from gpualloc.solvers.planner.records import FullModePlan
from gpualloc.solvers.policies import OnlinePolicy

log = logging.getLogger("gpualloc.agent")


@dataclass(frozen=True)
class Collected:
    """What full mode brings to a boundary's commit."""

    plan: FullModePlan | None  # the plan to offer for adoption (None: none)
    said: str | None  # what the commit says of full mode when it offers no plan
    ended: FullModeSolve | None  # the solve that ended since the last boundary


@dataclass
class FullModeRuns:
    """Full mode's solver process (None before its first solve) and whether the log said why
    its last launch was skipped (each commit says it after this)."""

    worker: FullModeWorker | None = None
    skip_said: bool = False

    def collect(self, pool: str) -> Collected:
        """At a boundary: the solve that ended since the last one, once, and what the commit
        says of full mode."""
        plan, ended = self.worker.collect() if self.worker is not None else (None, None)
        if ended is not None and ended.outcome in ("failed", "timed_out"):
            log.warning("pool %s: full mode failed: %s", pool, ended.detail)
        skipped = self.worker.skipped if self.worker is not None else None
        said = f"skipped: {skipped}" if skipped is not None else None
        if ended is not None and plan is None:
            said = f"{'not adopted' if ended.outcome == 'not_better' else 'failed'}: {ended.detail}"
        return Collected(plan, said, ended)

    def report(
        self, reads: PoolReads, last: FullModeReport | None, ended: FullModeSolve | None
    ) -> FullModeReport | None:
        """What became of full mode since the last commit, for the commit being made (None: the
        policy has none): `ended`, the solve collected at this boundary; `last`: the report of
        the latest commit that made one."""
        every, step, worker = reads.full_mode_every, step_of(reads), self.worker
        if not every or step is None:
            return None
        last_solve = ended or (last.last if last is not None else None)
        report = FullModeReport(state="not_due", last=last_solve, next_step=next_due(step + 1, every))
        if ended is not None:
            return report.model_copy(update={"state": "ran"})
        if worker is not None and worker.busy:
            return report.model_copy(update={"state": "running", "running_since": worker.solving})
        if worker is not None and worker.skipped is not None:
            return report.model_copy(update={"state": "skipped", "detail": worker.skipped})
        return report

    def after_commit(
        self, reads: PoolReads, catching_up: bool, settings: AgentSettings, policy: OnlinePolicy, pool: str
    ) -> None:
        """After a boundary's commit: launch the next solve when one is due (not while
        `catching_up`), else release an idle process until a later step."""
        if reads.full_mode_due() and not catching_up:
            self._launch(reads, settings, policy, pool)
        elif self.worker is not None and not reads.full_mode_due():
            self.worker.release()  # idle until a later step: its memory is not held meanwhile

    def _launch(self, reads: PoolReads, settings: AgentSettings, policy: OnlinePolicy, pool: str) -> None:
        """Solve the pool's current window with `policy`'s full mode."""
        s = settings
        if self.worker is None:
            full_mode = policy.full_mode
            assert full_mode is not None  # full mode is due only for a policy that has one (`Pool.use`)
            limit = s.full_mode_time_limit(reads.step_length.total_seconds())
            memory = None if s.full_mode_memory_mb is None else s.full_mode_memory_mb << 20
            self.worker = FullModeWorker(
                s.full_mode.options.model_copy(update={"time_limit": limit}),
                s.full_mode.max_jobs,
                full_mode.name,
                memory,
                s.full_mode_max_nonzeros,
            )
        self.worker.launch(reads.full_mode_problem(self.worker.max_jobs))
        if self.worker.skipped is not None and not self.skip_said:  # each commit says it after this
            log.warning("pool %s: full mode not started: %s", pool, self.worker.skipped)
        self.skip_said = self.worker.skipped is not None

    def close(self) -> None:
        """End the solver process (a session ends); the next session starts its own."""
        if self.worker is not None:
            self.worker.close()
        self.worker = None

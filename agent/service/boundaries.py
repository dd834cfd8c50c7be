"""The step boundaries as the agent's passes meet them: how long a poll may wait, when the window
is cut for the next boundary's plan (`plan_ahead`), and the commits of the steps whose start has
come, with full mode collected and launched there (`full_mode_runs`).

A boundary whose plan made ahead is on its way waits for it, deciding arrivals meanwhile; a pool
far behind its clock (after a restart or a stall) commits at most `catch_up_steps` a pass.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.full_mode_runs import FullModeRuns
from gpualloc.agent.service.outbox import Output
from gpualloc.agent.service.plan_ahead import PlanAhead
from gpualloc.agent.service.service_setup import ServiceSetup
from gpualloc.agent.service.snapshotting import Snapshotting

log = logging.getLogger("gpualloc.agent")

AWAIT_POLL_MS = 20  # a poll's wait while a boundary waits for its plan made ahead


@dataclass
class Boundaries:
    """A session's solver processes for the boundaries: the plans made ahead of them (None:
    made at the boundary, `agent.plan_ahead` off, or no session) and full mode's."""

    ahead: PlanAhead | None = None
    full_mode: FullModeRuns = field(default_factory=FullModeRuns)

    def start(self, setup: ServiceSetup) -> None:
        """A session starts serving: its process for plans made ahead, when the settings ask."""
        if setup.settings.plan_ahead:
            self.ahead = PlanAhead(setup.run_info["policy"], setup.run_info["effort"])

    def close(self) -> None:
        """A session ends: its solver processes with it."""
        self.full_mode.close()
        if self.ahead is not None:
            self.ahead.close()
        self.ahead = None

    def wait_ms(self, d: Dispatcher, now: datetime, longest: int) -> int:
        """How long a poll may wait (at most `longest`): until the next boundary, or the cut
        before it."""
        wake = self.cut_time(d) or d.reads.next_boundary()
        if wake is None:
            return longest
        if wake <= now and self.ahead is not None and self.ahead.awaited(d, wake, d.reads.step_length, now):
            return AWAIT_POLL_MS  # the boundary waits for its plan: noticed soon after it is made
        ahead = (wake - now).total_seconds() * 1000
        return int(min(longest, max(0.0, ahead)))

    def cut_time(self, d: Dispatcher) -> datetime | None:
        """When the window is to be cut for the next boundary's plan (None: not to be, or cut)."""
        boundary = d.reads.next_boundary()
        if self.ahead is None or boundary is None or d.reads.cut_pending or self.ahead.process.busy:
            return None
        return self.ahead.cut_time(boundary, d.reads.step_length)

    def cut(self, d: Dispatcher, now: datetime) -> None:
        """Cut the window for the next boundary's plan once its time has come (not when the
        boundary has too: a pool behind its clock replans)."""
        at, ahead, boundary = self.cut_time(d), self.ahead, d.reads.next_boundary()
        # `cut_time` gives a time only with plans made ahead and a boundary to come
        if at is not None and ahead is not None and boundary is not None and at <= now < boundary:
            ahead.launch(d, now)

    def deliver(self, d: Dispatcher) -> None:
        """Hand a plan made ahead to the pool, and start the plan of a cut recovery replayed."""
        if self.ahead is not None:
            self.ahead.deliver(d)
            self.ahead.resume(d)

    def commit_due(self, d: Dispatcher, now: datetime, setup: ServiceSetup, snapshots: Snapshotting) -> list[Output]:
        """Commit the steps whose start has come, at most `catch_up_steps` a pass (a pool found
        far behind its clock, after a restart or a stall, catches up over several passes while
        arrivals keep being decided); full mode is collected and launched here. What replaying
        each commit will cost goes to `snapshots`."""
        out: list[Output] = []
        steps = 0
        while (boundary := d.reads.next_boundary()) is not None and boundary <= now:
            step_length = d.reads.step_length
            if steps == setup.settings.catch_up_steps:
                behind = int((now - boundary) / step_length) + 1
                log.warning("pool %s: %d steps behind the clock; committing %d a pass", setup.pool, behind, steps)
                break
            if self.ahead is not None and self.ahead.awaited(d, boundary, step_length, now):
                break  # its plan made ahead is on its way: arrivals go on being decided meanwhile
            full_mode = self.full_mode.collect(setup.pool)
            carried, began = d.reads.ahead_ready(), time.perf_counter()
            out += d.commit(  # its parts
                now,
                full_mode.plan,
                full_mode=full_mode.said,
                report=self.full_mode.report(d.reads, d.full_mode_report, full_mode.ended),
            )
            # what replaying this commit will cost: its pass, and the plan made ahead that it carried
            snapshots.planned(time.perf_counter() - began + (self.ahead.plan_s if carried and self.ahead else 0.0))
            steps += 1
            catching_up = boundary + step_length <= now
            self.full_mode.after_commit(d.reads, catching_up, setup.settings, setup.policy, setup.pool)
        if steps:
            # the pool's state as the commit left it lives on: kept out of the collector's full
            # passes, which otherwise walk all of it (70-130 ms at the contract's limits) in a
            # pass that holds up arrivals. What is frozen is still freed once unreferenced; only
            # a reference cycle would stay, and the pool's passes make none (test_agent_heap)
            gc.freeze()
        return out

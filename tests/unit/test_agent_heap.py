"""The agent's heap at its boundaries: what a commit leaves alive is kept out of the collector's
full passes (`Boundaries.commit_due` freezes it), which is sound because the pool's passes make
no reference cycles (a frozen cycle would never be collected)."""

from __future__ import annotations

import gc
from datetime import datetime, timedelta, timezone

from test_ledger import message

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Record
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def _agent() -> AgentService:
    agent = AgentService(
        "unused:9092", AgentSettings(step_seconds=10, policy="heuristic", full_mode=RollingFullMode(every=0))
    )
    config = message("pool.configured", {"gpus": 16, "horizon": 8}, 0, T0)
    agent.dispatcher.handle([Record("gpualloc.config", 0, 0, "default", config)], T0)
    return agent


def _jobs(first: int, n: int, at: datetime) -> list[Record]:
    return [
        Record(
            "gpualloc.jobs",
            0,
            k,
            "default",
            message(
                "job.submitted",
                {"id": f"j{k}", "kind": "training", "priority": 1, "gpus": 1 + k % 4, "duration": 2},
                k,
                at,
            ),
        )
        for k in range(first, first + n)
    ]


def test_a_pass_that_commits_a_step_freezes_what_it_leaves_alive():
    agent = _agent()
    try:
        before = gc.get_freeze_count()
        agent.dispatcher.handle(_jobs(1, 5, T0), T0)
        assert agent.boundaries.commit_due(agent.dispatcher, T0, agent.setup, agent.snapshots)  # step 0
        frozen = gc.get_freeze_count()
        assert frozen > before
        later = T0 + timedelta(seconds=1)  # no step due: nothing frozen
        assert agent.boundaries.commit_due(agent.dispatcher, later, agent.setup, agent.snapshots) == []
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_the_pools_passes_make_no_reference_cycles():
    agent = _agent()
    d, now = agent.dispatcher, T0
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for step in range(4):
            d.handle(_jobs(1 + 10 * step, 10, now), now)
            agent.boundaries.commit_due(d, now, agent.setup, agent.snapshots)
            d.seal(agent.setup.run_info)
            d.snapshot(now, 0, 0, 0)
            now += timedelta(seconds=10)
        gc.unfreeze()
        gc.collect()
        assert gc.garbage == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()

"""The agent's clock and its catch-up rule, without a broker: a wall-clock jump while the agent
runs changes nothing; a pool found far behind its clock commits at most `catch_up_steps` a pass
(and says so); a pool whose clock went back commits nothing until the next step's start."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import orjson

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.agent.service.clock import Clock
from gpualloc.agent.service.outbox import Output
from gpualloc.bus.topics import Record
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


class Fake:
    """Wall and monotonic time the test moves by hand."""

    def __init__(self) -> None:
        self.wall, self.mono = T0.timestamp(), 100.0


def test_a_wall_clock_jump_does_not_move_the_agents_clock():
    fake = Fake()
    clock = Clock(wall=lambda: fake.wall, monotonic=lambda: fake.mono)
    fake.wall += 3600  # NTP steps the wall clock an hour ahead...
    fake.mono += 2.5  # ...while 2.5 s really pass
    assert clock.now() == T0 + timedelta(seconds=2.5)
    fake.wall -= 7200
    assert clock.now() == T0 + timedelta(seconds=2.5)


def configured(catch_up: int = 4) -> AgentService:
    agent = AgentService(
        "unused:9092",
        AgentSettings(step_seconds=10, catch_up_steps=catch_up, policy="heuristic", full_mode=RollingFullMode(every=0)),
    )
    config = {
        "event_id": "c",
        "type": "pool.configured",
        "occurred_at": T0.isoformat(),
        "pool": "default",
        "schema_version": 1,
        "payload": {"gpus": 8, "horizon": 6},
    }
    agent.dispatcher.handle([Record("gpualloc.config", 0, 0, "default", orjson.dumps(config))], T0)
    return agent


def commits_due(agent: AgentService, now: datetime) -> list[Output]:
    """What a pass at `now` commits."""
    return agent.boundaries.commit_due(agent.dispatcher, now, agent.setup, agent.snapshots)


def test_a_pool_far_behind_its_clock_catches_up_a_few_steps_a_pass(caplog):
    agent = configured(catch_up=4)
    late = T0 + timedelta(seconds=10 * 50 + 1)  # 51 steps are due (0..50)
    with caplog.at_level(logging.WARNING, logger="gpualloc.agent"):
        passes = []
        while commits := commits_due(agent, late):
            passes.append([c.message["payload"]["step"] for c in commits])
    assert passes[0] == [0, 1, 2, 3] and all(len(p) <= 4 for p in passes)
    assert [s for p in passes for s in p] == list(range(51))  # every step once, in order
    assert "47 steps behind the clock; committing 4 a pass" in caplog.text  # after its first 4


def test_after_the_clock_went_back_nothing_is_committed_until_the_next_step_starts():
    agent = configured()
    assert len(commits_due(agent, T0 + timedelta(seconds=25))) == 3  # steps 0, 1, 2
    earlier = T0 + timedelta(seconds=5)  # a restart found the wall clock 20 s back
    assert commits_due(agent, earlier) == [] and commits_due(agent, T0 + timedelta(seconds=29)) == []
    assert [c.message["payload"]["step"] for c in commits_due(agent, T0 + timedelta(seconds=30))] == [3]

"""A traffic spike within a step on a real broker: the agent grants idle GPUs in the same pass as
a reactive commit of the committed step, node agents bind them, and `audit` reproduces it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from support.kafka_broker import unique_topic
from test_audit import cli, publish
from test_node_agent_kafka import read_all, reports, running, wait_until

from gpualloc.agent.bus.topics import Topics
from gpualloc.agent.node.binders import FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

SETTINGS = AgentSettings(step_seconds=6.0, full_mode=RollingFullMode(every=0), snapshot_every=2)


def message(kind: str, payload: dict, at: datetime, event_id: str) -> bytes:
    return orjson.dumps(envelope(kind, payload, at, event_id))


async def test_a_spike_within_the_step_is_granted_bound_and_audited(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_topic("reactive") + "."
    topics = Topics.with_prefix(prefix)
    now = datetime.now(UTC)
    config = message("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 6}, now, "cfg")
    app = {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 8, "swap_cap": 8}
    await publish(kafka_bootstrap, topics.traffic, [message("app.registered", app, now, "app")], key=b"default")
    agent = AgentService(kafka_bootstrap, SETTINGS, topics, initial_config=config)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    d0, d1 = tmp_path / "node0", tmp_path / "node1"
    node0 = NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(d0), topics=topics)
    node1 = NodeAgent(kafka_bootstrap, 1, range(8, 16), FileBinder(d1), topics=topics)
    try:
        async with running(node0), running(node1):
            await asyncio.wait_for(ready.wait(), 60)

            async def two_commits() -> bool:
                return agent.dispatcher.seq >= 2

            await wait_until(two_commits, "two commits")
            seq = agent.dispatcher.seq

            async def fresh_commit() -> bool:
                return agent.dispatcher.seq > seq

            await wait_until(fresh_commit, "a fresh commit")  # the observation lands early in its step
            planner, origin = agent.dispatcher.planner, agent.dispatcher.interpreter.origin
            step = planner.now - 1
            held = planner.apps["chat"].held.bit_count()
            at = origin + timedelta(seconds=SETTINGS.step_seconds * step + 0.5)
            spike = message("traffic.observed", {"app": "chat", "gpus": 6}, at, "spike")
            await publish(kafka_bootstrap, topics.traffic, [spike], key=b"default")

            async def granted() -> bool:
                commits = [m for _, m in await read_all(kafka_bootstrap, topics.commits)]
                return any(m["payload"].get("reactive") for m in commits)

            await wait_until(granted, "a reactive commit")
            commits = [m["payload"] for _, m in await read_all(kafka_bootstrap, topics.commits)]
            [reactive] = [c for c in commits if c.get("reactive")]
            assert reactive["step"] == step and set(reactive["assignments"]) == {"chat"}
            gpus = reactive["assignments"]["chat"]
            assert len(gpus) == 6 > held and "granted at once" in reactive["reasons"]["chat"]
            assert reactive["seq"] == max(c["seq"] for c in commits if c["step"] == step)

            async def bound() -> bool:
                got = await read_all(kafka_bootstrap, topics.bindings)
                mine = {
                    g
                    for node in (0, 1)
                    for status, holder, owned in reports(got, node)
                    if status == "bound" and holder == "chat"
                    for g in owned
                }
                return set(gpus) <= mine

            await wait_until(bound, f"node agents binding chat on {gpus}")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    rc, out = await cli("audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("; 0 mismatches"), out

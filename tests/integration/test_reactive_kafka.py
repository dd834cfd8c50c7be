"""A traffic spike within a step on a real broker: the agent grants idle GPUs in the same pass as
a reactive commit of the committed step, hands them back idle when the next observation shows the
spike over, node agents bind and release them, and `audit` reproduces both."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from support.kafka_broker import unique_topic
from test_audit import cli, publish
from test_node_agent_kafka import read_all, reports, running, wait_until

from gpualloc.agent.node.binders import FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
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
            planner, origin = agent.dispatcher.interpreter.planner, agent.dispatcher.reads.origin
            step = planner.now - 1
            held = planner.apps["chat"].held.bit_count()
            at = origin + timedelta(seconds=SETTINGS.step_seconds * step + 0.5)
            spike = message("traffic.observed", {"app": "chat", "gpus": 6}, at, "spike")
            calm = message("traffic.observed", {"app": "chat", "gpus": 1}, at + timedelta(seconds=0.1), "calm")
            await publish(kafka_bootstrap, topics.traffic, [spike, calm], key=b"default")

            async def reacted() -> bool:
                commits = [m for _, m in await read_all(kafka_bootstrap, topics.commits)]
                return sum(1 for m in commits if m["payload"].get("reactive")) == 2

            await wait_until(reacted, "two reactive commits")
            commits = [m["payload"] for _, m in await read_all(kafka_bootstrap, topics.commits)]
            granted, back = [c for c in commits if c.get("reactive")]
            assert granted["step"] == back["step"] == step and set(granted["assignments"]) == {"chat"}
            gpus = granted["assignments"]["chat"]
            assert len(gpus) == 6 > held and "granted at once" in granted["reasons"]["chat"]
            kept = back["assignments"]["chat"]
            assert len(kept) == held and set(kept) < set(gpus) and "handed back idle" in back["reasons"]["chat"]
            assert back["seq"] == granted["seq"] + 1 == max(c["seq"] for c in commits if c["step"] == step)

            async def follow() -> bool:
                """Each node whose part changed bound its part of the grant, then its part of what was kept."""
                got = await read_all(kafka_bootstrap, topics.bindings)
                for node in (0, 1):
                    grant, keep = ([g for g in gs if g // 8 == node] for gs in (gpus, kept))
                    held = [
                        owned if status == "bound" else [] for status, h, owned in reports(got, node) if h == "chat"
                    ]
                    first = next((k for k, owned in enumerate(held) if sorted(owned) == grant), None)
                    if grant != keep and (first is None or sorted(keep) not in [sorted(o) for o in held[first + 1 :]]):
                        return False
                return True

            await wait_until(follow, f"node agents binding chat on {gpus}, then on {kept}")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    rc, out = await cli("audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("; 0 mismatches"), out

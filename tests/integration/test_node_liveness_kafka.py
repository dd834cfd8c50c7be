"""Node agents known alive, on a real broker: the agent and real node agents on nodes 0 and 1 of
a three-node pool whose node 2 has no agent. No work goes to node 2; a node agent stopped with a
job bound leaves the job running (never re-queued, never doubled) and its node takes no new work;
a start on a node whose agent beats but never binds is re-queued once, as never run; `audit`
replays it all."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from support.kafka_broker import unique_topic
from test_audit import cli, publish
from test_node_agent_kafka import read_all, running, wait_until

from gpualloc.agent.node.binders import FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import AgentSettings, NodeAgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

SETTINGS = AgentSettings(step_seconds=2.0, full_mode=RollingFullMode(every=0), heartbeat_flush_s=0.3)
BEATING = NodeAgentSettings(heartbeat_s=1.0)
POOL = {
    "gpus": 24,
    "gpus_per_node": 8,
    "horizon": 6,
    "node_silence_seconds": 3,
    "bind_confirm_seconds": 1,
    "bind_requeue_seconds": 4,
}


def message(kind: str, payload: dict, event_id: str | None = None) -> bytes:
    return orjson.dumps(envelope(kind, payload, datetime.now(UTC), event_id or uuid.uuid4().hex))


def job(name: str) -> bytes:
    return message("job.submitted", {"id": name, "kind": "training", "priority": 5, "gpus": 8, "duration": 40}, name)


def node_of(gpus: list[int]) -> set[int]:
    return {g // 8 for g in gpus}


async def test_work_goes_only_to_nodes_whose_agent_is_alive_and_an_unbound_start_is_requeued_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = unique_topic("alive") + "."
    topics = Topics.with_prefix(prefix)
    agent = AgentService(kafka_bootstrap, SETTINGS, topics, initial_config=message("pool.configured", POOL, "cfg"))
    node0 = NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(tmp_path / "n0"), topics=topics, settings=BEATING)
    node1 = NodeAgent(kafka_bootstrap, 1, range(8, 16), FileBinder(tmp_path / "n1"), topics=topics, settings=BEATING)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))

    def planner():
        p = agent.dispatcher.interpreter.planner
        assert p is not None
        return p

    async def decisions() -> list[dict]:
        return [m["payload"] for _, m in await read_all(kafka_bootstrap, topics.decisions)]

    async def heard(nodes: set[int]) -> bool:
        p = agent.dispatcher.interpreter.planner
        return p is not None and set(p.heard) >= nodes

    try:
        await asyncio.wait_for(ready.wait(), 60)
        async with running(node0):
            async with running(node1):
                await wait_until(lambda: heard({0, 1}), "both node agents heard")
                # node 2's agent has the silence bound from the pool's first heartbeat to report
                await wait_until(lambda: _async(planner().closed == 0xFF << 16), "node 2 closed: no agent")
                await publish(kafka_bootstrap, topics.jobs, [job("a"), job("b"), job("c")], key=b"default")

                async def decided() -> bool:
                    return {d["job_id"] for d in await decisions()} >= {"a", "b", "c"}

                await wait_until(decided, "three decisions")
                first = {d["job_id"]: d for d in await decisions()}
                started = {j for j, d in first.items() if d["action"] == "start"}
                assert len(started) == 2 and first[(set("abc") - started).pop()]["action"] != "start"
                assert all(node_of(first[j]["gpus"]) <= {0, 1} for j in started)  # node 2 has no agent
                on1 = next(j for j in started if node_of(first[j]["gpus"]) == {1})

                async def confirmed() -> bool:
                    return not planner().unbound

                await wait_until(confirmed, "both starts bound by their node agents")
            # node 1's agent has stopped, with `on1` bound: past the silence bound, its node takes no new work
            await wait_until(lambda: _async(planner().unheard & 0xFF00 == 0xFF00), "node 1 silent")
            # one heartbeat of node 2 (an agent that beats once, then hangs): the waiting job starts
            # there within the silence bound, is never bound, and goes back to the queue once; by then
            # node 2 is silent, so it is not placed there again
            beat = message("node.heartbeat", {"node": 2, "interval_seconds": 1})
            await publish(kafka_bootstrap, topics.bindings, [beat], key=b"default")

            async def requeued() -> bool:
                return any("re-queued as never run" in d["reason"] for d in await decisions())

            await wait_until(requeued, "a start on node 2 re-queued")
            await asyncio.sleep(6)  # past another re-queue bound: none comes
            ds = await decisions()
            waiting = (set("abc") - started).pop()
            again = [d for d in ds if "re-queued as never run" in d["reason"]]
            assert [d["job_id"] for d in again] == [waiting]
            assert "GPUs 16-23 was not bound" in again[0]["reason"] and "node 2: its agent" in again[0]["reason"]
            assert on1 in planner().running and on1 not in planner().queued  # bound, still running
            assert [d["action"] for d in ds if d["job_id"] == on1] == ["start"]  # decided once, never again
            jobs = [m for _, m in await read_all(kafka_bootstrap, topics.jobs)]
            assert not [m for m in jobs if m["type"] == "job.failed"]  # silence fails nothing
            commits = [m["payload"] for _, m in await read_all(kafka_bootstrap, topics.commits)]
            starts = [c["assignments"][waiting] for c in commits if waiting in c.get("started", [])]
            assert [node_of(gpus) for gpus in starts] == [{2}]  # once, on node 2: the only node free and live
            assert not [d for d in ds if d["job_id"] == waiting and d["action"] == "start"]
            since = first[on1]["start_step"]
            assert all(on1 in c["assignments"] for c in commits if c["step"] >= since and not c.get("reactive"))
            held = [g for c in commits for holder, gs in c["assignments"].items() if holder != on1 for g in gs]
            assert not [g for g in held if 8 <= g < 16]  # nothing new on node 1 after it went silent
            rc, out = await cli("status", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, "--json")
            status = orjson.loads(out)
            assert rc == 0 and {r["id"]: r["binding"] for r in status["running"]}[on1] == "unconfirmed"
            agents = {n["node"]: (n["state"], n["agent"]) for n in status["nodes"]}
            assert agents[0] == ("up", "live") and agents[1][0] == "no agent" and agents[1][1].startswith("silent")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    rc, out = await cli("audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("; 0 mismatches"), out


async def _async(value: bool) -> bool:
    return value

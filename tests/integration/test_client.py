"""`gpualloc.client`: an upstream platform submits jobs and hears their decisions through a real
broker and a running agent; bad jobs are refused before they are sent; dead letters of its
submissions reach the caller."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.client import Client, Rejected
from gpualloc.schemas.settings import AgentSettings, RollingFullMode


async def test_a_job_the_contract_refuses_is_not_sent():
    client = Client("127.0.0.1:1")  # never started: validation comes first
    with pytest.raises(ValueError, match="priority"):
        await client.submit_job({"id": "a", "kind": "training", "priority": -1, "gpus": 2, "duration": 1})
    with pytest.raises(ValueError, match="gpus, duration"):
        await client.submit_job({"id": "a", "kind": "training", "priority": 1, "gpus": 2})
    with pytest.raises(ValueError, match="requests_per_s"):
        await client.report_traffic("chat")
    with pytest.raises(ValueError, match="peak_memory_gb"):
        await client.complete("a", used={"peak_memory_gb": -1})
    with pytest.raises(ValueError, match="^reason: Input should be 'out_of_memory'"):
        await client.fail("a", reason="oom")
    with pytest.raises(ValueError, match="^node: Input should be greater than or equal to 0$"):
        await client.node_status(-1, "drained")
    with pytest.raises(ValueError, match="^id: String should have at most 200 characters$"):  # one line, as the rest
        await client.cancel("x" * 201)


async def test_a_dead_letter_of_a_submission_reaches_its_caller():
    client = Client("127.0.0.1:1", pool="p")
    future = asyncio.get_running_loop().create_future()
    client._decisions["a"], client._events["e1"] = future, "a"
    letter = {
        "type": "input.rejected",
        "pool": "p",
        "payload": {"reason": "occurred_at: too far ahead", "original": orjson.dumps({"event_id": "e1"}).decode()},
    }
    client._answer({**letter, "pool": "other"})  # another pool's letter is not this client's
    assert not future.done()
    client._answer(letter)
    with pytest.raises(Rejected, match="too far ahead"):
        future.result()


@pytest.mark.kafka
async def test_submissions_get_their_decisions_through_a_running_agent(kafka_bootstrap):
    topics = Topics.with_prefix(unique_topic("client") + ".")
    agent = AgentService(
        kafka_bootstrap,
        AgentSettings(step_seconds=0.5, full_mode=RollingFullMode(every=0), group_id=unique_topic("g")),
        topics,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with Client(kafka_bootstrap, topics=topics, source="test") as client:
            with pytest.raises(TimeoutError, match="no decision"):  # not configured yet: the agent holds it
                await client.submit_job(
                    {"id": "early", "kind": "training", "priority": 1, "gpus": 1, "duration": 1}, timeout=2
                )
            await client.send("pool.configured", {"gpus": 8, "gpus_per_node": 8, "horizon": 6})
            await client.register_app({"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4})
            await client.report_traffic("chat", gpus=2)
            both = await asyncio.gather(
                client.submit_job({"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 3}),
                client.submit_job({"id": "b", "kind": "training", "priority": 1, "gpus": 4, "duration": 2}),
            )
            a, b = both
            assert (a.job_id, a.action, len(a.gpus)) == ("a", "start", 4)
            assert b.job_id == "b" and b.action in ("planned", "queued")
            again = await client.submit_job({"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 3})
            assert again.action == "rejected" and "already" in again.reason
            await client.cancel("b")
            await client.complete("a", used={"gpus": 4, "duration": 3})
            await client.fail("nobody")  # dead-lettered: no such job
        for _ in range(50):
            letters = await read_all(kafka_bootstrap, topics.deadletter)
            if letters:
                break
            await asyncio.sleep(0.2)
        assert [orjson.loads(m["payload"]["original"])["payload"]["id"] for m in letters] == ["nobody"]
        jobs = await read_all(kafka_bootstrap, topics.jobs)
        assert [m["type"] for m in jobs] == ["job.submitted"] * 4 + ["job.cancelled", "job.completed", "job.failed"]
        assert all(m["event_id"].startswith("test-") and m["pool"] == "default" for m in jobs)
        decided = {m["payload"]["job_id"] for m in await read_all(kafka_bootstrap, topics.decisions)}
        assert decided == {"early", "a", "b"}  # "early" was decided once the pool was configured
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

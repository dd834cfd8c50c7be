"""On a real broker: an agent, a job submitted twice (a duplicate id) and a bad app published raw;
`status`, `explain` and `tail` then tell one truth: the job runs (its second submission refused
beside it), the bad app was never registered, and tail's lines carry times, in time order."""

from __future__ import annotations

import asyncio
import io
from datetime import datetime, timezone

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.kafka_broker import unique_topic
from support.pool_agents import gpualloc_on, pool_agent

from gpualloc.agent.operator.status import read_status
from gpualloc.agent.operator.tail import tail
from gpualloc.bus.topics import Topics
from gpualloc.client import Client

JOB = {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 40}
BAD = {"id": "bad", "priority": 5, "min_gpus": 5, "max_gpus": 4}


def _envelope(event_id: str, kind: str, payload: dict) -> bytes:
    at = datetime.now(timezone.utc).isoformat()
    return orjson.dumps({"event_id": event_id, "type": kind, "occurred_at": at, "pool": "p", "payload": payload})


@pytest.mark.kafka
async def test_status_explain_and_tail_agree_on_a_duplicate_job_and_a_dead_lettered_app(kafka_bootstrap):
    prefix = unique_topic("truth") + "."
    topics = Topics.with_prefix(prefix)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        async with pool_agent(kafka_bootstrap, topics) as halt:
            await producer.start()
            async with Client(kafka_bootstrap, pool="p", topics=topics) as client:
                await client.send("pool.configured", {"gpus": 32, "gpus_per_node": 8, "horizon": 6})
                await client.register_app({"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4})
                first = await client.submit_job(JOB)
                assert first.action == "start"
                # the same file again, and an app no pool can hold, both published raw (no client checks)
                await producer.send_and_wait(topics.jobs, _envelope("a-again", "job.submitted", JOB), key=b"p")
                await producer.send_and_wait(topics.traffic, _envelope("bad-1", "app.registered", BAD), key=b"p")
                for _ in range(100):  # until a commit after both answers
                    status = await read_status(kafka_bootstrap, topics, "p")
                    if status and status["commit"] and status["commit"]["seq"] >= 3:
                        break
                    await asyncio.sleep(0.3)
            await halt()  # the pool still: every command reads the same commit
        gpualloc = gpualloc_on(kafka_bootstrap, prefix)
        status, as_json, job, app, chat = await asyncio.gather(
            *(
                asyncio.to_thread(gpualloc, *args)
                for args in (
                    ["status"],
                    ["status", "--json"],
                    ["explain", "a"],
                    ["explain", "bad"],
                    ["explain", "chat"],
                )
            )
        )
        for run in (status, as_json, job, app, chat):
            assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        view = orjson.loads(as_json.stdout)
        (running,) = view["running"]
        assert running["id"] == "a" and [a["id"] for a in view["apps"]] == ["chat"]  # `bad` never registered
        assert f"  a                GPUs {running['gpus']}" in status.stdout and "apps (1):" in status.stdout
        # the registered app: explain's last lines say what status says of it, word for word
        (told,) = [line for line in status.stdout.splitlines() if line.startswith("  chat  ")]
        *_, now, forecast = chat.stdout.splitlines()
        assert now.endswith(" - registered: " + told.split(None, 1)[1])
        assert forecast.strip() in [line.strip() for line in status.stdout.splitlines()]
        assert f"at demand quantile {view['apps'][0]['forecast']['quantile']:g}: " in forecast
        held = [line for line in status.stdout.splitlines() if "GPUs held by" in line]
        assert sum(int(line.split("now: ")[1].split(" GPU")[0]) for line in held) == 4  # never 0 while bound
        committed = next(line for line in status.stdout.splitlines() if line.startswith("now: ")).split(" (seq")[0]
        last = job.stdout.splitlines()[-1]
        assert last.startswith(committed) and f" - running on GPUs {running['gpus']} since step " in last
        assert last.endswith(
            "; a second submission (event a-again) was rejected: job id 'a' is already queued or running"
        )
        assert "never planned" not in job.stdout
        last = app.stdout.splitlines()[-1]
        assert last.startswith(committed) and " - rejected, never registered: " in last and "waiting" not in app.stdout
        assert "rejected app.registered (event bad-1, " in app.stdout

        out, stopped = io.StringIO(), asyncio.Event()
        reading = asyncio.create_task(tail(kafka_bootstrap, topics, stopped, True, out))
        for _ in range(100):  # until the backlog is printed
            if "committed step" in out.getvalue() and "rejected  app.registered" in out.getvalue():
                break
            await asyncio.sleep(0.1)
        stopped.set()
        await asyncio.wait_for(reading, 30)
        lines = out.getvalue().splitlines()
        assert "input     app.registered bad: priority 5, 5-4 GPUs (event bad-1)" in [
            x.split("  ", 1)[1] for x in lines
        ]
        assert any(x.split("  ", 1)[1].startswith("rejected  app.registered bad (event bad-1) - ") for x in lines)
        assert not any("bad registered" in x or "registered:" in x for x in lines)
        assert any("decided   a: rejected a second submission (event a-again); a stays as it was" in x for x in lines)
        times = [x.split("  ", 1)[0] for x in lines]
        assert all(t.endswith("Z") and t[:2] == "20" for t in times) and times == sorted(times)
    finally:
        await producer.stop()


@pytest.mark.kafka
async def test_tail_follows_topics_created_after_it_started_and_prints_each_record_once(kafka_bootstrap):
    topics = Topics.with_prefix(unique_topic("follow") + ".")
    out, stopped = io.StringIO(), asyncio.Event()
    reading = asyncio.create_task(tail(kafka_bootstrap, topics, stopped, False, out))
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        await asyncio.sleep(0.5)  # tail has looked: no topic yet
        await producer.start()
        await producer.send_and_wait(topics.config, _envelope("n1", "node.status", {"node": 1, "state": "drained"}))
        for _ in range(100):  # the topic found on a later look, read whole
            if "(event n1)" in out.getvalue():
                break
            await asyncio.sleep(0.1)
        await producer.send_and_wait(topics.config, _envelope("n2", "node.status", {"node": 1, "state": "up"}))
        for _ in range(100):  # then followed live
            if "(event n2)" in out.getvalue():
                break
            await asyncio.sleep(0.1)
    finally:
        stopped.set()
        await producer.stop()
        await asyncio.wait_for(reading, 30)
    told = [x.split("  ", 1)[1] for x in out.getvalue().splitlines()]
    assert told == [
        "input     node.status node 1 drained (event n1)",
        "input     node.status node 1 up (event n2)",
    ]

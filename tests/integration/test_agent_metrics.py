"""The agent's metrics and health endpoints: through a real broker, `/readyz` turns ready once
the state is restored, and `/metrics` counts what the agent published."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client import CollectorRegistry, generate_latest
from support.http_metrics import get, samples
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.metrics import AgentMetrics, HealthServer, PoolsCollector, reason_label
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics, key_of
from gpualloc.schemas.settings import AgentSettings, RollingFullMode


def test_reasons_become_bounded_labels():
    assert reason_label("priority: Input should be greater than 0") == "priority"
    assert reason_label("not JSON (unexpected character: line 1)") == "not JSON"
    assert len(reason_label("x" * 500 + ": y")) == 40 and reason_label(":") == "other"


def test_a_group_member_shows_its_pools_metrics_as_one_family_each():
    a, b = AgentMetrics("a"), AgentMetrics("b")
    a.decided("start", 0.01)
    b.decided("start", 0.02)
    b.decided("queued", 0.02)
    running = [a.registry, b.registry]
    registry = CollectorRegistry()
    registry.register(PoolsCollector(lambda: running))
    text = generate_latest(registry).decode()
    assert text.count("# TYPE gpualloc_decisions_total counter") == 1  # one family, both pools' series
    got = samples(text)
    assert got[("gpualloc_group_pools", ())] == 2
    assert got[("gpualloc_decisions_total", (("action", "start"), ("pool", "a")))] == 1
    assert got[("gpualloc_decisions_total", (("action", "queued"), ("pool", "b")))] == 1
    assert got[("gpualloc_decision_latency_seconds_count", (("pool", "b"),))] == 2
    running.pop()  # pool b handed over: its series leave with it
    got = samples(generate_latest(registry).decode())
    assert got[("gpualloc_group_pools", ())] == 1 and not any(dict(k[1]).get("pool") == "b" for k in got)


async def test_health_answers_from_the_loop_and_readiness_follows_the_agent():
    metrics, state = AgentMetrics("p"), {"ready": False}
    server = HealthServer(metrics.registry, lambda: state["ready"])
    port = await server.start(0, "127.0.0.1")
    try:
        loop = asyncio.get_running_loop()
        assert (await loop.run_in_executor(None, get, port, "/healthz"))[0] == 200
        assert (await loop.run_in_executor(None, get, port, "/readyz"))[0] == 503
        state["ready"] = True
        assert (await loop.run_in_executor(None, get, port, "/readyz"))[0] == 200
        before = {name for name, _ in samples((await loop.run_in_executor(None, get, port, "/metrics"))[1])}
        assert before >= {
            "gpualloc_decisions_total",
            "gpualloc_decision_latency_seconds_count",
            "gpualloc_queue_depth",
            "gpualloc_gpus",
            "gpualloc_utilization",
            "gpualloc_realtime_shortfall_gpus",
            "gpualloc_full_mode_gap",
            "gpualloc_full_mode_adopted_total",
            "gpualloc_commits_total",
        }
        metrics.decided("start", 0.003)
        status, text = await loop.run_in_executor(None, get, port, "/metrics")
        assert status == 200 and samples(text)[("gpualloc_decisions_total", (("action", "start"), ("pool", "p")))] == 1
        assert (await loop.run_in_executor(None, get, port, "/nope"))[0] == 404
    finally:
        await server.close()


@pytest.mark.kafka
async def test_the_agent_serves_its_metrics_through_a_real_broker(kafka_bootstrap):
    topics = Topics.with_prefix(unique_topic("metrics") + ".")
    with socket.socket() as probe:  # a free port, for `run` to serve on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = AgentService(
        kafka_bootstrap,
        AgentSettings(
            step_seconds=0.5, full_mode=RollingFullMode(every=0), metrics_port=port, group_id=unique_topic("g")
        ),
        topics,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(ready.wait(), 30)
        assert (await loop.run_in_executor(None, get, port, "/readyz"))[0] == 200
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            for n, (kind, payload) in enumerate(
                [
                    ("pool.configured", {"gpus": 8, "gpus_per_node": 8, "horizon": 6}),
                    ("app.registered", {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4}),
                    ("traffic.observed", {"app": "chat", "gpus": 3}),
                    ("job.submitted", {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 3}),
                    ("job.submitted", {"id": "b", "kind": "training", "priority": -1, "gpus": 1, "duration": 1}),
                ]
            ):
                m = {
                    "event_id": f"m{n}",
                    "type": kind,
                    "occurred_at": "2026-12-01T00:00:00Z",
                    "pool": "default",
                    "payload": payload,
                }
                await producer.send_and_wait(topics.of_type(kind), orjson.dumps(m), key=key_of(m).encode())
        finally:
            await producer.stop()
        for _ in range(100):
            got = samples((await loop.run_in_executor(None, get, port, "/metrics"))[1])
            if (
                got.get(("gpualloc_commits_total", (("pool", "default"),)), 0) >= 2
                and got.get(("gpualloc_decisions_total", (("action", "start"), ("pool", "default"))), 0) >= 1
            ):
                break
            await asyncio.sleep(0.2)
        assert got[("gpualloc_decisions_total", (("action", "start"), ("pool", "default")))] == 1
        assert got[("gpualloc_dead_letters_total", (("pool", "default"), ("reason", "priority")))] == 1
        assert got[("gpualloc_decision_latency_seconds_count", (("pool", "default"),))] == 1
        assert got[("gpualloc_gpus", (("pool", "default"), ("state", "batch")))] == 4
        # the 3 observed, or above them by the forecaster's prior spread once the step moves on
        realtime = got[("gpualloc_gpus", (("pool", "default"), ("state", "realtime")))]
        assert realtime in (3, 4)
        assert got[("gpualloc_utilization", (("pool", "default"),))] == pytest.approx((4 + realtime) / 8)
        assert got[("gpualloc_realtime_shortfall_gpus", (("pool", "default"),))] == 0
        lags = [v for (name, labels), v in got.items() if name == "gpualloc_consumer_lag"]
        assert lags and all(v == 0 for v in lags)
        assert len([m for m in await read_all(kafka_bootstrap, topics.decisions)]) == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert agent.ready is False
    with pytest.raises(OSError):  # the endpoints closed with the agent
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)

"""Failures the agent cannot ride out are loud and leave nothing behind, on a real broker: a pass
that can never be published (a message over the producer's limit) fails without looping,
readiness and a metric say so, nothing of it is counted or published, and `audit` and `status`
report the pool as stalled; session restarts leave no solver process; SIGTERM ends the agent
within seconds while full mode is solving."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError
from support.http_metrics import get, samples
from support.kafka_broker import read_all, unique_topic
from test_solve_process import children

from gpualloc.agent.cli.running import agent_argv
from gpualloc.agent.operator.audit import audit
from gpualloc.agent.service import agent_service
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus import clients
from gpualloc.bus.topics import Topics, key_of
from gpualloc.schemas.settings import AgentSettings, FullModeOptions, RollingFullMode

pytestmark = pytest.mark.kafka

POOL = {"gpus": 64, "gpus_per_node": 8, "horizon": 24, "step_minutes": 60, "swap_cap": 2}
PROFILE = [2, 2, 3, 4, 6, 8, 9, 10, 10, 9, 8, 6] * 2


def inputs(jobs: int, seed: int = 7) -> list[dict]:
    """A pool of 64 GPUs with two apps and a backlog whose full-mode model solves for long
    (the MILP runs to its time limit here)."""
    rng = random.Random(seed)
    out = [
        ("pool.configured", POOL),
        (
            "app.registered",
            {"id": "chat", "priority": 9, "min_gpus": 2, "max_gpus": 13, "rps_per_gpu": 100, "profile": PROFILE},
        ),
        (
            "app.registered",
            {
                "id": "search",
                "priority": 8,
                "min_gpus": 2,
                "max_gpus": 8,
                "swap_cap": 1,
                "rps_per_gpu": 100,
                "profile": [p // 2 + 1 for p in PROFILE],
            },
        ),
    ]
    out += [
        (
            "job.submitted",
            {
                "id": f"job-{k}",
                "kind": "training",
                "priority": rng.randint(1, 9),
                "gpus": rng.choice([1, 2, 4, 8, 8, 8]),
                "duration": rng.randint(4, 16),
            },
        )
        for k in range(jobs)
    ]
    now = datetime.now(timezone.utc).isoformat()
    return [
        {"event_id": f"in-{n}", "type": kind, "occurred_at": now, "pool": "default", "payload": payload}
        for n, (kind, payload) in enumerate(out)
    ]


async def publish(bootstrap: str, topics: Topics, messages: list[dict]) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all") as producer:
        for m in messages:
            await producer.send(topics.of_type(m["type"]), orjson.dumps(m), key=key_of(m).encode())
        await producer.flush()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_a_pass_that_cannot_be_published_fails_loudly_without_looping(kafka_bootstrap, monkeypatch, caplog):
    limit = 300  # below any pass's messages: every pass that has something to publish fails
    made = clients.producer

    def small(bootstrap: str, **kwargs):
        if "transactional_id" in kwargs:
            kwargs["max_request_size"] = limit
        return made(bootstrap, **kwargs)

    monkeypatch.setattr(clients, "producer", small)
    monkeypatch.setattr(agent_service, "FAILED_RETRY_FIRST_S", 3.0)
    topics, port = Topics.with_prefix(unique_topic("failures") + "."), free_port()
    await publish(kafka_bootstrap, topics, inputs(jobs=12))
    agent = AgentService(
        kafka_bootstrap,
        AgentSettings(
            step_seconds=0.5, full_mode=RollingFullMode(every=0), metrics_port=port, group_id=unique_topic("g")
        ),
        topics,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    caplog.set_level(logging.ERROR, logger="gpualloc.agent")
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        for _ in range(100):
            got = samples((await loop.run_in_executor(None, get, port, "/metrics"))[1])
            if got[("gpualloc_publish_failures_total", (("kind", "too_large"), ("pool", "default")))] >= 1:
                break
            await asyncio.sleep(0.1)
        assert agent.readiness.failure is not None
        assert (await loop.run_in_executor(None, get, port, "/readyz"))[0] == 503
        assert got[("gpualloc_publish_failing", (("pool", "default"),))] == 1
        await asyncio.sleep(8)  # the retries come after 3 s, then 6 s: no loop
        got = samples((await loop.run_in_executor(None, get, port, "/metrics"))[1])
        failures = got[("gpualloc_publish_failures_total", (("kind", "too_large"), ("pool", "default")))]
        assert 1 <= failures <= 3
        assert (await loop.run_in_executor(None, get, port, "/readyz"))[0] == 503
        # decisions were made in every failed pass, and none is counted: none was published
        assert sum(v for (name, _), v in got.items() if name == "gpualloc_decisions_total") == 0
        assert got[("gpualloc_commits_total", (("pool", "default"),))] == 0
        assert agent.stats.decisions == agent.stats.commits == agent.stats.transactions == 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "cannot be published" in r.getMessage()]
    assert len(errors) == failures
    record = errors[0]
    assert record.message_type in ("allocation.decided", "plan.committed", "pass.recorded")
    assert record.bytes > limit and f"{record.bytes:,} bytes" in record.getMessage()
    assert record.message_type in record.getMessage() and "max_request_size" in record.getMessage()
    assert await read_all(kafka_bootstrap, topics.decisions) == []
    assert await read_all(kafka_bootstrap, topics.commits) == []

    result = await audit(kafka_bootstrap, topics, "default")
    assert not result.ok and result.stalled and result.waiting == 15
    assert "pool 'default': 15 inputs on the bus, no commit or decision published" in result.lines()
    status = subprocess.run(
        [sys.executable, "-m", "gpualloc", "status", "--bootstrap", kafka_bootstrap, "--topic-prefix", topics.prefix],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 1, status.stderr
    assert "pool 'default': 15 inputs on the bus, no commit or decision published" in status.stderr


async def test_a_message_the_broker_refuses_aborts_the_pass_whole(kafka_bootstrap, monkeypatch, caplog):
    """The broker's own limit (a decisions topic taking 300 bytes a message), below the
    producer's: the refusal comes in a message's delivery only, and the pass is aborted whole
    (nothing of it on any topic), not committed without the refused message."""
    monkeypatch.setattr(agent_service, "FAILED_RETRY_FIRST_S", 30.0)
    topics = Topics.with_prefix(unique_topic("broker-limit") + ".")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topics.decisions, 1, 1, topic_configs={"max.message.bytes": "300"})])
    finally:
        await admin.close()
    await publish(kafka_bootstrap, topics, inputs(jobs=4))
    agent = AgentService(
        kafka_bootstrap,
        AgentSettings(step_seconds=0.5, full_mode=RollingFullMode(every=0), group_id=unique_topic("g")),
        topics,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    caplog.set_level(logging.ERROR, logger="gpualloc.agent")
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        for _ in range(150):
            if agent.readiness.failure is not None:
                break
            await asyncio.sleep(0.1)
        assert agent.readiness.failure is not None and agent.stats.transactions == 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    errors = [r.getMessage() for r in caplog.records if "cannot be published" in r.getMessage()]
    assert errors and "allocation.decided (key " in errors[0] and "the broker refused it" in errors[0]
    for topic in (topics.decisions, topics.commits, topics.ledger):
        assert await read_all(kafka_bootstrap, topic) == [], topic


async def test_session_restarts_leave_no_solver_process(kafka_bootstrap, monkeypatch):
    """The broker 'lost' every few passes while full mode solves (each session starts its
    solver processes): at no time more than a session's two (plan ahead and full mode)."""
    monkeypatch.setattr(agent_service, "RETRY_FIRST_S", 0.2)
    monkeypatch.setattr(agent_service, "RETRY_MAX_S", 0.2)
    topics = Topics.with_prefix(unique_topic("restarts") + ".")
    await publish(kafka_bootstrap, topics, inputs(jobs=30))
    full = RollingFullMode(every=1, options=FullModeOptions(time_limit=60))
    agent = AgentService(
        kafka_bootstrap, AgentSettings(step_seconds=1.0, full_mode=full, group_id=unique_topic("g")), topics
    )
    passes, sessions = 0, []
    real_pass = AgentService._pass

    async def flaky(self, consumer, producer):
        nonlocal passes
        passes += 1
        worker, ahead = self.boundaries.full_mode.worker, self.boundaries.ahead
        if worker is not None and worker.busy and ahead is not None and passes % 3 == 0:
            sessions.append((worker.pid, ahead.process.pid))
            raise KafkaConnectionError("the test took the broker away")
        await real_pass(self, consumer, producer)

    monkeypatch.setattr(AgentService, "_pass", flaky)
    before = children()
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    most = 0
    try:
        deadline = time.monotonic() + 60
        while not (len(sessions) >= 4 and agent.ready) and time.monotonic() < deadline:
            most = max(most, len(children() - before))
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert len(sessions) >= 4, "full mode did not solve in the sessions"
    assert most <= 2
    ended = {pid for pair in sessions for pid in pair if pid is not None}
    assert len(ended) >= 8 and not ended & children()
    assert children() == before


def test_sigterm_ends_the_agent_within_seconds_while_full_mode_solves(kafka_bootstrap, tmp_path):
    topics = Topics.with_prefix(unique_topic("sigterm") + ".")
    asyncio.run(publish(kafka_bootstrap, topics, inputs(jobs=30)))
    log = (tmp_path / "agent.log").open("wb")
    agent = subprocess.Popen(
        agent_argv(
            kafka_bootstrap,
            topics.prefix,
            "--step-seconds",
            "1",
            "--full-mode-every",
            "1",
            "--full-mode-time-limit",
            "300",
        ),
        stderr=log,
    )
    try:
        busy = 0.0
        deadline = time.monotonic() + 60
        while busy < 0.5 and time.monotonic() < deadline:  # a solver using most of a core: full mode solving
            before = _cpu(children(agent.pid))
            time.sleep(1.0)
            busy = _cpu(children(agent.pid)) - before
        assert busy >= 0.5, (tmp_path / "agent.log").read_text()
        solvers = children(agent.pid)
        began = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(timeout=30)
        took = time.monotonic() - began
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert code == 0, (tmp_path / "agent.log").read_text()
    assert took < 10
    assert not [pid for pid in solvers if os.path.exists(f"/proc/{pid}")]


def _cpu(pids: set[int]) -> float:
    """User and system CPU seconds of `pids` so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except FileNotFoundError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


async def test_full_mode_too_large_for_its_time_limit_is_skipped_said_once_and_in_the_commits(kafka_bootstrap, caplog):
    topics = Topics.with_prefix(unique_topic("skipped") + ".")
    await publish(kafka_bootstrap, topics, inputs(jobs=30))
    full = RollingFullMode(every=1, options=FullModeOptions(time_limit=0.5))  # no model of this pool builds in 0.5 s
    agent = AgentService(
        kafka_bootstrap, AgentSettings(step_seconds=0.5, full_mode=full, group_id=unique_topic("g")), topics
    )
    caplog.set_level(logging.WARNING, logger="gpualloc.agent")
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        for _ in range(100):
            if agent.stats.commits >= 5:
                break
            await asyncio.sleep(0.1)
        worker = agent.boundaries.full_mode.worker
        assert worker is not None and worker.pid is None  # no process started for full mode
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    said = [r.getMessage() for r in caplog.records if "full mode not started" in r.getMessage()]
    assert len(said) == 1 and "nonzeros: building it takes" in said[0]
    commits = [m["payload"] for m in await read_all(kafka_bootstrap, topics.commits)]
    notes = [c.get("full_mode") for c in commits[1:]]  # the first commit comes before any launch
    assert len(notes) >= 4 and all(n.startswith("skipped: model of ~") for n in notes)
    result = await audit(kafka_bootstrap, topics, "default")
    assert result.ok, result.lines()
    status = subprocess.run(
        [sys.executable, "-m", "gpualloc", "status", "--bootstrap", kafka_bootstrap, "--topic-prefix", topics.prefix],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0 and "\nfull mode: skipped: model of ~" in status.stdout, status.stderr

"""What real producers write, read by the agents on a real broker: the Apache Kafka Java client
(tests/java/ContractProducer.java) and aiokafka, with every codec (none, gzip, snappy, lz4, zstd),
a batch holding headers, null keys and a tombstone among good messages. The pool agent decides
every job once, dead-letters the tombstone once and goes on deciding; the node agent binds
compressed commits and skips tombstones, live and in its resync. The bug report's case (zstd from
the Java client, then a restart) also runs through `gpualloc agent`, and `gpualloc audit` replays
its ledger, reading the compressed batch and the tombstone back.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.java_producer import CODECS, JavaProducer, Rec
from support.kafka_broker import read_all, unique_topic
from test_agent_group import Bus, job, message
from test_audit import cli
from test_node_agent_kafka import WAIT_S, commit_msg, files_are, publish, running, wait_until

from gpualloc.agent.node.binders import FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.topics import Topics, key_of
from gpualloc.schemas.events import PoolConfigured
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

POOL = "default"
SETTINGS = AgentSettings(step_seconds=0.5, policy="heuristic", full_mode=RollingFullMode(every=0))
CONFIG = PoolConfigured(gpus=16, gpus_per_node=8, horizon=12)
HEADERS = (
    ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("content-type", "application/json"),
)


@pytest.fixture(scope="session")
def java(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> JavaProducer:
    """Compiled once, after the broker fixture: a broker it starts itself fetches the jars."""
    return JavaProducer.build(tmp_path_factory.mktemp("java"))


def contract(m: dict, topics: Topics) -> Rec:
    """`m` on its topic, keyed as the contract says."""
    return Rec(topics.of_type(m["type"]), key_of(m), orjson.dumps(m))


def upstream(topics: Topics) -> tuple[list[Rec], Rec, set[str]]:
    """A platform's batch: the pool's configuration, then four jobs with headers, null keys and a
    tombstone among them. Returns the records, the tombstone and the ids of the jobs."""
    jobs = [job(POOL, n) for n in range(4)]
    first, no_key, plain, last = (contract(m, topics) for m in jobs)
    tombstone = Rec(topics.jobs, POOL, None)
    records = [
        replace(contract(message("pool.configured", CONFIG, POOL, "config"), topics), headers=HEADERS),
        replace(first, headers=HEADERS),
        replace(no_key, key=None),
        tombstone,
        plain,
        replace(last, key=None, headers=HEADERS),
    ]
    return records, tombstone, {m["payload"]["id"] for m in jobs}


async def aiokafka_send(bootstrap: str, records: list[Rec], codec: str) -> None:
    """The records through aiokafka's producer, queued together so they share compressed batches."""
    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=200,
        compression_type=None if codec == "none" else codec,
    ) as producer:
        sent = [
            await producer.send(
                r.topic,
                r.value,
                key=None if r.key is None else r.key.encode(),
                headers=[(k, v.encode()) for k, v in r.headers],
            )
            for r in records
        ]
        await asyncio.gather(*sent)


class Served:
    """An AgentService in the shape `running` drives (`run(stop)`, `ready`): it runs in a task, and
    whatever exception stops it fails the test."""

    def __init__(self, agent: AgentService) -> None:
        self.agent, self.ready = agent, asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        await self.agent.run(stop, self.ready)


def counted(agent: AgentService, decisions: int, rejected: int) -> Callable[[], Awaitable[bool]]:
    """A check for `wait_until` on the agent's own counters (cheap; the topics are checked after)."""

    async def check() -> bool:
        return agent.stats.decisions >= decisions and agent.stats.rejected >= rejected

    return check


async def check_outputs(bootstrap: str, topics: Topics, records: list[Rec], tombstone: Rec, jobs: set[str]) -> None:
    """Every job decided exactly once; the tombstone, and nothing else, dead-lettered once, naming the value."""
    decided = Counter(m["payload"]["job_id"] for m in await read_all(bootstrap, topics.decisions))
    assert decided == Counter(jobs), decided
    letters = [m["payload"] for m in await read_all(bootstrap, topics.deadletter)]
    offset = [r for r in records if r.topic == topics.jobs].index(tombstone)  # one partition: the send order
    assert [(d["topic"], d["partition"], d["offset"], d["original"]) for d in letters] == [(topics.jobs, 0, offset, "")]
    assert letters[0]["reason"].startswith("value: null"), letters[0]["reason"]


async def agent_reads(bootstrap: str, send: Callable[[list[Rec]], Awaitable[None]]) -> None:
    """A pool agent on fresh topics reads the batch `send` produces, then decides a job sent after
    it, and stops cleanly (an exception that ended it fails the test)."""
    topics = Topics.with_prefix(unique_topic("producers") + ".")
    records, tombstone, jobs = upstream(topics)
    late = job(POOL, len(jobs))
    agent = AgentService(bootstrap, SETTINGS, topics)
    async with running(Served(agent)):
        await send(records)
        await wait_until(counted(agent, len(jobs), 1), f"{len(jobs)} decisions and a dead letter")
        await publish(bootstrap, topics.jobs, late)
        await wait_until(counted(agent, len(jobs) + 1, 1), "the decision of a job sent after the batch")
    await check_outputs(bootstrap, topics, records, tombstone, jobs | {late["payload"]["id"]})


@pytest.mark.parametrize("codec", CODECS)
async def test_the_agent_reads_the_java_client(kafka_bootstrap: str, java: JavaProducer, codec: str) -> None:
    await agent_reads(kafka_bootstrap, lambda records: java.send(kafka_bootstrap, records, codec))


@pytest.mark.parametrize("codec", CODECS)
async def test_the_agent_reads_aiokafka(kafka_bootstrap: str, codec: str) -> None:
    await agent_reads(kafka_bootstrap, lambda records: aiokafka_send(kafka_bootstrap, records, codec))


def start(command: list[str], log: Path) -> subprocess.Popen:
    """The command in its own process, its stderr to `log`."""
    with log.open("wb") as out:  # the child has its own copy of the descriptor
        return subprocess.Popen(command, stderr=out)


def stopped(proc: subprocess.Popen, log: Path) -> str:
    """SIGTERM; the process must exit 0. Its summary line (`agent stopped: ...`: its log, JSON a
    line off a terminal)."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT_S) == 0, log.read_text()[-3000:]
    return json.loads(log.read_text().strip().splitlines()[-1])["event"]


async def test_the_bug_report_zstd_from_java_then_a_restart(
    kafka_bootstrap: str, java: JavaProducer, tmp_path: Path
) -> None:
    """`gpualloc agent` decides a zstd batch from the Java client with a tombstone in it and exits 0
    on SIGTERM; started again it recovers, decides nothing twice and decides a new job; the audit
    replays the whole ledger, reading the compressed batch back, and reproduces everything."""
    prefix = unique_topic("zstd") + "."
    topics = Topics.with_prefix(prefix)
    records, tombstone, jobs = upstream(topics)
    late = job(POOL, len(jobs))
    bus_flags = ["--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]
    command = [sys.executable, "-m", "gpualloc", "agent", *bus_flags, "--policy", "heuristic", "--step-seconds", "0.5"]
    await ensure_topics(kafka_bootstrap, topics, 1, -1)  # as operators would, before producers write
    bus = Bus(kafka_bootstrap, topics)
    await bus.producer.start()
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(start(command, logs[0]))
        await java.send(kafka_bootstrap, records, "zstd")
        assert jobs <= {d["job_id"] for d in await bus.decided(jobs, WAIT_S)}
        assert re.search(rf", {len(jobs)} decisions, \d+ commits, 1 dead-lettered$", stopped(procs[0], logs[0]))

        procs.append(start(command, logs[1]))
        await bus.send(late)
        assert late["payload"]["id"] in {d["job_id"] for d in await bus.decided(jobs | {late["payload"]["id"]}, WAIT_S)}
        assert re.search(r", 1 decisions, \d+ commits, 0 dead-lettered$", stopped(procs[1], logs[1]))
    finally:
        await bus.producer.stop()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    await check_outputs(kafka_bootstrap, topics, records, tombstone, jobs | {late["payload"]["id"]})
    rc, out = await cli("audit", *bus_flags)
    assert rc == 0, out[-3000:]
    assert re.fullmatch(
        rf"audit {POOL}: {len(jobs) + 1} decisions, \d+ commits reproduced; 0 mismatches", out.strip().splitlines()[-1]
    ), out[-3000:]


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
async def test_the_node_agent_binds_compressed_commits(
    kafka_bootstrap: str, java: JavaProducer, tmp_path: Path, codec: str
) -> None:
    """Commits from the Java client in one compressed batch, with tombstones (one newest) and a
    commit with headers and one without a key among them: bound live, and by a resync from them."""
    topics = Topics.with_prefix(unique_topic("node") + ".")
    tombstone = Rec(topics.commits, POOL, None)
    first, second, third = (
        contract(commit_msg(seq, assignments, started), topics)
        for seq, assignments, started in [
            (1, {"j1": [0, 1]}, ["j1"]),
            (2, {"j1": [0, 1], "app": [4]}, []),
            (3, {"app": [4, 5], "j2": [2, 3]}, ["j2"]),
        ]
    )
    records = [first, tombstone, replace(second, headers=HEADERS), replace(third, key=None), tombstone]
    expected = {"app": [4, 5], "j2": [2, 3]}  # j1 released, app grown, j2 bound
    live, resynced = tmp_path / "live", tmp_path / "resynced"
    async with running(NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(live), topics=topics)):
        await java.send(kafka_bootstrap, records, codec)
        await files_are(live, expected)
    async with running(NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(resynced), topics=topics)):
        await files_are(resynced, expected)

"""Node agents against a real broker: fast path, commit reconcile, resync on restart, reports,
job.failed on a failed bind, malformed messages skipped. Every wait is bounded (WAIT_S)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from support.kafka_broker import unique_topic

from gpualloc.agent.node.binders import BindError, FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.bus.topics import Topics, decode, encode
from gpualloc.schemas.commits import split
from gpualloc.schemas.events import BindingReported, JobRef, envelope
from gpualloc.schemas.published import AllocationDecided, PlanCommitted

pytestmark = pytest.mark.kafka

WAIT_S = 30
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def commit_msg(seq: int, assignments: dict[str, list[int]], started: list[str] = (), pool: str = "default") -> dict:
    payload = PlanCommitted(
        step=seq,
        seq=seq,
        step_start=NOW,
        assignments=assignments,
        source="heuristic",
        objective=0.0,
        started=list(started),
    )
    return envelope("plan.committed", payload, NOW, uuid.uuid4().hex, pool=pool)


def start_msg(job_id: str, gpus: list[int], step: int) -> dict:
    payload = AllocationDecided(
        job_id=job_id,
        action="start",
        gpus=gpus,
        start_step=step,
        reason="test",
        input_event_id=uuid.uuid4().hex,
        latency_ms=0.1,
    )
    return envelope("allocation.decided", payload, NOW, uuid.uuid4().hex)


async def publish(bootstrap: str, topic: str, *messages: dict | bytes, key: str = "default") -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for m in messages:
            await producer.send_and_wait(topic, m if isinstance(m, bytes) else encode(m), key=key.encode())


async def read_all(bootstrap: str, topic: str) -> list[tuple[str, dict]]:
    """(key, message) of every message in a one-partition topic so far."""
    async with AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
    ) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[tuple[str, dict]] = []
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                out.extend((r.key.decode(), decode(r.value)) for r in records)
        return out


async def wait_until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {WAIT_S}s waiting for {what}")
        await asyncio.sleep(0.1)


async def files_are(d: Path, expected: dict[str, list[int]]) -> None:
    async def check() -> bool:
        return FileBinder(d).bound() == expected

    await wait_until(check, f"binding files in {d.name} == {expected} (now {FileBinder(d).bound()})")


@contextlib.asynccontextmanager
async def running(agent: NodeAgent) -> AsyncIterator[NodeAgent]:
    """The agent running in a task, resynced and following its topics; stopped on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    ready = asyncio.create_task(agent.ready.wait())
    try:
        await asyncio.wait({task, ready}, timeout=WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises what stopped it
        assert agent.ready.is_set(), "the node agent did not get ready"
        yield agent
    finally:
        ready.cancel()
        stop.set()
        await asyncio.wait_for(task, WAIT_S)


def reports(messages: list[tuple[str, dict]], node: int) -> list[tuple[str, str, list[int]]]:
    out = []
    for key, m in messages:
        assert key == m["pool"]  # inputs are keyed by pool
        if m["type"] == "node.heartbeat":  # the agent's liveness, beside its reports
            continue
        r = BindingReported.model_validate(m["payload"])
        assert m["type"] == "binding.reported"
        if r.node == node:
            out.append((r.status, r.job_id, r.gpus))
    return out


@pytest.fixture
def topics() -> Topics:
    return Topics.with_prefix(unique_topic("n") + ".")


async def test_two_nodes_follow_commits_and_resync_on_restart(
    kafka_bootstrap: str, topics: Topics, tmp_path: Path
) -> None:
    d0, d1 = tmp_path / "node0", tmp_path / "node1"
    node0 = NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(d0), topics=topics)
    node1 = NodeAgent(kafka_bootstrap, 1, range(8, 16), FileBinder(d1), topics=topics)
    async with running(node0), running(node1):
        # the fast path: a start spanning both nodes binds each node's part at once
        await publish(kafka_bootstrap, topics.decisions, start_msg("j1", [6, 7, 8, 9], 1), key="j1")
        await files_are(d0, {"j1": [6, 7]})
        await files_are(d1, {"j1": [0, 1]})
        c3 = commit_msg(3, {"app": [0, 1, 2, 3], "j2": [12, 13], "j3": [10]}, ["j3"])
        await publish(
            kafka_bootstrap,
            topics.commits,
            commit_msg(1, {"j1": [6, 7, 8, 9], "app": [0, 1]}, ["j1"]),
            commit_msg(2, {"j1": [6, 7, 8, 9], "app": [0, 1, 2], "j2": [12, 13]}, ["j2"]),
            c3,
            c3,  # a redelivery
            commit_msg(2, {"stale": [0]}),  # an older seq arriving late
            commit_msg(4, {"app": [0, 1, 2, 3], "j2": [12, 13], "j3": [10]}),  # same state
            commit_msg(5, {"app": [0, 1, 2, 3], "j2": [12, 13], "j3": [10], "j4": [5], "j5": [15]}),
            commit_msg(9, {"other": [0]}, pool="other-pool"),
        )
        await files_are(d0, {"app": [0, 1, 2, 3], "j4": [5]})
        await files_are(d1, {"j2": [4, 5], "j3": [2], "j5": [7]})
    bindings = await read_all(kafka_bootstrap, topics.bindings)
    assert reports(bindings, 0) == [
        ("bound", "j1", [6, 7]),
        ("bound", "app", [0, 1]),
        ("bound", "app", [0, 1, 2]),
        ("released", "j1", [6, 7]),
        ("bound", "app", [0, 1, 2, 3]),
        ("bound", "j4", [5]),
    ]
    assert reports(bindings, 1) == [
        ("bound", "j1", [8, 9]),
        ("bound", "j2", [12, 13]),
        ("released", "j1", [8, 9]),
        ("bound", "j3", [10]),
        ("bound", "j5", [15]),
    ]

    # node 1 is down while a commit drops j2 and adds j6; on restart it resyncs from that commit
    await publish(
        kafka_bootstrap,
        topics.commits,
        commit_msg(6, {"app": [0, 1, 2, 3], "j3": [10], "j4": [5], "j5": [15], "j6": [14]}),
        b"{not json",
    )  # the newest message on the topic is malformed: resync skips it
    async with running(NodeAgent(kafka_bootstrap, 1, range(8, 16), FileBinder(d1), topics=topics)):
        await files_are(d1, {"j3": [2], "j5": [7], "j6": [6]})
    after = reports(await read_all(kafka_bootstrap, topics.bindings), 1)[5:]
    assert after == [("released", "j2", [12, 13]), ("bound", "j6", [14])]


async def test_a_commit_in_parts_is_bound_whole_and_resynced_from(
    kafka_bootstrap: str, topics: Topics, tmp_path: Path
) -> None:
    d0 = tmp_path / "node0"
    many = {f"far-{k}": [100 + k] for k in range(60)}  # other nodes' holders: they make the parts
    first = commit_msg(1, {"old": [0, 1]} | many)
    second = split({**commit_msg(2, {"new": [4, 5], "keep": [7]} | many), "event_id": "default:commit:2"}, 600)
    third = split({**commit_msg(3, {"keep": [7]} | many | {"last": [3]}), "event_id": "default:commit:3"}, 600)
    assert len(second) >= 3 and len(third) >= 3 and all(p["payload"]["parts"] == len(third) for p in third)
    async with running(NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(d0), topics=topics)):
        await publish(kafka_bootstrap, topics.commits, first, *second)
        await files_are(d0, {"new": [4, 5], "keep": [7]})
    # stopped; the next commit's parts arrive meanwhile (the newest part first: the resync
    # still takes the commit whole)
    await publish(kafka_bootstrap, topics.commits, *third[1:], third[0])
    async with running(NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(d0), topics=topics)):
        await files_are(d0, {"keep": [7], "last": [3]})
    assert reports(await read_all(kafka_bootstrap, topics.bindings), 0) == [
        ("bound", "old", [0, 1]),
        ("released", "old", [0, 1]),
        ("bound", "keep", [7]),
        ("bound", "new", [4, 5]),
        ("released", "new", [4, 5]),
        ("bound", "last", [3]),
    ]


class FlakyBinder(FileBinder):
    """Fails to bind any id starting with "bad"."""

    def bind(self, job_id: str, local_ids: list[int], global_ids: list[int]) -> None:
        if job_id.startswith("bad"):
            raise BindError("device busy")
        super().bind(job_id, local_ids, global_ids)


async def test_malformed_messages_are_skipped_and_failed_binds_reported(
    kafka_bootstrap: str, topics: Topics, tmp_path: Path
) -> None:
    d = tmp_path / "node0"
    bad_commit = commit_msg(7, {"x": [0]})
    bad_commit["payload"]["assignments"] = "not an object"
    async with running(NodeAgent(kafka_bootstrap, 0, range(0, 8), FlakyBinder(d), topics=topics)):
        await publish(
            kafka_bootstrap,
            topics.commits,
            b"\xff\xfe",
            b"[1, 2]",
            b"{}",
            bad_commit,
            {"event_id": "e", "type": "plan.committed"},
            commit_msg(1, {"a1": [0]}),
        )
        await files_are(d, {"a1": [0]})  # still running after five malformed messages
        await publish(
            kafka_bootstrap, topics.commits, commit_msg(2, {"a1": [0], "bad-app": [1], "bad-job": [2]}, ["bad-job"])
        )

        async def two_failures() -> bool:
            statuses = reports(await read_all(kafka_bootstrap, topics.bindings), 0)
            return sum(s == "failed" for s, _, _ in statuses) == 2

        await wait_until(two_failures, "two failed bindings")
    statuses = reports(await read_all(kafka_bootstrap, topics.bindings), 0)
    assert statuses == [("bound", "a1", [0]), ("failed", "bad-app", [1]), ("failed", "bad-job", [2])]
    jobs: list[tuple[str, Any]] = [
        (k, JobRef.model_validate(m["payload"])) for k, m in await read_all(kafka_bootstrap, topics.jobs)
    ]
    assert [(k, j.id, j.source) for k, j in jobs] == [("default", "bad-job", "node-agent:0")]  # keyed by pool; no app
    assert "device busy" in jobs[0][1].detail
    assert FileBinder(d).bound() == {"a1": [0]}


async def test_cli_runs_until_sigterm(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_topic("n") + "."
    topics, d = Topics.with_prefix(prefix), tmp_path / "binds"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gpualloc",
        "node-agent",
        "--node",
        "1",
        "--gpus",
        "8-15",
        "--bootstrap",
        kafka_bootstrap,
        "--bind-dir",
        str(d),
        "--topic-prefix",
        prefix,
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    lines: list[str] = []

    async def collect() -> None:
        assert proc.stderr is not None
        async for line in proc.stderr:
            lines.append(line.decode(errors="replace"))

    reader = asyncio.create_task(collect())
    try:

        async def resynced() -> bool:
            return any("resync with" in line for line in lines)

        await wait_until(resynced, "the node agent's resync log line")
        await publish(kafka_bootstrap, topics.commits, commit_msg(1, {"j": [9, 10]}))
        await files_are(d, {"j": [1, 2]})
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0, "".join(lines)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await asyncio.wait_for(reader, WAIT_S)

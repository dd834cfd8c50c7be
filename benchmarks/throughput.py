"""Sustained arrivals through a real broker: the agent in its own process, this one playing upstream.

Steady state at 64 GPUs: a standing queue of about `queue` jobs, every arrival balanced by the
completion of the oldest outstanding job, a commit every `step_seconds`. Latency is measured
here, from just before a `job.submitted` is handed to the producer to the moment its
`allocation.decided` is read back: broker both ways, the agent's poll, its planning pass and
its produce. Run: `gpualloc bench agent --bootstrap HOST:PORT` (make kafka-up starts a broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from gpualloc.agent.cli.running import agent_argv
from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import read_range, reader
from gpualloc.bus.topics import Topics, partition_of
from gpualloc.schemas.events import envelope
from gpualloc.schemas.published import PassRecorded, RecordedCommit

POOL = {"gpus": 64, "gpus_per_node": 8, "horizon": 24, "step_minutes": 60, "swap_cap": 2}
SIZES = (1, 1, 2, 2, 4, 8)
FETCH_WAIT_MS = 10  # a decision is readable once its transaction commits; a fetch parked before
# that waits this long for it (the 500 ms default would be measured as agent latency)


@dataclass
class ThroughputResult:
    rate_target: float
    seconds: float
    arrivals: int
    decisions: int
    arrivals_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    agent_p50_ms: float  # inside the agent: record received -> decision handed to the producer
    agent_p99_ms: float
    passes: int  # planning passes over the measured arrivals (one per poll)
    boundaries: int = 0  # commits over the whole run, warm-up included
    planned_ahead: int = 0  # ... of which carried a plan made ahead of the boundary (`agent.plan_ahead`)
    null_agent: bool = False  # measured through the agent that plans nothing (`null_agent`): the floor

    def line(self) -> str:
        if self.null_agent:
            return (
                f"null agent (no planning, the floor): {self.arrivals_per_s:,.0f} arrivals/s sustained "
                f"({self.arrivals} in {self.seconds:.1f} s); arrival-to-decision p50 {self.p50_ms:.1f} ms, "
                f"p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms; "
                f"{self.arrivals / max(self.passes, 1):.1f} arrivals per transaction"
            )
        return (
            f"{self.arrivals_per_s:,.0f} arrivals/s sustained ({self.arrivals} in {self.seconds:.1f} s, target "
            f"{self.rate_target:,.0f}/s); arrival-to-decision p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, "
            f"max {self.max_ms:.1f} ms; agent-side p50 {self.agent_p50_ms:.1f} ms, p99 {self.agent_p99_ms:.1f} ms; "
            f"{self.arrivals / max(self.passes, 1):.1f} arrivals per planning pass; {self.planned_ahead} of "
            f"{self.boundaries} boundaries carried a plan made ahead"
        )


async def stop_all(
    reader: asyncio.Task,
    consumer: AIOKafkaConsumer,
    producer: AIOKafkaProducer,
    agent: subprocess.Popen,
    bootstrap: Broker | str,
    topics: Topics,
) -> None:
    """A bench's teardown: its reader task, its clients, the agent process it started, and the
    topics it made (all under its own prefix: runs would otherwise pile partitions up on the
    broker, a few hundred after an afternoon of benches, each costing it memory and work)."""
    reader.cancel()
    await consumer.stop()
    await producer.stop()
    agent.terminate()
    agent.wait(timeout=30)
    await drop_topics(bootstrap, topics.prefix)


async def drop_topics(bootstrap: Broker | str, prefix: str) -> None:
    """Delete the topics named with `prefix` (a bench's own); a broker that cannot be reached
    keeps them, and the bench still reports."""
    admin = clients.admin(bootstrap)
    with contextlib.suppress(KafkaError, OSError, asyncio.TimeoutError):
        await admin.start()
        try:
            names = [t for t in await admin.list_topics() if t.startswith(prefix)]
            if names:
                await admin.delete_topics(names)
        finally:
            await admin.close()


def submitted_message(n: int, prefix: str, checked: bool = True) -> dict:
    """The n-th arrival of a bench: a short training job of 1-8 GPUs, stamped now (`checked`:
    against the contract's model; the timed loop leaves that to the agent, see `Upstream`)."""
    return envelope(
        "job.submitted",
        {
            "id": f"{prefix}-{n}",
            "kind": "training",
            "priority": 1 + n % 9,
            "gpus": SIZES[n % len(SIZES)],
            "duration": 1 + n % 6,
        },
        datetime.now(timezone.utc),
        f"{prefix}-s{n}",
        checked=checked,
    )


class Upstream:
    """The bench's producer of arrivals and completions, kept cheap: it shares the 2 cores with
    the agent and the broker, and every millisecond of its CPU is one they wait for. A tick's
    records go to the pool's partition as one record batch (one request, no per-record
    partitioning or futures), built without the per-message model checks (the agent checks each
    message; a malformed one would be dead-lettered, not decided, and the bench would say so)."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, prefix: str):
        self.producer, self.topic, self.prefix = producer, topic, prefix
        self.partition: int | None = None
        self.sent = self.completed = 0

    async def send(self, arrivals: int, completions: list[str], sent_at: dict[str, float]) -> list[str]:
        """`arrivals` new jobs and the completions of `completions`, in that order; returns the
        new jobs' ids (each stamped in `sent_at` as it is written)."""
        values, ids = [], []
        for k in range(arrivals):
            m = submitted_message(self.sent + k, self.prefix, checked=False)
            ids.append(m["payload"]["id"])
            sent_at[ids[-1]] = time.perf_counter()
            values.append(orjson.dumps(m))
        for k, job_id in enumerate(completions, start=self.completed):  # event ids short whatever the job's
            done = envelope(
                "job.completed",
                {"id": job_id, "detail": "benchmark"},
                datetime.now(timezone.utc),
                f"{self.prefix}-d{k}",
                checked=False,
            )
            values.append(orjson.dumps(done))
        await self.send_values(values)
        self.sent += arrivals
        self.completed += len(completions)
        return ids

    async def send_values(self, values: list[bytes]) -> None:
        """`values` to the pool's partition, in order, in as few record batches as hold them."""
        if self.partition is None:  # the pool's partition, as the keyed default partitioner picks it
            self.partition = partition_of("default", len(await self.producer.partitions_for(self.topic)))
        batch = self.producer.create_batch()
        for value in values:
            batch = await self._append(batch, value)
        if batch.record_count():
            await self.producer.send_batch(batch, self.topic, partition=self.partition)

    async def _append(self, batch, value: bytes):
        """`batch` with `value` appended, or a new one holding it once `batch` is full (sent)."""
        if batch.append(key=b"default", value=value, timestamp=None) is None:
            await self.producer.send_batch(batch, self.topic, partition=self.partition)
            batch = self.producer.create_batch()
            batch.append(key=b"default", value=value, timestamp=None)
        return batch


class Follower:
    """A topic read back from its start as its records become readable (`read_committed`), by a
    task of its own: `take` gets each record's value and when its fetch came back (`clock`)."""

    def __init__(self, bootstrap: Broker | str, topic: str, clock: Callable[[], float] = time.perf_counter):
        self.consumer = clients.consumer(
            topic,
            bootstrap=bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            fetch_max_wait_ms=FETCH_WAIT_MS,
        )
        self.clock = clock
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=100)
            now = self.clock()
            for ms in batch.values():
                for m in ms:
                    self.take(m.value, now)

    def take(self, value: bytes, at: float) -> None:
        raise NotImplementedError


class Decisions(Follower):
    """The pool's decisions: when each job's was read (`perf_counter`), and what it said."""

    def __init__(self, bootstrap: Broker | str, topics: Topics):
        super().__init__(bootstrap, topics.decisions)
        self.at: dict[str, float] = {}
        self.agent_ms: dict[str, float] = {}  # inside the agent: its poll's records received -> decision sent
        self.passes: dict[str, int] = {}
        self.actions: dict[str, str] = {}

    def take(self, value: bytes, at: float) -> None:
        p = orjson.loads(value)["payload"]
        self.at[p["job_id"]] = at
        self.agent_ms[p["job_id"]] = p["latency_ms"]
        self.passes[p["job_id"]] = p.get("pass_seq") or 0
        self.actions[p["job_id"]] = p["action"]


async def paced(
    upstream: Upstream, rate: float, seconds: float, outstanding: list[str], sent_at: dict[str, float]
) -> None:
    """`rate` arrivals a second for `seconds`, each balanced by the completion of the oldest of
    `outstanding` (which the new arrivals join), sent every 10 ms."""
    start, sent = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - start) < seconds:
        due = int(rate * elapsed) - sent
        if due > 0:
            done = outstanding[:due]
            del outstanding[:due]
            outstanding += await upstream.send(due, done, sent_at)
            sent += due
        await asyncio.sleep(0.01)


def spread(values: list[float]) -> tuple[float, float, float]:
    """p50, p99 and max of `values` (not empty), rounded to 0.01."""
    ordered = sorted(values)
    return (
        round(statistics.median(ordered), 2),
        round(ordered[int(0.99 * (len(ordered) - 1))], 2),
        round(ordered[-1], 2),
    )


async def measure(
    bootstrap: Broker | str,
    rate: float = 1000,
    seconds: float = 20,
    queue: int = 200,
    step_seconds: float = 2.0,
    null_agent: bool = False,
) -> ThroughputResult:
    """`null_agent`: through the agent that plans nothing (`null_agent`), for the floor."""
    prefix = uuid.uuid4().hex[:8]
    topics = Topics.with_prefix(f"bench-{prefix}.")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(POOL, f)
    command = (
        ["-m", "gpualloc.benchmarks.null_agent", str(bootstrap), f"bench-{prefix}."]
        if null_agent
        else agent_argv(
            bootstrap,
            f"bench-{prefix}.",
            "--config",
            f.name,
            "--step-seconds",
            str(step_seconds),
            "--full-mode-every",
            "0",
        )[1:]
    )
    agent = subprocess.Popen([sys.executable, *command], stderr=subprocess.DEVNULL)
    producer = clients.producer(bootstrap, linger_ms=2, acks=1)
    decisions = Decisions(bootstrap, topics)
    await producer.start()
    await decisions.start()
    assert decisions.task is not None  # start() made it
    sent_at: dict[str, float] = {}
    got = decisions.at
    outstanding: list[str] = []
    upstream = Upstream(producer, topics.jobs, prefix)
    try:
        outstanding += await upstream.send(queue + 40, [], sent_at)  # warm-up: the standing queue (and a running set)
        deadline = time.perf_counter() + 60
        while len(got) < queue + 40 and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        if agent.poll() is not None or not got:
            raise RuntimeError(
                f"the agent decided nothing in the warm-up (exit status {agent.poll()}); "
                f"run `gpualloc agent --topic-prefix bench-{prefix}.` by hand to see why"
            )
        warm = set(got)
        await paced(upstream, rate, seconds, outstanding, sent_at)
        await producer.flush()
        measured = [j for j in sent_at if j not in warm]
        deadline = time.perf_counter() + 30
        while any(j not in got for j in measured) and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        span = max(got[j] for j in measured if j in got) - min(sent_at[j] for j in measured)
        commits = [] if null_agent else await recorded_commits(bootstrap, topics)
    finally:
        await stop_all(decisions.task, decisions.consumer, producer, agent, bootstrap, topics)
        os.unlink(f.name)
    decided = [j for j in measured if j in got]
    p50, p99, most = spread([(got[j] - sent_at[j]) * 1000 for j in decided])
    inside = spread([decisions.agent_ms[j] for j in decided])
    return ThroughputResult(
        rate,
        round(span, 2),
        len(measured),
        len(decided),
        round(len(decided) / span, 1),
        p50,
        p99,
        most,
        inside[0],
        inside[1],
        len({decisions.passes[j] for j in decided}),
        len(commits),
        sum(c.ahead for c in commits),
        null_agent,
    )


async def recorded_commits(bootstrap: Broker | str, topics: Topics) -> list[RecordedCommit]:
    """The commits the agent's ledger recorded, in order."""
    consumer = await clients.started(reader(bootstrap), "bench: ledger reader")
    try:
        records = await read_range(consumer, {TopicPartition(topics.ledger, 0): 0})
    finally:
        await clients.close(consumer)
    return [c for r in records for c in PassRecorded.model_validate(orjson.loads(r.value)["payload"]).commits]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m gpualloc.benchmarks.throughput")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = asyncio.run(measure(args.bootstrap, args.rate, args.seconds))
    print(json.dumps(asdict(result)) if args.json else result.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())

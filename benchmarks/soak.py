"""A long run of the agent on a compressed clock: `gpualloc bench soak`. A leak or a backlog
that builds slowly passes every short test; this runs `gpualloc agent` (its own process, started
as a user starts it) through `events` input records at a steady `rate`, and checks that its RSS
grows by at most 50 MB from the `baseline_at`-th record to the last, and that at the end it is
less than a second of input behind.

The mix, keyed by pool as the contract says: job arrivals (1-8 GPUs, short) and completions
that keep a standing queue of about `queue` jobs (each completion ends the oldest outstanding
job, as `gpualloc bench agent` does), traffic for two real-time apps, a node drained now and
then and back up at its next report, and 1% malformed records. The
accounting counts what the agent published (read_committed): one decision per arrival and one
dead letter per malformed record.
Lag is read from the ledger: each transaction's entry carries the input frontier it consumed up
to, which is what a restart resumes from (the offsets group `gpualloc-agent-<pool>` is only
committed with snapshots, so it trails by up to a step by design).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import subprocess
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from gpualloc.agent.cli.running import agent_argv
from gpualloc.agent.operator.publish import completed_message
from gpualloc.benchmarks.recovery import until
from gpualloc.benchmarks.throughput import FETCH_WAIT_MS, POOL, stop_all, submitted_message
from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import AgentSettings

GROWTH_MB = 50.0  # the targets: RSS growth after the baseline, and lag in seconds of input
LAG_S = 1.0
APPS = ("chat", "search")
BAD = "soak-bad-"  # every malformed record carries BAD<k> into its dead letter's `original`
# 100 slots, shuffled once: 90 arrivals and completions, 8 traffic, 1 node status, 1 malformed
MIX = tuple(random.Random(7).sample(["submit", "complete"] * 45 + ["traffic"] * 8 + ["node", "malformed"], 100))


@dataclass
class SoakResult:
    rate_target: float
    events: int  # paced input records (after the pool's configuration and its two apps)
    seconds: float
    events_per_s: float
    jobs: int  # job.submitted among them
    decisions: int
    malformed: int
    dead_letters: int
    lost: int  # arrivals never decided and malformed records never dead-lettered
    duplicated: int  # decisions or dead letters beyond one per cause, and any for good input
    baseline_at: int
    rss_baseline_mb: float  # at the baseline_at-th record
    rss_end_mb: float  # once every record is accounted for
    rss_growth_mb: float
    rss_max_mb: float  # the agent's peak (VmHWM)
    rss_samples: list[tuple[int, float]]  # (records sent, RSS MB): the baseline, every few seconds, the end
    lag_s: float  # from the last record acknowledged to the ledger entry covering it being readable
    lag_records: int  # input records past the ledger's frontier when the last one was acknowledged
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def line(self) -> str:
        verdict = "PASS" if self.ok else "FAIL: " + "; ".join(self.failures)
        return (
            f"soak: {self.events:,} events in {self.seconds:.1f} s ({self.events_per_s:,.0f}/s, target "
            f"{self.rate_target:,.0f}/s), {self.decisions:,} decisions for {self.jobs:,} jobs, "
            f"{self.dead_letters} dead letters for {self.malformed} malformed; RSS {self.rss_baseline_mb:.1f} MB "
            f"at event {self.baseline_at:,} -> {self.rss_end_mb:.1f} MB at the end ({self.rss_growth_mb:+.1f} MB, "
            f"target <= {GROWTH_MB:.0f}), max {self.rss_max_mb:.1f} MB; end lag {self.lag_s * 1000:.0f} ms, "
            f"{self.lag_records} records (target < {LAG_S:.0f} s of input); lost {self.lost}, "
            f"duplicated {self.duplicated}: {verdict}"
        )


class Upstream:
    """The platforms around the agent as the soak plays them: the n-th record of the mix, and
    what was sent, for the accounting."""

    def __init__(self, topics: Topics, queue: int) -> None:
        self.topics, self.queue = topics, queue
        self.jobs: list[str] = []
        self.outstanding: deque[str] = deque()
        self.malformed = self.traffic = self.nodes = 0

    def setup(self) -> list[tuple[str, bytes]]:
        """The pool's configuration and its real-time apps: what a platform publishes first."""
        now = datetime.now(timezone.utc)
        apps = [
            envelope(
                "app.registered",
                {"id": app, "priority": 5 + k, "min_gpus": 1, "max_gpus": 8, "rps_per_gpu": 100.0},
                now,
                f"soak-app-{app}",
            )
            for k, app in enumerate(APPS)
        ]
        return [self._of(m) for m in (envelope("pool.configured", POOL, now, "soak-pool"), *apps)]

    def record(self, n: int) -> tuple[str, bytes]:
        """Topic and value of the n-th record; a completion slot before the standing queue is
        full is an arrival."""
        kind = MIX[n % len(MIX)]
        if kind == "complete" and len(self.outstanding) > self.queue:
            job_id = self.outstanding.popleft()
            return self._of(completed_message(job_id, event_id=f"{job_id}-done", detail="soak"))
        if kind in ("submit", "complete"):
            m = submitted_message(len(self.jobs), "soak")
            self.jobs.append(m["payload"]["id"])
            self.outstanding.append(m["payload"]["id"])
            return self._of(m)
        now = datetime.now(timezone.utc)
        if kind == "traffic":
            self.traffic += 1
            demand = 100.0 * (1 + self.traffic // 50 % 6)  # 1-6 GPUs, moving every 50 observations
            return self._of(
                envelope(
                    "traffic.observed",
                    {"app": APPS[self.traffic % 2], "requests_per_s": demand},
                    now,
                    f"soak-t{self.traffic}",
                )
            )
        if kind == "node":
            self.nodes += 1
            node = self.nodes // 2 % (POOL["gpus"] // POOL["gpus_per_node"])
            return self._of(
                envelope(
                    "node.status",
                    {"node": node, "state": "drained" if self.nodes % 2 else "up"},
                    now,
                    f"soak-n{self.nodes}",
                )
            )
        self.malformed += 1
        return self.topics.jobs, _malformed(self.malformed - 1)

    def _of(self, message: dict) -> tuple[str, bytes]:
        return self.topics.of_type(message["type"]), orjson.dumps(message)


def _malformed(k: int) -> bytes:
    """The k-th bad record, one of four kinds the agent must dead-letter: not JSON, not an
    object, a field out of range, and a completion for a job nobody submitted."""
    marker = f"{BAD}{k}"
    if k % 4 == 0:
        return b"{not json " + marker.encode()
    if k % 4 == 1:
        return orjson.dumps([marker])
    if k % 4 == 2:
        m = submitted_message(k, BAD.rstrip("-"))
        m["payload"]["priority"] = -1
        return orjson.dumps(m)
    return orjson.dumps(completed_message(marker, event_id=f"{marker}-done"))


@dataclass
class Readback:
    """What the agent published, read back committed: decisions per job, dead letters per
    malformed record, and the input frontier of the latest ledger entry (with when it was read)."""

    decisions: Counter = field(default_factory=Counter)
    dead: Counter = field(default_factory=Counter)
    unexpected: int = 0  # dead letters of good input
    frontier: dict[str, int] = field(default_factory=dict)
    frontier_at: float = 0.0

    async def follow(self, consumer: AIOKafkaConsumer, topics: Topics) -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for tp, messages in batch.items():
                for m in messages:
                    payload = orjson.loads(m.value)["payload"]
                    if tp.topic == topics.decisions:
                        self.decisions[payload["job_id"]] += 1
                    elif tp.topic == topics.deadletter:
                        found = re.search(rf"{BAD}(\d+)", payload["original"])
                        if found:
                            self.dead[int(found.group(1))] += 1
                        else:
                            self.unexpected += 1
                    elif payload["frontier"] != self.frontier:
                        self.frontier, self.frontier_at = payload["frontier"], now

    def covers(self, ends: dict[str, int]) -> bool:
        return all(self.frontier.get(key, 0) >= end for key, end in ends.items())

    def behind(self, ends: dict[str, int]) -> int:
        return sum(max(0, end - self.frontier.get(key, 0)) for key, end in ends.items())


def memory_mb(pid: int) -> tuple[float, float]:
    """RSS and peak RSS (VmRSS, VmHWM) of a process in MB, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def soak(
    bootstrap: Broker | str,
    events: int = 100_000,
    rate: float = 1000,
    step_seconds: float = 2.0,
    queue: int = 200,
    baseline_at: int = 10_000,
    sample_s: float = 5.0,
) -> SoakResult:
    """Run the soak on a fresh topic prefix (see the module docstring); RSS is sampled every
    `sample_s` seconds from the `baseline_at`-th record on."""
    if events <= baseline_at:
        raise ValueError(f"must be more than the RSS baseline's record, {baseline_at} (got {events})")
    prefix = f"soak-{uuid.uuid4().hex[:8]}."
    topics = Topics.with_prefix(prefix)
    settings = AgentSettings()
    counts = await ensure_topics(bootstrap, topics, settings.partitions, settings.retention_ms)
    inputs = [TopicPartition(t, p) for t in topics.inputs for p in range(counts[t])]
    agent = subprocess.Popen(
        agent_argv(bootstrap, prefix, "--policy", "heuristic", "--step-seconds", str(step_seconds)),
        stderr=subprocess.DEVNULL,
    )
    producer = clients.producer(bootstrap, enable_idempotence=True, acks="all", linger_ms=2)
    consumer = clients.consumer(
        topics.decisions,
        topics.deadletter,
        topics.ledger,
        bootstrap=bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        fetch_max_wait_ms=FETCH_WAIT_MS,
    )
    await producer.start()
    await consumer.start()
    read, upstream = Readback(), Upstream(topics, queue)
    reader = asyncio.create_task(read.follow(consumer, topics))
    samples: list[tuple[int, float]] = []

    async def acknowledged() -> dict[str, int]:
        """Flush, then the input topics' end offsets: what the agent must cover."""
        await producer.flush()
        ends = await consumer.end_offsets(inputs)
        return {f"{tp.topic}:{tp.partition}": offset for tp, offset in ends.items()}

    try:
        for topic, value in upstream.setup():
            await producer.send(topic, value, key=b"default")
        await _covered(read, await acknowledged(), agent, prefix)
        began = last_sample = time.perf_counter()
        n = 0
        while n < events:
            if agent.poll() is not None:
                raise RuntimeError(f"the agent exited with status {agent.returncode} after {n} events")
            for _ in range(min(int(rate * (time.perf_counter() - began)), events) - n):
                topic, value = upstream.record(n)
                await producer.send(topic, value, key=b"default")
                n += 1
                if n == baseline_at:
                    samples.append((n, memory_mb(agent.pid)[0]))
                    last_sample = time.perf_counter()
            if samples and time.perf_counter() - last_sample >= sample_s:
                samples.append((n, memory_mb(agent.pid)[0]))
                last_sample = time.perf_counter()
            await asyncio.sleep(0.01)
        ends = await acknowledged()
        sent_at = time.perf_counter()
        lag_records = read.behind(ends)
        await _covered(read, ends, agent, prefix)
        lag_s = max(0.0, read.frontier_at - sent_at)
        with contextlib.suppress(TimeoutError):  # what is still missing then is lost
            await until(lambda: len(read.decisions) >= len(upstream.jobs) and len(read.dead) >= upstream.malformed, 30)
        rss_end, rss_max = memory_mb(agent.pid)
        samples.append((n, rss_end))
    finally:
        await stop_all(reader, consumer, producer, agent, bootstrap, topics)
    return _result(rate, events, sent_at - began, upstream, read, samples, rss_max, lag_s, lag_records)


async def _covered(read: Readback, ends: dict[str, int], agent: subprocess.Popen, prefix: str) -> None:
    """Wait for the agent's ledger to cover `ends`; if it never does, say how the agent fared."""
    try:
        await until(lambda: read.covers(ends), 60)
    except TimeoutError:
        raise RuntimeError(
            f"the agent did not take up the input within 60 s (exit status {agent.poll()}); run "
            f"`gpualloc agent --topic-prefix {prefix}` by hand to see why"
        ) from None


def _result(
    rate: float,
    events: int,
    seconds: float,
    upstream: Upstream,
    read: Readback,
    samples: list[tuple[int, float]],
    rss_max: float,
    lag_s: float,
    lag_records: int,
) -> SoakResult:
    """The figures, and the targets they miss."""
    jobs = set(upstream.jobs)
    lost = sum(read.decisions[j] == 0 for j in jobs) + sum(read.dead[k] == 0 for k in range(upstream.malformed))
    duplicated = (
        sum(c - (j in jobs) for j, c in read.decisions.items())
        + sum(c - 1 for c in read.dead.values())
        + read.unexpected
    )
    baseline, end = samples[0][1], samples[-1][1]
    result = SoakResult(
        rate,
        events,
        round(seconds, 2),
        round(events / seconds, 1),
        len(jobs),
        sum(read.decisions.values()),
        upstream.malformed,
        sum(read.dead.values()) + read.unexpected,
        lost,
        duplicated,
        samples[0][0],
        round(baseline, 1),
        round(end, 1),
        round(end - baseline, 1),
        round(rss_max, 1),
        [(k, round(mb, 1)) for k, mb in samples],
        round(lag_s, 3),
        lag_records,
    )
    if result.rss_growth_mb > GROWTH_MB:
        result.failures.append(f"RSS grew {result.rss_growth_mb:.1f} MB (target <= {GROWTH_MB:.0f})")
    if lag_s >= LAG_S or lag_records >= rate * LAG_S:
        result.failures.append(f"end lag {lag_s:.2f} s, {lag_records} records (target < {LAG_S:.0f} s of input)")
    if lost or duplicated:
        result.failures.append(f"{lost} lost, {duplicated} duplicated")
    return result

"""The agent at the sizes users run: `gpualloc bench scale`. For each pool size (8 GPUs a
node), `gpualloc agent` runs in its own process, as a user starts it, on a compressed clock (the
pool's 30-minute steps every `step_seconds`), through the real broker: apps register (first,
as operators do: the backlog goes once the ledger shows them consumed), a backlog of `queued`
jobs arrives (a share of it given by features, which the forecasters size), then `rate`
arrivals a second for `seconds`, each balanced by the completion of the oldest job outstanding.
Measured from outside, as the pool's users see it:
- the backlog: from its records sent to its last decision readable;
- decisions: arrival sent to its decision readable, p50 and p99;
- boundaries: a step's start to its commit (every part) readable, while arrivals flow;
- bytes: the largest record on the commits, ledger and state topics;
- memory: the agent's peak RSS, and its child processes' (the solvers) together, sampled;
- `gpualloc status`: wall time and lines;
- recovery: SIGKILL, a restart and a job submitted with it, to that job's decision; the killed
  agent's child processes still running ORPHAN_S after the kill;
- SIGTERM: to the process's exit; its child processes still running a second later;
- the input records the agent refused (dead letters), with their first reasons.
Each phase is bounded in time (`WAIT_S`). One that fails or times out is reported under
`errors`, with the errors the agent logged, and the bench goes on with the next: a pool that
cannot publish its commits reads as such, not as a hung bench. Every process the bench starts
ends with it, and so do its topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, TypeVar

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from gpualloc.agent.cli.running import agent_argv
from gpualloc.benchmarks.recovery import killed_and_back, until
from gpualloc.benchmarks.soak import memory_mb
from gpualloc.benchmarks.throughput import Decisions, Follower, Upstream, drop_topics, paced, spread
from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics, partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import partitions, read_range, reader
from gpualloc.bus.topics import Topics
from gpualloc.generators.synthetic_jobs import sample_job
from gpualloc.schemas.events import envelope
from gpualloc.schemas.published import PassRecorded
from gpualloc.schemas.settings import AgentSettings

T = TypeVar("T")
SIZES = (256, 1024, 4096)
NODE_GPUS = 8
STEP_MINUTES = 30
GPU_TYPE = "h100-80gb"
FEATURED = 0.3  # of the backlog given by features
JOB_GPUS = (1, 2, 4, 8, 8, 16, 32, 64)  # the backlog's given sizes, up to an eighth of the pool
WAIT_S = {"backlog": 45.0, "drain": 15.0, "status": 20.0, "recovery": 30.0, "sigterm": 20.0}  # each phase's bound
SAMPLE_S = 0.5  # memory sampling period
ORPHAN_S = 5.0  # after SIGKILL: a child process of the killed agent still running then has outlived it


@dataclass
class ScaleResult:
    gpus: int
    apps: int
    queued: int  # the backlog's jobs
    featured: int  # ... of them given by features
    horizon: int
    step_seconds: float
    rate: float
    seconds: float
    node_gpus: int = NODE_GPUS
    backlog_decided: int = 0
    backlog_s: float | None = None  # backlog sent -> its last decision readable (all decided)
    rejected: int = 0  # backlog decisions `rejected`
    arrivals: int = 0  # sent at `rate`
    decided: int = 0  # ... of them decided
    p50_ms: float | None = None  # arrival sent -> its decision readable
    p99_ms: float | None = None
    commits: int = 0  # steps committed while arrivals flowed
    boundary_p50_ms: float | None = None  # a step's start -> its commit, every part, readable
    boundary_max_ms: float | None = None
    boundaries: int = 0  # steps committed over the run, by the ledger
    planned_ahead: int = 0  # ... of them carried a plan made ahead of the boundary
    commit_max_bytes: int | None = None  # the largest record of its topic
    commit_parts_max: int = 0
    ledger_max_bytes: int | None = None
    snapshot_max_bytes: int | None = None
    snapshots: int = 0
    agent_rss_mb: float | None = None  # peak (VmHWM) before the SIGKILL
    solver_rss_mb: float | None = None  # the agent's child processes together, the most sampled
    solver_processes: int = 0  # the most at once
    status_s: float | None = None
    status_lines: int = 0
    recovery_s: float | None = None  # SIGKILL, restart -> a job submitted with it decided
    left_after_kill: int = 0  # the killed agent's child processes running ORPHAN_S after the kill
    sigterm_s: float | None = None
    left_after_sigterm: int = 0  # its child processes alive a second after it exited
    dead_letters: int = 0  # input records the agent refused (`input.rejected`)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class ScaleReport:
    results: list[ScaleResult]

    def line(self) -> str:
        return table(self.results)


def pool_payload(gpus: int, horizon: int, node_gpus: int = NODE_GPUS) -> dict:
    return {
        "gpus": gpus,
        "gpus_per_node": node_gpus,
        "horizon": horizon,
        "step_minutes": STEP_MINUTES,
        "swap_cap": max(2, gpus // 128),
        "gpu_type": GPU_TYPE,
        "gpu_memory_gb": 80.0,
    }


def app_payloads(gpus: int, apps: int) -> list[dict]:
    """`apps` real-time apps sharing about a quarter of the pool, each with a daily peak of its own."""
    top = max(2, gpus // (4 * max(apps, 1)))
    low = max(1, top // 4)
    return [
        {
            "id": f"rt-{i}",
            "priority": 5 + i % 5,
            "min_gpus": low,
            "max_gpus": top,
            "rps_per_gpu": 100.0,
            "profile": [
                low + (top - low) * (12 - min(abs(h - (9 + i) % 24), 24 - abs(h - (9 + i) % 24))) // 12
                for h in range(24)
            ],
        }
        for i in range(apps)
    ]


def backlog_payloads(gpus: int, queued: int, id_chars: int, seed: int = 0) -> list[dict]:
    """`queued` jobs, FEATURED of them given by features (ground-truth generator, at most half
    the pool), the rest by GPUs (up to an eighth of the pool) and steps; ids padded to `id_chars`."""
    rng = random.Random(seed)
    sizes = [n for n in JOB_GPUS if n <= max(1, gpus // 8)]
    out = []
    for n in range(queued):
        job_id = padded(f"q-{n}", id_chars)
        if rng.random() < FEATURED:
            job = sample_job(rng, GPU_TYPE, STEP_MINUTES, max(1, gpus // 2))
            out.append({"id": job_id, "kind": job.kind, "priority": job.priority, "features": job.features})
        else:
            out.append(
                {
                    "id": job_id,
                    "kind": "training",
                    "priority": rng.randint(1, 10),
                    "gpus": rng.choice(sizes),
                    "duration": rng.randint(1, 24),
                }
            )
    return out


def padded(job_id: str, chars: int) -> str:
    return job_id if len(job_id) >= chars else f"{job_id}-{'x' * (chars - len(job_id) - 1)}"


def descendants(pid: int) -> dict[int, str]:
    """The processes `pid` started, and theirs (from /proc): each one's start time, which tells
    it from a later process given the same pid."""
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as f:
                stats[int(entry)] = f.read().rsplit(")", 1)[1].split()  # state, ppid, ...; start time 20th
    out, todo = {}, [pid]
    while todo:
        parent = str(todo.pop())
        kids = [child for child, fields in stats.items() if len(fields) > 19 and fields[1] == parent]
        out.update({child: stats[child][19] for child in kids})
        todo += kids
    return out


def running(pid: int, started: str) -> bool:
    """Is the process `descendants` saw as (`pid`, `started`) still running?"""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
        return len(fields) > 19 and fields[19] == started and fields[0] != "Z"
    return False


def rss_mb(pid: int) -> float:
    """Resident MB of `pid`, 0 once it is gone."""
    with contextlib.suppress(OSError, KeyError):
        return memory_mb(pid)[0]
    return 0.0


class Children:
    """An agent's child processes, sampled: the most MB they held together and the most at once;
    every pid seen, so none outlives the bench."""

    def __init__(self) -> None:
        self.mb, self.most = 0.0, 0
        self.seen: dict[int, str] = {}

    async def sample(self, pid: int) -> None:
        while True:
            kids = descendants(pid)
            self.seen.update(kids)
            self.mb = max(self.mb, sum(rss_mb(k) for k in kids))
            self.most = max(self.most, len(kids))
            await asyncio.sleep(SAMPLE_S)

    def end(self) -> None:
        """SIGKILL every child seen that still runs (the bench started them, through its agent)."""
        for pid, started in self.seen.items():
            if running(pid, started):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


class Commits(Follower):
    """The commits: the largest record, the most parts, and for each commit complete, its step's
    start and the seconds from it to the wall time its last part was read."""

    def __init__(self, bootstrap: Broker | str, topics: Topics):
        super().__init__(bootstrap, topics.commits, time.time)
        self.max_bytes, self.parts_max = 0, 0
        self.ready: list[tuple[datetime, float]] = []
        self._parts: dict[int, int] = {}

    def take(self, value: bytes, at: float) -> None:
        p = orjson.loads(value)["payload"]
        self.max_bytes = max(self.max_bytes, len(value))
        parts = p.get("parts", 1)
        self.parts_max = max(self.parts_max, parts)
        self._parts[p["seq"]] = self._parts.get(p["seq"], 0) + 1
        if self._parts[p["seq"]] == parts:
            start = datetime.fromisoformat(p["step_start"])
            self.ready.append((start, at - start.timestamp()))

    def since(self, wall: float) -> list[float]:
        """Seconds to readable of the commits whose step started at or after `wall`."""
        return [s for start, s in self.ready if start.timestamp() >= wall]


class DeadLetters(Follower):
    """The input records the agent refused: how many, and the first reasons."""

    count: int
    reasons: list[str]

    def __init__(self, bootstrap: Broker | str, topics: Topics):
        super().__init__(bootstrap, topics.deadletter)
        self.count, self.reasons = 0, []

    def take(self, value: bytes, at: float) -> None:
        self.count += 1
        reason = orjson.loads(value)["payload"]["reason"]
        if len(self.reasons) < 3 and reason not in self.reasons:
            self.reasons.append(reason[:240])


class Frontier(Follower):
    """How far the agent's ledger says it consumed each input partition ("topic:partition")."""

    def __init__(self, bootstrap: Broker | str, topics: Topics):
        super().__init__(bootstrap, topics.ledger)
        self.next: dict[str, int] = {}

    def take(self, value: bytes, at: float) -> None:
        for tp, offset in orjson.loads(value)["payload"].get("frontier", {}).items():
            self.next[tp] = max(offset, self.next.get(tp, 0))


class Agent:
    """`gpualloc agent` in its own process, its log (JSON lines on stderr) kept in a file."""

    def __init__(self, command: list[str]):
        self.command = command
        self.log: IO = tempfile.TemporaryFile("a+")  # appended to by each process that runs `command`
        self.process: subprocess.Popen | None = subprocess.Popen(command, stderr=self.log)

    def errors(self, most: int = 3) -> str:
        """The distinct errors it logged (its error-level lines, else the end of a crash)."""
        self.log.seek(0)
        lines = self.log.read().splitlines()
        found: list[str] = []
        for line in lines:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                entry = json.loads(line)
                if entry.get("level") in ("error", "critical") and entry.get("event") not in found:
                    found.append(str(entry.get("event")))
        if not found and self.process is not None and self.process.poll() not in (None, 0, -signal.SIGKILL):
            found = lines[-1:]  # a crash's last line (its exception)
        return "; ".join(e[:240] for e in found[:most])

    def exited(self) -> bool:
        """Has the process ended (it should not before the bench ends it)?"""
        return self.process is None or self.process.poll() is not None

    def stop(self) -> None:
        if not self.exited():
            assert self.process is not None  # exited() says so
            self.process.kill()
            self.process.wait()
        self.log.close()


async def all_decided(
    result: ScaleResult, name: str, jobs: Collection[str], decisions: Decisions, agent: Agent, seconds: float
) -> None:
    """Wait (`bounded`) until every one of `jobs` has its decision, or the agent has exited."""
    await bounded(
        result,
        name,
        until(lambda: agent.exited() or all(j in decisions.at for j in jobs), seconds),
        seconds + 1,
        agent,
    )


async def bounded(
    result: ScaleResult, name: str, work: Awaitable[T], seconds: float, agent: Agent | None = None
) -> T | None:
    """`work` within `seconds`; on failure its error goes in `result.errors[name]` (with what the
    agent logged) and None is returned, so the bench goes on."""
    try:
        return await asyncio.wait_for(work, seconds)
    except Exception as e:  # noqa: BLE001 - any failure is a figure of the run
        what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        logged = agent.errors() if agent is not None else ""
        result.errors[name] = f"{what}; the agent logged: {logged}" if logged else what
        return None


async def measure_scale(
    bootstrap: Broker | str,
    gpus: int,
    apps: int = 3,
    queued: int = 2000,
    rate: float = 100,
    seconds: float = 20,
    step_seconds: float = 10.0,
    horizon: int = 48,
    full_mode: bool = False,
    id_chars: int = 0,
    node_gpus: int = NODE_GPUS,
) -> ScaleResult:
    """One pool size through the phases of the module docstring."""
    prefix = f"scale-{uuid.uuid4().hex[:8]}."
    topics = Topics.with_prefix(prefix)
    backlog = backlog_payloads(gpus, queued, id_chars)
    result = ScaleResult(
        gpus, apps, queued, sum("features" in j for j in backlog), horizon, step_seconds, rate, seconds, node_gpus
    )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(pool_payload(gpus, horizon, node_gpus), f)
    settings = AgentSettings()
    await ensure_topics(bootstrap, topics, settings.partitions, settings.retention_ms)  # as the agent makes them
    command = agent_argv(
        bootstrap,
        prefix,
        "--config",
        f.name,
        "--step-seconds",
        str(step_seconds),
        *([] if full_mode else ["--full-mode-every", "0"]),
    )
    agent = Agent(command)
    producer = clients.producer(bootstrap, linger_ms=2, acks=1)
    decisions, commits = Decisions(bootstrap, topics), Commits(bootstrap, topics)
    refused, frontier, children = DeadLetters(bootstrap, topics), Frontier(bootstrap, topics), Children()
    sampler: asyncio.Task | None = None
    try:
        await producer.start()
        for follower in (decisions, commits, refused, frontier):
            await follower.start()
        assert agent.process is not None  # Agent() started it
        sampler = asyncio.create_task(children.sample(agent.process.pid))
        now = datetime.now(timezone.utc)
        sent = [
            await producer.send_and_wait(
                topics.traffic, key=b"default", value=orjson.dumps(envelope("app.registered", a, now, f"app-{a['id']}"))
            )
            for a in app_payloads(gpus, apps)
        ]
        # the apps first, as an operator registers them before work arrives: in one poll with the
        # backlog they would meet a pool its running jobs already fill
        await bounded(
            result,
            "apps",
            until(
                lambda: (
                    agent.exited() or all(frontier.next.get(f"{m.topic}:{m.partition}", 0) > m.offset for m in sent)
                ),
                WAIT_S["backlog"],
            ),
            WAIT_S["backlog"] + 1,
            agent,
        )
        began = time.perf_counter()
        await Upstream(producer, topics.jobs, prefix).send_values(
            [orjson.dumps(envelope("job.submitted", j, now, f"{prefix}q{n}")) for n, j in enumerate(backlog)]
        )
        ids = [j["id"] for j in backlog]
        await all_decided(result, "backlog", ids, decisions, agent, WAIT_S["backlog"])
        if all(j in decisions.at for j in ids):
            result.backlog_s = round(max(decisions.at[j] for j in ids) - began, 2)
        result.backlog_decided = sum(j in decisions.at for j in ids)
        result.rejected = sum(decisions.actions.get(j) == "rejected" for j in ids)
        await _arrivals(
            result,
            agent,
            producer,
            topics,
            prefix,
            decisions,
            commits,
            [j for j in ids if decisions.actions.get(j) not in (None, "rejected")],
        )
        await _status(result, bootstrap, prefix)
        if not agent.exited():
            assert agent.process is not None  # exited() says so
            with contextlib.suppress(OSError, KeyError):
                result.agent_rss_mb = round(memory_mb(agent.process.pid)[1], 1)
        sampler.cancel()
        result.solver_rss_mb, result.solver_processes = round(children.mb, 1), children.most
        await _recovery(result, agent, producer, topics, prefix, decisions, children)
        await _sigterm(result, agent, children)
        await bounded(result, "bytes", _bytes(result, bootstrap, topics), 60)
        result.commit_max_bytes, result.commit_parts_max = commits.max_bytes or None, commits.parts_max
        result.dead_letters = refused.count
        if refused.count:
            result.errors["dead letters"] = f"{refused.count:,} input records refused: " + "; ".join(refused.reasons)
    except Exception as e:  # noqa: BLE001 - the bench's own failure: reported with the figures so far
        result.errors["bench"] = f"{type(e).__name__}: {e}"
    finally:
        for task in (sampler, decisions.task, commits.task, refused.task, frontier.task):
            if task is not None:
                task.cancel()
        for client in (decisions.consumer, commits.consumer, refused.consumer, frontier.consumer, producer):
            with contextlib.suppress(Exception):
                await client.stop()
        agent.stop()
        children.end()
        await drop_topics(bootstrap, prefix)
        os.unlink(f.name)
    return result


async def _arrivals(
    result: ScaleResult,
    agent: Agent,
    producer: AIOKafkaProducer,
    topics: Topics,
    prefix: str,
    decisions: Decisions,
    commits: Commits,
    outstanding: list[str],
) -> None:
    """`rate` arrivals a second for `seconds` (each completing the oldest outstanding job): their
    latency, and the boundaries that passed meanwhile."""
    sent_at: dict[str, float] = {}
    wall = time.time()
    await bounded(
        result,
        "arrivals",
        paced(Upstream(producer, topics.jobs, f"{prefix}a"), result.rate, result.seconds, list(outstanding), sent_at),
        result.seconds + WAIT_S["drain"],
        agent,
    )
    await producer.flush()
    await all_decided(result, "decisions", sent_at, decisions, agent, WAIT_S["drain"])
    if agent.exited():
        assert agent.process is not None  # only _recovery, later, drops it
        result.errors["agent"] = f"exited ({agent.process.returncode}) before the bench stopped it: {agent.errors()}"
    decided = [(decisions.at[j] - sent_at[j]) * 1000 for j in sent_at if j in decisions.at]
    result.arrivals, result.decided = len(sent_at), len(decided)
    if decided:
        result.p50_ms, result.p99_ms, _ = spread(decided)
    ready = commits.since(wall)
    result.commits = len(ready)
    if ready:
        p50, _, most = spread([s * 1000 for s in ready])
        result.boundary_p50_ms, result.boundary_max_ms = p50, most
    elif time.time() - wall > 2 * result.step_seconds:
        logged = agent.errors()
        result.errors["commits"] = f"no commit readable in {time.time() - wall:.0f} s" + (
            f"; the agent logged: {logged}" if logged else ""
        )


async def _status(result: ScaleResult, bootstrap: Broker | str, prefix: str) -> None:
    """`gpualloc status` as a user runs it, while the agent runs."""
    command = [sys.executable, "-m", "gpualloc", "status", "--bootstrap", str(bootstrap), "--topic-prefix", prefix]
    began = time.perf_counter()
    try:
        done = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=WAIT_S["status"]
        )
    except subprocess.TimeoutExpired:
        result.errors["status"] = f"no answer within {WAIT_S['status']:.0f} s"
        return
    result.status_s = round(time.perf_counter() - began, 2)
    result.status_lines = done.stdout.count("\n")
    if done.returncode:
        result.errors["status"] = f"exit {done.returncode}: " + (done.stderr.strip().splitlines() or [""])[-1][:240]


async def _recovery(
    result: ScaleResult,
    agent: Agent,
    producer: AIOKafkaProducer,
    topics: Topics,
    prefix: str,
    decisions: Decisions,
    children: Children,
) -> None:
    """SIGKILL and restart: the seconds to a job submitted with the restart decided, and the
    killed agent's child processes still running ORPHAN_S after the kill."""
    assert agent.process is not None  # dropped only below, after a failed restart
    if agent.exited():
        result.errors["recovery"] = f"the agent had exited ({agent.process.returncode}): {agent.errors()}"
        return
    killed = descendants(agent.process.pid)
    children.seen.update(killed)
    began = time.perf_counter()
    back = await bounded(
        result,
        "recovery",
        killed_and_back(
            agent.process, agent.command, producer, topics, decisions, f"{prefix}probe", agent.log, WAIT_S["recovery"]
        ),
        WAIT_S["recovery"] + 5,
        agent,
    )
    await asyncio.sleep(max(0.0, ORPHAN_S - (time.perf_counter() - began)))
    result.left_after_kill = sum(running(pid, started) for pid, started in killed.items())
    if back is None:
        agent.process = None  # killed_and_back ended the restarted process
        return
    agent.process, seconds = back
    result.recovery_s = round(seconds, 2)


async def _sigterm(result: ScaleResult, agent: Agent, children: Children) -> None:
    """SIGTERM to the restarted agent: the seconds to its exit (killed after the phase's bound),
    and its child processes still running a second later."""
    if agent.exited():
        result.errors.setdefault("sigterm", "no agent running to stop")
        return
    assert agent.process is not None  # exited() says so
    kids = descendants(agent.process.pid)
    children.seen.update(kids)
    began = time.perf_counter()
    agent.process.terminate()
    try:
        await asyncio.to_thread(agent.process.wait, WAIT_S["sigterm"])
    except subprocess.TimeoutExpired:
        result.errors["sigterm"] = f"still running {WAIT_S['sigterm']:.0f} s after SIGTERM: killed"
        return
    result.sigterm_s = round(time.perf_counter() - began, 2)
    await asyncio.sleep(1.0)
    result.left_after_sigterm = sum(running(pid, started) for pid, started in kids.items())


async def _bytes(result: ScaleResult, bootstrap: Broker | str, topics: Topics) -> None:
    """The largest record of the ledger and of the state topic, the snapshots written, and the
    steps committed (those planned ahead among them)."""
    counts = await partition_counts(bootstrap, [topics.ledger, topics.state])
    consumer: AIOKafkaConsumer = await clients.started(reader(bootstrap), "bench: history reader")
    try:
        records = await read_range(
            consumer, {tp: 0 for t in (topics.ledger, topics.state) for tp in partitions(counts, t)}
        )
    finally:
        await clients.close(consumer)
    ledger = [r.value for r in records if r.topic == topics.ledger and r.value]
    state = [r for r in records if r.topic == topics.state and r.value]
    result.ledger_max_bytes = max(map(len, ledger), default=None)
    commits = [c for v in ledger for c in PassRecorded.model_validate(orjson.loads(v)["payload"]).commits]
    result.boundaries, result.planned_ahead = len(commits), sum(c.ahead for c in commits)
    result.snapshot_max_bytes = max((len(r.value) for r in state), default=None)
    result.snapshots = sum(orjson.loads(r.value)["type"] == "pool.snapshot" for r in state)


async def measure_sizes(bootstrap: Broker | str, sizes: tuple[int, ...] = SIZES, **options) -> ScaleReport:
    """`measure_scale` at each size in turn."""
    return ScaleReport([await measure_scale(bootstrap, gpus, **options) for gpus in sizes])


def _cell(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}" if value < 100 else f"{value:,.0f}{unit}"
    return f"{value:,}{unit}"


def _pair(a, b, unit: str = "") -> str:
    return f"{_cell(a)} / {_cell(b)}{unit}" if a is not None or b is not None else "-"


def table(results: list[ScaleResult]) -> str:
    """One column a pool size, one row a figure; then each size's errors."""
    if not results:
        return "no sizes measured"
    r0 = results[0]
    rows = [
        (
            "backlog decided (s)",
            lambda r: _cell(r.backlog_s) if r.backlog_decided == r.queued else f"{r.backlog_decided:,} of {r.queued:,}",
        ),
        ("backlog rejected", lambda r: _cell(r.rejected)),
        ("decided / arrivals", lambda r: _pair(r.decided, r.arrivals)),
        ("decision p50 / p99 (ms)", lambda r: _pair(r.p50_ms, r.p99_ms)),
        ("commits while measured", lambda r: _cell(r.commits)),
        ("boundary to commit p50 / max (ms)", lambda r: _pair(r.boundary_p50_ms, r.boundary_max_ms)),
        ("boundaries planned ahead / all", lambda r: _pair(r.planned_ahead, r.boundaries)),
        ("commit record max (bytes; parts)", lambda r: f"{_cell(r.commit_max_bytes)}; {r.commit_parts_max}"),
        ("ledger record max (bytes)", lambda r: _cell(r.ledger_max_bytes)),
        ("snapshot record max (bytes; n)", lambda r: f"{_cell(r.snapshot_max_bytes)}; {r.snapshots}"),
        ("agent peak RSS (MB)", lambda r: _cell(r.agent_rss_mb)),
        ("solver processes RSS (MB; n)", lambda r: f"{_cell(r.solver_rss_mb)}; {r.solver_processes}"),
        ("status (s; lines)", lambda r: f"{_cell(r.status_s)}; {r.status_lines:,}"),
        ("recovery after SIGKILL (s)", lambda r: _cell(r.recovery_s)),
        (f"children left {ORPHAN_S:g} s after SIGKILL", lambda r: _cell(r.left_after_kill)),
        ("SIGTERM to exit (s)", lambda r: _cell(r.sigterm_s)),
        ("children left after SIGTERM", lambda r: _cell(r.left_after_sigterm)),
    ]
    width = max(len(name) for name, _ in rows) + 2
    columns = [[f"{r.gpus:,} GPUs"] + [cell(r) for _, cell in rows] for r in results]
    col = [max(len(c) for c in column) + 2 for column in columns]
    lines = [
        f"scale: {r0.node_gpus} GPUs a node, horizon {r0.horizon}, {STEP_MINUTES}-minute steps every "
        f"{r0.step_seconds:g} s, {r0.apps} apps, {r0.queued:,} queued ({FEATURED:.0%} by features), "
        f"{r0.rate:g} arrivals/s for {r0.seconds:g} s",
        " " * width + "".join(c[0].rjust(w) for c, w in zip(columns, col)),
    ]
    for i, (name, _) in enumerate(rows, start=1):
        lines.append(name.ljust(width) + "".join(c[i].rjust(w) for c, w in zip(columns, col)))
    for r in results:
        lines += [f"{r.gpus:,} GPUs, {name}: {error}" for name, error in r.errors.items()]
    return "\n".join(lines)

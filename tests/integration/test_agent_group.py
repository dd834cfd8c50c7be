"""Pools across agents: two agent processes in one consumer group share four pools (one per
partition of the input topics, keyed by pool). A second agent joins (a rebalance: some pools move
to it with their state), then the first is killed with SIGKILL (its pools move after its session
times out). Every job of every pool is decided exactly once, each pool's `seq` rises strictly
across the moves, every committed step is legal, and `gpualloc audit` reproduces each pool."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.http_metrics import get, samples
from support.kafka_broker import _free_ports, read_all, unique_topic

from gpualloc.agent.cli.running import agent_argv
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.topics import Topics, key_of, partition_of
from gpualloc.schemas.events import JobSubmitted, PoolConfigured, envelope
from gpualloc.solvers.legality import online_violations

pytestmark = pytest.mark.kafka

PARTITIONS = 4
STEP = 0.5  # seconds per step
GPUS, NODE = 8, 4


def one_pool_per_partition(stem: str) -> list[str]:
    """Pool names that the default partitioner spreads over every partition, one each."""
    pools: dict[int, str] = {}
    n = 0
    while len(pools) < PARTITIONS:
        name = f"{stem}{n}"
        pools.setdefault(partition_of(name, PARTITIONS), name)
        n += 1
    return [pools[p] for p in range(PARTITIONS)]


def message(kind: str, payload, pool: str, event_id: str) -> dict:
    return envelope(kind, payload, datetime.now(timezone.utc), event_id, pool)


def job(pool: str, n: int) -> dict:
    payload = JobSubmitted(id=f"{pool}-j{n}", kind="training", priority=1 + n % 3, gpus=1 + n % 2, duration=2)
    return message("job.submitted", payload, pool, f"{pool}-j{n}")


class Bus:
    """The test's producer and a running tally of decisions."""

    def __init__(self, bootstrap: str, topics: Topics):
        self.bootstrap, self.topics = bootstrap, topics
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")

    async def send(self, m: dict, key: bytes | None | str = "by-contract") -> None:
        key = key_of(m).encode() if key == "by-contract" else key
        await self.producer.send_and_wait(self.topics.of_type(m["type"]), orjson.dumps(m), key=key)

    async def decided(self, jobs: set[str], seconds: float) -> list[dict]:
        deadline = time.monotonic() + seconds
        while True:
            decisions = [m["payload"] for m in await read_all(self.bootstrap, self.topics.decisions)]
            if jobs <= {d["job_id"] for d in decisions} or time.monotonic() > deadline:
                return decisions
            await asyncio.sleep(0.5)


def taken(log_path) -> list[str]:
    return re.findall(r"pool (\S+): taken up", log_path.read_text())


async def test_two_agents_share_pools_and_a_pool_moves_with_its_state(kafka_bootstrap, tmp_path):
    prefix = unique_topic("group") + "."
    topics = Topics.with_prefix(prefix)
    pools = one_pool_per_partition(prefix.replace(".", "-"))
    command = agent_argv(
        kafka_bootstrap,
        prefix,
        "--group",
        f"{prefix}agents",
        "--partitions",
        str(PARTITIONS),
        "--step-seconds",
        str(STEP),
        "--policy",
        "heuristic",
    )
    env = {**os.environ, "GPUALLOC_AGENT__SESSION_TIMEOUT_MS": "6000"}
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b")}
    await ensure_topics(kafka_bootstrap, topics, PARTITIONS, -1)  # as operators would, before producers write
    (port,) = _free_ports(1)
    a = subprocess.Popen(command + ["--metrics-port", str(port)], env=env, stderr=logs["a"].open("wb"))
    b = None
    bus = Bus(kafka_bootstrap, topics)
    await bus.producer.start()
    jobs: set[str] = set()
    try:
        for pool in pools:
            await bus.send(
                message(
                    "pool.configured",
                    PoolConfigured(gpus=GPUS, gpus_per_node=NODE, horizon=12, step_minutes=60),
                    pool,
                    f"{pool}-config",
                )
            )

        async def phase(first: int, count: int) -> None:
            for n in range(first, first + count):
                for pool in pools:
                    m = job(pool, n)
                    await bus.send(m)
                    jobs.add(m["payload"]["id"])
            decided = {d["job_id"] for d in await bus.decided(jobs, 90)}
            assert jobs <= decided, sorted(jobs - decided)[:5]

        await phase(0, 4)
        assert sorted(taken(logs["a"])) == sorted(pools)  # alone in the group, it serves every pool
        for _ in range(50):  # one endpoint for every pool the member runs
            got = samples((await asyncio.to_thread(get, port, "/metrics"))[1])
            decided = Counter()  # per pool, over the actions
            for (name, labels), v in got.items():
                if name == "gpualloc_decisions_total":
                    decided[dict(labels)["pool"]] += v
            if got.get(("gpualloc_group_pools", ())) == len(pools) and sum(decided.values()) == 4 * len(pools):
                break
            await asyncio.sleep(0.2)
        assert got[("gpualloc_group_pools", ())] == len(pools) and set(decided) == set(pools)
        assert sum(decided.values()) == 4 * len(pools)
        assert (await asyncio.to_thread(get, port, "/readyz"))[0] == 200

        b = subprocess.Popen(command, env=env, stderr=logs["b"].open("wb"))
        deadline = time.monotonic() + 60
        while not taken(logs["b"]) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        moved = taken(logs["b"])
        assert moved and len(moved) < len(pools), moved  # the rebalance split the pools
        await phase(4, 4)

        # records no pool's agent could read: no key, and a key that is not the pool it names
        await bus.send(job(pools[0], 90), key=None)
        await bus.send(job(pools[1], 91), key=pools[0].encode())

        a.kill()  # SIGKILL: its pools wait for its session to time out, then move to b
        a.wait()
        await phase(8, 4)
        assert sorted(taken(logs["b"])) == sorted(pools), taken(logs["b"])
        b.terminate()
        assert b.wait(timeout=60) == 0
    finally:
        await bus.producer.stop()
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()

    decisions = [m for m in await read_all(kafka_bootstrap, topics.decisions)]
    per_job = Counter(m["payload"]["job_id"] for m in decisions)
    assert set(per_job) == jobs  # the two stray jobs were not decided...
    assert max(per_job.values()) == 1, per_job.most_common(3)  # ...and each job once
    letters = {m["event_id"]: m["payload"] for m in await read_all(kafka_bootstrap, topics.deadletter)}
    reasons = Counter(d["reason"].split(";")[0].split(" (")[0] for d in letters.values())  # once per record
    assert reasons == {"key: missing": 1, f"pool: {pools[1]!r} must be the record's key, {pools[0]!r}": 1}, reasons

    commits = await read_all(kafka_bootstrap, topics.commits)
    for pool in pools:
        mine = [m["payload"] for m in commits if m["pool"] == pool]
        seqs = [c["seq"] for c in mine]
        assert seqs == list(range(1, len(seqs) + 1)), pool  # rising across both moves, no gap, no repeat
        steps = [
            type("Step", (), {"step": c["step"], "assignments": {k: tuple(v) for k, v in c["assignments"].items()}})
            for c in mine
        ]
        assert online_violations(steps, {}, set(), node_size=NODE) == [], pool
        audit = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpualloc",
                "audit",
                "--bootstrap",
                kafka_bootstrap,
                "--topic-prefix",
                prefix,
                "--pool",
                pool,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert audit.returncode == 0, (pool, audit.stdout[-3000:], audit.stderr[-2000:])
        own = sum(1 for m in decisions if m["pool"] == pool)
        assert (
            audit.stdout.strip().splitlines()[-1]
            == f"audit {pool}: {own} decisions, {len(mine)} commits reproduced; 0 mismatches"
        )

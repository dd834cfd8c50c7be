"""A flood of hostile input through the real broker: 10,000 bad messages of every kind
(tests/hostile.py) interleaved with a pool's good events, against `gpualloc agent` as the CLI runs
it, and a second run of the good events alone. The agent never stops; every bad message is
answered exactly once (a dead letter, or a `rejected` decision) and no dead letter nears the
broker's limit; every good job is decided exactly once, the same jobs as in the clean run; the
pool ends holding what the clean run's holds; and `gpualloc audit` reproduces the hostile run."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime, timezone

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.hostile import HOSTILE_IDS, envelope, hostile, job, topic_of
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.cli.running import agent_argv
from gpualloc.bus.topics import Topics

pytestmark = pytest.mark.kafka

BAD = 10_000
GPUS = 16
JOBS = HOSTILE_IDS + [f"j{k}" for k in range(40)]
HUGE_EVERY = 200  # one bad message in this many may be ~1 MB (the rest are small), to keep the run short


def now() -> datetime:
    return datetime.now(timezone.utc)


async def play(bootstrap: str, topics: Topics, bad: int, seed: int = 7) -> int:
    """The pool, an app, the jobs, with `bad` hostile messages spread among them; then, once
    every job is decided, a completion for each. Returns the bad messages sent."""
    rng = random.Random(seed)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=2**21)
    await producer.start()
    sent_bad, good_ids = 0, []

    async def send(value: bytes, topic: str) -> None:
        await producer.send(getattr(topics, topic), value, key=b"default")

    try:
        await send(
            orjson.dumps(envelope("pool.configured", {"gpus": GPUS, "gpus_per_node": 8, "horizon": 8}, "cfg", now())),
            "config",
        )
        await send(
            orjson.dumps(
                envelope(
                    "app.registered",
                    {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4, "profile": [2] * 24},
                    "app",
                    now(),
                )
            ),
            "traffic",
        )
        per_job = bad // len(JOBS)
        for k, job_id in enumerate(JOBS):
            event_id = f"good-{k}"
            await send(
                orjson.dumps(
                    envelope(
                        "job.submitted",
                        job(job_id, gpus=rng.choice([1, 2, 4]), duration=50, priority=rng.randint(1, 9)),
                        event_id,
                        now(),
                    )
                ),
                "jobs",
            )
            good_ids.append(event_id)
            count = per_job if k < len(JOBS) - 1 else bad - sent_bad
            for _ in range(count):
                value = hostile(rng, sent_bad, now(), GPUS, good_ids[-3:])
                while len(value) > 300_000 and sent_bad % HUGE_EVERY:
                    value = hostile(rng, sent_bad, now(), GPUS, good_ids[-3:])
                await send(value, topic_of(value))
                sent_bad += 1
            await producer.flush()
            await asyncio.sleep(0.05)
        return sent_bad
    finally:
        await producer.stop()


async def complete_all(bootstrap: str, topics: Topics) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all") as producer:
        for k, job_id in enumerate(JOBS):
            await producer.send(
                topics.jobs, orjson.dumps(envelope("job.completed", {"id": job_id}, f"done-{k}", now())), key=b"default"
            )


async def until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(1)


async def one_run(bootstrap: str, bad: int, tmp_path) -> dict:
    """Run the agent over the good events and `bad` hostile ones; what it published."""
    prefix = unique_topic("hostile") + "."
    topics = Topics.with_prefix(prefix)
    env = {**os.environ, "GPUALLOC_AGENT__DEDUP_STEPS": "10000"}  # reused ids stay recognisable all run long
    log = tmp_path / f"agent-{bad}.log"
    agent = subprocess.Popen(
        agent_argv(bootstrap, prefix, "--policy", "heuristic", "--step-seconds", "1"),
        env=env,
        stderr=log.open("wb"),
    )
    try:
        sent = await play(bootstrap, topics, bad)

        async def all_decided() -> bool:
            return {m["payload"]["job_id"] for m in await read_all(bootstrap, topics.decisions)} >= set(JOBS)

        await until(all_decided, 240, "every good job's decision")
        await complete_all(bootstrap, topics)

        async def quiet() -> bool:  # the last commit holds no job: every completion was taken
            commits = await read_all(bootstrap, topics.commits)
            return bool(commits) and set(commits[-1]["payload"]["assignments"]) == {"chat"}

        await until(quiet, 120, "a commit after every completion")
        assert agent.poll() is None, log.read_text()[-3000:]  # still running: no input stopped it
        agent.terminate()
        assert agent.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if agent.poll() is None:
            agent.kill()
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # not a terminal: JSON a line
    assert lines and all(line["pool"] == "default" and line["level"] and line["ts"] for line in lines)
    return {
        "sent": sent,
        "prefix": prefix,
        "decisions": await read_all(bootstrap, topics.decisions),
        "letters": await read_all(bootstrap, topics.deadletter),
        "commits": await read_all(bootstrap, topics.commits),
        "log": lines,
    }


async def test_ten_thousand_bad_messages_among_good_ones(kafka_bootstrap, tmp_path):
    clean = await one_run(kafka_bootstrap, 0, tmp_path)
    dirty = await one_run(kafka_bootstrap, BAD, tmp_path)
    assert dirty["sent"] == BAD and not clean["letters"]
    logged = [line for line in dirty["log"] if line["event"].startswith("dead-lettered")]
    assert len(logged) == len(dirty["letters"]) and all("event_id" in line and "input" in line for line in logged)
    assert any(line["event"].startswith("plan for step") and "seq" in line for line in clean["log"])

    good = [m["payload"] for m in dirty["decisions"] if m["payload"]["input_event_id"].startswith("good-")]
    assert sorted(d["job_id"] for d in good) == sorted(JOBS)  # each good job once...
    assert sorted(d["job_id"] for d in good) == sorted(m["payload"]["job_id"] for m in clean["decisions"])
    refused = [m for m in dirty["decisions"] if not m["payload"]["input_event_id"].startswith("good-")]
    assert all(m["payload"]["action"] == "rejected" for m in refused)
    letters = dirty["letters"]
    assert len(letters) + len(refused) == BAD  # each bad one answered exactly once
    assert len({m["event_id"] for m in letters}) == len(letters)
    assert all(m["payload"]["reason"] and m["payload"]["original_sha256"] for m in letters)
    assert max(len(orjson.dumps(m)) for m in letters) < 100_000  # far below the broker's 1 MiB

    def holders(run: dict) -> dict[str, int]:
        return {k: len(v) for k, v in run["commits"][-1]["payload"]["assignments"].items()}

    assert holders(dirty) == holders(clean) == {"chat": 2}

    audit = subprocess.run(
        [sys.executable, "-m", "gpualloc", "audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", dirty["prefix"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]
    assert audit.stdout.strip().splitlines()[-1].endswith("; 0 mismatches")

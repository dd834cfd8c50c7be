"""How fast a killed agent is back: `gpualloc bench recovery`. The agent (its own process, as
the CLI runs it) plans a 64-GPU pool until `queued` jobs wait, is killed with SIGKILL, and is
started again with the same command; the figure is the time from that start to the decision on
a job submitted at the same moment (the process's imports, the broker's fencing, reading the
snapshot and the ledger after it, and the pass). Repeated `repeat` times on the same pool."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO

import orjson
from aiokafka import AIOKafkaProducer

from gpualloc.agent.cli.running import agent_argv
from gpualloc.benchmarks.throughput import POOL, Decisions, stop_all
from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope


@dataclass
class RecoveryResult:
    queued: int
    restarts: int
    p50_s: float
    max_s: float

    def line(self) -> str:
        return (
            f"start to first decision after SIGKILL, {self.queued} jobs queued at 64 GPUs: p50 {self.p50_s:.2f} s, "
            f"max {self.max_s:.2f} s over {self.restarts} restarts"
        )


def _job(n: int, tag: str, gpus: int = 8, duration: int = 40) -> bytes:
    return orjson.dumps(
        envelope(
            "job.submitted",
            {"id": f"{tag}-{n}", "kind": "training", "priority": 1 + n % 9, "gpus": gpus, "duration": duration},
            datetime.now(timezone.utc),
            f"{tag}-e{n}",
        )
    )


async def measure_recovery(bootstrap: Broker | str, queued: int = 1000, repeat: int = 3) -> RecoveryResult:
    prefix = f"recovery-{uuid.uuid4().hex[:8]}."
    topics = Topics.with_prefix(prefix)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(POOL, f)
    command = agent_argv(bootstrap, prefix, "--config", f.name, "--step-seconds", "30", "--full-mode-every", "0")
    producer = clients.producer(bootstrap, linger_ms=5)
    decisions = Decisions(bootstrap, topics)
    decided = decisions.at
    agent = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    await producer.start()
    await decisions.start()
    assert decisions.task is not None  # start() made it
    times = []
    try:
        for n in range(queued):
            await producer.send(topics.jobs, _job(n, "q"), key=b"default")
        await producer.flush()
        await until(lambda: sum(j.startswith("q-") for j in decided) >= queued, 120)
        for k in range(repeat):
            agent, seconds = await killed_and_back(agent, command, producer, topics, decisions, f"probe-{k}")
            times.append(seconds)
    finally:
        await stop_all(decisions.task, decisions.consumer, producer, agent, bootstrap, topics)
        os.unlink(f.name)
    return RecoveryResult(queued, repeat, round(statistics.median(times), 3), round(max(times), 3))


async def killed_and_back(
    agent: subprocess.Popen,
    command: list[str],
    producer: AIOKafkaProducer,
    topics: Topics,
    decisions: Decisions,
    probe: str,
    stderr: IO | int = subprocess.DEVNULL,
    seconds: float = 60,
) -> tuple[subprocess.Popen, float]:
    """SIGKILL `agent`, start `command` again and submit job `probe` at once: the new process,
    and the seconds from its start to the probe's decision (imports, fencing the old producer,
    the snapshot and the ledger after it, the pass). TimeoutError after `seconds`."""
    agent.kill()
    agent.wait()
    began = time.perf_counter()
    agent = subprocess.Popen(command, stderr=stderr)
    try:
        await producer.send_and_wait(topics.jobs, _job(0, probe, gpus=1, duration=1), key=b"default")
        await until(lambda: f"{probe}-0" in decisions.at, seconds)
    except BaseException:
        agent.kill()  # the caller's teardown stops the process it knows of, not this one
        agent.wait()
        raise
    return agent, decisions.at[f"{probe}-0"] - began


async def until(done: Callable[[], bool], seconds: float) -> None:
    """Wait for `done()` to hold, polling; TimeoutError after `seconds` (a bench never hangs)."""
    deadline = time.perf_counter() + seconds
    while not done():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not done within {seconds} s")
        await asyncio.sleep(0.02)

"""Faults with a real broker: the broker stopped and started again in the middle of a stream.
`gpualloc agent` and `gpualloc node-agent` (the CLI, as operators run them) keep running through
the outage, reconnect with backoff and resume: every job sent before, during and after it is
decided exactly once, `seq` rises without a gap, the node agent ends bound as the last commit
says, and `gpualloc audit` reproduces the whole run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.hostile import envelope, job
from support.kafka_broker import LocalBroker, local_broker, port_open, read_all

from gpualloc.agent.node.binders import FileBinder
from gpualloc.bus.topics import Topics

pytestmark = pytest.mark.kafka

STEP = 0.5


def restart(broker: LocalBroker, down_s: float) -> None:
    """Kill the broker's JVM (SIGKILL), wait `down_s`, start the same command
    on the same data again, and wait until it serves."""
    pidfile = broker.directory / "kafka.pid"
    pid = int(pidfile.read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    os.kill(
        pid, signal.SIGKILL
    )  # a crash: the one broker does no controlled shutdown, so its partitions come back led by it
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, "the broker did not stop"
        time.sleep(0.2)
    time.sleep(down_s)
    with (broker.directory / "kafka.log").open("ab") as log:
        jvm = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    pidfile.write_text(str(jvm.pid))  # so the fixture's `down` stops the new JVM
    host, port = broker.bootstrap.split(":")
    while not port_open(host, int(port)):
        assert time.monotonic() < deadline + 60, "the broker did not come back"
        time.sleep(0.2)


async def send_jobs(bootstrap: str, topics: Topics, ids: list[str]) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True) as producer:
        for job_id in ids:
            m = envelope("job.submitted", job(job_id, gpus=1, duration=4), job_id, datetime.now(timezone.utc))
            await producer.send_and_wait(topics.jobs, orjson.dumps(m), key=b"default")
            await asyncio.sleep(0.05)


async def decided(bootstrap: str, topics: Topics, ids: set[str], seconds: float) -> list[dict]:
    deadline = time.monotonic() + seconds
    while True:
        decisions = [m["payload"] for m in await read_all(bootstrap, topics.decisions)]
        if ids <= {d["job_id"] for d in decisions} or time.monotonic() > deadline:
            return decisions
        await asyncio.sleep(0.5)


async def test_agent_and_node_agent_ride_out_a_broker_restart(tmp_path):
    with local_broker() as broker:
        bootstrap, topics = broker.bootstrap, Topics()
        cli = [sys.executable, "-m", "gpualloc"]
        agent = subprocess.Popen(
            cli + ["agent", "--bootstrap", bootstrap, "--policy", "heuristic", "--step-seconds", str(STEP)],
            stderr=(tmp_path / "agent.log").open("wb"),
        )
        node = subprocess.Popen(
            cli
            + [
                "node-agent",
                "--bootstrap",
                bootstrap,
                "--node",
                "0",
                "--gpus",
                "0-7",
                "--bind-dir",
                str(tmp_path / "bound"),
            ],
            stderr=(tmp_path / "node.log").open("wb"),
        )
        try:
            async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all") as producer:
                config = envelope(
                    "pool.configured", {"gpus": 8, "gpus_per_node": 8, "horizon": 8}, "cfg", datetime.now(timezone.utc)
                )
                await producer.send_and_wait(topics.config, orjson.dumps(config), key=b"default")
            before = [f"before-{k}" for k in range(6)]
            await send_jobs(bootstrap, topics, before)
            assert {d["job_id"] for d in await decided(bootstrap, topics, set(before), 60)} >= set(before)

            await asyncio.to_thread(restart, broker, 3.0)
            after = [f"after-{k}" for k in range(6)]
            await send_jobs(bootstrap, topics, after)
            decisions = await decided(bootstrap, topics, set(before + after), 120)
            await asyncio.sleep(6 * STEP)  # a few commits after the last decision reach the node agent
            for proc, name in ((agent, "agent"), (node, "node")):
                assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()[-3000:]
            agent.terminate()  # first: the node agent then sees the last commit
            assert agent.wait(timeout=60) == 0
            await asyncio.sleep(2)
            node.terminate()
            assert node.wait(timeout=60) == 0
            commits = [m["payload"] for m in await read_all(bootstrap, topics.commits)]
        finally:
            for proc in (agent, node):
                if proc.poll() is None:
                    proc.kill()

        assert sorted(d["job_id"] for d in decisions) == sorted(before + after)  # each exactly once
        assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
        last = {owner: gpus for owner, gpus in commits[-1]["assignments"].items()}
        assert FileBinder(tmp_path / "bound").bound() == last
        audit = subprocess.run(cli + ["audit", "--bootstrap", bootstrap], capture_output=True, text=True, timeout=300)
        assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]

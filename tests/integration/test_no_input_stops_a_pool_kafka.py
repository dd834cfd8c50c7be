"""No input stops a pool, on a real broker with the agent as operators run it: a pool configured
with no GPU type, a job given by its features and its sizes, and its completion (which stopped
the agent at every restart: the forecasters cannot size the job to learn from it), followed by
hostile records of every kind; the agent keeps deciding, restarts cleanly over the same ledger,
and `audit` reproduces everything it published."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime

import orjson
import pytest
from support.feature_jobs import LORA_7B
from support.kafka_broker import read_all, unique_topic
from test_audit import publish

from gpualloc.agent.cli.running import agent_argv
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope

pytestmark = pytest.mark.kafka

STEP = 0.5


def message(kind: str, payload: dict, event_id: str) -> bytes:
    return orjson.dumps(envelope(kind, payload, datetime.now(UTC), event_id))


async def decided(bootstrap: str, topics: Topics, job_id: str, agent: subprocess.Popen, log) -> dict:
    for _ in range(300):
        assert agent.poll() is None, log.read_text()[-3000:]
        for m in await read_all(bootstrap, topics.decisions):
            if m["payload"]["job_id"] == job_id:
                return m["payload"]
        await asyncio.sleep(0.2)
    raise AssertionError(f"no decision for {job_id}: {log.read_text()[-3000:]}")


async def test_a_completion_no_gpu_type_sizes_and_hostile_records_stop_no_pool(kafka_bootstrap, tmp_path):
    prefix = unique_topic("nostop") + "."
    topics = Topics.with_prefix(prefix)
    log = tmp_path / "agent.log"
    command = agent_argv(kafka_bootstrap, prefix, "--step-seconds", str(STEP))
    agent = subprocess.Popen(command, cwd=tmp_path, stderr=log.open("ab"))
    try:
        await publish(kafka_bootstrap, topics.config, [message("pool.configured", {"gpus": 1024}, "cfg")], b"default")
        sized = {"kind": "training", "priority": 3, "gpus": 8, "duration": 4, "features": LORA_7B}
        await publish(kafka_bootstrap, topics.jobs, [message("job.submitted", {"id": "f", **sized}, "f")], b"default")
        assert (await decided(kafka_bootstrap, topics, "f", agent, log))["action"] in ("start", "planned")
        hostile = [
            message("job.completed", {"id": "f", "used": {"gpus": 8, "duration": 2, "peak_memory_gb": 40}}, "done"),
            message("job.failed", {"id": "f", "reason": "out_of_memory"}, "late-oom"),  # it has ended already
            message("job.submitted", {"id": "g", **sized, "gpus": 4096}, "huge"),  # larger than the pool
            message("job.submitted", {"id": "h", "kind": "training", "priority": 3, "features": LORA_7B}, "h"),
            b"{not json",
            message("job.cancelled", {"id": "nobody"}, "ghost"),
            message("job.submitted", {"id": "after", "kind": "training", "priority": 1, "gpus": 2, "duration": 2}, "a"),
        ]
        await publish(kafka_bootstrap, topics.jobs, hostile, b"default")
        assert (await decided(kafka_bootstrap, topics, "after", agent, log))["action"] in ("start", "planned")
        agent.kill()  # the same ledger again: the completion is replayed on restart
        agent.wait()
        agent = subprocess.Popen(command, cwd=tmp_path, stderr=log.open("ab"))
        again = message(
            "job.submitted", {"id": "again", "kind": "training", "priority": 1, "gpus": 2, "duration": 2}, "b"
        )
        await publish(kafka_bootstrap, topics.jobs, [again], b"default")
        assert (await decided(kafka_bootstrap, topics, "again", agent, log))["action"] in ("start", "planned")
        agent.terminate()
        assert agent.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if agent.poll() is None:
            agent.kill()
    letters = {
        m["payload"]["original"][:60]: m["payload"]["reason"]
        for m in await read_all(kafka_bootstrap, topics.deadletter)
    }
    assert not any("internal error" in reason for reason in letters.values()), letters
    audit = subprocess.run(
        [sys.executable, "-m", "gpualloc", "audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0, (audit.stdout[-3000:], audit.stderr[-2000:])

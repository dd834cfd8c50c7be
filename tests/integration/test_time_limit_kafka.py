"""A job whose completion never comes, on a real broker: the agent fails it at its time limit
(`job.failed`, reason `time_limit`, once), the node agents bound to it release it (the bind
directory's env file removed, a hook's `release` run to stop it), and `audit` reproduces it."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from support.kafka_broker import unique_topic
from test_audit import cli, publish
from test_node_agent_kafka import files_are, read_all, reports, running, wait_until

from gpualloc.agent.node.binders import FileBinder, HookBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

SETTINGS = AgentSettings(step_seconds=2.0, full_mode=RollingFullMode(every=0), snapshot_every=2)
HOOK = "import sys\nwith open(sys.argv[1], 'a') as f:\n    f.write(' '.join(sys.argv[2:]) + '\\n')\n"


def message(kind: str, payload: dict, at: datetime, event_id: str) -> bytes:
    return orjson.dumps(envelope(kind, payload, at, event_id))


async def test_a_job_past_its_time_limit_is_failed_released_and_audited(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_topic("limit") + "."
    topics = Topics.with_prefix(prefix)
    now = datetime.now(UTC)
    config = message("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 6}, now, "cfg")
    hook, calls = tmp_path / "hook.py", tmp_path / "calls.log"
    hook.write_text(HOOK)
    d0 = tmp_path / "node0"
    node0 = NodeAgent(kafka_bootstrap, 0, range(0, 8), FileBinder(d0), topics=topics)
    node1 = NodeAgent(
        kafka_bootstrap, 1, range(8, 16), HookBinder([sys.executable, str(hook), str(calls)]), topics=topics
    )
    agent = AgentService(kafka_bootstrap, SETTINGS, topics, initial_config=config)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        async with running(node0), running(node1):
            await asyncio.wait_for(ready.wait(), 60)
            job = {"id": "stuck", "kind": "training", "priority": 5, "gpus": 16, "duration": 50, "time_limit": 2}
            await publish(kafka_bootstrap, topics.jobs, [message("job.submitted", job, now, "stuck")], key=b"default")
            await files_are(d0, {"stuck": list(range(8))})

            async def failed() -> bool:
                return any(m["type"] == "job.failed" for _, m in await read_all(kafka_bootstrap, topics.jobs))

            await wait_until(failed, "the agent's job.failed")
            notices = [
                m["payload"] for _, m in await read_all(kafka_bootstrap, topics.jobs) if m["type"] == "job.failed"
            ]
            assert [(n["id"], n["reason"], n["source"]) for n in notices] == [("stuck", "time_limit", "agent")]
            commits = [m["payload"] for _, m in await read_all(kafka_bootstrap, topics.commits)]
            ran = [c["step"] for c in commits if "stuck" in c["assignments"]]
            assert len(ran) == 2 and not any("stuck" in c["assignments"] for c in commits if c["step"] > max(ran))
            await files_are(d0, {})  # the env file the launcher sourced is gone

            async def released() -> bool:
                got = await read_all(kafka_bootstrap, topics.bindings)
                return all(("released", "stuck") in [r[:2] for r in reports(got, node)] for node in (0, 1))

            await wait_until(released, "both nodes releasing the job")
            assert calls.read_text().splitlines() == ["bind stuck 0,1,2,3,4,5,6,7", "release stuck"]
            assert (
                agent.dispatcher.interpreter.planner is not None
                and "stuck" not in agent.dispatcher.interpreter.planner.queued
            )
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    rc, out = await cli("audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("; 0 mismatches"), out

"""Audit, explain and restart on a real broker: an agent plans a few jobs, is stopped and started
again without `--config` (it restores its pool), `gpualloc audit` reproduces everything and
catches a forged decision, `gpualloc explain` tells a job's story, and a snapshot this release
cannot read is refused and the state rebuilt from the ledger."""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime, timezone

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.kafka_broker import unique_topic

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

pytestmark = pytest.mark.kafka

SETTINGS = AgentSettings(step_seconds=0.5, full_mode=RollingFullMode(every=0), snapshot_every=2)


def job(n: int, gpus: int = 8, duration: int = 4) -> bytes:
    return orjson.dumps(
        envelope(
            "job.submitted",
            {"id": f"j{n}", "kind": "training", "priority": 1 + n, "gpus": gpus, "duration": duration},
            datetime.now(timezone.utc),
            f"e{n}",
        )
    )


async def publish(bootstrap: str, topic: str, values: list[bytes], key: bytes = b"k") -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


async def cli(*args: str) -> tuple[int, str]:
    """The command as a user runs it (its own process and event loop)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpualloc", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode() + err.decode()


async def run_agent(
    bootstrap: str, topics: Topics, seconds: float, config: bytes | None = None, until=None
) -> AgentService:
    """Run an agent for `seconds`, and then until `until(agent)` holds (at most 30 s more)."""
    agent = AgentService(bootstrap, SETTINGS, topics, initial_config=config)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    await asyncio.wait([task, asyncio.create_task(ready.wait())], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert ready.is_set(), task.exception() if task.done() else "not ready within 60 s"
    await asyncio.sleep(seconds)
    for _ in range(300):
        if until is None or until(agent):
            break
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, 30)
    return agent


async def test_restart_audit_explain_and_a_refused_snapshot(kafka_bootstrap):
    prefix = unique_topic("audit") + "."
    topics = Topics.with_prefix(prefix)
    config = orjson.dumps(
        envelope("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 12}, datetime.now(timezone.utc), "cfg")
    )
    first = await run_agent(kafka_bootstrap, topics, 0.1, config)
    await publish(kafka_bootstrap, topics.jobs, [job(n) for n in range(4)])  # two run, two wait
    first = await run_agent(
        kafka_bootstrap,
        topics,
        1.5,  # no --config: restored from the bus
        until=lambda a: a.stats.decisions == 4,
    )
    assert first.stats.decisions == 4 and first.dispatcher.seq > 1
    seq = first.dispatcher.seq

    bus = ["--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]
    rc, out = await cli("audit", *bus)
    assert (
        rc == 0
        and out.strip().splitlines()[-1] == f"audit default: 4 decisions, {seq} commits reproduced; 0 mismatches"
    )

    rc, story = await cli("explain", "j3", *bus)  # the most valuable: running
    assert rc == 0 and "submitted: training, 8 GPUs for 4 steps" in story and "decided start" in story
    assert "started at step" in story
    rc, waiting = await cli("explain", "j0", *bus)  # the least valuable: still waiting behind two
    assert rc == 0 and "waiting, planned at step" in waiting and "held by j" in waiting, waiting
    assert (await cli("explain", "nobody", *bus))[0] == 2

    # a snapshot of another version: refused, and the state rebuilt from the whole ledger
    forged = envelope(
        "pool.snapshot",
        {"version": 0, "txn": 10**6, "seq": 0, "ledger_partition": 0, "ledger_next": 0, "frontier": {}, "state": ""},
        datetime.now(timezone.utc),
        "forged",
    )
    await publish(kafka_bootstrap, topics.state, [orjson.dumps(forged)], key=b"default")
    again = await run_agent(kafka_bootstrap, topics, 1.0)
    assert again.dispatcher.seq > seq and again.stats.replayed >= 3
    assert (await run_agent(kafka_bootstrap, topics, 0.2)).stats.replayed < again.stats.replayed  # a good one again

    # a decision nobody made: the audit names it and fails
    fake = envelope(
        "allocation.decided",
        {"job_id": "j9", "action": "start", "gpus": [0], "reason": "forged", "input_event_id": "x", "latency_ms": 0},
        datetime.now(timezone.utc),
        "x:decided",
    )
    await publish(kafka_bootstrap, topics.decisions, [orjson.dumps(fake)], key=b"j9")
    rc, out = await cli("audit", *bus, "--from", "0")
    assert rc == 1
    assert "allocation.decided x:decided: published, but the ledger's replay does not make it" in out
    assert out.strip().splitlines()[-1].endswith("; 1 mismatches")


async def test_events_before_the_configuration_survive_a_restart(kafka_bootstrap):
    """Jobs that wait for their pool's configuration are in the ledger, never in a snapshot:
    a restart replays them, and they are decided once the configuration arrives."""
    topics = Topics.with_prefix(unique_topic("pending") + ".")
    await publish(kafka_bootstrap, topics.jobs, [job(n, gpus=1) for n in range(3)])
    waiting = await run_agent(kafka_bootstrap, topics, 0.5, until=lambda a: a.stats.records == 3)
    assert waiting.stats.decisions == 0 and len(waiting.dispatcher.interpreter.pending) == 3
    config = envelope("pool.configured", {"gpus": 8}, datetime.now(timezone.utc), "cfg")
    await publish(kafka_bootstrap, topics.config, [orjson.dumps(config)], key=b"default")
    configured = await run_agent(kafka_bootstrap, topics, 0.5, until=lambda a: a.stats.decisions == 3)
    assert configured.stats.decisions == 3 and configured.stats.replayed >= 1


async def test_apps_sent_with_the_configuration_keep_their_floors_beside_jobs_that_waited(kafka_bootstrap):
    """Jobs read before their pool's configuration wait (a restart replays them from the ledger);
    the configuration and three apps read next register the apps before those jobs are decided,
    so none is refused, and `audit` reproduces it all."""
    prefix = unique_topic("setup") + "."
    topics = Topics.with_prefix(prefix)
    await publish(kafka_bootstrap, topics.jobs, [job(n, gpus=1) for n in range(10)], key=b"default")
    waiting = await run_agent(kafka_bootstrap, topics, 0.5, until=lambda a: a.stats.records == 10)
    assert waiting.stats.decisions == 0 and len(waiting.dispatcher.interpreter.pending) == 10
    now = datetime.now(timezone.utc)
    config = envelope("pool.configured", {"gpus": 8, "gpus_per_node": 8, "horizon": 12}, now, "cfg")
    apps = [
        envelope("app.registered", {"id": f"rt-{k}", "priority": 6, "min_gpus": 2, "max_gpus": 4}, now, f"app-{k}")
        for k in range(3)
    ]
    await publish(kafka_bootstrap, topics.config, [orjson.dumps(config)], key=b"default")
    await publish(kafka_bootstrap, topics.traffic, [orjson.dumps(a) for a in apps], key=b"default")
    configured = await run_agent(kafka_bootstrap, topics, 0.5, until=lambda a: a.stats.decisions == 10)
    assert configured.stats.rejected == 0 and sorted(configured.dispatcher.interpreter.planner.apps) == [
        "rt-0",
        "rt-1",
        "rt-2",
    ]
    assert len(configured.dispatcher.interpreter.planner.running) == 8 - 3 * 2  # the jobs took what the floors left
    rc, out = await cli("audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("; 0 mismatches"), out


async def test_a_pool_above_64_gpus_with_an_app_snapshots_in_parts_restarts_and_audits(kafka_bootstrap, monkeypatch):
    """72 GPUs, an app on the highest two: its held set is a mask past 64 bits. Snapshots cut into
    parts (a small piece size stands in for a pool at the contract's limits) are read back by a
    restart, `status` shows the pool, and `audit` reproduces every decision and commit."""
    from gpualloc.agent.service import dispatcher
    from gpualloc.agent.service.dispatcher import Dispatcher
    from gpualloc.agent.service.recovery import rebuild
    from gpualloc.bus.admin import partition_counts
    from gpualloc.bus.history import read_history, reader
    from gpualloc.solvers.planner.interpreter import Pool

    monkeypatch.setattr(dispatcher, "SNAPSHOT_BYTES", 200)
    prefix = unique_topic("wide") + "."
    topics = Topics.with_prefix(prefix)
    now = datetime.now(timezone.utc)
    config = orjson.dumps(envelope("pool.configured", {"gpus": 72, "gpus_per_node": 8, "horizon": 12}, now, "cfg"))
    app = orjson.dumps(
        envelope(
            "app.registered",
            {"id": "chat", "priority": 9, "min_gpus": 2, "max_gpus": 2, "current": [70, 71]},
            now,
            "app",
        )
    )
    await run_agent(kafka_bootstrap, topics, 0.1, config)
    await publish(kafka_bootstrap, topics.traffic, [app], key=b"default")
    await publish(kafka_bootstrap, topics.jobs, [job(n) for n in range(10)], key=b"default")
    first = await run_agent(kafka_bootstrap, topics, 1.5, until=lambda a: a.stats.decisions == 10)
    held = first.dispatcher.interpreter.planner.apps["chat"].held
    assert first.stats.decisions == 10 and held >> 64, held

    counts = await partition_counts(kafka_bootstrap, [topics.state, topics.ledger, *topics.inputs])
    consumer = reader(kafka_bootstrap)
    await consumer.start()
    try:
        history = await read_history(consumer, topics, counts, "default")
    finally:
        await consumer.stop()
    snap = history.snapshot
    assert snap is not None and snap.parts > 1 and sorted(history.pieces) == list(range(1, snap.parts))
    restored = Dispatcher("default", topics, Pool())
    rebuild(restored, history)  # raises SnapshotError for a part missing
    assert len(history.entries) < restored.txn and restored.interpreter.planner.apps["chat"].held == held

    again = await run_agent(kafka_bootstrap, topics, 1.0)  # no --config: the snapshot and the ledger after it
    assert again.dispatcher.seq > first.dispatcher.seq and again.dispatcher.interpreter.planner.apps["chat"].held >> 64
    assert again.stats.replayed < again.dispatcher.txn

    bus = ["--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]
    rc, out = await cli("status", *bus, "--json")
    assert rc == 0 and orjson.loads(out[: out.rindex("}") + 1])["gpus"] == 72, out
    rc, out = await cli("audit", *bus)
    assert rc == 0 and out.strip().splitlines()[-1].endswith(
        f"10 decisions, {again.dispatcher.seq} commits reproduced; 0 mismatches"
    ), out


def test_a_pool_whose_inputs_wait_past_its_ledger_for_long_is_reported_stalled():
    from gpualloc.agent.operator.audit import STALLED_AFTER_S, AuditResult

    working = AuditResult("default", transactions=40, waiting=12, waited_s=3.0)  # an agent at work
    assert not working.stalled and working.ok
    stuck = AuditResult("default", transactions=40, waiting=12, waited_s=STALLED_AFTER_S + 1)
    assert stuck.stalled and not stuck.ok
    assert (
        "pool 'default': 12 inputs on the bus past its ledger, the oldest 301 s old: its agent publishes nothing"
        in stuck.lines()
    )
    never = AuditResult("default", waiting=3)
    assert never.stalled and "pool 'default': 3 inputs on the bus, no commit or decision published" in never.lines()

"""The platforms around the agent, for people and tests: publish a trace, watch the outputs.

`publish_trace` sends a trace of contract events to their topics; paced (`step_seconds`), it
keeps the trace's rhythm on a compressed clock and stamps each event with its send time, and
with `complete` it plays the platform that runs the jobs: each job started in a commit gets its
`job.completed` after its `actual_duration` (else its declared duration) steps. `lines` renders
decisions, commits, bindings and dead letters as readable lines for `gpualloc tail`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import orjson

from gpualloc.agent import kafka_clients
from gpualloc.agent.topics import Topics, decode
from gpualloc.client import Client
from gpualloc.schemas.events import JobRef, envelope, timestamp


async def publish_trace(
    bootstrap: str,
    events: list[dict[str, Any]],
    topics: Topics,
    step_seconds: float | None = None,
    complete: bool = False,
) -> int:
    """Publish `events` (trace order) through a `gpualloc.client.Client`; returns how many
    messages were sent."""
    durations = {
        e["payload"]["id"]: e["payload"].get("actual_duration") or e["payload"].get("duration")
        for e in events
        if e.get("type") == "job.submitted"
    }
    watcher = asyncio.create_task(complete_jobs(bootstrap, topics, durations)) if complete else None
    sent = 0
    try:
        async with Client(bootstrap, topics=topics, source="publish") as client:
            t0 = _trace_start(events)
            step_minutes = next(
                (e["payload"].get("step_minutes", 60) for e in events if e.get("type") == "pool.configured"), 60
            )
            began = time.monotonic()
            for event in events:
                if step_seconds:
                    offset = (
                        (_parse_time(event["occurred_at"]) - t0).total_seconds() / (60 * step_minutes) * step_seconds
                    )
                    await asyncio.sleep(max(0.0, began + offset - time.monotonic()))
                    event = {**event, "occurred_at": timestamp(datetime.now(timezone.utc))}
                await client.publish(event, acknowledged=False)
                sent += 1
            await client.flush()
        if watcher is not None:
            await watcher
    finally:
        if watcher is not None and not watcher.done():
            watcher.cancel()
    return sent


async def complete_jobs(
    bootstrap: str, topics: Topics, durations: dict[str, int], stop: asyncio.Event | None = None, pool: str = "default"
) -> set[str]:
    """Play the platform running the jobs: each job of `durations` that a commit starts gets its
    job.completed (through a `Client`) once the commit of its last step is out. Runs until
    `stop` is set (without one: until every job completed); returns the jobs completed."""
    consumer = kafka_clients.consumer(
        topics.commits, bootstrap=bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    )
    ends: dict[str, int] = {}
    done: set[str] = set()
    await kafka_clients.started(consumer, "platform consumer")
    try:
        async with Client(bootstrap, pool, topics, source="platform") as client:
            while not (stop.is_set() if stop is not None else len(done) >= len(durations)):
                batch = await consumer.getmany(timeout_ms=200)
                for messages in batch.values():
                    for m in messages:
                        payload = decode(m.value)["payload"]
                        for job_id in payload.get("started", []):
                            if job_id in durations and job_id not in done:
                                ends[job_id] = payload["step"] + durations[job_id] - 1
                        for job_id in sorted(j for j, end in ends.items() if end <= payload["step"]):
                            await client.complete(job_id, detail="ran its time")
                            del ends[job_id]
                            done.add(job_id)
    finally:
        await kafka_clients.close(consumer)
    return done


def completed_message(
    job_id: str, pool: str = "default", event_id: str | None = None, detail: str = "ran its time"
) -> dict[str, Any]:
    """A `job.completed` as the platform running the job would publish it, stamped now."""
    return envelope(
        "job.completed",
        JobRef(id=job_id, detail=detail),
        datetime.now(timezone.utc),
        event_id or uuid.uuid4().hex,
        pool,
    )


def _trace_start(events: list[dict[str, Any]]) -> datetime:
    return min(_parse_time(e["occurred_at"]) for e in events)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def line(message: dict[str, Any], topic: str) -> str:
    """One readable line for an output message."""
    p, kind = message.get("payload", {}), message.get("type")
    if kind == "allocation.decided":
        gpus = span(p.get("gpus", []))
        where = f" GPUs {gpus}" if gpus else ""
        at = f" step {p['start_step']}" if p.get("start_step") is not None else ""
        return f"decided   {p['job_id']}: {p['action']}{where}{at} ({p.get('latency_ms', 0):.1f} ms) - {p['reason']}"
    if kind == "plan.committed":
        bound = f" bound {p['bound']:.2f}" if p.get("bound") is not None else ""
        started = f", started {', '.join(p['started'])}" if p.get("started") else ""
        holders = sorted(p["assignments"].items(), key=lambda kv: (min(kv[1], default=0), kv[0]))
        shown = ", ".join(f"{owner} {span(gpus)}" for owner, gpus in holders[:HOLDERS_SHOWN])
        more = f" and {len(holders) - HOLDERS_SHOWN} more" if len(holders) > HOLDERS_SHOWN else ""
        part = f", part {p['part']} of {p['parts']}" if p.get("parts", 1) > 1 else ""
        return (
            f"committed step {p['step']} (seq {p['seq']}{part}, {p['source']}) objective {p['objective']:.2f}{bound}: "
            f"{shown or 'nothing held'}{more}{started}"
        )
    if kind == "binding.reported":
        return f"binding   node {p['node']} {p['job_id']} {p['status']} GPUs {span(p.get('gpus', []))} {p.get('detail', '')}".rstrip()
    if kind == "input.rejected":
        return f"rejected  {p['topic']}:{p['partition']}:{p['offset']} - {p['reason']}"
    return f"{kind or 'message'} on {topic}"


HOLDERS_SHOWN = 12  # of a commit's holders on its line (by first GPU)


def concerns(message: dict[str, Any], job: str) -> bool:
    """Does an output message concern job (or app) `job`: its decision, a binding of it, a
    commit that assigns or starts it, a dead letter of a record naming it?"""
    p, kind = message.get("payload", {}), message.get("type")
    if kind in ("allocation.decided", "binding.reported"):
        return p.get("job_id") == job
    if kind == "plan.committed":
        return job in p.get("assignments", {}) or job in p.get("started", [])
    if kind == "input.rejected":
        return orjson.dumps(job).decode() in p.get("original", "")
    return False


def render(message: dict[str, Any], topic: str, as_json: bool = False, job: str | None = None) -> str | None:
    """A message as `gpualloc tail` prints it (None: filtered out by `job`): one readable line,
    or with `as_json` the message itself with its topic, one JSON object a line."""
    if job is not None and not concerns(message, job):
        return None
    if as_json:
        return orjson.dumps({"topic": topic, **message}).decode()
    return line(message, topic)


def span(gpus: list[int]) -> str:
    if not gpus:
        return ""
    if gpus == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}" if len(gpus) > 1 else str(gpus[0])
    return ",".join(map(str, gpus))


async def tail(
    bootstrap: str,
    topics: Topics,
    stop: asyncio.Event,
    from_beginning: bool,
    out,
    as_json: bool = False,
    job: str | None = None,
) -> None:
    """Print output topics (`render`) until `stop` is set."""
    consumer = kafka_clients.consumer(
        topics.decisions,
        topics.commits,
        topics.bindings,
        topics.deadletter,
        bootstrap=bootstrap,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level="read_committed",
    )
    await kafka_clients.started(consumer, "tail consumer")
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for tp, messages in batch.items():
                for m in messages:
                    try:
                        text = render(decode(m.value), tp.topic, as_json, job)
                        if text is not None:
                            out.write(text + "\n")
                    except (ValueError, KeyError, TypeError) as e:
                        out.write(f"unreadable message on {tp.topic}:{tp.partition}:{m.offset}: {e}\n")
            out.flush()
    finally:
        await consumer.stop()

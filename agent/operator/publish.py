"""`gpualloc publish`: a trace of contract events sent to their topics, for people and tests.

`publish_trace` sends each event to its topic; paced (`step_seconds`), it keeps the trace's
rhythm on a compressed clock and stamps each event with its send time, and with `complete` it
plays the platform that runs the jobs: each job started in a commit gets its `job.completed`
after its `actual_duration` (else its declared duration) steps.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics, decode
from gpualloc.client import Client
from gpualloc.schemas.events import JobRef, envelope, timestamp


async def publish_trace(
    bootstrap: Broker | str,
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
    bootstrap: Broker | str,
    topics: Topics,
    durations: dict[str, int],
    stop: asyncio.Event | None = None,
    pool: str = "default",
) -> set[str]:
    """Play the platform running the jobs: each job of `durations` that a commit starts gets its
    job.completed (through a `Client`) once the commit of its last step is out. Runs until
    `stop` is set (without one: until every job completed); returns the jobs completed."""
    consumer = clients.consumer(
        topics.commits, bootstrap=bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    )
    ends: dict[str, int] = {}
    done: set[str] = set()
    await clients.started(consumer, "platform consumer")
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
        await clients.close(consumer)
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

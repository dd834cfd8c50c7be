"""`gpualloc tail`: decisions, commits, bindings and dead letters as readable lines."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gpualloc.agent.bus import clients
from gpualloc.agent.bus.clients import Broker
from gpualloc.agent.bus.topics import Topics, decode


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
    bootstrap: Broker | str,
    topics: Topics,
    stop: asyncio.Event,
    from_beginning: bool,
    out,
    as_json: bool = False,
    job: str | None = None,
) -> None:
    """Print output topics (`render`) until `stop` is set."""
    consumer = clients.consumer(
        topics.decisions,
        topics.commits,
        topics.bindings,
        topics.deadletter,
        bootstrap=bootstrap,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level="read_committed",
    )
    await clients.started(consumer, "tail consumer")
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

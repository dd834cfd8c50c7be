"""`gpualloc tail`: decisions, commits, bindings, dead letters and the inputs operators act by
(pool configured, nodes up, drained or down, apps registered, jobs completed, cancelled or
failed) as readable lines."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gpualloc.agent.operator.words import span
from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics, decode

QUIET = ("job.submitted", "traffic.observed")  # inputs not shown: a decision answers each submission


def line(message: dict[str, Any], topic: str) -> str:
    """One readable line for a message."""
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
        return f"rejected  {_letter(p)} - {p['reason']} ({p['topic']}:{p['partition']}:{p['offset']})"
    if kind == "node.status":
        return f"node      {p['node']} {p['state']}" + (f" - {p['detail']}" if p.get("detail") else "")
    if kind in ("job.completed", "job.cancelled", "job.failed"):
        why = f" ({p['reason']})" if p.get("reason") else ""
        by = f" by {p['source']}" if p.get("source") else ""
        return f"{kind.split('.')[1]:<9} {p['id']}{why}{by}" + (f" - {p['detail']}" if p.get("detail") else "")
    if kind == "app.registered":
        top = p.get("max_gpus") if p.get("max_gpus") is not None else "pool"
        return f"app       {p['id']} registered: priority {p['priority']:g}, {p.get('min_gpus', 0)}-{top} GPUs"
    if kind == "pool.configured":
        per = f", {p['gpus_per_node']} a node" if p.get("gpus_per_node") else ""
        return (
            f"pool      {message.get('pool', 'default')} configured: {p['gpus']} GPUs{per}, "
            f"horizon {p.get('horizon', '-')}, {p.get('step_minutes', '-')}-min steps"
        )
    return f"{kind or 'message'} on {topic}"


def original_of(letter: dict[str, Any]) -> dict[str, Any] | None:
    """The rejected record of a dead letter as JSON (None: not a JSON object, or cut short)."""
    try:
        original = orjson.loads(letter.get("original", ""))
    except orjson.JSONDecodeError:
        return None
    return original if isinstance(original, dict) else None


def names(message: dict[str, Any]) -> tuple[Any, ...]:
    """The job or app ids a message's payload names (`id`, `job_id`, `app`)."""
    p = message.get("payload")
    return tuple(p.get(k) for k in ("id", "job_id", "app") if p.get(k) is not None) if isinstance(p, dict) else ()


def _letter(letter: dict[str, Any]) -> str:
    """What a dead letter rejected: the event type and the job or app it names, when its text says."""
    original = original_of(letter)
    if original is None:
        return "a record that is not a JSON object" if not letter.get("truncated") else "a record cut short"
    who = next((str(n) for n in names(original) if isinstance(n, (str, int))), "")
    return " ".join(x for x in (str(original.get("type", "a message without a type")), who) if x)


HOLDERS_SHOWN = 12  # of a commit's holders on its line (by first GPU)


def concerns(message: dict[str, Any], job: str) -> bool:
    """Does a message concern job (or app) `job`: its decision, a binding of it, a commit that
    assigns or starts it, an input naming it, a dead letter of a record naming it?"""
    p, kind = message.get("payload", {}), message.get("type")
    if kind in ("allocation.decided", "binding.reported"):
        return p.get("job_id") == job
    if kind == "plan.committed":
        return job in p.get("assignments", {}) or job in p.get("started", [])
    if kind == "input.rejected":
        original = original_of(p)
        if original is None:
            return orjson.dumps(job).decode() in p.get("original", "")
        return job in names(original)
    return p.get("id") == job


def render(message: dict[str, Any], topic: str, as_json: bool = False, job: str | None = None) -> str | None:
    """A message as `gpualloc tail` prints it (None: filtered out by `job`): one readable line,
    or with `as_json` the message itself with its topic, one JSON object a line."""
    if message.get("type") in QUIET or (job is not None and not concerns(message, job)):
        return None
    if as_json:
        return orjson.dumps({"topic": topic, **message}).decode()
    return line(message, topic)


async def tail(
    bootstrap: Broker | str,
    topics: Topics,
    stop: asyncio.Event,
    from_beginning: bool,
    out,
    as_json: bool = False,
    job: str | None = None,
) -> None:
    """Print the output topics and the operators' inputs (`render`) until `stop` is set."""
    consumer = clients.consumer(
        topics.config,
        topics.jobs,
        topics.traffic,
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

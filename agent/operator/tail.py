"""`gpualloc tail`: decisions, commits, bindings, dead letters and the inputs operators act by
(pool configured, nodes up, drained or down, apps registered, jobs completed, cancelled or
failed) as readable lines, each with the time its record reached the bus (its Kafka timestamp).
An input is told as what was published (`input ...`, with its event id), never as if it took
effect: the agent's answer follows (a dead letter naming the same event when it refused it), and
a decision refusing a second submission of a live job says so (`states.Job`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import orjson
from aiokafka import ConsumerRecord, TopicPartition

from gpualloc.agent.operator.states import Fold, names, original_of
from gpualloc.agent.operator.words import span
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import POLL_MS, partitions, reader
from gpualloc.bus.topics import Topics, decode

# inputs not shown: a decision answers each submission; node agents' heartbeats come every few
# seconds a node (`gpualloc status` says which agents are alive)
QUIET = ("job.submitted", "traffic.observed", "node.heartbeat")
HOLDERS_SHOWN = 12  # of a commit's holders on its line (by first GPU)
DISCOVER_S = 2.0  # while a topic tail reads does not exist yet, how often it looks again


def line(message: dict[str, Any], topic: str, refused: bool = False) -> str:
    """One readable line for a message (`refused`: a `rejected` decision that answers a second
    submission of a live job, not the job)."""
    p, kind = message.get("payload", {}), message.get("type")
    if kind == "allocation.decided":
        gpus = span(p.get("gpus", []))
        where = f" GPUs {gpus}" if gpus else ""
        at = f" step {p['start_step']}" if p.get("start_step") is not None else ""
        action = p["action"]
        if refused:
            action = f"rejected a second submission (event {p.get('input_event_id')}); {p['job_id']} stays as it was"
        return f"decided   {p['job_id']}: {action}{where}{at} ({p.get('latency_ms', 0):.1f} ms) - {p['reason']}"
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
    if kind == "job.failed" and p.get("source") == "agent":  # the agent's own notice: it acted already
        return f"failed    {p['id']}" + (f" ({p['reason']})" if p.get("reason") else "") + " by agent" + _detail(p)
    return f"input     {_input(message, topic)}" + (
        f" (event {message['event_id']})" if message.get("event_id") else ""
    )


def _detail(p: dict[str, Any]) -> str:
    return f" - {p['detail']}" if p.get("detail") else ""


def _input(message: dict[str, Any], topic: str) -> str:
    """An input as published: its type and what it asks, not what became of it."""
    p, kind = message.get("payload", {}), message.get("type")
    if kind == "node.status":
        return f"node.status node {p['node']} {p['state']}" + _detail(p)
    if kind in ("job.completed", "job.cancelled", "job.failed"):
        why = f" ({p['reason']})" if p.get("reason") else ""
        by = f" by {p['source']}" if p.get("source") else ""
        return f"{kind} {p['id']}{why}{by}" + _detail(p)
    if kind == "app.registered":
        top = p.get("max_gpus") if p.get("max_gpus") is not None else "pool"
        return f"app.registered {p['id']}: priority {p['priority']:g}, {p.get('min_gpus', 0)}-{top} GPUs"
    if kind == "pool.configured":
        per = f", {p['gpus_per_node']} a node" if p.get("gpus_per_node") else ""
        horizon = f", horizon {p['horizon']}" if p.get("horizon") else ""
        steps = f", {p['step_minutes']}-min steps" if p.get("step_minutes") else ""
        return f"pool.configured {message.get('pool', 'default')}: {p['gpus']} GPUs{per}{horizon}{steps}"
    return f"{kind or 'message'} on {topic}"


def _letter(letter: dict[str, Any]) -> str:
    """What a dead letter rejected: the event type, the job or app it names and the event's id,
    when its text says."""
    original = original_of(letter)
    if original is None:
        return "a record that is not a JSON object" if not letter.get("truncated") else "a record cut short"
    who = next((str(n) for n in names(original) if isinstance(n, (str, int))), "")
    event = f"(event {original['event_id']})" if isinstance(original.get("event_id"), str) else ""
    return " ".join(x for x in (str(original.get("type", "a message without a type")), who, event) if x)


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


def when(timestamp_ms: int | None) -> str:
    """A Kafka timestamp (ms) as `2026-12-07T10:15:03.123Z` ("?" without one)."""
    if timestamp_ms is None or timestamp_ms < 0:
        return "?"
    return datetime.fromtimestamp(timestamp_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Follower:
    """Renders messages in the order read, keeping every job's and app's state (`states.Fold`)
    so a decision that refuses a second submission is told as one."""

    def __init__(self, as_json: bool = False, job: str | None = None) -> None:
        self.as_json, self.job, self.fold = as_json, job, Fold()

    def render(self, message: dict[str, Any], topic: str, timestamp_ms: int | None = None) -> str | None:
        """A message as `gpualloc tail` prints it (None: filtered out by `job`): its time (its
        record's Kafka timestamp, when given) and one readable line, or with `as_json` the
        message itself with its topic and time, one JSON object a line."""
        p = message.get("payload") or {}
        refused = (
            message.get("type") == "allocation.decided"
            and isinstance(p.get("job_id"), str)
            and self.fold.job(message.get("pool", "default"), p["job_id"]).answers_another(p)
        )
        self.fold.read(message)
        if message.get("type") in QUIET or (self.job is not None and not concerns(message, self.job)):
            return None
        stamp = {} if timestamp_ms is None else {"timestamp": when(timestamp_ms)}
        if self.as_json:
            return orjson.dumps({"topic": topic, **stamp, **message}).decode()
        text = line(message, topic, refused)
        return text if timestamp_ms is None else f"{stamp['timestamp']}  {text}"


def render(message: dict[str, Any], topic: str, as_json: bool = False, job: str | None = None) -> str | None:
    """One message alone as `gpualloc tail` prints it, without its time (`Follower.render`)."""
    return Follower(as_json, job).render(message, topic)


def flow(topics: Topics) -> list[str]:
    """The topics in the order a pass acts (inputs, then the agent's decisions, dead letters and
    commits, then the node agents' bindings): how records of one instant are told."""
    return [
        topics.config,
        topics.jobs,
        topics.traffic,
        topics.decisions,
        topics.deadletter,
        topics.commits,
        topics.bindings,
    ]


def in_time_order(records: Iterable[ConsumerRecord], order: list[str]) -> list[ConsumerRecord]:
    """Records of several topics merged by Kafka timestamp; records of one millisecond in the
    topics' `order` (`flow`), then by partition and offset."""
    rank = {topic: k for k, topic in enumerate(order)}
    return sorted(records, key=lambda r: (r.timestamp, rank.get(r.topic, len(rank)), r.partition, r.offset))


async def tail(
    bootstrap: Broker | str,
    topics: Topics,
    stop: asyncio.Event,
    from_beginning: bool,
    out,
    as_json: bool = False,
    job: str | None = None,
) -> None:
    """Print the output topics and the operators' inputs (`Follower.render`) until `stop` is set:
    with `from_beginning` first everything on them, merged in time order (`in_time_order`),
    then what comes, each poll's records in time order."""
    names_ = flow(topics)
    follower = Follower(as_json, job)
    consumer = await clients.started(reader(bootstrap, fetch_wait_ms=POLL_MS), "tail consumer")

    def write(records: Iterable[ConsumerRecord]) -> None:
        for r in in_time_order(records, names_):
            if r.value is None:
                continue
            try:
                text = follower.render(decode(r.value), r.topic, r.timestamp)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                text = f"{when(r.timestamp)}  unreadable message on {r.topic}:{r.partition}:{r.offset}: {e}"
            if text is not None:
                out.write(text + "\n")
        out.flush()

    try:
        known: list[TopicPartition] = []
        loop = asyncio.get_running_loop()
        looked: float | None = None  # when the topics were last looked for (None: never)
        while not stop.is_set():
            if len({tp.topic for tp in known}) < len(names_) and (looked is None or loop.time() - looked >= DISCOVER_S):
                counts = await partition_counts(bootstrap, names_)
                found = [tp for name in names_ for tp in partitions(counts, name)]
                new = [tp for tp in found if tp not in known]
                if new:  # a topic created since tail started holds only what came since: read it whole
                    write(await _assign(consumer, known, new, start=from_beginning or looked is not None))
                    known += new
                looked = loop.time()
            batch = await consumer.getmany(timeout_ms=POLL_MS) if known else {}
            if not known:
                await asyncio.sleep(POLL_MS / 1000)
            write(r for records in batch.values() for r in records)
    finally:
        await consumer.stop()


async def _assign(
    consumer, known: list[TopicPartition], new: list[TopicPartition], start: bool
) -> list[ConsumerRecord]:
    """Read partitions `new` beside `known` (whose positions are kept): from their start when
    `start` (the records up to their current end returned, to print in time order before what
    follows), else from their end."""
    positions = {tp: await consumer.position(tp) for tp in known}
    consumer.assign([*known, *new])
    for tp, at in positions.items():
        consumer.seek(tp, at)
    ends = await consumer.end_offsets(new)
    if not start:
        for tp in new:
            consumer.seek(tp, ends[tp])
        return []
    out: list[ConsumerRecord] = []
    begins = await consumer.beginning_offsets(new)
    pending = {tp for tp in new if ends[tp] > begins[tp]}
    for tp in new:
        consumer.seek(tp, begins[tp])
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=POLL_MS)).items():
            out.extend(r for r in records if r.offset < ends[tp])
        pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
    for tp in new:
        consumer.seek(tp, ends[tp])
    return out

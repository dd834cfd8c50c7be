"""Reading a pool's history back from the bus: its latest snapshot (state topic), its ledger
entries after it, and the input records those entries name. A restarted agent rebuilds its state
from them (`recover`); `gpualloc audit` replays the whole ledger with the same readers.

Readers assign partitions by hand (no consumer group) and read committed data only, so what
was aborted by a crash is never seen; each read stops at the end offsets it found on entry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from pydantic import ValidationError

from gpualloc.agent import kafka_clients
from gpualloc.agent.service.dispatcher import Dispatcher, Record
from gpualloc.agent.topics import Topics, decode, partition_of
from gpualloc.schemas.events import PassRecorded, PoolSnapshot, PoolSnapshotPart

log = logging.getLogger("gpualloc.agent")

POLL_MS = 200
LEADER_WAIT_S = 15.0


async def ensure_topics(bootstrap: str, topics: Topics, partitions: int, retention_ms: int) -> dict[str, int]:
    """Create the bus's topics that do not exist yet, all with `partitions` partitions (a pool's
    records share one partition number on every input topic): the state topic compacted, the
    ledger and the inputs kept `retention_ms` (-1: forever), as long as audits and recovery must
    reach back. Returns every bus topic's partition count."""
    admin = await kafka_clients.started(kafka_clients.admin(bootstrap), "agent admin")
    try:
        existing = set(await admin.list_topics())
        kept = {"retention.ms": str(retention_ms)}
        wanted = [NewTopic(topics.state, partitions, 1, topic_configs={"cleanup.policy": "compact"})]
        wanted += [NewTopic(name, partitions, 1, topic_configs=kept) for name in (topics.ledger, *topics.inputs)]
        wanted += [NewTopic(name, partitions, 1) for name in (topics.decisions, topics.commits, topics.deadletter)]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:  # another agent made them meanwhile
                pass
        return await _led(admin, [t.name for t in wanted])
    finally:
        await admin.close()


async def partition_counts(bootstrap: str, names: list[str]) -> dict[str, int]:
    """How many partitions each existing topic of `names` has (absent ones are left out)."""
    admin = await kafka_clients.started(kafka_clients.admin(bootstrap), "admin")
    try:
        return await _counts(admin, names)
    finally:
        await admin.close()


async def _counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    described = await admin.describe_topics(names)
    return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}


async def _led(admin: AIOKafkaAdminClient, names: list[str], seconds: float = LEADER_WAIT_S) -> dict[str, int]:
    """Partition counts once every partition of `names` has a leader: a topic created a moment
    ago answers reads and writes with NotLeaderForPartition until then."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        described = await admin.describe_topics(names)
        ready = all(
            t["error_code"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
            for t in described
        )
        if ready or asyncio.get_running_loop().time() > deadline:
            return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}
        await asyncio.sleep(0.1)


def reader(bootstrap: str, fetch_wait_ms: int = 500) -> AIOKafkaConsumer:
    """A consumer for reading history back: no group, committed transactions only. The agent's
    live input reader passes a short `fetch_wait_ms` (`agent.fetch_wait_ms`)."""
    return kafka_clients.consumer(
        bootstrap=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=fetch_wait_ms,
    )


def partitions(counts: dict[str, int], topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


async def read_range(consumer: AIOKafkaConsumer, starts: dict[TopicPartition, int]) -> list:
    """Every committed record from each partition's start offset to its end (as of now)."""
    if not starts:
        return []
    consumer.assign(list(starts))
    ends = await consumer.end_offsets(list(starts))
    pending = set()
    for tp, start in starts.items():
        consumer.seek(tp, start)
        if ends[tp] > start:
            pending.add(tp)
    out = []
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=POLL_MS)).items():
            out.extend(r for r in records if r.offset < ends[tp])
        pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
    return out


def _of_pool(records: Iterable, pool: str, model, keyed: Callable[[str], bool] | None = None):
    """(record, payload) of `pool`'s messages among `records` keyed by the pool (or unkeyed), or
    with a key `keyed` accepts."""
    keyed = keyed or pool.__eq__
    for r in records:
        if r.value is None or (r.key is not None and not keyed(r.key.decode("utf-8", "replace"))):
            continue
        try:
            message = decode(r.value)
            if message.get("pool") == pool:
                yield r, model.model_validate(message["payload"])
        except (ValueError, TypeError, KeyError, AttributeError, ValidationError) as e:
            log.warning(
                "skipping unreadable %s record %s[%d]@%d: %s", model.__name__, r.topic, r.partition, r.offset, e
            )


@dataclass
class History:
    """A pool's snapshot (if any) with its parts' pieces, and the ledger entries after it, with
    their input records."""

    snapshot: PoolSnapshot | None = None
    pieces: dict[int, str] = field(default_factory=dict)  # the snapshot's parts' pieces by part number
    entries: list[PassRecorded] = field(default_factory=list)
    records: dict[tuple[str, int, int], Record] = field(default_factory=dict)

    def record_at(self, topic: str, partition: int, offset: int) -> Record:
        try:
            return self.records[topic, partition, offset]
        except KeyError:
            raise LookupError(
                f"input {topic}[{partition}]@{offset} named by the ledger is gone (retention shorter than the ledger?)"
            ) from None


async def read_history(
    consumer: AIOKafkaConsumer, topics: Topics, counts: dict[str, int], pool: str, use_snapshot: bool = True
) -> History:
    """The latest snapshot of `pool` (unless `use_snapshot` is False), the ledger entries after it
    in transaction order, and the input records they name. `counts`: partitions per topic."""
    history = History()
    if use_snapshot and counts.get(topics.state):
        home = TopicPartition(topics.state, partition_of(pool, counts[topics.state]))  # keyed by pool
        records = await read_range(consumer, {home: 0})
        snaps = list(_of_pool(records, pool, PoolSnapshot))
        if snaps:  # the pool's latest value on the compacted topic: its last record
            history.snapshot = max(snaps, key=lambda rs: rs[0].offset)[1]
            part_key = f"{pool}\x00"
            for _, part in _of_pool(records, pool, PoolSnapshotPart, lambda key: key.startswith(part_key)):
                if part.txn == history.snapshot.txn:  # the latest of each, in offset order
                    history.pieces[part.part] = part.state
    snap = history.snapshot
    if snap is not None:
        starts = {TopicPartition(topics.ledger, snap.ledger_partition): snap.ledger_next}
    else:
        starts = {tp: 0 for tp in partitions(counts, topics.ledger)}
    after = snap.txn if snap is not None else 0
    entries = sorted(
        (e for _, e in _of_pool(await read_range(consumer, starts), pool, PassRecorded) if e.txn > after),
        key=lambda e: e.txn,
    )
    history.entries = entries
    spans: dict[TopicPartition, list[int]] = {}
    for entry in entries:
        for topic, partition, first, last in entry.inputs:
            if topic in topics.inputs:
                span = spans.setdefault(TopicPartition(topic, partition), [first, last])
                span[0], span[1] = min(span[0], first), max(span[1], last)
    wanted = {tp: span[0] for tp, span in spans.items()}
    for r in await read_range(consumer, wanted):
        if r.offset <= spans[TopicPartition(r.topic, r.partition)][1]:
            key = r.key.decode("utf-8", "replace") if r.key else None
            history.records[r.topic, r.partition, r.offset] = Record(r.topic, r.partition, r.offset, key, r.value)
    return history


def rebuild(dispatcher: Dispatcher, history: History) -> int:
    """Bring `dispatcher` (fresh) to the state after the last recorded transaction; returns how
    many transactions were replayed. Raises SnapshotError for a snapshot this release cannot read
    (the caller then reads the history again without it and replays the whole ledger)."""
    if history.snapshot is not None:
        dispatcher.restore(history.snapshot, history.pieces)
    for entry in history.entries:
        dispatcher.replay(entry, history.record_at)
    return len(history.entries)

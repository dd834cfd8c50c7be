"""Reading a pool's history back from the bus: its latest snapshot (state topic), its ledger
entries after it, and the input records those entries name. A restarted agent rebuilds its state
from them (`gpualloc.agent.service.recovery`); `gpualloc audit` replays the whole ledger with the same readers.

Readers assign partitions by hand (no consumer group) and read committed data only, so what
was aborted by a crash is never seen; each read stops at the end offsets it found on entry.
"""

from __future__ import annotations

import base64
import logging
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from pydantic import ValidationError

from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Record, Topics, decode, partition_of
from gpualloc.schemas.published import PassFactsPart, PassRecorded, PoolSnapshot, PoolSnapshotPart

log = logging.getLogger("gpualloc.agent")

POLL_MS = 200
HISTORY_FETCH_WAIT_MS = 20  # what history reads let a fetch wait for records that are not there yet


def reader(bootstrap: Broker | str, fetch_wait_ms: int = HISTORY_FETCH_WAIT_MS) -> AIOKafkaConsumer:
    """A consumer for reading history back: no group, committed transactions only. History is
    read up to end offsets known beforehand, so a fetch has nothing to wait for; a broker answers
    a connection's requests in order, and a long wait would hold each offset lookup behind it.
    The agent's live input reader passes its own `fetch_wait_ms` (`agent.fetch_wait_ms`)."""
    return clients.consumer(
        bootstrap=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=fetch_wait_ms,
    )


def partitions(counts: dict[str, int], topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


async def read_range(consumer: AIOKafkaConsumer, starts: dict[TopicPartition, int]) -> list[ConsumerRecord]:
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
    out: list[ConsumerRecord] = []
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=POLL_MS)).items():
            out.extend(r for r in records if r.offset < ends[tp])
        pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
    return out


def _of_pool(records: Iterable, pool: str, model, keyed: Callable[[str], bool] | None = None, kind: str = ""):
    """(record, payload) of `pool`'s messages among `records` keyed by the pool (or unkeyed), or
    with a key `keyed` accepts; with `kind`, only messages of that type."""
    keyed = keyed or pool.__eq__
    for r in records:
        if r.value is None or (r.key is not None and not keyed(r.key.decode("utf-8", "replace"))):
            continue
        try:
            message = decode(r.value)
            if message.get("pool") == pool and (not kind or message.get("type") == kind):
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


def with_facts(entries: list[PassRecorded], parts: Iterable[tuple[Any, PassFactsPart]]) -> list[PassRecorded]:
    """`entries` with the facts their `pass.facts.part` records carry joined in (ValueError
    naming an entry whose parts are missing or damaged)."""
    pieces: dict[tuple[int, int], str] = {(p.txn, p.part): p.text for _, p in parts}
    out = []
    for entry in entries:
        if entry.facts_parts:
            missing = [k for k in range(1, entry.facts_parts + 1) if (entry.txn, k) not in pieces]
            if missing:
                raise ValueError(f"ledger entry {entry.txn}: its facts' part {missing[0]} is missing")
            packed = "".join(pieces[entry.txn, k] for k in range(1, entry.facts_parts + 1))
            try:
                facts = orjson.loads(zlib.decompress(base64.b64decode(packed)))
            except (ValueError, zlib.error) as e:
                raise ValueError(f"ledger entry {entry.txn}: its facts' parts are damaged ({e})") from None
            entry = entry.model_copy(update={"facts": facts})
        out.append(entry)
    return out


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
    ledger = await read_range(consumer, starts)
    entries = sorted(
        (e for _, e in _of_pool(ledger, pool, PassRecorded, kind="pass.recorded") if e.txn > after),
        key=lambda e: e.txn,
    )
    history.entries = with_facts(entries, _of_pool(ledger, pool, PassFactsPart, kind="pass.facts.part"))
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

"""A snapshot's records: the pool's packed state in pieces under the broker's message limit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from gpualloc.agent.service.outbox import Output
from gpualloc.schemas.events import envelope
from gpualloc.schemas.published import PoolSnapshot, PoolSnapshotPart
from gpualloc.solvers.planner.snapshot import pack_json

SNAPSHOT_BYTES = 900_000  # a snapshot record's piece of the state: under the broker's default message limit (1 MiB)


@dataclass(frozen=True)
class SnapshotRecords:
    """A snapshot's records, with what it kept: the de-duplication ids that fitted (None: all)
    and the number of its records."""

    records: list[Output]
    seen_fit: int | None
    parts: int


def snapshot_records(
    topic: str,
    pool: str,
    now: datetime,
    state: bytes,
    seen: list[Any],
    window: int,
    before: int,
    meta: dict[str, Any],
    state_partition: int,
    piece_bytes: int = SNAPSHOT_BYTES,
) -> SnapshotRecords:
    """The records of a snapshot of the serialized pool `state` with as many of the newest `seen`
    ids (of `window`) as fit, in pieces of at most `piece_bytes`, in the room the state leaves (`Dispatcher.snapshot_job`), and
    tombstones for the parts of the snapshot before (`before` records) this one does not have.
    Reads and writes nothing shared, so it may run in another thread."""

    txn = meta["txn"]

    def packed(kept: list[Any]) -> str:
        return pack_json(b'{"pool":' + state + b',"seen":' + orjson.dumps(kept) + b"}")

    kept, text = seen, packed(seen)
    if len(text) > piece_bytes and kept:
        room = piece_bytes * -(-len(packed([])) // piece_bytes)  # the records the pool's state needs
        while len(text) > room and kept:
            kept = kept[(len(kept) + 1) // 2 :]  # keep the newer half
            text = packed(kept)
    # what fits, to trim to at once next time; all again once the state leaves room for more
    roomy = len(text) <= piece_bytes * max(1, -(-len(text) // piece_bytes)) // 2
    seen_fit = len(kept) if len(kept) < window and not roomy else None
    parts = max(1, -(-len(text) // piece_bytes))
    size = -(-len(text) // parts)
    pieces = [text[i * size : (i + 1) * size] for i in range(parts)]
    records = (
        [
            Output(
                topic,
                pool,
                envelope(
                    "pool.snapshot",
                    PoolSnapshot(**meta, parts=parts, state=pieces[0]),
                    now,
                    f"{pool}:snapshot:{txn}",
                    pool,
                ),
                state_partition,
            )
        ]
        + [
            Output(
                topic,
                f"{pool}\x00{i}",
                envelope(
                    "pool.snapshot.part",
                    PoolSnapshotPart(txn=txn, part=i, state=piece),
                    now,
                    f"{pool}:snapshot:{txn}:{i}",
                    pool,
                ),
                state_partition,
            )
            for i, piece in enumerate(pieces[1:], 1)
        ]
        + [
            Output(topic, f"{pool}\x00{i}", None, state_partition)  # an older snapshot's
            for i in range(parts, before)
        ]
    )  # parts beyond this one's: dropped by compaction
    return SnapshotRecords(records, seen_fit, parts)

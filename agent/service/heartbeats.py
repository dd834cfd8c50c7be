"""Node agents' heartbeats, held back a while: a poll of nothing but heartbeats is planned with the
next pass that has other work, or once the first of them has waited `heartbeat_flush_s`. Each pass
is a ledger entry, so a pool of 512 nodes beating every 10 s (51 a second) adds an entry every few
seconds, not one a poll; liveness bounds are tens of seconds, so the delay costs nothing there."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from gpualloc.bus.topics import Record
from gpualloc.schemas.events import EventType


def is_heartbeat(rec: Record, bindings: str) -> bool:
    """Is `rec` a `node.heartbeat` (on the bindings topic, where node agents write)?"""
    if rec.topic != bindings or rec.value is None:
        return False
    try:
        message = orjson.loads(rec.value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and message.get("type") == EventType.NODE_HEARTBEAT


@dataclass
class Parked:
    """Heartbeats read and not planned yet, in the order they were read, and since when (monotonic s)."""

    records: list[Record] = field(default_factory=list)
    since: float | None = None

    def take(self, records: list[Record], at: float, flush_s: float, due: bool, bindings: str) -> list[Record]:
        """What this pass plans: the parked heartbeats and `records`, unless they are all heartbeats,
        nothing else is `due` (a boundary) and the first parked has waited less than `flush_s`:
        then they wait, and the pass plans nothing."""
        if not records and not self.records:
            return []
        if not due and all(is_heartbeat(rec, bindings) for rec in records):
            self.records += records
            self.since = at if self.since is None else self.since
            if at - self.since < flush_s:
                return []
        taken, self.records, self.since = self.records + records, [], None
        return taken

    def wait_s(self, at: float, flush_s: float) -> float | None:
        """Seconds until the parked heartbeats are due (None: none parked)."""
        return None if self.since is None else max(0.0, self.since + flush_s - at)

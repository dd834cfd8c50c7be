"""A pass's intake: each input record decoded and validated into an event of the contract, or
the reason it goes to the dead-letter topic (never an exception); redeliveries and other pools'
events are passed over by event id."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pydantic import ValidationError

from gpualloc.agent.service.seen_ids import SeenIds
from gpualloc.bus.topics import Record, decode
from gpualloc.schemas.errors import describe
from gpualloc.schemas.events import EventType, parse_event
from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.planner.effects import Event


def read_record(rec: Record, pool: str, keyed: bool, seen: SeenIds, taken: dict[str, str]) -> Event | str | None:
    """The event of a record of `pool` not seen before, in `seen` or `taken` (this pass's ids,
    with their payloads' digests: its id and digest go there); a string: why it is rejected;
    None: passed over (another pool's, or a redelivery). `keyed`: the input topics are keyed by
    pool (a shared group's), so a record of this key naming another pool is an error."""
    try:
        if rec.value is None:
            raise ValueError("value: null (a tombstone); an input record must be a JSON object")
        if len(rec.value) > LIMITS.input_bytes:
            raise ValueError(f"value: {len(rec.value)} bytes, more than the limit of {LIMITS.input_bytes}")
        try:
            data = decode(rec.value)
        except ValueError as e:
            raise ValueError(f"value: {e}") from None
        if not isinstance(data, dict):
            raise ValueError("message: must be a JSON object")
        env, payload = parse_event(data)
    except ValidationError as e:
        return "; ".join(describe(e))
    except ValueError as e:
        return str(e)
    if env.pool != pool and keyed:  # keyed by this pool, so no other agent sees it
        return f"pool: {env.pool!r} must be the record's key, {rec.key!r} (the input topics are keyed by pool)"
    if env.pool != pool:
        return None  # another pool's agent owns it
    if env.type == EventType.NODE_HEARTBEAT:  # idempotent, and frequent: it stays out of the de-duplication window
        return Event(env.type, payload, env.occurred_at, (rec, env.event_id))
    digest = _digest(env.type, env.payload)
    if env.event_id in seen or env.event_id in taken:
        before = taken[env.event_id] if env.event_id in taken else seen.digest(env.event_id)
        if before in (digest, None):
            return None  # a redelivery
        return (
            f"event_id: {env.event_id!r} was used before by another event "
            "(an event id names one event; a redelivery repeats its payload)"
        )
    taken[env.event_id] = digest
    return Event(env.type, payload, env.occurred_at, (rec, env.event_id))


def _digest(kind: str, payload: dict[str, Any]) -> str:
    """What tells a redelivery (same type and payload) from a new event reusing its id."""
    return hashlib.blake2b(orjson.dumps([kind, payload], option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()

"""A pass the core fails on: its records dead-lettered, so a bug in the planner stops neither the
pool nor its restarts.

`Pool.apply` is all or nothing: a pass that raises leaves the pool, and `Dispatcher.handle` its
frontier and transaction log, as it found them. Handed the same records again it would raise
again, on every restart, so its records are answered here with `input.rejected` (the reason names
the exception) and the frontier moves past them. The transaction is marked as having read, so
its ledger entry carries that frontier; its inputs do not name the records, so a replay passes
them over rather than failing on them again.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.outbox import Output, rejection
from gpualloc.bus.topics import Record


def internal_reason(error: Exception) -> str:
    """A dead letter's reason for a pass that raised `error`: the exception, named."""
    return f"internal error: {type(error).__name__}: {error}".rstrip(": ")


def dead_lettered(d: Dispatcher, records: list[Record], error: Exception, now: datetime) -> list[Output]:
    """The dead letters of the pass `d.handle(records, now)` raised `error` on, each of the pool's
    records answered once (a shared partition's records of other pools only move the frontier)."""
    reason = internal_reason(error)
    out = []
    for rec in records:
        if rec.topic in d.topics.inputs:
            d.frontier[f"{rec.topic}:{rec.partition}"] = rec.offset + 1
        if not d.keyed or rec.key == d.pool:
            out.append(rejection(d.topics, rec, reason, now, d.pool))
    d._log = replace(d._log, now=d._log.now or now)  # an entry is sealed: it carries the frontier
    return out

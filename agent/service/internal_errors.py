"""A pass the core fails on: its records dead-lettered, so a bug in the planner stops neither the
pool nor its restarts.

`Pool.apply` is all or nothing: a pass that raises leaves the pool, and `Dispatcher.handle` its
frontier and transaction log, as it found them. Handed the same records again it would raise
again, on every restart, so its records are answered here with `input.rejected` (the reason names
the exception) and the frontier moves past them. The ledger entry names them as refused, not as
inputs, so a replay dead-letters them again rather than failing on them.
"""

from __future__ import annotations

from datetime import datetime

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.outbox import Output
from gpualloc.bus.topics import Record


def internal_reason(error: Exception) -> str:
    """A dead letter's reason for a pass that raised `error`: the exception, named."""
    return f"internal error: {type(error).__name__}: {error}".rstrip(": ")


def dead_lettered(d: Dispatcher, records: list[Record], error: Exception, now: datetime) -> list[Output]:
    """The dead letters of the pass `d.handle(records, now)` raised `error` on, each of the pool's
    records answered once (`Dispatcher.refuse`)."""
    return d.refuse(records, internal_reason(error), now)

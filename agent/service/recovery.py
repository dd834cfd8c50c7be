"""A restarted agent's state: its latest snapshot and the ledger after it, replayed."""

from __future__ import annotations

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.history import History


def rebuild(dispatcher: Dispatcher, history: History) -> int:
    """Bring `dispatcher` (fresh) to the state after the last recorded transaction; returns how
    many transactions were replayed. Each entry's recorded facts hold the pool to what was bound,
    whichever release wrote it. Raises SnapshotError for a snapshot this release cannot read (the
    caller then reads the history again without it and replays the whole ledger), NewerRelease
    for a snapshot or entry a newer release wrote."""
    if history.snapshot is not None:
        dispatcher.restore(history.snapshot, history.pieces)
    for entry in history.entries:
        dispatcher.replay(entry, history.record_at)
    return len(history.entries)

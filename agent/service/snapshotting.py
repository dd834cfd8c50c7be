"""The pool's snapshots as the agent takes them: one at a time, started once due (`snapshot_due`)
after a pass's ledger entry, compressed off the event loop, and sent with the next transaction.

A snapshot holds the state after the transaction whose entry was just written, and says where
recovery reads the ledger from: at or before that entry (recovery skips the entries the snapshot
holds by their txn), known without waiting for the entry's offset, a round trip inside the pass
that commits a step. None is started while events wait for the pool's configuration (they stay
in the ledger) or while a cut waits for its boundary (a snapshot holds no plan made ahead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.outbox import Output
from gpualloc.agent.service.publishing import PublishFailed
from gpualloc.agent.service.snapshot_due import SinceSnapshot

log = logging.getLogger("gpualloc.agent")


@dataclass
class Snapshotting:
    """The snapshot being made, what was written and planned since the last, and where the
    pool's ledger and state go."""

    making: asyncio.Future | None = None  # a snapshot being compressed, sent with the next transaction
    since: SinceSnapshot = field(default_factory=SinceSnapshot)  # what was written and planned since the last
    ledger_next: int | None = None  # at or before the offset of the pool's next ledger entry
    ledger_partition: int = 0  # the pool's partition of the ledger topic
    state_partition: int = 0  # ... and of the state topic

    def recovered(
        self, txn: int, replay_s: float, ledger_partition: int, state_partition: int, ledger_next: int
    ) -> None:
        """A session recovered the pool at transaction `txn` in `replay_s` (what the next recovery
        replays again, at least); this session's entries come at or after `ledger_next`."""
        self.since = replace(self.since, txn=txn, replay_s=replay_s)
        self.ledger_partition, self.state_partition, self.ledger_next = ledger_partition, state_partition, ledger_next

    def ready(self) -> bool:
        """Is a snapshot made, to be sent with this transaction?"""
        return self.making is not None and self.making.done()

    async def send(self, d: Dispatcher, pool: str, send: Callable[[Output], Awaitable[tuple[int, object]]]) -> None:
        """Send the snapshot made (the state after an earlier transaction: recovery replays the
        ledger entries after it), its first record then its parts. One that cannot be published
        is logged and the pool goes on; a restart replays the ledger further."""
        assert self.making is not None  # ready: a snapshot was made
        records, self.making = d.snapshot_taken(self.making.result()), None
        sent_bytes = 0
        try:
            try:
                for snap in records:
                    sent_bytes += (await send(snap))[0]
            finally:
                self.since = self.since.sent(sent_bytes)
        except PublishFailed as e:
            log.error("pool %s: %s; a restart replays the ledger further", pool, e)

    def written(self, ledger_bytes: int) -> None:
        """A ledger entry of `ledger_bytes` sent."""
        self.since = self.since.written(ledger_bytes)

    def planned(self, seconds: float) -> None:
        """A commit made that a replay plans again for `seconds`."""
        self.since = self.since.planned(seconds)

    def start_if_due(self, d: Dispatcher, committed: bool, every: int, now: datetime) -> None:
        """Start the snapshot of the state after the entry just sent when one is due (`committed`:
        the pass committed a step; `every`: the transactions between snapshots, between commits),
        compressed in a thread off the loop."""
        due = self.since.due(d.txn, committed, every)
        if due and d.reads.view is not None and not d.reads.cut_pending and self.making is None:
            assert self.ledger_next is not None  # found by recovery, before the first pass
            job = d.snapshot_job(now, self.ledger_partition, self.ledger_next, self.state_partition)
            self.making = asyncio.get_running_loop().run_in_executor(None, job)
            self.since = self.since.taken(d.txn)

    def entry_delivered(self, offset: int) -> None:
        """The pass's ledger entry delivered at `offset`, its transaction committed."""
        self.ledger_next = offset + 1

    def drop(self) -> None:
        """A session ends: its snapshot's transaction may not have committed, so the next
        session snapshots afresh."""
        self.making = None

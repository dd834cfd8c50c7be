"""When a snapshot of the pool is due: a pure decision over what was written and planned since
the last one.

A snapshot is due once replaying the ledger since the last would cost about as much as reading
it (its bytes), and, between commits, not before `snapshot_every` transactions; not at every
commit, where it would serialize the whole state in the pass that holds up the arrivals behind
the boundary. Also at a commit once replaying the commits since the last would plan for
`REPLAY_S`: at thousands of GPUs a boundary's plan takes seconds, and recovery replays each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

REPLAY_S = 1.0  # a snapshot is due at a commit once replaying the ledger since the last would plan this long


@dataclass(frozen=True)
class SinceSnapshot:
    """What the pool wrote and planned since its last snapshot was taken."""

    txn: int = 0  # the transaction the last snapshot holds (or recovery reached)
    snapshot_bytes: int = 0  # the last snapshot's size
    ledger_bytes: int = 0  # ledger entries written since
    replay_s: float = 0.0  # the wall time of the commits since (and of the plans they carried)

    def due(self, txn: int, committed: bool, every: int) -> bool:
        """Is a snapshot due after transaction `txn` (`committed`: it committed a step), at most
        one every `every` transactions between commits?"""
        worth = self.ledger_bytes >= self.snapshot_bytes or (committed and self.replay_s >= REPLAY_S)
        return worth and (committed or txn - self.txn >= every)

    def written(self, ledger_bytes: int) -> SinceSnapshot:
        """With a ledger entry of `ledger_bytes` written."""
        return replace(self, ledger_bytes=self.ledger_bytes + ledger_bytes)

    def planned(self, seconds: float) -> SinceSnapshot:
        """With a commit that planned for `seconds` (a replay plans it again)."""
        return replace(self, replay_s=self.replay_s + seconds)

    def sent(self, snapshot_bytes: int) -> SinceSnapshot:
        """With the records of a snapshot sent, `snapshot_bytes` in all."""
        return replace(self, snapshot_bytes=snapshot_bytes)

    def taken(self, txn: int) -> SinceSnapshot:
        """A snapshot of the state after `txn` taken: counting starts again."""
        return replace(self, txn=txn, ledger_bytes=0, replay_s=0.0)

"""The ledger's side of a pass: what a transaction did (`TxnLog`), the run settings a replay
needs, and which full-mode plans a ledger entry can record."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from gpualloc.schemas.events import RecordedCommit
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.snapshot import dump_schedule

# an adopted full-mode schedule in its ledger entry: with the entry's other fields (up to 2,000 input runs,
# the frontier, the run) under 1 MiB; a schedule that would take more is not adopted
SCHEDULE_BYTES = 600_000


def run_settings(settings: AgentSettings) -> dict[str, Any]:
    """What a replay needs to plan as this agent did; recorded in every ledger entry."""
    return {
        "policy": settings.policy,
        "effort": settings.hot_path_effort,
        "replan_work": settings.replan_work,
        "step_seconds": settings.step_seconds,
        "every": settings.full_mode.every,
        "dedup_steps": settings.dedup_steps,
        "seen_limit": settings.seen_limit,
        "keyed": settings.group is not None,
        "forecast": settings.forecast.model_dump(),
    }


@dataclass
class TxnLog:
    """What the transaction under way did, for its ledger entry (`now`: its clock, set by its
    first input or commit; None while it did nothing)."""

    now: datetime | None = None
    inputs: list[list] = field(default_factory=list)  # runs [topic, partition, first, last]
    inline: dict[str, str] = field(default_factory=dict)
    commits: list[RecordedCommit] = field(default_factory=list)
    cut: bool = False

    def copy(self) -> TxnLog:
        return TxnLog(self.now, [run[:] for run in self.inputs], dict(self.inline), list(self.commits), self.cut)

    def begun(self, now: datetime) -> None:
        if self.now is None:
            self.now = now


def recordable(schedule: Schedule, limit: int = SCHEDULE_BYTES) -> str | None:
    """Why a full-mode schedule is not adopted for its size (None: its ledger record fits): an
    adopted plan is recorded whole, and a ledger entry must stay one message."""
    size = len(orjson.dumps(dump_schedule(schedule)))
    if size <= limit:
        return None
    return f"not adopted: its ledger record would take {size:,} bytes, more than {limit:,}"

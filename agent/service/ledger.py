"""The ledger's side of a pass: what a transaction did (`TxnLog`), the run settings a replay
needs, and which full-mode plans a ledger entry can record."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import orjson

from gpualloc.bus.topics import Record
from gpualloc.schemas.published import RecordedCommit
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.snapshot import dump_schedule
from gpualloc.solvers.release import release

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
        **release(),  # the version, the rules and ledger schema it wrote by, the heuristic's implementation
    }


@dataclass(frozen=True)
class TxnLog:
    """What the transaction under way did, for its ledger entry (`now`: its clock, set by its
    first input or commit; None while it did nothing). A value: each step of the transaction
    makes a new one, which its owner keeps once that step has succeeded."""

    now: datetime | None = None
    inputs: tuple[tuple[str, int, int, int], ...] = ()  # runs (topic, partition, first, last)
    inline: Mapping[str, str] = field(default_factory=dict)  # records from no topic, by topic:partition:offset
    commits: tuple[RecordedCommit, ...] = ()
    cut: bool = False
    refused: Mapping[str, str] = field(default_factory=dict)  # "topic:partition:offset" -> why, dead-lettered unplanned

    def read(self, records: list[Record], now: datetime, topics: Collection[str]) -> TxnLog:
        """With `records` read in order, as runs of consecutive offsets (a record of none of the
        input `topics`, an inline one such as `--config`, is kept whole as its own run)."""
        if not records:
            return self
        runs, inline = list(self.inputs), dict(self.inline)
        for rec in records:
            if rec.topic not in topics:
                assert rec.value is not None  # an inline record (`--config`, a replay's) carries its text
                inline[f"{rec.topic}:{rec.partition}:{rec.offset}"] = rec.value.decode("utf-8", "replace")
                runs.append((rec.topic, rec.partition, rec.offset, rec.offset))
                continue
            last = runs[-1] if runs else None
            if last and last[0] == rec.topic and last[1] == rec.partition and last[3] + 1 == rec.offset:
                runs[-1] = (last[0], last[1], last[2], rec.offset)
            else:
                runs.append((rec.topic, rec.partition, rec.offset, rec.offset))
        return replace(self, now=self.now or now, inputs=tuple(runs), inline=inline)

    def refusing(self, refused: Mapping[str, str], now: datetime) -> TxnLog:
        """With records dead-lettered without being planned (`Dispatcher.refuse`), by where they are."""
        return replace(self, now=self.now or now, refused={**self.refused, **refused})

    def committed(self, commit: RecordedCommit, now: datetime) -> TxnLog:
        """With a step's commit made."""
        return replace(self, now=self.now or now, commits=(*self.commits, commit))

    def cut_at(self, now: datetime) -> TxnLog:
        """With the window cut for the next boundary's plan."""
        return replace(self, now=self.now or now, cut=True)


def recordable(schedule: Schedule, limit: int = SCHEDULE_BYTES) -> str | None:
    """Why a full-mode schedule is not adopted for its size (None: its ledger record fits): an
    adopted plan is recorded whole, and a ledger entry must stay one message."""
    size = len(orjson.dumps(dump_schedule(schedule)))
    if size <= limit:
        return None
    return f"not adopted: its ledger record would take {size:,} bytes, more than {limit:,}"

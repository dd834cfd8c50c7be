"""What `Pool` takes in and hands back: an input event, and the effects and commits it caused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Union

from pydantic import BaseModel

from gpualloc.solvers.planner.records import Adoption, Commit, Decision, Grant


@dataclass(frozen=True)
class Event:
    """One input event: its contract type, typed payload and time; `ref` is the caller's handle
    (a record, an event id), handed back with whatever the event caused."""

    type: str
    payload: BaseModel
    occurred_at: datetime
    ref: Any = None


@dataclass(frozen=True)
class Decided:
    """An arrival's decision, from planning pass `pass_seq` of `pass_size` arrivals."""

    ref: Any
    decision: Decision
    pass_seq: int
    pass_size: int


@dataclass(frozen=True)
class Rejected:
    """An event the pool cannot act on: `reason` names the field and the rule."""

    ref: Any
    reason: str


@dataclass(frozen=True)
class Failed:
    """A job that failed: re-queued if it allows it. `by_gpualloc`: the pool failed it itself (its
    node went down, its binding failed), so upstream is owed a `job.failed` notice."""

    job_id: str
    detail: str
    by_gpualloc: bool
    reason: Literal["time_limit"] | None = None  # `job.failed`'s reason, when gpualloc gives one


@dataclass(frozen=True)
class Granted:
    """A real-time app's set changed within the committed step (`RealTime.react` granted it GPUs,
    or `RealTime.release` handed some back): the shell publishes it as a reactive commit of that step."""

    grant: Grant


@dataclass(frozen=True)
class Ended:
    """A running job left its GPUs on a `job.completed` or `job.cancelled`; `detail`: what its
    completion could not do (teach the forecasters, with why), "" when nothing."""

    job_id: str
    detail: str = ""


@dataclass(frozen=True)
class Requeued:
    """A start no node agent bound in time (`node_watch`): the job is back in the queue as never
    run; `reason` says why, for the decision the shell publishes."""

    job_id: str
    reason: str


Effect = Union[Decided, Rejected, Failed, Ended, Granted, Requeued]


@dataclass(frozen=True)
class Committed:
    commit: Commit
    full_mode: str | None  # what became of full mode's plan, when one was offered
    bound: float | None  # its bound, when it was adopted
    expired: tuple[Failed, ...] = ()  # jobs failed at their time limit before the step was planned
    adoption: Adoption | None = None  # how full mode's offered plan fared (objectives, reason)
    requeued: tuple[Requeued, ...] = ()  # starts no node agent bound in time, re-queued before the step was planned

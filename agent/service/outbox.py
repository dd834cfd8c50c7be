"""What the agent publishes: messages with deterministic event ids derived from their causes
(decisions, gpualloc's own job failures, dead letters), bounded whatever the input."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from gpualloc.bus.topics import Record, Topics
from gpualloc.forecasting.job_forecast import JobForecast
from gpualloc.schemas.events import JobFailed, envelope
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.published import AllocationDecided, ForecastMade, InputRejected
from gpualloc.solvers.planner.effects import Decided, Failed, Requeued


@dataclass(frozen=True)
class Output:
    topic: str
    key: str
    message: dict[str, Any] | None  # None: a tombstone (a compacted topic then drops the key)
    partition: int | None = None  # None: the key's partition (Kafka's default partitioner)


def decided(topics: Topics, pool: str, effect: Decided, now: datetime) -> Output:
    """The `allocation.decided` of a decision; its event id names the input it answers."""
    d, input_id = effect.decision, effect.ref[1]
    payload = AllocationDecided(
        job_id=d.job_id,
        action=d.action,
        gpus=list(d.gpus),
        start_step=d.start_step,
        reason=d.reason,
        input_event_id=input_id,
        latency_ms=0.0,
        pass_seq=effect.pass_seq,
        pass_size=effect.pass_size,
        forecast=_forecast_made(d.forecast),
    )
    return Output(topics.decisions, d.job_id, envelope("allocation.decided", payload, now, f"{input_id}:decided", pool))


def requeued_decision(topics: Topics, pool: str, requeued: Requeued, now: datetime, step: int) -> Output:
    """The `allocation.decided` (`queued`) of a start no node agent bound in time: upstream and
    operators read why the job waits again; it answers no input, so its id names the pool's step."""
    input_id = f"{pool}:unbound:{requeued.job_id}:{step}"  # `is_unbound_requeue` tells it apart
    payload = AllocationDecided(
        job_id=requeued.job_id, action="queued", reason=requeued.reason, input_event_id=input_id, latency_ms=0.0
    )
    return Output(
        topics.decisions, requeued.job_id, envelope("allocation.decided", payload, now, f"{input_id}:decided", pool)
    )


def is_unbound_requeue(message: dict[str, Any]) -> bool:
    """Is `message` a decision `requeued_decision` made (a start re-queued as never run)?"""
    return message["event_id"].startswith(f"{message['pool']}:unbound:")


def job_failed(topics: Topics, pool: str, failed: Failed, now: datetime, step: int) -> Output:
    """The notice the contract asks for on gpualloc.jobs when gpualloc fails a job itself."""
    notice = JobFailed(id=failed.job_id, detail=failed.detail, source="agent", reason=failed.reason)
    return Output(
        topics.jobs,
        pool,
        envelope("job.failed", notice, now, f"{pool}:failed:{failed.job_id}:{step}", pool),
    )


def rejection(topics: Topics, rec: Record, reason: str, now: datetime, pool: str, source: str | None = None) -> Output:
    """The dead letter of `rec`: its original text and where it was, with the field and rule it
    broke; its event id names the record, so a redelivered rejection is recognisable. Bounded
    whatever the record: the text is cut to `LIMITS.original_chars` (its length and SHA-256 kept),
    the reason and the key to a few thousand characters."""
    value = rec.value or b""
    text = value[: LIMITS.original_chars * 4].decode("utf-8", "replace")
    payload = InputRejected(
        reason=_cut(reason, LIMITS.text_chars),
        original=text[: LIMITS.original_chars],
        topic=rec.topic,
        partition=rec.partition,
        offset=rec.offset,
        source=source,
        original_bytes=None if rec.value is None else len(value),
        original_sha256=hashlib.sha256(value).hexdigest(),
        truncated=len(text) > LIMITS.original_chars or len(value) > LIMITS.original_chars * 4,
    )
    return Output(
        topics.deadletter,
        _cut(rec.key or "", LIMITS.id_chars),
        envelope(
            "input.rejected",
            payload,
            now,
            f"{rec.topic}:{rec.partition}:{rec.offset}:rejected",
            _cut(pool, LIMITS.id_chars),
        ),
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _forecast_made(f: JobForecast | None) -> ForecastMade | None:
    if f is None:
        return None
    return ForecastMade(
        forecast=cast(list[Literal["gpus", "duration"]], list(f.forecast)),  # the values JobForecast says
        gpus=f.gpus,
        duration=f.duration,
        quantile=f.quantile,
        median=round(f.median, 3),
        interval=(round(f.low, 3), round(f.high, 3)),
        coverage=f.coverage,
        peak_memory_gb=round(f.peak_memory_gb, 3),
    )

"""The pool's job events, as the planner's admission role takes them: arrivals decided a pass at a
time, and what becomes of a job after (completed, cancelled, failed, its binding failed)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, cast

from gpualloc.forecasting.job_forecast import SizeError
from gpualloc.schemas.events import BindingReported, EventType, JobCompleted, JobFailed, JobRef, JobSubmitted
from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.planner.effects import Decided, Effect, Ended, Event, Failed, Rejected
from gpualloc.solvers.planner.node_watch import bound
from gpualloc.solvers.planner.records import Decision, JobSpec

if TYPE_CHECKING:
    from gpualloc.solvers.planner.interpreter import Pool
    from gpualloc.solvers.planner.planner import Planner


def _unknown_job(event: Event) -> list[Effect]:
    """A job event naming a job the pool does not hold: rejected, naming the field."""
    return [
        Rejected(
            event.ref,
            f"id: job {cast(JobRef, event.payload).id!r} is neither queued nor running in this pool "
            "(never submitted, rejected, or ended already)",
        )
    ]


def job_ended(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(JobRef, event.payload), pool._planner
    if p.id not in planner.queued and p.id not in planner.running:
        return _unknown_job(event)
    was_running, detail = p.id in planner.running, ""
    if event.type == EventType.JOB_COMPLETED:
        detail = planner.admission.complete(p.id, cast(JobCompleted, p).used)
    else:
        planner.admission.cancel(p.id)
    return [Ended(p.id, detail)] if was_running else []


def job_failed(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(JobFailed, event.payload), pool._planner
    if p.source is not None:  # gpualloc's own notice for upstream: it acted already
        return []
    if p.id not in planner.queued and p.id not in planner.running:
        return _unknown_job(event)
    if p.reason == "time_limit":  # its platform ended it at a limit of its own: not re-queued
        planner.admission.cancel(p.id)
        return [Failed(p.id, p.detail, by_gpualloc=False)]
    if p.reason != "out_of_memory":
        planner.admission.fail(p.id)
        return [Failed(p.id, p.detail, by_gpualloc=False)]
    again, note = planner.admission.out_of_memory(p.id)
    failed = Failed(p.id, "; ".join(x for x in (p.detail, note) if x), by_gpualloc=False)
    if again is None:
        return [failed]
    pool.passes += 1  # decided anew at its new count, as an arrival is
    return [failed, Decided(event.ref, planner.admission.submit(again, pool.setting_up(now)), pool.passes, 1)]


def binding_reported(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(BindingReported, event.payload), pool._planner
    if p.status == "bound":
        bound(planner, p.job_id, p.node)
    if p.status != "failed" or p.job_id not in planner.running:
        return []
    planner.admission.fail(p.job_id)
    return [Failed(p.job_id, f"binding failed on node {p.node}: {p.detail}", by_gpualloc=True)]


def decide(pool: Pool, arrivals: list[Event], setup: bool = False) -> list[Effect]:
    """One planning pass for the arrivals; one decision (or rejection) each. A job that
    gives its features has what it does not give forecast; one that cannot be sized is
    decided `rejected` with the reason. In the pool's set-up window (`setup`) none starts
    (`Admission.submit_all`)."""
    out: list[Effect] = []
    jobs: list[tuple[Event, JobSpec | Decision]] = []
    planner = pool._planner
    for event in arrivals:
        p = cast(JobSubmitted, event.payload)
        if len(planner.queued) + len(jobs) >= LIMITS.queued_jobs and p.id not in planner.queued:
            out.append(Rejected(event.ref, f"id: the pool has {LIMITS.queued_jobs} jobs queued, the limit"))
            continue
        try:
            jobs.append((event, job_spec(pool, p, event.occurred_at)))
        except SizeError as e:
            jobs.append((event, Decision(p.id, "rejected", (), None, str(e))))
    if not jobs:
        return out
    pool.passes += 1
    specs = [job for _, job in jobs if isinstance(job, JobSpec)]
    decided = iter(planner.admission.submit_all(specs, setup) if specs else ())
    return out + [
        Decided(event.ref, job if isinstance(job, Decision) else next(decided), pool.passes, len(jobs))
        for event, job in jobs
    ]


def job_spec(pool: Pool, p: JobSubmitted, submitted: datetime) -> JobSpec:
    """The job as the planner plans it: the sizes given, the rest from the forecasters; without
    a time limit, the pool's default in force when it was `submitted` (its `occurred_at`), though
    a configuration occurring later came first in its pass."""
    planner = pool._planner
    features = p.feature_model()
    forecast = None
    gpus, duration = p.gpus, p.duration
    limit = p.time_limit if p.time_limit is not None else default_time_limit(planner, submitted)
    if gpus is None or duration is None:
        assert features is not None  # `JobSubmitted` refuses a job giving neither its sizes nor its features
        forecast = planner.size_job(p.kind, features, gpus, duration)
        gpus, duration = forecast.gpus, forecast.duration
    return JobSpec(p.id, p.kind, p.priority, gpus, duration, planner.now, p.requeue, features, forecast, limit)


def default_time_limit(planner: Planner, submitted: datetime) -> int | None:
    """The pool's default time limit for a job submitted at `submitted`: the one in force then
    (rules 2 on), or, replaying rules 1, the one the pool's last configuration gave."""
    return planner.config.time_limit_at(submitted) if planner.rules >= 2 else planner.config.time_limit

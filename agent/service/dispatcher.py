"""One pool's agent logic between the bus and the planner core, with no I/O and no clock.

The Kafka shell (`gpualloc.agent.service.kafka_loop`) hands in raw records and the time; this returns the messages
to publish. Records are decoded and validated here, so a bad one becomes an `input.rejected`
for the dead-letter topic and never an exception. Arrivals of one poll are decided in one
planning pass (`Planner.submit_all`), one decision each; the pass is named in the decisions
(`pass_seq`, `pass_size`) so a replay can regroup them. Every output carries a deterministic
event id derived from its cause, so consumers can de-duplicate redeliveries.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from gpualloc.agent.topics import Topics, decode
from gpualloc.schemas.errors import describe
from gpualloc.schemas.events import (AllocationDecided, InputRejected, JobRef, PlanCommitted, envelope,
                            parse_event)
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.metrics import compute_metrics
from gpualloc.solvers.planner.state import BLOCKER, AppSpec, Commit, Decision, FullModePlan, JobSpec, Planner, PoolConfig
from gpualloc.solvers.problem import Problem, mask_of

SEEN_LIMIT = 200_000  # event ids remembered for de-duplication
PENDING_LIMIT = 10_000  # events held until the pool is configured


@dataclass(frozen=True)
class Record:
    """A consumed message, as the shell passes it in."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes


@dataclass(frozen=True)
class Output:
    topic: str
    key: str
    message: dict[str, Any]


@dataclass
class Dispatcher:
    pool: str
    topics: Topics = field(default_factory=Topics)
    step_seconds: float | None = None  # compressed clock; None: the pool's step_minutes
    full_mode_every: int = 1  # steps between full-mode launches (0: never)
    scheduler: Callable[[Problem], Schedule] = heuristic_schedule  # the hot path
    planner: Planner | None = None
    t0: datetime | None = None  # wall time of step 0: the pool's first pool.configured
    seq: int = 0  # commits published
    passes: int = 0  # planning passes over arrivals
    seen: OrderedDict = field(default_factory=OrderedDict)
    pending: list[tuple[Record, Any, BaseModel]] = field(default_factory=list)
    last_commit: Commit | None = None

    # ---- input ----------------------------------------------------------------------------
    def handle(self, records: list[Record], now: datetime) -> list[Output]:
        """Apply a poll's records (pool configuration first); the messages to publish."""
        out: list[Output] = []
        parsed = []
        for rec in records:
            event = self._parse(rec, out, now)
            if event is not None:
                parsed.append((rec, *event))
        parsed.sort(key=lambda e: e[1].type not in ("pool.configured", "node.status"))  # stable
        arrivals: list[tuple[Record, Any, BaseModel]] = []
        for rec, env, payload in parsed:
            if self.planner is None and env.type != "pool.configured":
                if len(self.pending) < PENDING_LIMIT:
                    self.pending.append((rec, env, payload))
                else:
                    out.append(self._reject(rec, f"pool {self.pool!r}: not configured yet and "
                                                 f"{PENDING_LIMIT} events already wait for it", now))
                continue
            if env.type == "job.submitted":
                arrivals.append((rec, env, payload))
                continue
            if arrivals and _concerns(payload, {p.id for _, _, p in arrivals}):
                out += self._decide(arrivals, now)
                arrivals = []
            out += self._apply(rec, env, payload, now)
        if arrivals:
            out += self._decide(arrivals, now)
        return out

    def _parse(self, rec: Record, out: list[Output], now: datetime):
        """(envelope, payload) of a record of this pool not seen before; rejects go to `out`."""
        try:
            data = decode(rec.value)
            if not isinstance(data, dict):
                raise ValueError("message: must be a JSON object")
            env, payload = parse_event(data)
        except ValidationError as e:
            out.append(self._reject(rec, "; ".join(describe(e)), now))
            return None
        except ValueError as e:
            out.append(self._reject(rec, str(e), now))
            return None
        if env.pool != self.pool or env.event_id in self.seen:
            return None  # another pool's agent owns it, or a redelivery
        self.seen[env.event_id] = None
        if len(self.seen) > SEEN_LIMIT:
            self.seen.popitem(last=False)
        return env, payload

    def _apply(self, rec: Record, env, p, now: datetime) -> list[Output]:
        kind = env.type
        if kind == "pool.configured":
            return self._configure(rec, p, now)
        planner = self.planner
        if kind in ("job.cancelled", "job.completed"):
            planner.complete(p.id)
        elif kind == "job.failed":
            if p.source is None:  # gpualloc's own notices are for upstream: it acted already
                planner.fail(p.id)
        elif kind == "binding.reported":
            if p.status == "failed" and p.job_id in planner.running:
                planner.fail(p.job_id)
                return [self._job_failed(p.job_id, f"binding failed on node {p.node}: {p.detail}", now)]
        elif kind == "app.registered":
            problem = self._app_problem(p)
            if problem:
                return [self._reject(rec, problem, now)]
            planner.register_app(AppSpec(p.id, p.priority, p.min_gpus, p.max_gpus, p.swap_cap, p.profile,
                                         rps_per_gpu=p.rps_per_gpu,
                                         held=mask_of(p.current) if p.current is not None else -1))
        elif kind == "traffic.observed":
            app = planner.apps.get(p.app)
            if app is None:
                return [self._reject(rec, f"app: {p.app!r} is not registered (app.registered comes first)", now)]
            planner.observe_traffic(p.app, self._step_at(env.occurred_at), p.gpus_needed(app.rps_per_gpu))
        elif kind == "node.status":
            nodes = planner.config.gpus // planner.config.node_size
            if p.node >= nodes:
                return [self._reject(rec, f"node: must be below {nodes}, the pool's node count (got {p.node})", now)]
            return [self._job_failed(job_id, f"node {p.node} is down: {p.detail}".rstrip(": "), now)
                    for job_id in planner.node_status(p.node, p.state)]
        return []

    def _configure(self, rec: Record, p, now: datetime) -> list[Output]:
        config = PoolConfig(p.gpus, p.gpus_per_node, p.horizon, p.step_minutes, p.time_decay,
                            p.realtime_penalty, p.swap_cap)
        if self.planner is None:
            self.planner, self.t0 = Planner(config, scheduler=self.scheduler), now
            waiting, self.pending = self.pending, []
            return self._replay_pending(waiting, now)
        old = self.planner.config
        if (config.gpus, config.node_size) != (old.gpus, old.node_size) and (self.planner.running or self.planner.queued):
            return [self._reject(rec, "gpus, gpus_per_node: cannot change while jobs are queued or running", now)]
        self.planner.config = config
        return []

    def _replay_pending(self, waiting, now: datetime) -> list[Output]:
        out: list[Output] = []
        arrivals = [w for w in waiting if w[1].type == "job.submitted"]
        for rec, env, payload in waiting:
            if env.type != "job.submitted":
                out += self._apply(rec, env, payload, now)
        return out + (self._decide(arrivals, now) if arrivals else [])

    def _app_problem(self, p) -> str:
        gpus = self.planner.config.gpus
        bad = [g for g in p.current or () if not 0 <= g < gpus]
        if bad:
            return f"current: GPU {bad[0]} is outside the pool's {gpus} GPUs"
        if p.max_gpus is not None and p.max_gpus < p.min_gpus:
            return f"max_gpus: must be >= min_gpus ({p.max_gpus} < {p.min_gpus})"
        return ""

    # ---- decisions ------------------------------------------------------------------------
    def _decide(self, arrivals: list[tuple[Record, Any, BaseModel]], now: datetime) -> list[Output]:
        """One planning pass for a poll's arrivals; one decision (or rejection) each."""
        out: list[Output] = []
        jobs: list[tuple[Any, JobSpec]] = []
        for rec, env, p in arrivals:
            if p.gpus is None or p.duration is None:
                out.append(self._reject(rec, "features: no forecaster is configured for this pool yet; "
                                             "give gpus and duration", now))
                continue
            jobs.append((env, JobSpec(p.id, p.kind, p.priority, p.gpus, p.duration, self.planner.now, p.requeue)))
        if not jobs:
            return out
        self.passes += 1
        decisions = self.planner.submit_all([job for _, job in jobs])
        for (env, _), decision in zip(jobs, decisions):
            out.append(self._decision_output(env.event_id, decision, len(jobs), now))
        return out

    def _decision_output(self, input_id: str, d: Decision, size: int, now: datetime) -> Output:
        payload = AllocationDecided(job_id=d.job_id, action=d.action, gpus=list(d.gpus), start_step=d.start_step,
                                    reason=d.reason, input_event_id=input_id, latency_ms=0.0,
                                    pass_seq=self.passes, pass_size=size)
        return Output(self.topics.decisions, d.job_id,
                      envelope("allocation.decided", payload, now, f"{input_id}:decided", self.pool))

    # ---- the clock ------------------------------------------------------------------------
    @property
    def step_length(self) -> timedelta:
        seconds = self.step_seconds if self.step_seconds else 60 * self.planner.config.step_minutes
        return timedelta(seconds=seconds)

    def _step_at(self, at: datetime) -> int:
        return max(0, math.floor((at - self.t0) / self.step_length))

    def next_boundary(self) -> datetime | None:
        """Wall time of the next step to commit (None before the pool is configured)."""
        return None if self.planner is None else self.t0 + self.planner.now * self.step_length

    def commit(self, now: datetime, plan: FullModePlan | None = None) -> Output:
        """Commit the current step: the hot path's plan, or `plan` (full mode's) when it is
        adopted; the message carries the whole tentative plan from this step on."""
        planner, note = self.planner, None
        if plan is not None:
            adoption = planner.adopt(plan)
            note = adoption.reason
            commit = planner.tick_after(adoption)
        else:
            commit = planner.tick()
        self.last_commit, self.seq = commit, self.seq + 1
        grid = to_grid(commit.window, commit.schedule)
        objective = compute_metrics(commit.window, grid).objective
        payload = PlanCommitted(
            step=commit.step, seq=self.seq, step_start=self.t0 + commit.step * self.step_length,
            assignments={k: list(v) for k, v in commit.assignments.items()},
            grid=[[None if c == BLOCKER else c for c in row] for row in grid],
            source=commit.source, objective=round(objective, 6),
            bound=plan.bound if commit.source == "milp" else None, started=list(commit.started),
            full_mode=note)
        return Output(self.topics.commits, self.pool,
                      envelope("plan.committed", payload, now, f"{self.pool}:commit:{self.seq}", self.pool))

    def full_mode_due(self) -> bool:
        """Launch full mode after this commit? Every `full_mode_every` steps."""
        every = self.full_mode_every
        return bool(every) and self.planner is not None and (self.planner.now - 1) % every == 0

    # ---- outputs --------------------------------------------------------------------------
    def _reject(self, rec: Record, reason: str, now: datetime) -> Output:
        payload = InputRejected(reason=reason, original=rec.value.decode("utf-8", "replace"),
                                topic=rec.topic, partition=rec.partition, offset=rec.offset)
        return Output(self.topics.deadletter, rec.key or "",
                      envelope("input.rejected", payload, now, f"{rec.topic}:{rec.partition}:{rec.offset}:rejected",
                               self.pool))

    def _job_failed(self, job_id: str, detail: str, now: datetime) -> Output:
        """The notice the contract asks for on gpualloc.jobs when gpualloc fails a job itself."""
        step = self.planner.now
        return Output(self.topics.jobs, job_id,
                      envelope("job.failed", JobRef(id=job_id, detail=detail, source="agent"), now,
                               f"{self.pool}:failed:{job_id}:{step}", self.pool))


def _concerns(payload: BaseModel, job_ids: set[str]) -> bool:
    """Does this event name a job of the arrivals waiting for their pass?"""
    return getattr(payload, "id", None) in job_ids or getattr(payload, "job_id", None) in job_ids

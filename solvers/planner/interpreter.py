"""The one event interpreter: contract events in, planner calls made, what the planner did out.

The Kafka dispatcher, the simulator and audit replays hand their events to a `Pool`, so an
event means the same thing everywhere. Each caller keeps only its own concerns: the dispatcher
its records, dead letters, event ids and the wall clock; the simulator its simulated clock and
report. Pure: no I/O and no clock. Time comes in as `now` (the caller's clock at the pass) and
the events' `occurred_at`; steps count from `origin`, the time the pool was first configured.

One `apply` is one planning pass: configuration and node states first, then the events in order,
with all arrivals decided together (`Planner.submit_all`), except that an event naming a waiting
arrival (its cancellation, say) has the arrivals decided before it. Events of a pool that is not
configured yet wait for its `pool.configured`, and are its pass's next events once it comes:
their arrivals are decided with the pass's own, after every registration and node state the
pass brings, so an app sent at set-up keeps its floor whichever topic a poll read first.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Literal, Union, cast

from pydantic import BaseModel

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.jobs import SizeError
from gpualloc.forecasting.traffic import week_minute
from gpualloc.schemas.events import (
    AppRegistered,
    BindingReported,
    EventType,
    JobCompleted,
    JobFailed,
    JobRef,
    JobSubmitted,
    NodeStatus,
    PoolConfigured,
    TrafficObserved,
)
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import ForecastSettings, SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.full_mode import full_mode_window
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import (
    FULL_MODE,
    Adoption,
    AppSpec,
    Commit,
    Cut,
    Decision,
    FullModePlan,
    Grant,
    JobSpec,
    PoolConfig,
)
from gpualloc.solvers.planner.state import fork, restore
from gpualloc.solvers.planner.view import PoolView
from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Problem, bits_of, mask_of

FIRST = (EventType.POOL_CONFIGURED, EventType.NODE_STATUS)  # applied before the rest of their pass


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
    """A real-time app's set changed within the committed step (`Planner.react` granted it GPUs,
    or `Planner.release` handed some back): the shell publishes it as a reactive commit of that step."""

    grant: Grant


@dataclass(frozen=True)
class Ended:
    """A running job left its GPUs on a `job.completed` or `job.cancelled`."""

    job_id: str


Effect = Union[Decided, Rejected, Failed, Ended, Granted]


@dataclass(frozen=True)
class Committed:
    commit: Commit
    full_mode: str | None  # what became of full mode's plan, when one was offered
    bound: float | None  # its bound, when it was adopted
    expired: tuple[Failed, ...] = ()  # jobs failed at their time limit before the step was planned
    adoption: Adoption | None = None  # how full mode's offered plan fared (objectives, reason)


@dataclass
class Pool:
    """One pool's planner behind the event contract: the core's one face to the shell.

    Verbs: `apply` (a pass of events), `commit` / `replay_commit` (a step), `cut`, `waiting_cut`,
    `planned_ahead`, `ahead_ready` (the next boundary's plan, made elsewhere), `full_mode_problem`
    (the window full mode solves), `use` (the run settings; the one writer of the hot path).

    Contract:
    - Read-only: callers read the planner through `PoolView` (`gpualloc.solvers.planner.view`);
      only these verbs change it, each field through one of them.
    - A failure leaves nothing behind: a pass that raises leaves the pool as it found it.
    - Never concurrent: the verbs run one at a time on the caller's thread; work done elsewhere
      takes values out (a `Cut`) and hands values back through a verb.
    """

    scheduler: Callable[[Problem], Schedule] = heuristic_schedule  # the hot path
    by_arrival: bool = False  # the hot path's order is arrival order (`Planner.by_arrival`)
    replan_work: int = 0  # a pass replans while queued jobs x GPUs is at most this (`Planner.replan_work`)
    step_seconds: float | None = None  # compressed clock; None: the pool's step_minutes
    full_mode_every: int = 0  # steps between full-mode solves (0: never)
    pending_limit: int = LIMITS.pending_events
    forecast: ForecastSettings = ForecastSettings()  # the forecasters' settings, for a pool configured from now on
    planner: Planner | None = None
    origin: datetime | None = None  # time of step 0: when the pool was first configured
    passes: int = 0  # planning passes over arrivals
    pending: list[Event] = field(default_factory=list)

    @property
    def _planner(self) -> Planner:
        """The planner, where the pool is configured already: the event handlers (`_pass` holds
        every event but `pool.configured` until that has made the planner, and handles the events
        that waited after it), commits and the clock, which callers use only
        once the pool is configured (`next_boundary` is None before)."""
        planner = self.planner
        assert planner is not None, "pool: not configured yet"
        return planner

    # ---- events -------------------------------------------------------------------------------
    def apply(self, events: list[Event], now: datetime) -> list[Effect]:
        """One planning pass over `events` (see the module docstring); what they caused, in order.
        All or nothing: the pass changes forks of the pool's state (`state.fork`), and one that
        raises (a scheduler's bug, say) leaves the pool as it found it (`state.restore`), the
        exception going to the caller."""
        found = fork(self)
        try:
            return self._pass(events, now)
        except BaseException:
            restore(self, found)
            raise

    def _pass(self, events: list[Event], now: datetime) -> list[Effect]:
        out: list[Effect] = []
        arrivals: list[Event] = []
        queue = deque(sorted(events, key=lambda e: e.type not in FIRST))  # stable
        while queue:
            event = queue.popleft()
            if self.planner is None and event.type != EventType.POOL_CONFIGURED:
                if len(self.pending) < self.pending_limit:
                    self.pending.append(event)
                else:
                    out.append(
                        Rejected(
                            event.ref, f"pool: not configured yet and {self.pending_limit} events already wait for it"
                        )
                    )
                continue
            ahead = self._too_far_ahead(event, now)
            if ahead:
                out.append(Rejected(event.ref, ahead))
                continue
            if event.type == EventType.JOB_SUBMITTED:
                arrivals.append(event)
                continue
            if arrivals and _names_one_of(event.payload, {cast(JobSubmitted, a.payload).id for a in arrivals}):
                out += self._decide(arrivals)
                arrivals = []
            configuring = self.planner is None
            out += self._apply(event, now)
            if configuring:  # the events that waited for it come next, then the rest of the pass
                queue.extendleft(reversed(self.pending))
                self.pending = []
        if arrivals:
            out += self._decide(arrivals)
        return out

    def _apply(self, event: Event, now: datetime) -> list[Effect]:
        handler = _HANDLERS.get(event.type)
        if handler is None:
            raise ValueError(f"type: {event.type!r} is not an input event type")
        return handler(self, event, now)

    def _unknown_job(self, event: Event) -> list[Effect]:
        """A job event naming a job the pool does not hold: rejected, naming the field."""
        return [
            Rejected(
                event.ref,
                f"id: job {cast(JobRef, event.payload).id!r} is neither queued nor running in this pool "
                "(never submitted, rejected, or ended already)",
            )
        ]

    def _ended(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(JobRef, event.payload), self._planner
        if p.id not in planner.queued and p.id not in planner.running:
            return self._unknown_job(event)
        was_running = p.id in planner.running
        if event.type == EventType.JOB_COMPLETED:
            planner.complete(p.id, cast(JobCompleted, p).used)
        else:
            planner.cancel(p.id)
        return [Ended(p.id)] if was_running else []

    def _job_failed(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(JobFailed, event.payload), self._planner
        if p.source is not None:  # gpualloc's own notice for upstream: it acted already
            return []
        if p.id not in planner.queued and p.id not in planner.running:
            return self._unknown_job(event)
        if p.reason == "time_limit":  # its platform ended it at a limit of its own: not re-queued
            planner.cancel(p.id)
            return [Failed(p.id, p.detail, by_gpualloc=False)]
        if p.reason != "out_of_memory":
            planner.fail(p.id)
            return [Failed(p.id, p.detail, by_gpualloc=False)]
        again, note = planner.out_of_memory(p.id)
        failed = Failed(p.id, "; ".join(x for x in (p.detail, note) if x), by_gpualloc=False)
        if again is None:
            return [failed]
        self.passes += 1  # decided anew at its new count, as an arrival is
        return [failed, Decided(event.ref, planner.submit(again), self.passes, 1)]

    def _app_registered(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(AppRegistered, event.payload), self._planner
        app = AppSpec(
            p.id,
            p.priority,
            p.min_gpus,
            p.max_gpus,
            p.swap_cap,
            p.profile,
            rps_per_gpu=p.rps_per_gpu,
            held=mask_of(p.current) if p.current is not None else -1,
        )
        problem = self._app_problem(p) or planner.floor_problem(app)
        if problem:
            return [Rejected(event.ref, problem)]
        planner.register_app(app)
        return []

    def _traffic(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(TrafficObserved, event.payload), self._planner
        app = planner.apps.get(p.app)
        if app is None:
            return [Rejected(event.ref, f"app: {p.app!r} is not registered (app.registered comes first)")]
        step = self.step_at(event.occurred_at)
        planner.observe_traffic(p.app, step, p.gpus_needed(app.rps_per_gpu), p.load(app.rps_per_gpu))
        if step != planner.now - 1:  # not demand in the committed step
            return []
        grant = planner.react(p.app) or planner.release(p.app)
        return [] if grant is None else [Granted(grant)]

    def _configure(self, event: Event, now: datetime) -> list[Effect]:
        p = cast(PoolConfigured, event.payload)
        config = PoolConfig(
            p.gpus,
            p.gpus_per_node,
            p.horizon,
            p.step_minutes,
            p.time_decay,
            p.realtime_penalty,
            p.swap_cap,
            p.gpu_type,
            p.gpu_memory_gb,
            p.starvation_bound,
            p.time_limit,
        )
        if self.planner is None:
            self.planner = Planner(
                config,
                scheduler=self.scheduler,
                forecasts=Forecasters(self.forecast),
                week_minute=week_minute(now),
                by_arrival=self.by_arrival,
                replan_work=self.replan_work,
            )
            self.origin = now
            return []  # the events that waited for it are its pass's next (`_pass`)
        problem = self.planner.resize_problem(config)
        if problem:
            return [Rejected(event.ref, problem)]
        return [Failed(job_id, why, by_gpualloc=True) for job_id, why in self.planner.resize(config)]

    def _binding(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(BindingReported, event.payload), self._planner
        if p.status != "failed" or p.job_id not in planner.running:
            return []
        planner.fail(p.job_id)
        return [Failed(p.job_id, f"binding failed on node {p.node}: {p.detail}", by_gpualloc=True)]

    def _node(self, event: Event, now: datetime) -> list[Effect]:
        p, planner = cast(NodeStatus, event.payload), self._planner
        nodes = planner.config.gpus // planner.config.node_size
        if p.node >= nodes:
            return [Rejected(event.ref, f"node: must be below {nodes}, the pool's node count (got {p.node})")]
        detail = f"node {p.node} is down: {p.detail}".rstrip(": ")
        return [Failed(job_id, detail, by_gpualloc=True) for job_id in planner.node_status(p.node, p.state)]

    def _app_problem(self, p: AppRegistered) -> str:
        planner = self._planner
        gpus, apps = planner.config.gpus, planner.apps
        if p.id not in apps and len(apps) >= LIMITS.apps:
            return f"id: the pool has {len(apps)} apps registered, the limit"
        bad = [g for g in p.current or () if not 0 <= g < gpus]
        if bad:
            return f"current: GPU {bad[0]} is outside the pool's {gpus} GPUs"
        if p.current is not None and len(set(p.current)) < len(p.current):
            return "current: lists a GPU twice"
        if p.max_gpus is not None and p.max_gpus < p.min_gpus:
            return f"max_gpus: must be >= min_gpus ({p.max_gpus} < {p.min_gpus})"
        if p.id in apps or not p.current:  # a registered app keeps what it holds
            return ""
        holders = {
            g: f"running job {job_id!r}"
            for job_id, entry in sorted(planner.running.items())
            for g in bits_of(entry.mask)
        }
        holders.update(
            {g: f"app {app_id!r}" for app_id, a in sorted(apps.items()) if a.held > 0 for g in bits_of(a.held)}
        )
        clash = [g for g in p.current if g in holders]
        if clash:
            return f"current: GPU {clash[0]} is held by {holders[clash[0]]}"
        return ""

    def _decide(self, arrivals: list[Event]) -> list[Effect]:
        """One planning pass for the arrivals; one decision (or rejection) each. A job that
        gives its features has what it does not give forecast; one that cannot be sized is
        decided `rejected` with the reason."""
        out: list[Effect] = []
        jobs: list[tuple[Event, JobSpec | Decision]] = []
        planner = self._planner
        for event in arrivals:
            p = cast(JobSubmitted, event.payload)
            if len(planner.queued) + len(jobs) >= LIMITS.queued_jobs and p.id not in planner.queued:
                out.append(Rejected(event.ref, f"id: the pool has {LIMITS.queued_jobs} jobs queued, the limit"))
                continue
            try:
                jobs.append((event, self._spec(p)))
            except SizeError as e:
                jobs.append((event, Decision(p.id, "rejected", (), None, str(e))))
        if not jobs:
            return out
        self.passes += 1
        specs = [job for _, job in jobs if isinstance(job, JobSpec)]
        decided = iter(planner.submit_all(specs) if specs else ())
        return out + [
            Decided(event.ref, job if isinstance(job, Decision) else next(decided), self.passes, len(jobs))
            for event, job in jobs
        ]

    def _spec(self, p: JobSubmitted) -> JobSpec:
        """The job as the planner plans it: the sizes given, the rest from the forecasters."""
        planner = self._planner
        features = p.feature_model()
        forecast = None
        gpus, duration = p.gpus, p.duration
        limit = p.time_limit if p.time_limit is not None else planner.config.time_limit  # the pool's default
        if gpus is None or duration is None:
            forecast = planner.size_job(p.kind, features, gpus, duration)
            gpus, duration = forecast.gpus, forecast.duration
        return JobSpec(p.id, p.kind, p.priority, gpus, duration, planner.now, p.requeue, features, forecast, limit)

    def _too_far_ahead(self, event: Event, now: datetime) -> str:
        """Why an event stamped more than one horizon after `now` is refused ("" when it is not):
        no clock is that far off, and a traffic observation there would be planned for steps
        the window cannot reach."""
        config: PoolConfigured | PoolConfig = (
            cast(PoolConfigured, event.payload) if event.type == EventType.POOL_CONFIGURED else self._planner.config
        )
        steps, step = config.horizon, self._step_of(config.step_minutes)
        if event.occurred_at <= now + steps * step:
            return ""
        return (
            f"occurred_at: {event.occurred_at.isoformat()} is more than one horizon ({steps} steps) after "
            f"the agent's clock ({now.isoformat()})"
        )

    # ---- steps ----------------------------------------------------------------------------------
    def commit(
        self,
        plan: FullModePlan | None = None,
        recorded: Schedule | None = None,
        admit: Callable[[Schedule], str | None] | None = None,
        full_mode: str | None = None,
    ) -> Committed:
        """Commit the current step: full mode's `plan` when it is adopted (legal and better than
        the hot path on the current window, and let through by `admit`, which gives the reason
        it refuses a schedule, None when it does not), or `recorded` (a plan a commit recorded,
        when replaying), else the hot path's plan, saying `full_mode` of full mode."""
        planner = self._planner
        expired = self._expire()
        if plan is not None:
            adoption = planner.adopt(plan)
            refused = admit(adoption.schedule) if admit is not None and adoption.schedule is not None else None
            if refused:
                adoption = replace(adoption, schedule=None, reason=refused)
            starving = bool(planner.starving())  # the plan's bound is on the boosted objective then
            commit = planner.tick_after(adoption)
            bound = plan.bound if commit.source == FULL_MODE and not starving else None
            return Committed(commit, adoption.reason, bound, expired, adoption)
        return Committed(planner.tick(recorded), full_mode, None, expired)

    def _expire(self) -> tuple[Failed, ...]:
        """The running jobs whose time limit is up at this boundary, failed before it is planned
        (`Planner.expire`): upstream is owed a `job.failed` notice for each."""
        return tuple(
            Failed(spec.id, f"its time limit of {spec.time_limit} steps is up", by_gpualloc=True, reason="time_limit")
            for spec in self._planner.expire()
        )

    def replay_commit(
        self, schedule: Schedule | None, full_mode: str | None, bound: float | None, carried: bool
    ) -> Committed:
        """The commit a ledger recorded: its adopted full-mode `schedule` (None: the hot path's
        plan), with what the commit said of full mode; `carried`: whether it carried the plan
        made ahead (when not, the agent replanned there: its cut came too late, and is dropped;
        when it did, the cut's plan is made here, the same function of the same window)."""
        planner = self._planner
        expired = self._expire()
        if not carried:
            planner.drop_cut()
        elif (waiting := self.waiting_cut()) is not None:
            planner.planned_ahead(planner.scheduler(waiting.problem))
        return Committed(planner.tick(schedule), full_mode, bound, expired)

    # ---- plans made elsewhere -------------------------------------------------------------------
    def cut(self) -> Cut | None:
        """Cut the window for the next boundary's plan, made ahead of it by whoever solves the
        cut's problem with the hot path (`planned_ahead` takes the plan); None before the pool is
        configured or while a cut waits for its boundary."""
        if self.planner is None or self.planner.ahead is not None:
            return None
        problem = self.planner.cut()
        return Cut(self.planner.now, problem)

    def waiting_cut(self) -> Cut | None:
        """The cut whose plan has not come back yet (a cut replayed by recovery, say), if any."""
        ahead = None if self.planner is None else self.planner.ahead
        if ahead is None or ahead.schedule is not None or ahead.problem is None:
            return None
        return Cut(ahead.now, ahead.problem)

    @property
    def cut_pending(self) -> bool:
        """Does a cut wait for its boundary (with or without its plan)?"""
        return self.planner is not None and self.planner.ahead is not None

    def planned_ahead(self, step: int, schedule: Schedule) -> None:
        """The plan of the cut made at `step` (ignored unless that cut still waits for it)."""
        if self.planner is not None and self.planner.ahead is not None and self.planner.ahead.now == step:
            self.planner.planned_ahead(schedule)

    def ahead_ready(self) -> bool:
        """Will the next commit carry a plan made ahead onto its window (else it replans)?"""
        return self.planner is not None and self.planner.ahead_ready()

    @property
    def view(self) -> PoolView | None:
        """The planner, to read (None before the pool is configured): what the shell is given of
        the pool's state (status, explain, audits, metrics)."""
        return self.planner

    def full_mode_problem(self, max_jobs: int) -> Cut:
        """The current window for full mode, as the hot path plans it, its queue cut to the
        `max_jobs` most valuable jobs (`gpualloc.solvers.planner.full_mode.full_mode_window`)."""
        return full_mode_window(self._planner, max_jobs)

    # ---- run settings ---------------------------------------------------------------------------
    def use(
        self,
        policy: str,
        effort: float,
        step_seconds: float | None,
        every: int,
        forecast: ForecastSettings,
        replan_work: int = 0,
    ) -> None:
        """Plan with registered policy `policy` (its hot path at `effort`; its full mode every
        `every` steps, when it has one), on a step of `step_seconds` (None: the pool's own), the
        forecasters set by `forecast`, passes replanning while queued jobs x GPUs is at most
        `replan_work`. The one writer of the hot path, here and in the planner."""
        online = online_policy(policy)
        self.step_seconds = step_seconds
        self.full_mode_every = every if online.full_mode is not None else 0
        self.forecast = forecast
        self.replan_work = replan_work
        self._use_hot(online.hot.bind(SolveOptions(effort=effort)), online.hot.by_arrival)
        if self.planner is not None:
            self.planner.forecasts.use(forecast)

    def _use_hot(self, scheduler: Callable[[Problem], Schedule], by_arrival: bool) -> None:
        self.scheduler, self.by_arrival = scheduler, by_arrival
        if self.planner is not None:
            self.planner.scheduler, self.planner.by_arrival = scheduler, by_arrival
            self.planner.replan_work = self.replan_work

    def adopt_planner(self, planner: Planner | None) -> None:
        """Take up `planner` (a snapshot's) with this pool's hot path."""
        self.planner = planner
        self._use_hot(self.scheduler, self.by_arrival)

    def full_mode_due(self) -> bool:
        """Solve full mode for the current step? Every `full_mode_every` steps, from step 0."""
        every = self.full_mode_every
        return bool(every) and self.planner is not None and self.planner.now % every == 0

    # ---- the clock ------------------------------------------------------------------------------
    @property
    def step_length(self) -> timedelta:
        return self._step_of(self._planner.config.step_minutes)

    def _step_of(self, step_minutes: int) -> timedelta:
        """A step's wall length: the compressed clock's, else the pool's `step_minutes`."""
        return timedelta(seconds=self.step_seconds if self.step_seconds else 60 * step_minutes)

    def step_at(self, at: datetime) -> int:
        """The step `at` falls in (0 before the origin)."""
        origin = self.origin
        assert origin is not None, "pool: not configured yet"  # set with the planner, by pool.configured
        return max(0, math.floor((at - origin) / self.step_length))

    def next_boundary(self) -> datetime | None:
        """Time of the next step to commit (None before the pool is configured)."""
        if self.planner is None:
            return None
        origin = self.origin
        assert origin is not None  # set with the planner (`_configure`, a snapshot's `load_pool`)
        return origin + self.planner.now * self.step_length


# what each input event does (`Pool._apply`); `job.submitted` is decided by the pass (`Pool._decide`)
_HANDLERS: dict[str, Callable[[Pool, Event, datetime], list[Effect]]] = {
    EventType.POOL_CONFIGURED: Pool._configure,
    EventType.NODE_STATUS: Pool._node,
    EventType.JOB_CANCELLED: Pool._ended,
    EventType.JOB_COMPLETED: Pool._ended,
    EventType.JOB_FAILED: Pool._job_failed,
    EventType.BINDING_REPORTED: Pool._binding,
    EventType.APP_REGISTERED: Pool._app_registered,
    EventType.TRAFFIC_OBSERVED: Pool._traffic,
}


def _names_one_of(payload: BaseModel, job_ids: set[str]) -> bool:
    """Does this event name one of the arrivals waiting for their pass?"""
    return getattr(payload, "id", None) in job_ids or getattr(payload, "job_id", None) in job_ids

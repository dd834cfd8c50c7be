"""The one event interpreter: contract events in, planner calls made, what the planner did out.

The Kafka dispatcher, the simulator and audit replays hand their events to a `Pool`, so an
event means the same thing everywhere. Each caller keeps only its own concerns: the dispatcher
its records, dead letters, event ids and the wall clock; the simulator its simulated clock and
report. Pure: no I/O and no clock. Time comes in as `now` (the caller's clock at the pass) and
the events' `occurred_at`; steps count from `origin`, the time the pool was first configured
plus its set-up window (`setup_seconds`): a pass whose `now` is before it decides its arrivals
without a start, so step 0's commit plans them with every app registered in the window (a later
configuration keeps the origin).

One `apply` is one planning pass: configuration and node states first, then the events in order,
with all arrivals decided together (`Admission.submit_all`), except that an event naming a waiting
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
from typing import Callable, cast

from pydantic import BaseModel

from gpualloc.schemas.events import EventType, JobSubmitted, PoolConfigured
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import ForecastSettings, SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.admission_events import binding_reported, decide, job_ended, job_failed
from gpualloc.solvers.planner.effects import Committed, Effect, Event, Failed, Rejected, Requeued
from gpualloc.solvers.planner.facts import Change, Facts, change, facts_of, hold
from gpualloc.solvers.planner.full_mode import full_mode_window
from gpualloc.solvers.planner.node_watch import node_heartbeat, watch
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.pool_change_events import configure, node_status
from gpualloc.solvers.planner.realtime_events import app_registered, traffic_observed
from gpualloc.solvers.planner.records import FULL_MODE, Cut, FullModePlan, PoolConfig
from gpualloc.solvers.planner.state import fork, restore
from gpualloc.solvers.planner.view import PoolView
from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.release import RULES

FIRST = (EventType.POOL_CONFIGURED, EventType.NODE_STATUS, EventType.NODE_HEARTBEAT)  # before the rest of their pass


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
    rules: int = RULES  # the planning rules it decides by (`Planner.rules`)
    step_seconds: float | None = None  # compressed clock; None: the pool's step_minutes
    full_mode_every: int = 0  # steps between full-mode solves (0: never)
    pending_limit: int = LIMITS.pending_events
    forecast: ForecastSettings = ForecastSettings()  # the forecasters' settings, for a pool configured from now on
    planner: Planner | None = None
    origin: datetime | None = None  # time of step 0: the pool's first configuration, plus its set-up window
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
        out: list[Effect] = self._watch(now)
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
                out += self._decide(arrivals, now)
                arrivals = []
            configuring = self.planner is None
            out += self._apply(event, now)
            if configuring:  # the events that waited for it come next, then the rest of the pass
                queue.extendleft(reversed(self.pending))
                self.pending = []
        if arrivals:
            out += self._decide(arrivals, now)
        return out

    def _watch(self, now: datetime | None) -> list[Effect]:
        """Node agents known alive at `now` (`node_watch.watch`); nothing without a clock (the
        simulator's commits) or before the pool is configured."""
        if self.planner is None or now is None:
            return []
        return watch(self.planner, now.timestamp())

    def _apply(self, event: Event, now: datetime) -> list[Effect]:
        handler = _HANDLERS.get(event.type)
        if handler is None:
            raise ValueError(f"type: {event.type!r} is not an input event type")
        return handler(self, event, now)

    def _decide(self, arrivals: list[Event], now: datetime) -> list[Effect]:
        """The pass's arrivals, decided together (`admission_events.decide`); none starts in the
        pool's set-up window."""
        return decide(self, arrivals, self.setting_up(now))

    def setting_up(self, now: datetime) -> bool:
        """Is `now` in the pool's set-up window: configured, its step 0 not begun (`origin`, the
        first configuration's time plus its `setup_seconds`)?"""
        return self.origin is not None and now < self.origin

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
        now: datetime | None = None,
    ) -> Committed:
        """Commit the current step: full mode's `plan` when it is adopted (legal and better than
        the hot path on the current window, and let through by `admit`, which gives the reason
        it refuses a schedule, None when it does not), or `recorded` (a plan a commit recorded,
        when replaying), else the hot path's plan, saying `full_mode` of full mode; `now`: the
        caller's clock, which node agents' liveness is judged by (`node_watch`)."""
        planner = self._planner
        requeued = self._requeued(now)
        expired = self._expire()
        if plan is not None:
            adoption = planner.adoption.adopt(plan)
            refused = admit(adoption.schedule) if admit is not None and adoption.schedule is not None else None
            if refused:
                adoption = replace(adoption, schedule=None, reason=refused)
            # the plan's bound is on the boosted objective with starving jobs, on the lifted one
            # with the node reserve: it bounds neither the window's
            off_window = bool(planner.starving()) or planner.forecasts.settings.realtime_node_reserve
            commit = planner.boundary.tick_after(adoption)
            bound = plan.bound if commit.source == FULL_MODE and not off_window else None
            return Committed(commit, adoption.reason, bound, expired, adoption, requeued)
        return Committed(planner.boundary.tick(recorded), full_mode, None, expired, requeued=requeued)

    def _requeued(self, now: datetime | None) -> tuple[Requeued, ...]:
        """The starts no node agent bound in time, re-queued before the step is planned."""
        return tuple(e for e in self._watch(now) if isinstance(e, Requeued))

    def _expire(self) -> tuple[Failed, ...]:
        """The running jobs whose time limit is up at this boundary, failed before it is planned
        (`Admission.expire`): upstream is owed a `job.failed` notice for each."""
        return tuple(
            Failed(spec.id, f"its time limit of {spec.time_limit} steps is up", by_gpualloc=True, reason="time_limit")
            for spec in self._planner.admission.expire()
        )

    def replay_commit(
        self,
        schedule: Schedule | None,
        full_mode: str | None,
        bound: float | None,
        carried: bool,
        now: datetime | None = None,
    ) -> Committed:
        """The commit a ledger recorded: its adopted full-mode `schedule` (None: the hot path's
        plan), with what the commit said of full mode; `carried`: whether it carried the plan
        made ahead (when not, the agent replanned there: its cut came too late, and is dropped;
        when it did, the cut's plan is made here, the same function of the same window). A pool
        replaying older rules' entries may hold another window than the plan was made on: the
        plan is then adopted as full mode's are (carried onto the window, only where legal and
        better), else the hot path's is committed; the entry's facts correct the rest."""
        planner = self._planner
        if schedule is not None and planner.rules < RULES:
            self._replay_cut(carried)
            return self.commit(FullModePlan(planner.now, schedule, 0.0), full_mode=full_mode, now=now)
        requeued = self._requeued(now)
        expired = self._expire()
        self._replay_cut(carried)
        return Committed(planner.boundary.tick(schedule), full_mode, bound, expired, requeued=requeued)

    def _replay_cut(self, carried: bool) -> None:
        """A replayed commit's plan made ahead: dropped when the commit replanned, else made here."""
        planner = self._planner
        if not carried:
            planner.boundary.drop_cut()
        elif (waiting := self.waiting_cut()) is not None:
            planner.boundary.planned_ahead(planner.scheduler(waiting.problem))

    # ---- what is bound ----------------------------------------------------------------------------
    def facts(self) -> Facts:
        """What the pool has bound now (`gpualloc.solvers.planner.facts`): a value, kept by the
        caller to see what a pass changes."""
        return facts_of(self.planner)

    def changed(self, before: Facts) -> Change:
        """What the pool changed of the facts `before` since (what its ledger entry records)."""
        return change(before, self.planner)

    def hold(self, before: Facts, recorded: Change) -> bool:
        """Hold the pool to the facts a replayed pass `recorded` (its facts `before` when the pass
        began), whatever this planner decided in it (`facts.hold`); True when it had to."""
        return self.planner is not None and hold(self.planner, before, recorded)

    # ---- plans made elsewhere -------------------------------------------------------------------
    def cut(self) -> Cut | None:
        """Cut the window for the next boundary's plan, made ahead of it by whoever solves the
        cut's problem with the hot path (`planned_ahead` takes the plan); None before the pool is
        configured or while a cut waits for its boundary."""
        if self.planner is None or self.planner.ahead is not None:
            return None
        problem = self.planner.boundary.cut()
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
            self.planner.boundary.planned_ahead(schedule)

    def ahead_ready(self) -> bool:
        """Will the next commit carry a plan made ahead onto its window (else it replans)?"""
        return self.planner is not None and self.planner.boundary.ahead_ready()

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
        rules: int = RULES,
    ) -> None:
        """Plan with registered policy `policy` (its hot path at `effort`; its full mode every
        `every` steps, when it has one), on a step of `step_seconds` (None: the pool's own), the
        forecasters set by `forecast`, passes replanning while queued jobs x GPUs is at most
        `replan_work`. The one writer of the hot path, here and in the planner (a planner made by
        `pool.configured` or loaded from a snapshot starts with the pool's)."""
        online = online_policy(policy)
        self.step_seconds = step_seconds
        self.full_mode_every = every if online.full_mode is not None else 0
        self.forecast = forecast
        self.replan_work = replan_work
        self.rules = rules
        self.scheduler, self.by_arrival = online.hot.bind(SolveOptions(effort=effort)), online.hot.by_arrival
        if self.planner is not None:
            self.planner.scheduler, self.planner.by_arrival = self.scheduler, self.by_arrival
            self.planner.replan_work = replan_work
            self.planner.rules = rules
            self.planner.forecasts.use(forecast)

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
        assert origin is not None  # set with the planner (`pool_change_events.configure`, a snapshot's `load_pool`)
        return origin + self.planner.now * self.step_length


# what each input event does (`Pool._apply`); `job.submitted` is decided by the pass (`admission_events.decide`)
_HANDLERS: dict[str, Callable[[Pool, Event, datetime], list[Effect]]] = {
    EventType.POOL_CONFIGURED: configure,
    EventType.NODE_STATUS: node_status,
    EventType.NODE_HEARTBEAT: node_heartbeat,
    EventType.JOB_CANCELLED: job_ended,
    EventType.JOB_COMPLETED: job_ended,
    EventType.JOB_FAILED: job_failed,
    EventType.BINDING_REPORTED: binding_reported,
    EventType.APP_REGISTERED: app_registered,
    EventType.TRAFFIC_OBSERVED: traffic_observed,
}


def _names_one_of(payload: BaseModel, job_ids: set[str]) -> bool:
    """Does this event name one of the arrivals waiting for their pass?"""
    return getattr(payload, "id", None) in job_ids or getattr(payload, "job_id", None) in job_ids

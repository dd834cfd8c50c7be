"""The pool's state as the planner holds it, and what every role reads of it: the window as a
Problem, the hot path's plan of it, demand and headroom, the hardware a job is sized for (the
state's methods), and the roles' shared reads of running work, floors and the current plan
(`steps_held`, `next_floor`, `plan_busy`).

One brain for the Kafka agent, the simulator and the audit: no I/O, no clock. Time is the step
counter a commit advances; every plan covers the window [now, now + horizon) and weighs time
from now (w_0 is the current step). Each plan is built from the state as a Problem: running jobs
are inherited with their GPUs (so they are never moved or interrupted), each app's `current` is
the set it holds in the last committed step (so the swap cap holds across commits), and GPUs
that may take no new work (down or drained nodes) are held by a blocker for the window. Every
field keeps the rule of `gpualloc.solvers.planner.state`, so a pass works on a fork of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from gpualloc.forecasting.forecasters import Forecasters, pool_hardware
from gpualloc.forecasting.job_forecast import Hardware, JobForecast
from gpualloc.forecasting.traffic import pool_hour
from gpualloc.schemas.features import Features
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.ahead import Ahead
from gpualloc.solvers.planner.headroom import MEDIAN, Headroom, displaced_value, fixed, priced
from gpualloc.solvers.planner.node_reserve import reserved
from gpualloc.solvers.planner.records import AppSpec, AppState, JobSpec, PoolConfig, Running
from gpualloc.solvers.planner.reservations import Reserved, apps_keep_their_rules, pinned, released, reservations
from gpualloc.solvers.planner.starvation import raised, starving
from gpualloc.solvers.planner.window import demand, demands, steps_left, window
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.release import RULES


@dataclass
class PlannerState:
    """One pool's state: what a pass may change, with the reads every role and the shell share."""

    config: PoolConfig
    now: int = 0
    queued: dict[str, JobSpec] = field(default_factory=dict)
    running: dict[str, Running] = field(default_factory=dict)
    apps: dict[str, AppState] = field(default_factory=dict)
    down: int = 0  # GPUs of nodes that are down
    drained: int = 0  # GPUs of drained nodes: running work continues, nothing new lands there
    scheduler: Callable[[Problem], Schedule] = heuristic_schedule  # the hot path (FIFO for baselines)
    committed: int = 0  # GPUs assigned in the last committed step
    forecasts: Forecasters = field(default_factory=Forecasters)
    week_minute: int = 0  # minute of the week (from Monday 00:00 UTC) at which step 0 began
    busy: list[int] | None = None  # the current plan, per step of the window: the GPUs it holds (`plan_busy`)
    by_arrival: bool = False  # a pass's arrivals inserted in arrival order (FIFO's), else most valuable first
    replan_work: int = 0  # a pass replans the window while queued jobs x GPUs is at most this (0: never)
    ahead: Ahead | None = None  # the next boundary's plan, cut before it (`Boundary.cut`)
    # the last reservations made (`reservations`): the window and the starving jobs they were made for
    reserved: tuple[Problem, tuple[str, ...], list[Reserved]] | None = None
    rules: int = RULES  # the planning rules it decides by (`gpualloc.solvers.release`): older ones replay older entries
    # node agents known alive (`node_watch`): node -> (the clock when its agent was last heard, in
    # seconds, and its heartbeat interval); the GPUs of nodes without a live agent, planned as
    # drained; the starts not yet bound (job -> (the clock at its start, the nodes yet to bind it));
    # the clock (seconds) of the pass or commit being planned
    heard: dict[int, tuple[float, float]] = field(default_factory=dict)
    unheard: int = 0
    unbound: dict[str, tuple[float, int]] = field(default_factory=dict)
    clock: float = 0.0
    watch_due: float = 0.0  # the clock by which a live node agent can next fall silent (`node_watch.watch`)
    watched_since: float = 0.0  # the clock at the pool's first heartbeat (its nodes' agents report from then)

    @property
    def closed(self) -> int:
        """GPUs that take no new work: down or drained nodes, and nodes without a live agent."""
        return self.down | self.drained | self.unheard

    def hour_of(self, step: int) -> int:
        """The pool hour `step` begins in (hour 0: the Monday 00:00 UTC before step 0)."""
        return pool_hour(self.week_minute, step, self.config.step_minutes)

    def size_job(self, kind: str, features: Features, gpus: int | None, duration: int | None) -> JobForecast:
        """A job's GPU count and duration from its features (given values win); SizeError with
        the field and the rule when it cannot be sized."""
        return self.forecasts.size(kind, features, self.hardware(features), gpus, duration)

    def hardware(self, features: Features) -> Hardware:
        """What a job given by `features` runs on; the most GPUs it can ever be given are those
        the real-time apps' floors leave, so no forecast sizes a job that could never start."""
        hw = pool_hardware(features, self.config)
        floors = tuple((app_id, app.spec.min_gpus) for app_id, app in sorted(self.apps.items()) if app.spec.min_gpus)
        if not floors:
            return hw
        kept = sum(n for _, n in floors)
        return replace(hw, max_gpus=max(1, hw.max_gpus - kept), pool_gpus=hw.max_gpus, floors=floors)

    def plan(self, problem: Problem | None = None) -> tuple[Problem, Schedule]:
        """The hot path's plan for the window [now, now + horizon): made on the window with
        starving jobs put first (`scheduling_problem`); the window itself, with the contract's
        priorities, is what the plan is committed and weighed on."""
        problem = self.window_problem() if problem is None else problem  # `problem`: the current window, made already
        schedule = self.scheduler(self.scheduling_problem(problem))
        if not self.config.reserved_jobs:  # nothing pinned: the plan is the window's as it is
            return problem, schedule
        if not apps_keep_their_rules(problem, schedule):
            schedule = self.scheduler(self.scheduling_problem(problem, reserving=False))
        return problem, released(problem, schedule)

    def starving(self) -> dict[str, int]:
        """The queued jobs past the starvation bound, with the steps beyond it (`starvation.starving`)."""
        return starving(self.queued, self.now, self.config.starvation_steps, self.config.gpus)

    def scheduling_problem(self, problem: Problem, reserving: bool = True) -> Problem:
        """`problem` with the starving jobs put first (`with_starving`; `reserving` False: by
        raised priorities, even with `reserved_jobs`, where a plan around the reservations broke
        an app's rules) and, with `forecast.realtime_node_reserve`, the apps' demand lifted
        against a node's loss (`node_reserve.reserved`)."""
        problem = self.with_starving(problem) if reserving else raised(problem, self.starving())
        return reserved(problem) if self.forecasts.settings.realtime_node_reserve else problem

    def with_starving(self, problem: Problem) -> Problem:
        """`problem` with the starving jobs put first: with `reserved_jobs` k, the k oldest hold
        reservations every planner plans around (`reservations`; one the apps cannot live
        beside is planned by raised priority instead); without, every starving job's priority
        raised (`starvation.raised`)."""
        if not self.config.reserved_jobs:
            return raised(problem, self.starving())
        held = self.reservations(problem)
        ids = {r.job_id for r in held}
        oldest = list(self.starving().items())[: self.config.reserved_jobs]
        return pinned(raised(problem, {job_id: beyond for job_id, beyond in oldest if job_id not in ids}), held)

    def reservations(self, problem: Problem | None = None) -> list[Reserved]:
        """The reservations the k oldest starving jobs hold on the window `problem` (the current
        one when not given); none without `reserved_jobs`."""
        k = self.config.reserved_jobs
        if not k:
            return []
        oldest = list(self.starving())[:k]
        if not oldest:
            return []
        window = self.window_problem() if problem is None else problem
        key = tuple(oldest)
        if self.reserved is None or self.reserved[1] != key or self.reserved[0] != window:  # asked several times a pass
            self.reserved = (window, key, reservations(window, oldest))
        return self.reserved[2]

    def window_demand(self, app_id: str, displaced: float | None = None) -> list[int]:
        """An app's GPUs needed in each step of the window, as the plan sees them (`displaced`:
        the queue's `displaced()`, computed when not given)."""
        return self._demand(self.apps[app_id], displaced)

    def displaced(self) -> float:
        """What a GPU-step of the waiting work earns (`headroom.displaced_value`): what priced
        headroom weighs an app's shortfall against. Once for all apps: it reads the whole queue."""
        return displaced_value(self.queued.values(), self.config.value_model)

    def window_problem(self) -> Problem:
        """The window [now, now + horizon) as a Problem (`window.window`), each app's median
        read with its planned demand."""
        displaced = self.displaced()
        medians: dict[str, list[int]] = {}

        def planned(app: AppState) -> list[int]:
            q = self.headroom(app.spec, displaced).quantile
            curve, medians[app.spec.id] = demands(app, self.config, self.now, self.forecasts, self.hour_of, (q, MEDIAN))
            return curve

        return window(
            self.config,
            self.now,
            self.running,
            self.queued,
            self.apps,
            self.closed,
            planned,
            lambda app: medians[app.spec.id],
            medians_always=self.forecasts.settings.realtime_node_reserve,
        )

    def headroom(self, app: AppSpec, displaced: float | None = None) -> Headroom:
        """The demand quantile `app` is planned at and why: the settings' (`headroom.fixed`), or
        with `forecast.realtime_priced` the objective's (`headroom.priced`; `displaced`: the
        queue's `displaced_value`, computed when not given)."""
        settings = self.forecasts.settings
        if not settings.realtime_priced:
            return fixed(settings.realtime_quantile)
        if displaced is None:
            displaced = self.displaced()
        return priced(app, self.config.realtime_penalty, displaced)

    def _demand(self, app: AppState, displaced: float | None = None) -> list[int]:
        return demand(
            app, self.config, self.now, self.forecasts, self.hour_of, self.headroom(app.spec, displaced).quantile
        )


def steps_held(state: PlannerState, entry: Running) -> int:
    """Steps of the window a running job holds its GPUs for (one at least, when it overruns)."""
    return min(steps_left(entry.spec, entry.start, state.now), state.config.horizon)


def next_floor(state: PlannerState, app: AppSpec, held: int) -> int:
    """The GPUs `app` holds at the next commit at least: its floor, or, holding `held` now,
    what its swap cap lets it give up of those in one step, whichever is more."""
    if held < 0:
        return app.min_gpus
    cap = app.cap(state.config.swap_cap)
    return max(app.min_gpus, (held & ~state.closed).bit_count() - cap)


def plan_busy(state: PlannerState, schedule: Schedule, shift: int) -> list[int]:
    """Per step of the window at `now`, the GPUs held by running jobs (for as long as the
    window counts them, overrunning ones included), by `schedule`'s blocks of jobs still
    queued and by its app sets, `schedule` being a plan made `shift` steps ago (its last app
    sets held on): the plan arrivals are inserted into; with `reserved_jobs`, the reservations'
    blocks are held too, past the window's end included (`reservations.pinned`)."""
    T = state.config.horizon
    busy = [0] * T
    for entry in state.running.values():
        for t in range(steps_held(state, entry)):
            busy[t] |= entry.mask
    if state.config.reserved_jobs:
        window = state.window_problem()
        for t, mask in enumerate(pinned(window, state.reservations(window)).running_busy):
            busy[t] |= mask
    for job_id, (start, mask) in schedule.batch.items():
        spec = state.queued.get(job_id)
        if spec is not None:
            for t in range(max(0, start - shift), min(start - shift + spec.duration, T)):
                busy[t] |= mask
    apps = [0] * T
    for masks in schedule.realtime.values():
        for t in range(T):
            apps[t] |= masks[min(t + shift, len(masks) - 1)]
    pool = (1 << state.config.gpus) - 1
    for t in range(T):
        # an app set planned on GPUs a job still holds (one that overran the plan) needs as
        # many others: held from the top, as floors are, so arrivals do not take them
        clash = (apps[t] & busy[t]).bit_count()
        busy[t] |= apps[t]
        free = pool & ~(busy[t] | state.closed)
        while clash > 0 and free:
            top = 1 << (free.bit_length() - 1)
            busy[t], free, clash = busy[t] | top, free ^ top, clash - 1
    return busy

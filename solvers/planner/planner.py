"""The planner core: cluster state, event methods and decisions, as pure as the heuristic.

One brain for the Kafka agent, the simulator and the audit: no I/O, no clock. Time is the step
counter the caller advances with `tick`; every plan covers the window [now, now + horizon) and
weighs time from now (w_0 is the current step). Each plan is built from the state as a Problem:
running jobs are inherited with their GPUs (so they are never moved or interrupted), each app's
`current` is the set it holds in the last committed step (so the swap cap holds across commits),
and GPUs that may take no new work (down or drained nodes) are held by a blocker for the window.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from gpualloc.forecasting.forecasters import Forecasters, pool_hardware
from gpualloc.forecasting.jobs import Hardware, JobForecast, SizeError
from gpualloc.forecasting.traffic import pool_hour
from gpualloc.schemas.events import JobUsage
from gpualloc.schemas.scenario import block_size_problems
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.ahead import Ahead, app_rules, carry_over
from gpualloc.solvers.planner.headroom import Headroom, displaced_value, fixed, priced
from gpualloc.solvers.planner.reasons import HELD_NOW, holders, noted, running_holders, waiting, why_waiting
from gpualloc.solvers.planner.reconcile import reconcile
from gpualloc.solvers.planner.records import (
    FULL_MODE,
    HOT_PATH,
    Adoption,
    AppSpec,
    Commit,
    Decision,
    FullModePlan,
    Grant,
    JobSpec,
    PoolConfig,
    Running,
    Source,
    is_blocker,
)
from gpualloc.solvers.planner.starvation import delayed, raised, starving
from gpualloc.solvers.planner.window import demand, observed_in, running_mask, steps_left, window
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.problem import Batch, Problem, bits_of, earliest_block, obeys_node_rule


@dataclass
class Planner:
    config: PoolConfig
    now: int = 0
    queued: dict[str, JobSpec] = field(default_factory=dict)
    running: dict[str, Running] = field(default_factory=dict)
    apps: dict[str, AppSpec] = field(default_factory=dict)
    down: int = 0  # GPUs of nodes that are down
    drained: int = 0  # GPUs of drained nodes: running work continues, nothing new lands there
    scheduler: Callable[[Problem], Schedule] = heuristic_schedule  # the hot path (FIFO for baselines)
    committed: int = 0  # GPUs assigned in the last committed step
    forecasts: Forecasters = field(default_factory=Forecasters)
    week_minute: int = 0  # minute of the week (from Monday 00:00 UTC) at which step 0 began
    busy: list[int] | None = None  # the current plan, per step of the window: the GPUs it holds (`submit_all`)
    by_arrival: bool = False  # a pass's arrivals inserted in arrival order (FIFO's), else most valuable first
    replan_work: int = 0  # a pass replans the window while queued jobs x GPUs is at most this (0: never)
    ahead: Ahead | None = None  # the next boundary's plan, cut before it (`cut`)

    # ---- events -------------------------------------------------------------------------
    def submit(self, job: JobSpec) -> Decision:
        """A job arrives: it joins the queue and gets a decision from a fresh plan."""
        return self.submit_all([job])[0]

    def submit_all(self, jobs: list[JobSpec]) -> list[Decision]:
        """Arrivals taken together (one poll's worth): all join the queue and get their decisions.

        While the queue is small (`replan_work`: queued jobs x GPUs, a count of work, so a
        replay decides the same way) the window is replanned with all of them in the queue, as
        at a step boundary: every started job stays where it is, and jobs only `planned` may
        move, as the boundary's replan would move them. Above it, or with no current plan to
        insert into, the hot path inserts each (most valuable first: priority, then GPU-steps;
        in arrival order for a policy whose order that is) into the current plan (`busy`, made
        at the last step boundary) at its earliest legal block: no decision already given
        moves, nor the committed step, and it costs a scan of the window, not a replan. A
        `start` takes effect at once: the job runs from this step on its GPUs (its node agent
        binds them now), so nothing later in the step moves it."""
        rejected: dict[int, Decision] = {}
        for k, job in enumerate(jobs):
            if job.id in self.queued or job.id in self.running:
                reason = f"job id {job.id!r} is already queued or running"
            else:
                reason = self._unplaceable(job)
            if reason:
                rejected[k] = Decision(job.id, "rejected", (), None, reason)
            else:
                self.queued[job.id] = job
        if len(rejected) == len(jobs):
            return [rejected[k] for k in range(len(jobs))]
        if self.busy is not None and len(self.queued) * self.config.gpus > self.replan_work:
            order = (
                range(len(jobs))
                if self.by_arrival
                else sorted(range(len(jobs)), key=lambda k: (-jobs[k].priority, -jobs[k].gpus * jobs[k].duration, k))
            )
            inserted = {k: self._insert(jobs[k]) for k in order if k not in rejected}
            return [rejected.get(k) or inserted[k] for k in range(len(jobs))]
        problem, schedule = self.plan()
        decisions = [rejected.get(k) or self._decision(problem, schedule, job) for k, job in enumerate(jobs)]
        for decision in decisions:
            if decision.action == "start":
                self._start(decision.job_id, schedule.batch[decision.job_id][1])
        self.busy = self._plan_busy(schedule, 0)
        return decisions

    def cancel(self, job_id: str) -> None:
        self.queued.pop(job_id, None)
        self._release(job_id)

    def _release(self, job_id: str) -> Running | None:
        """A running job leaves its GPUs: free in the current plan from the next commit (the
        window's step 0), the step they are still bound in being the committed one."""
        entry = self.running.pop(job_id, None)
        if entry is not None and self.busy is not None:
            for t in range(self._steps_left(entry)):
                self.busy[t] &= ~entry.mask
        return entry

    def _steps_left(self, entry: Running) -> int:
        """Steps of the window a running job holds its GPUs for (one at least, when it overruns)."""
        return min(steps_left(entry.spec, entry.start, self.now), self.config.horizon)

    def complete(self, job_id: str, used: JobUsage | None = None) -> None:
        """The job exited: its GPUs are free from the next committed step. One that gave its
        features teaches the forecasters what it really took (`used`, else what the pool saw:
        its GPUs and the steps since it started)."""
        entry = self._release(job_id)
        self.queued.pop(job_id, None)
        if entry is None or entry.spec.features is None:
            return
        spec, start = entry.spec, entry.start
        used = used or JobUsage()
        gpus = used.gpus or spec.gpus
        self.forecasts.finished(
            spec.kind,
            spec.features,
            self.hardware(spec.features),
            gpus,
            used.duration or max(1, self.now - start),
            used.peak_memory_gb,
        )

    def size_job(self, kind: str, features: Any, gpus: int | None, duration: int | None) -> JobForecast:
        """A job's GPU count and duration from its features (given values win); SizeError with
        the field and the rule when it cannot be sized."""
        return self.forecasts.size(kind, features, self.hardware(features), gpus, duration)

    def hardware(self, features: Any) -> Hardware:
        """What a job given by `features` runs on; the most GPUs it can ever be given are those
        the real-time apps' floors leave, so no forecast sizes a job that could never start."""
        hw = pool_hardware(features, self.config)
        floors = tuple((app_id, app.min_gpus) for app_id, app in sorted(self.apps.items()) if app.min_gpus)
        if not floors:
            return hw
        kept = sum(n for _, n in floors)
        return replace(hw, max_gpus=max(1, hw.max_gpus - kept), pool_gpus=hw.max_gpus, floors=floors)

    def fail(self, job_id: str) -> None:
        """The job failed (or could not bind): it goes back to the queue if it allows it."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.queued.get(job_id)
        if spec is not None:
            self._requeue(spec)

    def expire(self) -> list[JobSpec]:
        """At a step boundary: the running jobs whose time limit is up (started `time_limit` steps
        before this step or earlier) leave their GPUs, not re-queued (a job that ran out of time
        would again), so this step is planned and committed without them. By id."""
        over = sorted(
            job_id
            for job_id, entry in self.running.items()
            if entry.spec.time_limit is not None and entry.start + entry.spec.time_limit <= self.now
        )
        specs = [self.running[job_id].spec for job_id in over]
        for job_id in over:
            self._release(job_id)
        return specs

    def _requeue(self, spec: JobSpec) -> None:
        """A failed job goes back to the queue if it allows it, else leaves the pool."""
        if spec.requeue:
            self.queued[spec.id] = spec
        else:
            self.queued.pop(spec.id, None)

    def out_of_memory(self, job_id: str) -> tuple[JobSpec | None, str]:
        """The job ran out of GPU memory at the count it was given. One given by its features
        teaches the forecasters that it needs more there; one whose count was forecast and that
        allows re-queueing is sized again, at least the next count up, and returned (off the
        queue) to be decided anew; one the pool cannot give more GPUs is dropped. Else as `fail`.
        Also what became of it, for the record."""
        entry = self._release(job_id)
        spec = entry.spec if entry else self.queued.get(job_id)
        if spec is None:
            return None, ""
        ran = entry.mask.bit_count() if entry else spec.gpus
        if spec.features is None:
            self._requeue(spec)
            return None, ""
        hw = self.hardware(spec.features)
        self.forecasts.out_of_memory(spec.kind, spec.features, hw, ran)
        if spec.forecast is None or "gpus" not in spec.forecast.forecast or not spec.requeue:
            self._requeue(spec)
            return None, ""
        self.queued.pop(job_id, None)
        if 2 * ran > hw.max_gpus:
            return None, f"out of memory at {ran} GPUs, the most the pool can give it: dropped"
        try:
            again = self.size_job(spec.kind, spec.features, None, None)
        except SizeError as e:
            return None, f"out of memory at {ran} GPUs and no count is forecast to hold it ({e}): dropped"
        gpus = max(again.gpus, 2 * ran)
        sized = again if again.gpus == gpus else self.size_job(spec.kind, spec.features, gpus, None)
        made = tuple(dict.fromkeys((*spec.forecast.forecast, *sized.forecast)))  # its count stays a forecast one
        return replace(spec, gpus=gpus, duration=sized.duration, forecast=replace(sized, forecast=made)), (
            f"re-queued at {gpus} GPUs after running out of memory at {ran}"
        )

    def floor_problem(self, app: AppSpec) -> str:
        """Why `app`'s bounds cannot be kept from the next commit on, or "" when they can. Running
        work is never moved and holds its GPUs at least until the next commit, so an app whose
        floor does not fit beside it, the GPUs of down or drained nodes and the other apps'
        floors could not be kept within its bounds; nor could one whose bounds are further from
        the GPUs it holds than its swap cap moves in a step. It is refused instead of committed
        outside them."""
        cap = self.config.swap_cap if app.swap_cap is None else app.swap_cap
        old = self.apps.get(app.id)
        held = (old.held if old is not None else app.held) & ~(self.down | self.drained)
        if held >= 0:  # it holds GPUs now: R4 lets it gain or give up `cap` of them a step
            n = held.bit_count()
            if app.min_gpus > n + cap:
                return (
                    f"min_gpus: {app.min_gpus} cannot be reached at the next step: the app holds {n} GPUs and its "
                    f"swap_cap lets it take at most {cap} more a step (R4); register a floor of at most {n + cap}"
                )
            if app.max_gpus is not None and app.max_gpus < n - cap:
                return (
                    f"max_gpus: {app.max_gpus} cannot be reached at the next step: the app holds {n} GPUs and its "
                    f"swap_cap lets it give up at most {cap} a step (R4); register a ceiling of at least {n - cap}"
                )
        need = self._next_floor(app, held)
        if need == 0:
            return ""
        others = sum(self._next_floor(a, a.held) for a_id, a in self.apps.items() if a_id != app.id)
        taken = (self._running_mask() | self.down | self.drained).bit_count()
        room = self.config.gpus - taken - others
        if need <= room:
            return ""
        return (
            f"min_gpus: {need} GPUs cannot be kept from the next step on: running jobs and "
            f"unavailable nodes take {taken} of the pool's {self.config.gpus} GPUs and the other apps' "
            f"floors {others}, leaving {max(room, 0)} (running work is never moved; register with a "
            "lower floor, or once work ends)"
        )

    def _next_floor(self, app: AppSpec, held: int) -> int:
        """The GPUs `app` holds at the next commit at least: its floor, or, holding `held` now,
        what its swap cap lets it give up of those in one step, whichever is more."""
        if held < 0:
            return app.min_gpus
        cap = self.config.swap_cap if app.swap_cap is None else app.swap_cap
        return max(app.min_gpus, (held & ~(self.down | self.drained)).bit_count() - cap)

    def register_app(self, app: AppSpec) -> None:
        """Register (or update) an app. Its floor is reserved at once in the current plan
        (`_reserve_floor`), so no arrival inserted before the next boundary's replan can start
        on the GPUs the floor needs (`floor_problem` says whether it fits at all). A cut waiting
        for its plan is dropped: that plan could not be carried over, and its boundary need not
        wait for it."""
        old = self.apps.get(app.id)
        if old is not None:  # what the pool knows of it stays; its registration changes
            app = replace(
                app, observed=old.observed, held=old.held, before=old.before, latest=old.latest, granted=old.granted
            )
        elif app.held > 0:  # a new app's `current`: bound to it now, as a committed step's GPUs are
            self.committed |= app.held & ((1 << self.config.gpus) - 1)
        self.apps[app.id] = app
        self.ahead = None  # a plan cut before knew other app rules: the boundary replans (`carry_over`)
        if self.busy is not None:
            self._reserve_floor(app, app.min_gpus - (old.min_gpus if old is not None else 0), old is None)

    def _reserve_floor(self, app: AppSpec, extra: int, new: bool) -> None:
        """Hold `extra` more GPUs for `app` at every step of the current plan (and, for a new app
        holding GPUs, that set first, so its swap cap lets it keep them): the plan made before it
        registered gives it nothing, and the floors must not be taken by work started before the
        boundary replans with it. Where a step has too few free GPUs, they are held by work
        planned there, not running (`floor_problem`), which the boundary's replan moves."""
        pool = (1 << self.config.gpus) - 1
        blocked = self.down | self.drained
        own = app.held & pool & ~blocked if new and app.held >= 0 else 0
        plan = self.busy
        assert plan is not None  # `register_app` reserves only in a current plan
        for t, busy in enumerate(plan):
            kept = own & ~busy
            need = extra - kept.bit_count()
            free = pool & ~(busy | blocked | kept)
            while need > 0 and free:
                top = 1 << (free.bit_length() - 1)  # from the top: inserted blocks fill from GPU 0
                kept |= top
                free ^= top
                need -= 1
            plan[t] = busy | kept

    def observe_traffic(self, app_id: str, step: int, gpus: int, load: float | None = None) -> None:
        """`gpus` needed at `step` (`load`: the same, unrounded, when the observation gave requests/s)."""
        app = self.apps[app_id]
        latest = (step, gpus) if app.latest is None or step >= app.latest[0] else app.latest
        observed = {**app.observed, step: max(gpus, app.observed.get(step, 0))}
        self.apps[app_id] = replace(app, observed=observed, latest=latest)
        self.forecasts.observed(app_id, self.hour_of(step), gpus if load is None else load)

    def react(self, app_id: str) -> Grant | None:
        """The demand `app_id` needs now in the committed step (`_needs`) above what it holds there, met at once
        where it can be: GPUs idle in the step (held by no running job, no start decided since
        the commit, no app, no down or drained node) first, then GPUs other apps hold above their
        own demand observed in the step (least valuable app first; each keeps its demand and its
        floor), up to the app's ceiling. Every app's swap cap holds across the step, counted
        against the set it ended the previous step with (a GPU an app held then comes back free,
        one it took this step leaves free; an app's first committed step has none), and every
        registered floor keeps room at the next commit (what an app takes now, its swap cap
        makes it keep then). Idle GPUs are taken first among those it held then, then those the
        current plan leaves free next step, lowest first. None when nothing is short or nothing
        can be had. What it gets it keeps until the next boundary's plan, which starts from it."""
        step, app = self.now - 1, self.apps.get(app_id)
        wanted = None if app is None else self._needs(app)
        if app is None or app.held < 0 or wanted is None:
            return None
        pool, dead = (1 << self.config.gpus) - 1, self.down | self.drained
        ceiling = self.config.gpus if app.max_gpus is None else min(app.max_gpus, self.config.gpus)
        short = min(wanted, ceiling) - (app.held & ~dead).bit_count()
        if short <= 0:
            return None
        taken = self.committed | self._running_mask() | dead
        for other in self.apps.values():
            taken |= max(other.held, 0)
        cap, before, spent = self._swaps(app)
        planned = self.busy[0] if self.busy else 0
        order: list[tuple[str | None, int]] = []  # (donor or None for idle, GPU), in the order taken
        for g in sorted(bits_of(pool & ~taken), key=lambda g: (not before >> g & 1, bool(planned >> g & 1), g)):
            cost = -1 if before >> g & 1 else 1  # held at the end of the previous step: taking it back undoes a swap
            if short == 0 or spent + cost > cap:
                break
            order.append((None, g))
            spent, short = spent + cost, short - 1
        donors = (d for d in self.apps.values() if d.id != app_id and d.held > 0 and observed_in(d, step) is not None)
        for donor in sorted(donors, key=lambda d: (d.priority, d.id)):
            live = donor.held & ~dead
            spare = live.bit_count() - max(observed_in(donor, step) or 0, donor.min_gpus)
            d_cap, d_before, d_spent = self._swaps(donor)
            for g in sorted(bits_of(live), key=lambda g: (bool(d_before >> g & 1), not before >> g & 1, g)):
                if short == 0 or spare <= 0:
                    break
                d_cost, cost = (1 if d_before >> g & 1 else -1), (-1 if before >> g & 1 else 1)
                if d_spent + d_cost <= d_cap and spent + cost <= cap:
                    order.append((donor.id, g))
                    d_spent, spent, short, spare = d_spent + d_cost, spent + cost, short - 1, spare - 1
        room = self.config.gpus - (self._running_mask() | dead).bit_count()
        if order and not self._floors_fit(app_id, order, room):  # the last taken go back first
            low, high = 0, len(order) - 1  # the longest prefix that fits: taking more only raises floors
            while low < high:
                mid = (low + high + 1) // 2
                low, high = (mid, high) if self._floors_fit(app_id, order[:mid], room) else (low, mid - 1)
            del order[low:]
        if not order:
            return None
        grant = sum(1 << g for _, g in order)
        for donor_id, g in order:
            if donor_id is not None:
                donor = self.apps[donor_id]
                self.apps[donor_id] = replace(donor, held=donor.held & ~(1 << g))
        app = self.apps[app_id] = replace(app, held=app.held | grant, granted=app.granted | grant)
        self.committed |= grant
        given = {d: tuple(bits_of(self.apps[d].held)) for d in dict.fromkeys(d for d, _ in order if d is not None)}
        n, idle = grant.bit_count(), sum(1 for d, _ in order if d is None)
        still = min(wanted, ceiling) - (app.held & ~dead).bit_count()
        if app.latest is not None and app.latest[0] == step:
            seen = f"in step {step}"
        elif app.latest is not None and app.latest[0] == step - 1:
            seen = f"in step {step - 1}, holding into step {step}"
        else:
            seen = f"for step {step} (known ahead)"
        reason = (
            f"observed demand {wanted} GPUs {seen} above the {app.held.bit_count() - n} it held: "
            + ", ".join(
                part
                for part in (
                    f"{idle} idle GPU{'s' * (idle != 1)}" if idle else "",
                    f"{n - idle} from {', '.join(given)} above their observed demand" if given else "",
                )
                if part
            )
            + " granted at once"
            + (f", {still} still short (nothing more to take, a swap cap, or the floors next step)" if still else "")
        )
        return Grant(step, app_id, tuple(bits_of(app.held)), tuple(bits_of(grant)), reason, given)

    def release(self, app_id: str) -> Grant | None:
        """GPUs given to `app_id` within the committed step (`react`) above what it needs now
        (`_needs`, its floor at least) handed back as idle, so arrivals of the step and other
        apps' grants may take them: first those it did not hold at the end of the previous step
        (each gives back the swap taking it cost), then, as its swap cap allows, those it did
        (each a swap again), highest first; none on a down or drained node. None when it needs
        them all, or nothing was given in the step."""
        step, app = self.now - 1, self.apps.get(app_id)
        wanted = None if app is None else self._needs(app)
        dead = self.down | self.drained
        if app is None or wanted is None or not app.granted & app.held & ~dead:
            return None
        surplus = (app.held & ~dead).bit_count() - max(wanted, app.min_gpus)
        cap, before, spent = self._swaps(app)
        freed = 0
        for g in sorted(bits_of(app.granted & app.held & ~dead), key=lambda g: (bool(before >> g & 1), -g)):
            cost = 1 if before >> g & 1 else -1  # given back, a GPU it held then is a swap again
            if surplus <= 0 or spent + cost > cap:
                break
            freed, spent, surplus = freed | 1 << g, spent + cost, surplus - 1
        if not freed:
            return None
        app = self.apps[app_id] = replace(app, held=app.held & ~freed, granted=app.granted & ~freed)
        self.committed &= ~freed
        reason = (
            f"observed demand {wanted} GPUs in step {step}: {freed.bit_count()} GPU{'s' * (freed.bit_count() != 1)} "
            "granted in the step handed back idle"
        )
        return Grant(step, app_id, tuple(bits_of(app.held)), (), reason, {}, tuple(bits_of(freed)))

    def _needs(self, app: AppSpec) -> int | None:
        """GPUs `app` needs now in the committed step: its last observation, when it was made in
        that step or the step before (an observation holds until the next), else the largest one
        known ahead for that step; None: none."""
        step = self.now - 1
        if app.latest is not None and step - 1 <= app.latest[0] <= step:
            return app.latest[1]
        return app.observed.get(step)

    def _floors_fit(self, app_id: str, order: list[tuple[str | None, int]], room: int) -> bool:
        """Would every app's floor at the next commit (`_next_floor`: what its swap cap makes it
        keep of its set then) fit in the `room` running work and unavailable nodes leave, were
        `app_id` to take the GPUs of `order` (idle ones, or a donor's)?"""
        after = {a_id: a.held for a_id, a in self.apps.items()}
        for donor_id, g in order:
            after[app_id] = after[app_id] | 1 << g
            if donor_id is not None:
                after[donor_id] &= ~(1 << g)
        return sum(self._next_floor(a, after[a_id]) for a_id, a in self.apps.items()) <= room

    def _swaps(self, app: AppSpec) -> tuple[int, int, int]:
        """(swap cap, the set it ended the previous step with, swaps spent in this step) of `app`;
        its first committed step is bound by no cap (R4 counts between steps)."""
        cap = self.config.swap_cap if app.swap_cap is None else app.swap_cap
        if app.before < 0:
            return self.config.gpus, 0, 0
        return cap, app.before, (app.held ^ app.before).bit_count()

    def hour_of(self, step: int) -> int:
        """The pool hour `step` begins in (hour 0: the Monday 00:00 UTC before step 0)."""
        return pool_hour(self.week_minute, step, self.config.step_minutes)

    def node_status(self, node: int, state: str) -> list[str]:
        """Mark a node up, drained or down; returns the running jobs that fail with it."""
        N = self.config.node_size
        mask = ((1 << N) - 1) << (node * N)
        self.down &= ~mask
        self.drained &= ~mask
        if state == "down":
            self.down |= mask
        elif state == "drained":
            self.drained |= mask
        failed = [jid for jid, entry in sorted(self.running.items()) if state == "down" and entry.mask & mask]
        for jid in failed:
            self.fail(jid)
        return failed

    def resize_problem(self, config: PoolConfig) -> str:
        """Why the pool cannot take `config`'s shape now ("" when it can): a node size under
        which a running job's block would break R3's node rule (running work is never moved),
        or too few GPUs for the registered apps' floors beside the running work that stays."""
        ns = config.node_size
        for job_id, entry in sorted(self.running.items()):
            mask = entry.mask
            first, last = (mask & -mask).bit_length() - 1, mask.bit_length() - 1
            if last < config.gpus and not obeys_node_rule(first, last - first + 1, ns):
                return (
                    f"gpus_per_node: running job {job_id!r} holds GPUs {first}-{last}, across nodes of "
                    f"{ns} GPUs (R3's node rule); change the node size once it ends"
                )
        pool = (1 << config.gpus) - 1
        floors = sum(self._next_floor(a, a.held & pool if a.held >= 0 else -1) for a in self.apps.values())
        staying = (self._running_mask() | self.down | self.drained) & pool
        if floors > config.gpus - staying.bit_count():
            return (
                f"gpus: {config.gpus} GPUs cannot hold the registered apps' floors ({floors} GPUs) beside the "
                f"{staying.bit_count()} that running jobs and unavailable nodes keep there (running work is "
                "never moved; drain the nodes that leave first, or lower the floors)"
            )
        return ""

    def resize(self, config: PoolConfig) -> list[tuple[str, str]]:
        """Take a new configuration (`resize_problem` said it can): a pool that shrinks fails
        the running jobs on the GPUs it loses, as a node going down does (re-queued if they
        allow it), drops the queued jobs that no longer fit it anywhere, and trims what apps
        and node states held there. Returns (job id, why) for each job failed or dropped. The
        next arrivals and boundary get a fresh plan (the window may have changed shape)."""
        pool = (1 << config.gpus) - 1
        out = []
        for job_id, entry in sorted(self.running.items()):
            if entry.mask & ~pool:
                self.fail(job_id)
                out.append((job_id, f"the pool shrank to {config.gpus} GPUs and its GPUs left it"))
        failed = {job_id for job_id, _ in out}
        for job_id, spec in sorted(self.queued.items()):
            if next(block_size_problems(spec.gpus, config.gpus, config.node_size, "job"), None):
                self.queued.pop(job_id)
                if job_id not in failed:  # one that was running is failed once, with why it left
                    out.append((job_id, f"its {spec.gpus} GPUs no longer fit the pool of {config.gpus} GPUs"))
        for app_id, app in self.apps.items():
            if app.held >= 0:
                self.apps[app_id] = replace(app, held=app.held & pool)
        self.down, self.drained, self.committed = self.down & pool, self.drained & pool, self.committed & pool
        self.config = config
        self.busy = None
        self.ahead = None
        return out

    # ---- decisions ----------------------------------------------------------------------
    def plan(self, problem: Problem | None = None) -> tuple[Problem, Schedule]:
        """The hot path's plan for the window [now, now + horizon): made on the window with
        starving jobs put first (`scheduling_problem`); the window itself, with the contract's
        priorities, is what the plan is committed and weighed on."""
        problem = self.window_problem() if problem is None else problem  # `problem`: the current window, made already
        return problem, self.scheduler(self.scheduling_problem(problem))

    def cut(self) -> Problem:
        """Cut the window for the next boundary's plan, made ahead of it (`gpualloc.solvers.planner.ahead`):
        the problem to solve with the hot path's scheduler, its plan handed back by `planned_ahead`."""
        window = self.window_problem()
        problem = self.scheduling_problem(window)
        self.ahead = Ahead(self.now, frozenset(self.queued), app_rules(window), problem)
        return problem

    def planned_ahead(self, schedule: Schedule) -> None:
        """The plan of the problem `cut` gave, made (ignored when no cut waits for it)."""
        if self.ahead is not None and self.ahead.schedule is None:
            self.ahead = replace(self.ahead, schedule=schedule)

    def drop_cut(self) -> None:
        """Forget the cut: the next boundary replans (its plan came too late)."""
        self.ahead = None

    def ahead_ready(self) -> bool:
        """Will the next commit carry a plan made ahead onto its window (else it replans)?"""
        return self.ahead is not None and self.ahead.schedule is not None and self.ahead.now == self.now

    def boundary_plan(self) -> tuple[Problem, Schedule]:
        """The hot path's plan at a step boundary: the plan made ahead of it carried onto the
        window (`ahead_ready`), else a fresh one (`plan`), on the same window either way."""
        problem = self.window_problem()
        ahead = self.ahead if self.ahead_ready() else None  # ready: not None
        carried = carry_over(problem, ahead, self.by_arrival) if ahead is not None else None
        return (problem, carried) if carried is not None else self.plan(problem)

    def starving(self) -> dict[str, int]:
        """The queued jobs past the starvation bound, with the steps beyond it (`starvation.starving`)."""
        return starving(self.queued, self.now, self.config.starvation_steps, self.config.gpus)

    def scheduling_problem(self, problem: Problem) -> Problem:
        """`problem` with the starving jobs' priorities raised (`starvation.raised`)."""
        return raised(problem, self.starving())

    def window_demand(self, app_id: str) -> list[int]:
        """An app's GPUs needed in each step of the window, as the plan sees them."""
        return self._demand(self.apps[app_id])

    def _decision(self, problem: Problem, schedule: Schedule, job: JobSpec) -> Decision:
        """`job`'s decision from a fresh plan of the window (`_placed`; `queued` when the plan
        leaves it out)."""
        placed = schedule.batch.get(job.id)
        if placed is None:
            return waiting(job, why_waiting(problem, schedule, job))
        start, mask = placed
        return self._placed(job, start, mask, lambda: holders(problem, schedule, mask, start, self.now))

    def _insert(self, job: JobSpec) -> Decision:
        """`job` decided into the current plan: its earliest block free of everything the plan
        holds and of GPUs that may take no new work, lowest GPUs first; `queued` when the window
        has none (the next boundary's replan looks again). A `start` runs from now."""
        busy, T = self.busy, self.config.horizon
        assert busy is not None  # `submit_all` inserts only into a current plan
        blocked = self.down | self.drained
        cfg = self.config
        placed = earliest_block(
            _geometry(cfg.gpus, cfg.node_size, T),
            Batch(0, job.id, job.priority, job.gpus, job.duration, 0, 0, 0),
            [b | blocked for b in busy],
        )
        if placed is None:
            return waiting(
                job,
                f"no {job.gpus}-GPU block is free for {job.duration} steps within the {T}-step window beside "
                "the current plan; it stays queued and is replanned at every step boundary",
            )
        start, mask = placed
        for t in range(start, min(start + job.duration, T)):
            busy[t] |= mask
        decision = self._placed(
            job,
            start,
            mask,
            lambda: running_holders(
                (
                    (job_id, entry.spec.priority, entry.mask, self._steps_left(entry))
                    for job_id, entry in sorted(self.running.items())
                ),
                mask,
                start,
                self.now,
            ),
        )
        if decision.action == "start":
            self._start(job.id, mask)
        return decision

    def _placed(self, job: JobSpec, start: int, mask: int, held_by: Callable[[], str]) -> Decision:
        """The decision of `job` placed on `mask` from window step `start`: `start` only when its
        block is idle in the committed step too, so a node agent can bind it at once; a block
        still held there (by work ending at this boundary, say) makes it `planned` for the
        boundary, and a later block `planned` with what holds it until then (`held_by`)."""
        gpus = tuple(bits_of(mask))
        if start == 0 and not mask & self.committed:
            return Decision(
                job.id, "start", gpus, self.now, noted(f"starts now on GPUs {gpus[0]}-{gpus[-1]}", job), job.forecast
            )
        why = held_by() if start else HELD_NOW
        return Decision(
            job.id,
            "planned",
            gpus,
            self.now + start,
            noted(f"planned at step {self.now + start} on GPUs {gpus[0]}-{gpus[-1]}: " + why, job),
            job.forecast,
        )

    def _start(self, job_id: str, mask: int) -> None:
        """A `start` decision: the job runs from this step on `mask`, bound in the committed step
        from now on (should it leave before the boundary, its GPUs stay bound until then)."""
        self.running[job_id] = Running(self.queued.pop(job_id), mask, self.now)
        self.committed |= mask

    def _plan_busy(self, schedule: Schedule, shift: int) -> list[int]:
        """Per step of the window at `now`, the GPUs held by running jobs (for as long as the
        window counts them, overrunning ones included), by `schedule`'s blocks of jobs still
        queued and by its app sets, `schedule` being a plan made `shift` steps ago (its last app
        sets held on): the plan arrivals are inserted into."""
        T = self.config.horizon
        busy = [0] * T
        for entry in self.running.values():
            for t in range(self._steps_left(entry)):
                busy[t] |= entry.mask
        for job_id, (start, mask) in schedule.batch.items():
            spec = self.queued.get(job_id)
            if spec is not None:
                for t in range(max(0, start - shift), min(start - shift + spec.duration, T)):
                    busy[t] |= mask
        apps = [0] * T
        for masks in schedule.realtime.values():
            for t in range(T):
                apps[t] |= masks[min(t + shift, len(masks) - 1)]
        pool = (1 << self.config.gpus) - 1
        for t in range(T):
            # an app set planned on GPUs a job still holds (one that overran the plan) needs as
            # many others: held from the top, as floors are, so arrivals do not take them
            clash = (apps[t] & busy[t]).bit_count()
            busy[t] |= apps[t]
            free = pool & ~(busy[t] | self.down | self.drained)
            while clash > 0 and free:
                top = 1 << (free.bit_length() - 1)
                busy[t], free, clash = busy[t] | top, free ^ top, clash - 1
        return busy

    def adopt(self, plan: FullModePlan) -> Adoption:
        """At a step boundary: `plan` carried onto the current window (`gpualloc.solvers.planner.reconcile`),
        offered for `tick` only when the validator passes it and it beats the hot path."""
        shift = self.now - plan.made_at
        if not 0 <= shift < self.config.horizon:
            return Adoption(None, f"made for step {plan.made_at}, the window is at step {self.now}")
        problem, hot = self.boundary_plan()
        hot_objective = objective_of(problem, hot)
        best: tuple[float, Schedule] | None = None
        why = "its blocks force real-time apps past their swap caps once reconciled"
        starving = self.starving()
        for candidate in reconcile(problem, plan.schedule, shift):
            violations = check_plan(problem, to_grid(problem, candidate))
            if violations:
                why = f"illegal once reconciled: {violations[0]}"
                continue
            late = delayed(starving, hot, candidate)
            if late:
                why = f"it starts starving job {late!r} later than the hot path does"
                continue
            objective = objective_of(problem, candidate)
            if best is None or objective > best[0] + 1e-9:
                best = (objective, candidate)
        if best is None:
            return Adoption(None, why, None, hot_objective, (problem, hot))
        if best[0] <= hot_objective + 1e-6:
            return Adoption(
                None,
                f"no better than the hot path ({best[0]:.2f} <= {hot_objective:.2f})",
                best[0],
                hot_objective,
                (problem, hot),
            )
        return Adoption(
            best[1],
            f"adopted: {best[0]:.2f} against the hot path's {hot_objective:.2f}",
            best[0],
            hot_objective,
            (problem, hot),
        )

    def tick_after(self, adoption: Adoption) -> Commit:
        """`tick` at the boundary where `adoption` was decided: its plan when adopted, else the
        hot path's plan it was weighed against (made once, not again)."""
        if adoption.hot is None:
            return self.tick()
        problem, hot = adoption.hot
        if adoption.schedule is not None:
            return self._commit(problem, adoption.schedule, FULL_MODE)
        return self._commit(problem, hot, HOT_PATH)

    def tick(self, adopted: Schedule | None = None) -> Commit:
        """Commit the current step of a fresh plan (or of `adopted`, a plan of this same window
        from `adopt`, or recorded in a commit being replayed), then advance the clock one step."""
        if adopted is not None:
            return self._commit(self.window_problem(), adopted, FULL_MODE)
        return self._commit(*self.boundary_plan(), HOT_PATH)

    def _commit(self, problem: Problem, schedule: Schedule, source: Source) -> Commit:
        """Step 0 of `schedule` (a plan of the window `problem`) committed; the clock advances,
        and the plan, one step on, is what the next step's arrivals are inserted into."""
        displaced = displaced_value(self.queued.values())
        reasons = {app_id: self.headroom(app, displaced).why for app_id, app in sorted(self.apps.items())}
        assignments: dict[str, tuple[int, ...]] = {}
        for job_id, (start, mask) in sorted(schedule.batch.items()):
            if is_blocker(job_id) or (job_id not in self.running and job_id not in self.queued):
                continue
            if job_id in self.running:
                assignments[job_id] = tuple(bits_of(self.running[job_id].mask))
            elif start == 0:
                self._start(job_id, mask)
                assignments[job_id] = tuple(bits_of(mask))
        started = tuple(
            sorted(
                job_id for job_id, entry in self.running.items() if entry.start == self.now and job_id in assignments
            )
        )
        for app_id, masks in sorted(schedule.realtime.items()):
            app = self.apps[app_id]
            self.apps[app_id] = replace(app, before=app.held, held=masks[0], granted=0)
            assignments[app_id] = tuple(bits_of(masks[0]))
        for app_id, app in self.apps.items():  # past observations are no longer planned for: only the latest is
            latest = max(app.observed, default=None)
            observed = {s: g for s, g in app.observed.items() if s > self.now or s == latest}
            if len(observed) < len(app.observed):
                self.apps[app_id] = replace(app, observed=observed)
        self.committed = 0
        for owned in assignments.values():
            for g in owned:
                self.committed |= 1 << g
        self.now += 1
        self.ahead = None
        self.busy = self._plan_busy(schedule, 1)
        for app_id in sorted(self.apps, key=lambda a: (-self.apps[a].priority, a)):
            grant = self.react(app_id)  # demand observed before the boundary holds into the step
            if grant is not None:
                reasons[app_id] = f"{reasons[app_id]}; {grant.reason}"
        for app_id in schedule.realtime:
            assignments[app_id] = tuple(bits_of(self.apps[app_id].held))
        return Commit(self.now - 1, assignments, started, problem, schedule, source, reasons)

    # ---- the window as a Problem ----------------------------------------------------------
    def window_problem(self) -> Problem:
        """The window [now, now + horizon) as a Problem (`window.window`)."""
        displaced = displaced_value(self.queued.values())
        return window(
            self.config,
            self.now,
            self.running,
            self.queued,
            self.apps,
            self.down | self.drained,
            lambda app: self._demand(app, displaced),
        )

    def headroom(self, app: AppSpec, displaced: float | None = None) -> Headroom:
        """The demand quantile `app` is planned at and why: the settings' (`headroom.fixed`), or
        with `forecast.realtime_priced` the objective's (`headroom.priced`; `displaced`: the
        queue's `displaced_value`, computed when not given)."""
        settings = self.forecasts.settings
        if not settings.realtime_priced:
            return fixed(settings.realtime_quantile)
        if displaced is None:
            displaced = displaced_value(self.queued.values())
        return priced(app, self.config.realtime_penalty, displaced)

    def _demand(self, app: AppSpec, displaced: float | None = None) -> list[int]:
        return demand(app, self.config, self.now, self.forecasts, self.hour_of, self.headroom(app, displaced).quantile)

    def _running_mask(self) -> int:
        return running_mask(self.running)

    def _unplaceable(self, job: JobSpec) -> str:
        problems = list(block_size_problems(job.gpus, self.config.gpus, self.config.node_size, "job"))
        if job.duration < 1:
            problems.append(f"job.duration: must be >= 1 (got {job.duration})")
        return "; ".join(problems)


@functools.cache
def _geometry(gpus: int, node_size: int, horizon: int) -> Problem:
    """A pool's shape as a Problem with no jobs, for block searches (one a shape: its block
    tables are built once)."""
    return Problem("geometry", gpus, node_size, horizon, 1.0, 0.0, (1.0,) * horizon, (), ())


def applied(commits: list[Commit], gpus: int) -> list[list[str | None]]:
    """The executed grid (GPU x committed step) rebuilt from commits, for audits and tests."""
    grid: list[list[str | None]] = [[None] * len(commits) for _ in range(gpus)]
    for k, commit in enumerate(commits):
        for owner, owned in commit.assignments.items():
            for g in owned:
                grid[g][k] = owner
    return grid

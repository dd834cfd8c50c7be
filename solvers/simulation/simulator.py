"""What-if runs: a trace of contract events drives the planner core on a simulated clock.

Each online policy (`gpualloc.solvers.policies.online_policy`) gets its own `Pool`, the one event
interpreter, fed the same events one at a time: `fifo` (the contract's FIFO over the window),
`heuristic` (the hot path), `full-mode` (the hot path, plus full mode every K steps as the agent
runs it: it solves the state at the step boundary while that step's events arrive, and its plan,
reconciled with them, is adopted at the next boundary when it is legal and better). A job's
completion comes from the trace's `job.completed`, or else `actual_duration` steps after it
starts (its declared duration when the trace gives neither). Everything is a pure function of
the events and the options.

Time within a step is what the agent sees: a step's commit is made at its start, with what
arrived before it; a traffic observation stamped after the step began reaches the pool after that
commit (the next commit plans with it), and may be met at once by a reactive grant of idle GPUs
(`Planner.react`), which serves from the minute it came (`PolicyRun.grants`). Real-time service
and shortfall are counted in GPU-minutes over each step's pieces, against demand that holds each
observation until the next (`Simulation.within`). Jobs keep the step they arrive
in: one decided `start` runs from that step.

A job started on fewer GPUs than the trace says it needs (`actual_used.gpus`) runs out of memory
after `OUT_OF_MEMORY_AFTER` steps: the run hands the pool the `job.failed` (reason `out_of_memory`)
the agent would read, which teaches the forecasters and decides it anew at a larger count
(`PolicyRun.out_of_memory` counts the restarts and the GPU-steps they held for nothing). One given
more runs as long as on its true count (the traces have no speed-up model).

A run covers the whole trace: it goes on past the last event until every job it was given has
finished, or until the cap (`drain_cap`: the last event plus twice the longest declared
duration), so the report can count every job, the ones never started among them. `days` cuts
the runs at that many days instead.

With `forecast`, each policy runs twice on the same trace. `<policy>/forecast`: jobs given by
their features arrive without `gpus` and `duration`, so the forecasters size them, and real-time
curves come from the traffic forecaster; completions (with the trace's `actual_used`) and traffic
teach them as the run goes. `<policy>/oracle`: jobs arrive with their true GPUs
(`actual_used.gpus`, else `gpus`) and `actual_duration`, and each traffic observation reaches the
pool a window ahead, so every plan knows the demand it will meet. The difference is the price of
forecast error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable

from gpualloc.schemas.events import Envelope, JobFailed, JobSubmitted
from gpualloc.schemas.features import FEATURES
from gpualloc.schemas.settings import ForecastSettings, RollingFullMode, SimulationSettings, SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.effects import Decided, Ended, Event, Failed, Granted, Rejected
from gpualloc.solvers.planner.full_mode import FullModeRun, run_snapshot, snapshot
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import FULL_MODE, Commit, Decision, Grant, PoolConfig
from gpualloc.solvers.policies import OnlinePolicy, online_policy

OUT_OF_MEMORY_AFTER = 1  # steps a job given too few GPUs runs before it runs out of memory (loading, first steps)


@dataclass(frozen=True)
class SimOptions:
    policies: tuple[str, ...] = ("fifo", "heuristic")  # online policies, e.g. fifo, heuristic, full-mode
    days: int | None = None  # None: the whole trace, until every job finished (at most `drain_cap` steps)
    full_mode: RollingFullMode = SimulationSettings().full_mode
    forecast: bool = False  # each policy forecast-driven and as an oracle (see the module)
    forecast_settings: ForecastSettings = SimulationSettings().forecast
    starvation_steps: int | None = None  # the pools' starvation bound B instead of the trace's (0: none)
    replan_work: int = SimulationSettings().replan_work  # passes replan while queued jobs x GPUs <= this

    def labels(self) -> list[tuple[str, str | None]]:
        """(run label, information mode) per run: the policies, each twice with `forecast`."""
        names = [online_policy(name).name for name in self.policies]  # ValueError naming a bad one
        if not self.forecast:
            return [(name, None) for name in names]
        return [(f"{name}/{mode}", mode) for name in names for mode in ("oracle", "forecast")]


def base_policy(label: str) -> str:
    """The online policy a run label names ("heuristic/forecast" -> "heuristic")."""
    return label.split("/", 1)[0]


@dataclass
class PolicyRun:
    policy: str
    exempt: frozenset[str] = frozenset()  # online rules its hot path is exempt from (FIFO's)
    commits: list[Commit] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    submitted: dict[str, int] = field(default_factory=dict)  # job id -> step
    started: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)  # job id -> steps it failed at (then re-queued)
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (step, reason): events the pool refused
    down: list[int] = field(default_factory=list)  # per committed step: GPUs of nodes down or drained
    full_mode: list[tuple[int, str | None]] = field(default_factory=list)  # (step, what became of its plan)
    run_steps: dict[str, int] = field(default_factory=dict)  # job id -> steps its last start runs for
    full_mode_runs: list[FullModeRun] = field(default_factory=list)  # every solve: warm, own objective, bound
    grants: list[tuple[float, Grant]] = field(default_factory=list)  # (minute of its step, grant), in order
    # (job, step it failed at, GPUs it was given, GPU-steps it held for nothing): started below its true need
    out_of_memory: list[tuple[str, int, int, int]] = field(default_factory=list)

    def executed(self) -> list[Commit]:
        """Each step's commit as it ended: its reactive grants applied to the apps' sets."""
        out = list(self.commits)
        first = out[0].step if out else 0
        for _, grant in self.grants:
            k = grant.step - first
            if 0 <= k < len(out):
                out[k] = replace(out[k], assignments={**out[k].assignments, **grant.sets})
        return out

    @property
    def full_mode_adopted(self) -> list[int]:
        """Steps whose commit came from full mode."""
        return [c.step for c in self.commits if c.source == FULL_MODE]

    def recorded(self) -> dict[int, Schedule]:
        """The adopted full-mode plans by step, as the commits record them: what a replay reuses."""
        return {c.step: c.schedule for c in self.commits if c.source == FULL_MODE}


@dataclass
class Simulation:
    config: PoolConfig
    steps: int
    demand: dict[str, list[int]]  # app id -> demand actually observed per step (its largest observation)
    priorities: dict[str, float]  # job and app id -> priority
    limits: dict[str, tuple[int, int, int]]  # app id -> (min_gpus, max_gpus, swap_cap)
    runs: dict[str, PolicyRun]
    drained: bool = False  # whole-trace: each run went on past the trace until its jobs finished (or the cap)
    cap: int = 0  # the most steps a run could take
    # whole-trace: real-time service counts through this step, the last event's; after it the
    # demand is the last observation held, and runs of different lengths would serve it unequally
    apps_until: int | None = None
    # (app, step) observed within the step -> its demand from each minute on: the last value before
    # the step until its first observation, then each observation until the next (service and
    # shortfall count by these; a step absent here has its `demand` throughout)
    within: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)


# A trace's events, (envelope, payload), and the same with each one's step in front; the
# envelope's type decides the payload's model (Any here).
Events = list[tuple[Envelope, Any]]
Timed = list[tuple[int, Envelope, Any]]


def simulate(
    events: Events,
    options: SimOptions = SimOptions(),
    recorded: dict[int, Schedule] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Simulation:
    """`events`: (Envelope, payload) pairs as `schemas.events.parse_event` returns them.
    `recorded`: full-mode plans by step from an earlier run (`PolicyRun.recorded`); a policy with
    full mode then commits those instead of solving, as an audit replay does. `progress(label,
    steps done, steps)` is called after each step (the CLI shows it on stderr)."""
    labels = options.labels()
    events = sorted(events, key=lambda e: e[0].occurred_at)  # stable: file order breaks ties
    first = next((e for e in events if e[0].type == "pool.configured"), None)
    if first is None:
        raise ValueError("trace: needs a pool.configured event (it sets the pool and step 0)")
    rest = [e for e in events if e is not first]
    if options.starvation_steps is not None:
        bound = options.starvation_steps or None
        first = (
            first[0],
            first[1].model_copy(update={"starvation_steps": bound, "starvation_minutes": 0 if bound is None else None}),
        )
    clock = Pool()  # only to read the trace's steps the way every run's interpreter reads them
    clock.apply([Event(first[0].type, first[1], first[0].occurred_at)], first[0].occurred_at)
    assert clock.planner is not None  # pool.configured makes the planner
    config = clock.planner.config
    timed: Timed = [(clock.step_at(e[0].occurred_at), *e) for e in rest]
    last = max((s for s, _, _ in timed), default=0)
    steps = options.days * 24 * 60 // config.step_minutes if options.days else drain_cap(timed, last)
    demand, priorities, within = _observed(timed, steps, first[0].occurred_at, clock.step_length, config.step_minutes)
    limits = {
        p.id: (
            p.min_gpus,
            config.gpus if p.max_gpus is None else p.max_gpus,
            config.swap_cap if p.swap_cap is None else p.swap_cap,
        )
        for _, env, p in timed
        if env.type == "app.registered"
    }
    drain_after = None if options.days else last
    runs = {
        label: _run(
            label,
            online_policy(base_policy(label)),
            first,
            _informed(timed, mode, config),
            steps,
            drain_after,
            options,
            recorded,
            progress,
        )
        for label, mode in labels
    }
    return Simulation(
        config,
        max(len(r.commits) for r in runs.values()),
        demand,
        priorities,
        limits,
        runs,
        drained=drain_after is not None,
        cap=steps,
        apps_until=drain_after,
        within=within,
    )


def drain_cap(timed: Timed, last: int) -> int:
    """Steps a whole-trace run may take: past the last event, twice the longest declared
    duration, for the jobs still queued or running to finish (those that cannot by then are
    reported as never started or unfinished)."""
    longest = max(
        (max(p.duration or 1, p.actual_duration or 1) for _, env, p in timed if env.type == "job.submitted"), default=0
    )
    return last + 1 + 2 * longest


def _informed(timed: Timed, mode: str | None, config: PoolConfig) -> Timed:
    """The events as a run with `mode`'s information meets them: (delivery step, envelope,
    payload). Forecast: sizes withheld from jobs that give features. Oracle: true sizes, and
    traffic delivered a window (horizon - 1 steps) before the step it is for."""
    if mode is None:
        return timed
    out = []
    for step, env, p in timed:
        if env.type == "job.submitted" and mode == "forecast" and p.features and p.kind in FEATURES:
            p = p.model_copy(update={"gpus": None, "duration": None})
        elif env.type == "job.submitted" and mode == "oracle":
            used = p.actual_used
            p = p.model_copy(
                update={
                    "gpus": used.gpus if used and used.gpus else p.gpus,
                    "duration": p.actual_duration or p.duration,
                }
            )
        elif env.type == "traffic.observed" and mode == "oracle":
            step = max(0, step - config.horizon + 1)
        out.append((step, env, p))
    return sorted(out, key=lambda e: e[0])  # stable


def _observed(
    timed: Timed, steps: int, origin: datetime, step_length: timedelta, step_minutes: int
) -> tuple[dict[str, list[int]], dict[str, float], dict[tuple[str, int], list[tuple[float, int]]]]:
    """Per app, demand per step as observed (its largest observation, held flat between
    observations); priorities; and per (app, step) observed within the step, its demand from each
    minute on (`Simulation.within`)."""
    demand: dict[str, list[int]] = {}
    rps: dict[str, float] = {}
    priorities: dict[str, float] = {}
    seen: dict[tuple[str, int], list[tuple[float, int]]] = {}  # (app, step) -> (minute, GPUs) in time order
    for step, env, p in timed:
        if env.type == "app.registered":
            demand.setdefault(p.id, [0] * steps)
            rps[p.id] = p.rps_per_gpu
            priorities[p.id] = p.priority
        elif env.type == "job.submitted":
            priorities[p.id] = p.priority
        elif env.type == "traffic.observed" and p.app in demand and step < steps:
            gpus = p.gpus_needed(rps[p.app])
            demand[p.app][step] = max(demand[p.app][step], gpus)
            minute = (env.occurred_at - origin - step * step_length) / step_length * step_minutes
            seen.setdefault((p.app, step), []).append((max(0.0, minute), gpus))
    for curve in demand.values():
        for s in range(1, steps):
            if curve[s] == 0:
                curve[s] = curve[s - 1]
    within: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for app in demand:
        last: int | None = None  # the last observation before the step at hand
        for step in range(steps):
            points = sorted(seen.get((app, step), ()))
            if points:
                carried = [] if points[0][0] == 0 or last is None else [(0.0, last)]
                within[(app, step)] = carried + ([(0.0, points[0][1])] if last is None else []) + points
                last = points[-1][1]
            elif last is not None:
                within[(app, step)] = [(0.0, last)]
    return demand, priorities, within


def _run(
    label: str,
    online: OnlinePolicy,
    first: tuple[Envelope, Any],
    timed: Timed,
    steps: int,
    drain_after: int | None,
    options: SimOptions,
    recorded: dict[int, Schedule] | None,
    progress: Callable[[str, int, int], None] | None,
) -> PolicyRun:
    """One policy over the trace: `steps` steps, or with `drain_after` (the last event's step)
    until every job it was given has finished, at most `steps`."""
    full = online.full_mode
    pool = Pool(
        online.hot.bind(SolveOptions()),
        online.hot.by_arrival,
        full_mode_every=options.full_mode.every if full else 0,
        forecast=options.forecast_settings,
        replan_work=options.replan_work,
    )
    origin = first[0].occurred_at
    pool.apply([Event(first[0].type, first[1], origin)], origin)
    planner = pool.planner
    assert planner is not None  # pool.configured makes the planner
    run = PolicyRun(label, online.hot.exempt)
    config_minutes = planner.config.step_minutes
    actual: dict[str, JobSubmitted] = {}  # job -> its payload, for what it really runs and uses
    ends: dict[str, int] = {}  # running job -> step at which its completion is processed
    failing: dict[str, tuple[int, int, int]] = {}  # job started below its need -> (step it fails at, start, GPUs)
    i = 0
    for step in range(steps):
        if (
            drain_after is not None
            and step > drain_after
            and i == len(timed)
            and not planner.queued
            and not planner.running
        ):
            break
        proposal = None
        if full is not None and recorded is None and pool.full_mode_due():
            solved = _full_mode(planner, full.name, options.full_mode)  # solved while this step's events arrive
            run.full_mode_runs.append(solved)
            proposal = solved.plan
            if proposal is None:
                run.full_mode.append((step, "no better than its warm start on its own snapshot"))
        within: Timed = []  # traffic observed after the step began: it meets the step's commit
        while i < len(timed) and timed[i][0] <= step:
            delivered, env, payload = timed[i]
            early = delivered < pool.step_at(env.occurred_at)  # an oracle's traffic, delivered ahead
            if env.type == "traffic.observed" and not early and env.occurred_at > origin + step * pool.step_length:
                within.append(timed[i])
                i += 1
                continue
            now = origin + delivered * pool.step_length if early else env.occurred_at
            for effect in pool.apply([Event(env.type, payload, env.occurred_at, payload)], now):
                _record(run, actual, ends, step, effect)
            i += 1
        for job_id in sorted(j for j, end in ends.items() if end <= step):
            planner.complete(job_id, actual[job_id].actual_used if job_id in actual else None)
            run.finished[job_id] = step
            del ends[job_id]
        for job_id in sorted(j for j, (at, _, _) in failing.items() if at <= step):
            _, start, given = failing.pop(job_id)
            if job_id not in planner.running or planner.running[job_id].start != start:
                continue  # it left its GPUs otherwise meanwhile (cancelled, its node down)
            need = _need(actual.get(job_id))
            failed = JobFailed(id=job_id, reason="out_of_memory", detail=f"needs {need} GPUs, given {given}")
            at = origin + step * pool.step_length
            run.out_of_memory.append((job_id, step, given, given * (step - start)))
            for effect in pool.apply([Event("job.failed", failed, at, ("out_of_memory", job_id))], at):
                _record(run, actual, ends, step, effect)
        run.down.append(planner.down | planner.drained)
        replayed = recorded.get(step) if full is not None and recorded is not None else None
        committed = pool.commit(proposal, replayed)
        if proposal is not None:
            run.full_mode.append((step, committed.full_mode))
        run.commits.append(committed.commit)
        for effect in committed.expired:  # failed at their time limit: the trace's end never comes
            _record(run, actual, ends, step, effect)
        for _, env, payload in within:
            minute = (env.occurred_at - origin - step * pool.step_length) / pool.step_length * config_minutes
            for effect in pool.apply([Event(env.type, payload, env.occurred_at, payload)], env.occurred_at):
                if isinstance(effect, Granted):
                    run.grants.append((min(minute, config_minutes), effect.grant))
                _record(run, actual, ends, step, effect)
        for job_id in committed.commit.started:
            run.started[job_id] = step
            job, given = actual.get(job_id), len(committed.commit.assignments[job_id])
            need = _need(job)
            if need is not None and given < need:  # out of memory once it has loaded and run its first step
                failing[job_id] = (step + OUT_OF_MEMORY_AFTER, planner.running[job_id].start, given)
                run.run_steps[job_id] = OUT_OF_MEMORY_AFTER
                continue
            ends[job_id] = step + (
                job.actual_duration if job and job.actual_duration else planner.running[job_id].spec.duration
            )
            run.run_steps[job_id] = ends[job_id] - step
        if progress is not None:
            progress(label, step + 1, steps)
    return run


def _record(run: PolicyRun, actual: dict[str, JobSubmitted], ends: dict[str, int], step: int, effect: object) -> None:
    """The simulator's bookkeeping of what an event caused."""
    if isinstance(effect, Decided) and isinstance(effect.ref, tuple):  # decided anew after running out of memory
        run.decisions.append(effect.decision)
    elif isinstance(effect, Decided):
        job = effect.ref
        run.submitted[job.id] = step
        run.run_steps[job.id] = job.actual_duration or job.duration or 1  # until it starts and its plan says
        actual[job.id] = job
        run.decisions.append(effect.decision)
    elif isinstance(effect, Ended):
        run.finished[effect.job_id] = step
        ends.pop(effect.job_id, None)
    elif isinstance(effect, Failed):
        ends.pop(effect.job_id, None)
        run.failed.setdefault(effect.job_id, []).append(step)
    elif isinstance(effect, Rejected):
        run.rejected.append((step, effect.reason))


def _need(job: JobSubmitted | None) -> int | None:
    """The GPUs a job truly needs, where the trace says (`actual_used.gpus`): fewer run out of memory."""
    return job.actual_used.gpus if job is not None and job.actual_used is not None else None


def _full_mode(planner: Planner, policy_name: str, rolling: RollingFullMode) -> FullModeRun:
    return run_snapshot(
        snapshot(planner, rolling.max_jobs), planner.now, policy_name, SolveOptions(full_mode=rolling.options)
    )

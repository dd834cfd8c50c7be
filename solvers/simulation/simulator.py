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
(`RealTime.react`), which serves from the minute it came (`PolicyRun.grants`). Real-time service
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
duration and the steps the pool takes to run all the trace's work), so the report can count every job, the ones never started among them. `days` cuts
the runs at that many days instead.

With `forecast`, each policy runs twice on the same trace. `<policy>/forecast`: jobs given by
their features arrive without `gpus` and `duration`, so the forecasters size them, and real-time
curves come from the traffic forecaster; completions (with the trace's `actual_used`) and traffic
teach them as the run goes. `<policy>/oracle`: jobs arrive with their true GPUs
(`actual_used.gpus`, else `gpus`) and `actual_duration`, and each traffic observation reaches the
pool a window ahead, so every plan knows the demand it will meet. The difference is the price of
forecast error. Each part of `known` adds a run, `<policy>/<part>-known`: the forecast run's, but
with every job's true GPUs (`gpus`), duration (`durations`) or both (`sizes`), so the difference
to the forecast run is what knowing that part is worth, with traffic as it comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gpualloc.schemas.events import Envelope, JobFailed, JobSubmitted
from gpualloc.schemas.settings import ForecastSettings, RollingFullMode, SimulationSettings, SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.effects import Decided, Ended, Event, Failed, Granted, Rejected
from gpualloc.solvers.planner.full_mode import FullModeRun, run_snapshot, snapshot
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.policies import OnlinePolicy, online_policy
from gpualloc.solvers.simulation.results import PolicyRun, Simulation, base_policy
from gpualloc.solvers.simulation.trace_events import KNOWN, Events, Timed, drain_cap, informed, observed, planned_at
from gpualloc.solvers.value_models import ValueModel

OUT_OF_MEMORY_AFTER = 1  # steps a job given too few GPUs runs before it runs out of memory (loading, first steps)


@dataclass(frozen=True)
class SimOptions:
    policies: tuple[str, ...] = ("fifo", "heuristic")  # online policies, e.g. fifo, heuristic, full-mode
    days: int | None = None  # None: the whole trace, until every job finished (at most `drain_cap` steps)
    full_mode: RollingFullMode = SimulationSettings().full_mode
    forecast: bool = False  # each policy forecast-driven and as an oracle (see the module)
    known: tuple[str, ...] = ()  # with `forecast`, a run a policy for each: `trace_events.KNOWN`'s parts
    forecast_settings: ForecastSettings = SimulationSettings().forecast
    starvation_steps: int | None = None  # the pools' starvation bound B instead of the trace's (0: none)
    replan_work: int = SimulationSettings().replan_work  # passes replan while queued jobs x GPUs <= this
    value_model: ValueModel | None = None  # the pools' value model instead of the trace's
    reserved_jobs: int | None = None  # the pools' reserved jobs instead of the trace's (0: none)
    duration_factor: float | None = None  # every job planned at this x its true duration (`trace_events.planned_at`)

    def labels(self) -> list[tuple[str, str | None]]:
        """(run label, information mode) per run: the policies, each twice with `forecast`."""
        names = [online_policy(name).name for name in self.policies]  # ValueError naming a bad one
        if not self.forecast:
            return [(name, None) for name in names]
        for part in self.known:
            if part not in KNOWN:
                raise ValueError(f"known: {part!r} is none of {', '.join(KNOWN)}")
        modes = ("oracle", "forecast", *(f"{part}-known" for part in self.known))
        return [(f"{name}/{mode}", mode) for name in names for mode in modes]


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
    pool = {"value_model": options.value_model, "reserved_jobs": options.reserved_jobs}
    if any(v is not None for v in pool.values()):
        update = {k: v or None for k, v in pool.items() if v is not None}
        first = (first[0], first[1].model_copy(update=update))
    clock = Pool()  # only to read the trace's steps the way every run's interpreter reads them
    effects = clock.apply([Event(first[0].type, first[1], first[0].occurred_at)], first[0].occurred_at)
    if clock.planner is None or clock.origin is None:  # refused: a configuration needing newer planning rules
        refused = "; ".join(e.reason for e in effects if isinstance(e, Rejected))
        raise ValueError(f"trace: its pool.configured is refused: {refused}")
    config = clock.planner.config
    timed: Timed = [(clock.step_at(e[0].occurred_at), *e) for e in rest]
    if options.duration_factor is not None:
        timed = planned_at(timed, options.duration_factor)
    last = max((s for s, _, _ in timed), default=0)
    steps = options.days * 24 * 60 // config.step_minutes if options.days else drain_cap(timed, last, config.gpus)
    demand, priorities, within = observed(timed, steps, clock.origin, clock.step_length, config.step_minutes)
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
            informed(timed, mode, config),
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
        needs={p.id: need for _, env, p in timed if env.type == "job.submitted" and (need := _need(p)) is not None},
        sizes={p.id: _size(p) for _, env, p in timed if env.type == "job.submitted"},
    )


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
    pool.apply([Event(first[0].type, first[1], first[0].occurred_at)], first[0].occurred_at)
    planner, origin = pool.planner, pool.origin
    assert planner is not None and origin is not None  # pool.configured makes the planner and step 0's time
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
            planner.admission.complete(job_id, actual[job_id].actual_used if job_id in actual else None)
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
        run.down.append(planner.closed)
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
    run.pending = frozenset(planner.queued) | frozenset(planner.running)
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


def _size(job: JobSubmitted) -> tuple[int, int]:
    """(GPUs, steps) of a job's work as the trace gives it: its true GPUs, else those it asked
    for; its actual duration, else its declared one (1 where a forecaster sizes it unseen)."""
    used = job.actual_used
    gpus = (used.gpus if used is not None else None) or job.gpus or 1
    return gpus, job.actual_duration or (used.duration if used is not None else None) or job.duration or 1


def _full_mode(planner: Planner, policy_name: str, rolling: RollingFullMode) -> FullModeRun:
    return run_snapshot(
        snapshot(planner, rolling.max_jobs), planner.now, policy_name, SolveOptions(full_mode=rolling.options)
    )

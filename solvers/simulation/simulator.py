"""What-if runs: a trace of contract events drives the planner core on a simulated clock.

Each policy gets its own Planner fed the same events: `fifo` (the contract's FIFO over the
window: static reservation at the forecast daily peak, arrival-order first fit with backfill),
`heuristic` (the hot path), `heuristic+milp` (the hot path, plus full mode every K steps, as the
agent runs it: it solves the state at the step boundary while that step's events arrive, and its
plan, reconciled with them, is adopted at the next boundary when it is legal and better). A job's completion comes from the trace's
`job.completed`, or else `actual_duration` steps after it starts (its declared duration when the
trace gives neither). Everything is a pure function of the events and the options.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime

from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.full_mode import snapshot, solve_snapshot
from gpualloc.solvers.planner.state import AppSpec, Commit, Decision, FullModePlan, JobSpec, Planner, PoolConfig
from gpualloc.solvers.problem import mask_of

POLICIES = ("fifo", "heuristic", "heuristic+milp")


@dataclass(frozen=True)
class SimOptions:
    policies: tuple[str, ...] = ("fifo", "heuristic")
    days: int | None = None  # None: until the trace's last event
    milp_every: int = 6  # steps between full-mode runs (heuristic+milp)
    milp_node_limit: int = 50  # a work limit, so reruns give the same plans
    milp_max_jobs: int = 20  # full mode plans the most valuable queued jobs only (model size)
    milp_time_limit: float | None = 10.0  # root work is not bounded by nodes: when this binds,
    # reruns can differ (the agent records adopted full-mode plans so replays reuse them)


@dataclass
class PolicyRun:
    policy: str
    commits: list[Commit] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    submitted: dict[str, int] = field(default_factory=dict)  # job id -> step
    started: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)  # job id -> steps it failed at (then re-queued)
    down: list[int] = field(default_factory=list)  # per committed step: GPUs of nodes that are down
    full_mode: list[tuple[int, str]] = field(default_factory=list)  # (step, what became of its plan)

    @property
    def milp_adopted(self) -> list[int]:
        """Steps whose commit came from full mode."""
        return [c.step for c in self.commits if c.source == "milp"]

    def recorded(self) -> dict[int, Schedule]:
        """The adopted full-mode plans by step, as the commits record them: what a replay reuses."""
        return {c.step: c.schedule for c in self.commits if c.source == "milp"}


@dataclass
class Simulation:
    config: PoolConfig
    steps: int
    demand: dict[str, list[int]]  # app id -> demand actually observed per step
    priorities: dict[str, float]  # job and app id -> priority
    limits: dict[str, tuple[int, int, int]]  # app id -> (min_gpus, max_gpus, swap_cap)
    runs: dict[str, PolicyRun]


def _step_of(t0: datetime, at: datetime, step_minutes: int) -> int:
    return max(0, math.floor((at - t0).total_seconds() / (60 * step_minutes)))


def simulate(events: list, options: SimOptions = SimOptions(),
             recorded: dict[int, Schedule] | None = None) -> Simulation:
    """`events`: (Envelope, payload) pairs as `gpualloc.schemas.events.parse_event` returns them.
    `recorded`: full-mode plans by step from an earlier run (`PolicyRun.recorded`); the
    heuristic+milp policy then commits those instead of solving, as an audit replay does."""
    events = sorted(events, key=lambda e: e[0].occurred_at)  # stable: file order breaks ties
    first = next((e for e in events if e[0].type == "pool.configured"), None)
    if first is None:
        raise ValueError("trace: needs a pool.configured event (it sets the pool and step 0)")
    t0, cfg = first[0].occurred_at, first[1]
    config = PoolConfig(cfg.gpus, cfg.gpus_per_node, cfg.horizon, cfg.step_minutes, cfg.time_decay,
                        cfg.realtime_penalty, cfg.swap_cap)
    timed = [(_step_of(t0, env.occurred_at, config.step_minutes), env, payload) for env, payload in events]
    last = max(s for s, _, _ in timed)
    steps = options.days * 24 * 60 // config.step_minutes if options.days else last + 1
    demand, priorities = _observed(timed, steps)
    limits = {p.id: (p.min_gpus, config.gpus if p.max_gpus is None else p.max_gpus,
                     config.swap_cap if p.swap_cap is None else p.swap_cap)
              for _, env, p in timed if env.type == "app.registered"}
    runs = {policy: _run(policy, config, timed, steps, options, recorded) for policy in options.policies}
    return Simulation(config, steps, demand, priorities, limits, runs)


def _observed(timed, steps: int) -> tuple[dict[str, list[int]], dict[str, float]]:
    """Per app, demand per step as observed (held flat between observations), and priorities."""
    demand: dict[str, list[int]] = {}
    rps: dict[str, float] = {}
    priorities: dict[str, float] = {}
    for step, env, p in timed:
        if env.type == "app.registered":
            demand.setdefault(p.id, [0] * steps)
            rps[p.id] = p.rps_per_gpu
            priorities[p.id] = p.priority
        elif env.type == "job.submitted":
            priorities[p.id] = p.priority
        elif env.type == "traffic.observed" and p.app in demand and step < steps:
            demand[p.app][step] = max(demand[p.app][step], p.gpus_needed(rps[p.app]))
    for curve in demand.values():
        for s in range(1, steps):
            if curve[s] == 0:
                curve[s] = curve[s - 1]
    return demand, priorities


def _scheduler(policy: str):
    if policy == "fifo":
        return fifo_schedule
    if policy in ("heuristic", "heuristic+milp"):
        return heuristic_schedule
    raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")


def _run(policy: str, config: PoolConfig, timed, steps: int, options: SimOptions,
         recorded: dict[int, Schedule] | None) -> PolicyRun:
    planner = Planner(config, scheduler=_scheduler(policy))
    run = PolicyRun(policy)
    actual: dict[str, int] = {}
    ends: dict[str, int] = {}  # running job -> step at which its completion is processed
    i = 0
    full_mode = policy == "heuristic+milp"
    for step in range(steps):
        proposal = None
        if full_mode and recorded is None and step % options.milp_every == 0:
            proposal = _full_mode(planner, options)  # solved while this step's events arrive
            if proposal is None:
                run.full_mode.append((step, "no better than the heuristic on its own snapshot"))
        while i < len(timed) and timed[i][0] <= step:
            _apply(planner, run, actual, ends, *timed[i])
            i += 1
        for job_id in sorted(j for j, end in ends.items() if end <= step):
            planner.complete(job_id)
            run.finished[job_id] = step
            del ends[job_id]
        run.down.append(planner.down)
        if proposal is not None:
            adoption = planner.adopt(proposal)
            run.full_mode.append((step, adoption.reason))
            commit = planner.tick_after(adoption)
        else:
            commit = planner.tick(recorded.get(step) if full_mode and recorded is not None else None)
        run.commits.append(commit)
        for job_id in commit.started:
            run.started[job_id] = step
            ends[job_id] = step + actual.get(job_id, planner.running[job_id][0].duration)
    return run


def _apply(planner: Planner, run: PolicyRun, actual, ends, step: int, env, p) -> None:
    kind = env.type
    if kind == "job.submitted":
        if p.gpus is None or p.duration is None:
            return  # needs the forecaster (a later issue); the agent dead-letters it meanwhile
        run.submitted[p.id] = step
        if p.actual_duration is not None:
            actual[p.id] = p.actual_duration
        run.decisions.append(planner.submit(JobSpec(p.id, p.kind, p.priority, p.gpus, p.duration, step, p.requeue)))
    elif kind in ("job.completed", "job.cancelled"):
        if p.id in planner.running:
            run.finished[p.id] = step
        ends.pop(p.id, None)
        planner.complete(p.id)
    elif kind == "job.failed":
        ends.pop(p.id, None)
        run.failed.setdefault(p.id, []).append(step)
        planner.fail(p.id)
    elif kind == "app.registered":
        planner.register_app(AppSpec(p.id, p.priority, p.min_gpus, p.max_gpus, p.swap_cap, p.profile,
                                     rps_per_gpu=p.rps_per_gpu,
                                     held=mask_of(p.current) if p.current is not None else -1))
    elif kind == "traffic.observed" and p.app in planner.apps:
        planner.observe_traffic(p.app, step, p.gpus_needed(planner.apps[p.app].rps_per_gpu))
    elif kind == "node.status":
        for job_id in planner.node_status(p.node, p.state):
            ends.pop(job_id, None)
            run.failed.setdefault(job_id, []).append(step)


def _full_mode(planner: Planner, options: SimOptions) -> FullModePlan | None:
    from gpualloc.solvers.policies.milp.model import MilpOptions

    problem = snapshot(planner, options.milp_max_jobs)
    return solve_snapshot(problem, planner.now, MilpOptions(time_limit=options.milp_time_limit,
                                                            node_limit=options.milp_node_limit))


# ---- reporting ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DayReport:
    policy: str
    day: int | None  # None: the whole run
    utilization: float
    value: float  # undiscounted priority x GPU-steps (batch) + priority x served (real-time)
    realtime_shortfall: int
    started: int
    completed: int
    mean_queue_steps: float | None
    mean_completion_steps: float | None


def report(sim: Simulation) -> list[DayReport]:
    per_day = 24 * 60 // sim.config.step_minutes
    out = []
    for policy, run in sim.runs.items():
        days = range(math.ceil(sim.steps / per_day))
        for day in list(days) + [None]:
            lo, hi = (0, sim.steps) if day is None else (day * per_day, min((day + 1) * per_day, sim.steps))
            out.append(_summary(sim, run, day, lo, hi))
    return out


def _summary(sim: Simulation, run: PolicyRun, day, lo: int, hi: int) -> DayReport:
    used = value = 0.0
    short = 0
    for commit in run.commits[lo:hi]:
        for owner, gpus in commit.assignments.items():
            prio = sim.priorities.get(owner, 0.0)
            if owner in sim.demand:
                served = min(len(gpus), sim.demand[owner][commit.step])
                used += served
                value += prio * served
            else:
                used += len(gpus)
                value += prio * len(gpus)
        for app_id, curve in sim.demand.items():
            short += max(0, curve[commit.step] - len(commit.assignments.get(app_id, ())))
    started = [j for j, s in run.started.items() if lo <= s < hi]
    finished = [j for j, s in run.finished.items() if lo <= s < hi]
    queue = [run.started[j] - run.submitted[j] for j in started if j in run.submitted]
    jct = [run.finished[j] - run.submitted[j] for j in finished if j in run.submitted]
    return DayReport(run.policy, day, round(used / (sim.config.gpus * max(hi - lo, 1)), 4), round(value, 2),
                     short, len(started), len(finished),
                     round(statistics.fmean(queue), 2) if queue else None,
                     round(statistics.fmean(jct), 2) if jct else None)


def executed_violations(sim: Simulation, run: PolicyRun) -> list[str]:
    """The contract's online rules over a simulated run's executed grid (`online_violations`);
    FIFO's static reservations are exempt from the app rules, as in the contract."""
    return online_violations(run.commits, sim.limits if run.policy != "fifo" else {}, set(sim.limits),
                             run.down, run.failed)


def online_violations(commits, limits: dict[str, tuple[int, int, int]], apps: set[str],
                      down: list[int] | None = None, failed: dict[str, list[int]] | None = None) -> list[str]:
    """The contract's online rules over committed steps (objects with `step` and `assignments`,
    as the planner makes them or as rebuilt from `plan.committed` messages): one owner per GPU
    per step; a batch job holds one contiguous power-of-two block from its first committed step
    until its completion, without a gap or a move (a failed, re-queued job starts afresh); apps
    in `limits` (min_gpus, max_gpus, swap_cap) within their bounds and their swap cap between
    consecutive commits, GPUs lost to a node going down (`down`: mask per step) not counting."""
    out = []
    failed = failed or {}
    seen_at: dict[str, tuple[int, tuple[int, ...]]] = {}
    for commit in commits:
        owner_of: dict[int, str] = {}
        for owner, gpus in commit.assignments.items():
            for g in gpus:
                if g in owner_of:
                    out.append(f"step {commit.step}: GPU {g} held by {owner} and {owner_of[g]}")
                owner_of[g] = owner
            if owner in apps:
                if owner in limits:
                    out.extend(_app_violations(limits[owner], owner, commit, seen_at.get(owner),
                                               down[commit.step] if down else 0))
                seen_at[owner] = (commit.step, tuple(gpus))
                continue
            if owner in seen_at:
                last, before = seen_at[owner]
                restarted = any(last < s <= commit.step for s in failed.get(owner, ()))
                if not restarted and (before != tuple(gpus) or last != commit.step - 1):
                    out.append(f"step {commit.step}: {owner} moved or was interrupted")
            seen_at[owner] = (commit.step, tuple(gpus))
            n = len(gpus)
            if n & (n - 1) or list(gpus) != list(range(gpus[0], gpus[0] + n)):
                out.append(f"step {commit.step}: {owner} is not on a contiguous power-of-two block")
    return out


def _app_violations(limits: tuple[int, int, int], app: str, commit, before, down: int) -> list[str]:
    """R3 and R4 for one app at one commit; GPUs lost to a node going down do not count as swaps."""
    lo, hi, cap = limits
    gpus = set(commit.assignments[app])
    out = []
    if not lo <= len(gpus) <= hi:
        out.append(f"step {commit.step}: {app} holds {len(gpus)} GPUs, outside [{lo}, {hi}] (R3)")
    if before is not None and before[0] == commit.step - 1:
        kept_up = {g for g in before[1] if not (down >> g) & 1}
        if len(gpus ^ kept_up) > cap:
            out.append(f"step {commit.step}: {app} swaps {len(gpus ^ kept_up)} GPUs, above {cap} (R4)")
    return out

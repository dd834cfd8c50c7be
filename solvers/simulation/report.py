"""The simulator's figures per policy and per day, and the online rules over what each policy
executed: pure functions of a `Simulation`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.metrics import app_moves, idle_moves, objective_of, relative_gap
from gpualloc.solvers.planner.records import Commit
from gpualloc.solvers.policies.milp.bound import capacity_bound
from gpualloc.solvers.simulation.results import PolicyRun, Simulation, base_policy
from gpualloc.solvers.simulation.trace_events import KNOWN
from gpualloc.solvers.value_models import COMPLETION, completion_value


@dataclass(frozen=True)
class DayReport:
    policy: str
    day: int | None  # None: the whole run
    utilization: float
    # undiscounted priority x GPU-steps (batch: those that do a job's work, `Simulation.useful_gpus`)
    # + priority x served (real-time)
    value: float
    # the same, each batch GPU-step discounted by time_decay per step since its job arrived; under the
    # `completion` value model, batch work counts instead each job finished: its completion value
    # (`value_models.completion_value`) at its JCT
    timely_value: float
    # timely value less the real-time penalty: realtime_penalty x each app's priority x its GPU-steps short
    objective: float
    realtime_shortfall: float  # GPU-steps: demand not held, each step weighted by the share of it that was short
    realtime_shortfall_minutes: float  # the same in GPU-minutes
    realtime_moves: float  # GPUs apps moved per app-step (`metrics.app_moves` between executed steps)
    started: int
    completed: int
    mean_queue_steps: float | None
    mean_completion_steps: float | None
    # of `realtime_moves`, those no work needed: every GPU the app left stayed idle (`_moves`)
    realtime_idle_moves: float = 0.0


SPIKE = 2.0  # a step's demand over both neighbours' that makes it a one-step spike


def report(sim: Simulation) -> list[DayReport]:
    """Per policy, a row per day of its run and one for the whole run (each run's own length: a
    whole-trace run ends when its last job finishes; its real-time apps count through the last
    event, `Simulation.apps_until`, so that runs of other lengths serve the same demand)."""
    per_day = 24 * 60 // sim.config.step_minutes
    out = []
    for policy, run in sim.runs.items():
        steps = len(run.commits)
        days = range(math.ceil(steps / per_day))
        held, executed = held_over_step(run), run.executed()
        out += [_summary(sim, run, day, day * per_day, min((day + 1) * per_day, steps), held, executed) for day in days]
        out.append(_summary(sim, run, None, 0, steps, held, executed))
    return out


def whole_run(sim: Simulation, run: PolicyRun) -> DayReport:
    """The row of a run's whole length (`day` None)."""
    return _summary(sim, run, None, 0, len(run.commits), held_over_step(run), run.executed())


def window_gaps(run: PolicyRun, every: int = 6) -> dict[str, float]:
    """How far the plans a run committed were from optimal on their own windows, at every
    `every`-th step with work queued: (capacity bound - objective) / |bound|, p50/p90/max. An
    upper limit: the relaxation's slack (fragmentation, which it ignores) is in it, and so is
    what a starvation reservation costs the window."""
    gaps = []
    for commit in run.commits[::every]:
        problem = commit.window
        if not any(not job.running_mask for job in problem.batch):
            continue
        bound = capacity_bound(problem)
        if bound is not None and bound > 1e-9:
            gaps.append(max(0.0, relative_gap(bound, objective_of(problem, commit.schedule))))
    return _spread(gaps)


def _spread(gaps: list[float]) -> dict[str, float]:
    """p50, p90 and max of `gaps`, to 4 decimals (empty: none)."""
    return {k: round(v, 4) for k, v in quantiles(gaps).items() if k != "p99"} if gaps else {}


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50, p90, p99 and the max (empty: none)."""
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1]}


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n at the worst."""
    if not values or not any(values):
        return None
    return round(sum(values) ** 2 / (len(values) * sum(v * v for v in values)), 4)


def held_over_step(run: PolicyRun) -> dict[tuple[int, str], list[tuple[float, int]]]:
    """Per (step, app) whose set a reactive grant changed within the step: the GPUs it held from
    each minute of the step on, the commit's set from minute 0, then each grant's from the minute
    it came."""
    out: dict[tuple[int, str], list[tuple[float, int]]] = {}
    first = run.commits[0].step if run.commits else 0
    for minute, grant in run.grants:
        k = grant.step - first
        if not 0 <= k < len(run.commits):
            continue
        for app_id, gpus in grant.sets.items():  # the app granted, and any that gave it GPUs
            pieces = out.setdefault((grant.step, app_id), [(0.0, len(run.commits[k].assignments.get(app_id, ())))])
            pieces.append((minute, len(gpus)))
    return out


def _app_minutes(
    held: list[tuple[float, int]], demand: list[tuple[float, int]], step_minutes: int
) -> tuple[float, float]:
    """(GPU-minutes served, GPU-minutes short) of one app over one step: `held` and `demand`, its
    GPUs and its need from each minute on."""
    served = short = 0.0
    cuts = sorted({0.0, *(at for at, _ in held), *(at for at, _ in demand), float(step_minutes)})
    for at, end in zip(cuts, cuts[1:]):
        n = next(v for m, v in reversed(held) if m <= at)  # both start at minute 0
        d = next(v for m, v in reversed(demand) if m <= at)
        served += min(n, d) * (end - at)
        short += max(0, d - n) * (end - at)
    return served, short


def _step_minutes(
    sim: Simulation, held: dict[tuple[int, str], list[tuple[float, int]]], commit: Commit, app: str
) -> tuple[float, float]:
    """`_app_minutes` of `app` over `commit`'s step: what it held (`held_over_step`, else the
    commit's set) against its demand (`Simulation.within`, else the step's)."""
    step = commit.step
    return _app_minutes(
        held.get((step, app)) or [(0.0, len(commit.assignments.get(app, ())))],
        sim.within.get((app, step)) or [(0.0, sim.demand[app][step])],
        sim.config.step_minutes,
    )


def _summary(
    sim: Simulation,
    run: PolicyRun,
    day: int | None,
    lo: int,
    hi: int,
    held: dict[tuple[int, str], list[tuple[float, int]]],
    executed: list[Commit],
) -> DayReport:
    used = value = timely = short = penalty = 0.0
    decay, minutes = sim.config.time_decay, sim.config.step_minutes
    by_completion = sim.config.value_model == COMPLETION
    moves, idle_moves, app_steps = _moves(sim, run, executed, lo, hi)
    for commit in run.commits[lo:hi]:
        apps_count = sim.apps_until is None or commit.step <= sim.apps_until
        for owner, gpus in commit.assignments.items():
            prio = sim.priorities.get(owner, 0.0)
            if owner in sim.demand:
                continue
            used += len(gpus)
            useful = sim.useful_gpus(owner, len(gpus))
            value += prio * useful
            if not by_completion:
                timely += prio * useful * decay ** (commit.step - run.submitted.get(owner, commit.step))
        for app_id in sim.demand if apps_count else ():
            served_minutes, short_minutes = _step_minutes(sim, held, commit, app_id)
            served = served_minutes / minutes
            used += served
            value += sim.priorities.get(app_id, 0.0) * served
            timely += sim.priorities.get(app_id, 0.0) * served
            short += short_minutes
            penalty += sim.priorities.get(app_id, 0.0) * short_minutes / minutes
    started = [j for j, s in run.started.items() if lo <= s < hi]
    finished = [j for j, s in run.finished.items() if lo <= s < hi]
    if by_completion:  # each job its completion's value, its JCT counted from its arrival
        timely += sum(
            completion_value(sim.priorities.get(j, 0.0), run.finished[j] - run.submitted[j], decay, sim.config.horizon)
            for j in finished
            if j in run.submitted
        )
    queue = [run.started[j] - run.submitted[j] for j in started if j in run.submitted]
    jct = [run.finished[j] - run.submitted[j] for j in finished if j in run.submitted]
    return DayReport(
        run.policy,
        day,
        round(used / (sim.config.gpus * max(hi - lo, 1)), 4),
        round(value, 2),
        round(timely, 2),
        round(timely - sim.config.realtime_penalty * penalty, 2),
        round(short / minutes, 2),
        round(short, 1),
        round(moves / app_steps, 4) if app_steps else 0.0,
        len(started),
        len(finished),
        round(statistics.fmean(queue), 2) if queue else None,
        round(statistics.fmean(jct), 2) if jct else None,
        round(idle_moves / app_steps, 4) if app_steps else 0.0,
    )


def served_share(sim: Simulation, run: PolicyRun) -> dict[str, dict[str, object]]:
    """Per app: the share of its demand (GPU-minutes) it held, over the run (`whole`) and per day
    (`days`, None for a day without demand), with its least day (`worst_day`). Counted as the
    shortfall is (`_step_minutes`), through `Simulation.apps_until`."""
    per_day = 24 * 60 // sim.config.step_minutes
    held = held_over_step(run)
    tally: dict[str, list[list[float]]] = {app: [] for app in sim.demand}  # app -> per day [served, demand]
    for k, commit in enumerate(run.commits):
        if sim.apps_until is not None and commit.step > sim.apps_until:
            break
        for app_id, days in tally.items():
            served, short = _step_minutes(sim, held, commit, app_id)
            while len(days) <= k // per_day:
                days.append([0.0, 0.0])
            days[k // per_day][0] += served
            days[k // per_day][1] += served + short
    out: dict[str, dict[str, object]] = {}
    for app_id, days in tally.items():
        shares = [round(s / d, 4) if d else None for s, d in days]
        total = sum(d for _, d in days)
        out[app_id] = {
            "whole": round(sum(s for s, _ in days) / total, 4) if total else None,
            "days": shares,
            "worst_day": min((s for s in shares if s is not None), default=None),
        }
    return out


def _moves(sim: Simulation, run: PolicyRun, executed: list[Commit], lo: int, hi: int) -> tuple[int, int, int]:
    """(GPUs the apps moved, of them those no work needed, app-steps) over the run's executed
    steps [lo, hi) (`PolicyRun.executed`) that real-time service counts in, each step's set as it
    ended against the step before's (a step's first set is no move). A move is needed where work
    took a GPU the app left (a batch job or another app holds it in the new step) or its node went
    down or was drained; where every GPU it left stayed idle, the move was for nothing."""
    moves = idle = app_steps = 0
    for k in range(max(lo, 1), hi):
        if sim.apps_until is not None and executed[k].step > sim.apps_until:
            break
        before, after = executed[k - 1].assignments, executed[k].assignments
        dead = run.down[k] if k < len(run.down) else 0
        for app_id in sim.demand:
            if app_id in before and app_id in after:
                moves += app_moves(before[app_id], after[app_id])
                idle += idle_moves(before[app_id], after[app_id], after.values(), dead)
                app_steps += 1
    return moves, idle, app_steps


def executed_violations(sim: Simulation, run: PolicyRun) -> list[str]:
    """The contract's online rules over a simulated run's executed grid (`online_violations`),
    under its policy's exemptions (FIFO's static reservations are exempt from the app rules)."""
    return online_violations(
        run.executed(),
        sim.limits,
        set(sim.limits),
        run.down,
        run.failed,
        run.exempt,
        sim.config.node_size,
        (sim.config.gpus, sim.priorities),
    )


def forecast_price(rows: list[DayReport], sim: Simulation) -> dict[str, dict[str, Any]]:
    """Per policy run both ways (`SimOptions.forecast`): the share of the oracle's value gain over
    the FIFO oracle that the forecast-driven run keeps, and its real-time shortfall beside the
    oracle's, in all and away from one-step `spikes`; under "known", what each known run
    (`SimOptions.known`) says knowing its part is worth (`_worth`). Empty without a `fifo/oracle`
    run to measure gains from."""
    whole = {r.policy: r for r in rows if r.day is None}
    fifo = whole.get("fifo/oracle")
    if fifo is None:
        return {}
    out = {}
    for label, oracle in whole.items():
        forecast = whole.get(f"{base_policy(label)}/forecast")
        if not label.endswith("/oracle") or forecast is None or label == "fifo/oracle":
            continue
        gain = oracle.value - fifo.value
        spiky = {
            mode: spike_shortfall(sim, sim.runs[f"{base_policy(label)}/{mode}"]) for mode in ("oracle", "forecast")
        }
        steady = {
            mode: run.realtime_shortfall - spiky[mode] for mode, run in (("oracle", oracle), ("forecast", forecast))
        }
        known = {part: whole.get(f"{base_policy(label)}/{part}-known") for part in KNOWN}
        out[base_policy(label)] = {
            "oracle_value": oracle.value,
            "forecast_value": forecast.value,
            "fifo_oracle_value": fifo.value,
            "gain_kept": round((forecast.value - fifo.value) / gain, 4) if gain > 0 else None,
            "oracle_objective": oracle.objective,
            "forecast_objective": forecast.objective,
            "fifo_oracle_objective": fifo.objective,
            "objective_gain_kept": round((forecast.objective - fifo.objective) / (oracle.objective - fifo.objective), 4)
            if oracle.objective > fifo.objective
            else None,
            "oracle_shortfall": oracle.realtime_shortfall,
            "forecast_shortfall": forecast.realtime_shortfall,
            "shortfall_ratio": round(forecast.realtime_shortfall / oracle.realtime_shortfall, 4)
            if oracle.realtime_shortfall
            else None,
            "oracle_spike_shortfall": spiky["oracle"],
            "forecast_spike_shortfall": spiky["forecast"],
            "steady_shortfall_ratio": round(steady["forecast"] / steady["oracle"], 4) if steady["oracle"] else None,
            "known": {part: _worth(fifo, forecast, run) for part, run in known.items() if run is not None},
        }
    return out


def _worth(fifo: DayReport, forecast: DayReport, known: DayReport) -> dict[str, Any]:
    """What knowing part of the jobs' truth is worth beside the forecast run: the known run's
    objective and shortfall, its objective less the forecast run's, and the share of its gain
    over the FIFO oracle that the forecast run keeps."""
    gain = known.objective - fifo.objective
    return {
        "objective": known.objective,
        "shortfall": known.realtime_shortfall,
        "worth": round(known.objective - forecast.objective, 2),
        "objective_gain_kept": round((forecast.objective - fifo.objective) / gain, 4) if gain > 0 else None,
    }


def spikes(demand: dict[str, list[int]]) -> set[tuple[str, int]]:
    """(app, step) where demand is at least `SPIKE` times both its neighbours': a one-step spike
    (a glitch, a flash crowd) that no forecast foresees and only an oracle can make room for."""
    out = set()
    for app, curve in demand.items():
        for t in range(1, len(curve) - 1):
            if curve[t] >= SPIKE * max(1, curve[t - 1]) and curve[t] >= SPIKE * max(1, curve[t + 1]):
                out.add((app, t))
    return out


def spike_shortfall(sim: Simulation, run: PolicyRun) -> float:
    """Real-time shortfall (GPU-steps, as `DayReport.realtime_shortfall`) at the `spikes`."""
    at, held = spikes(sim.demand), held_over_step(run)
    short = sum(_step_minutes(sim, held, c, app)[1] for c in run.commits for app in sim.demand if (app, c.step) in at)
    return round(short / sim.config.step_minutes, 2)


def full_mode_figures(run: PolicyRun) -> dict[str, object] | None:
    """A run's full-mode solves: how many, how many beat their warm start (the hot path's plan
    of the snapshot) and by how much, how many were adopted, and the hot path's gap to the
    snapshot's bound (p50, p90, max), with how many bounds the capacity relaxation gave. None for
    a run without full mode."""
    runs = run.full_mode_runs
    if not runs:
        return None
    gaps = sorted(r.hot_gap for r in runs if r.hot_gap is not None)
    gains = [(r.objective - r.warm) / abs(r.warm) for r in runs if r.plan is not None and r.warm]
    return {
        "solves": len(runs),
        "improved": sum(r.plan is not None for r in runs),
        "adopted": len(run.full_mode_adopted),
        "capacity_bounds": sum(r.bound_source == "capacity" for r in runs),
        "improvement_mean": round(statistics.fmean(gains), 4) if gains else None,
        "hot_gap": _spread(gaps),
    }


def mistakes(sim: Simulation, run: PolicyRun) -> dict[str, float]:
    """What GPU counts off the truth cost a run: restarts and the GPU-hours they held (counts
    below), and the GPU-hours jobs held past their need (counts above)."""
    steps = sum(lost for *_, lost in run.out_of_memory)
    beyond = sum(
        max(0, len(gpus) - sim.needs[owner])
        for commit in run.commits
        for owner, gpus in commit.assignments.items()
        if owner in sim.needs
    )
    return {
        "out_of_memory_restarts": len(run.out_of_memory),
        "gpu_hours_lost": round(steps * sim.config.step_minutes / 60, 2),
        "gpu_hours_beyond_need": round(beyond * sim.config.step_minutes / 60, 2),
    }

"""The window [now, now + horizon) as a Problem: running jobs inherited on their GPUs, queued
jobs by arrival, each app's bounds and demand (its floor lowered only when lost nodes leave too
few GPUs), and GPUs that may take no new work held by blockers (`blocked_from`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.solvers.legality import lowered_floors
from gpualloc.solvers.planner.records import BLOCKER, AppState, JobSpec, PoolConfig, Running
from gpualloc.solvers.policies.heuristic.contention import contested
from gpualloc.solvers.problem import Batch, Problem, Realtime


def window(
    cfg: PoolConfig,
    now: int,
    running: Mapping[str, Running],
    queued: Mapping[str, JobSpec],
    apps: Mapping[str, AppState],
    unavailable: int,
    demand_of: Callable[[AppState], list[int]],
    median_of: Callable[[AppState], list[int]] | None = None,
    medians_always: bool = False,
) -> Problem:
    """The window at step `now`; `unavailable`: the GPUs of down or drained nodes; `median_of`:
    each app's median demand (`Realtime.median`), where the planner has one, attached where some
    step's apps contend for room (`contention.contested`), or always with `medians_always` (the
    node reserve's sizing reads them, `node_reserve`); elsewhere none is needed."""
    T = cfg.horizon
    batch: list[Batch] = []
    index = 0
    held = running_mask(running)
    blocked = unavailable & ~held
    for first, mask in sorted(blocked_from(running, unavailable, now, T).items()):
        name = BLOCKER if first == 0 else f"{BLOCKER}@{first}"
        batch.append(Batch(index, name, 1e-9, mask.bit_count(), T, 0, mask, T, first))
        index += 1
    for job_id, entry in sorted(running.items()):
        spec, remaining = entry.spec, steps_left(entry.spec, entry.start, now)
        batch.append(Batch(index, job_id, spec.priority, spec.gpus, spec.duration, 0, entry.mask, remaining))
        index += 1
    for job_id, spec in sorted(queued.items(), key=lambda kv: (kv[1].submitted, kv[0])):
        batch.append(Batch(index, job_id, spec.priority, spec.gpus, spec.duration, max(0, spec.submitted - now), 0, 0))
        index += 1
    realtime = []
    lows = floors(apps, cfg, blocked | held, unavailable)
    for app_id, app in sorted(apps.items()):
        rules = app.spec
        hi = rules.ceiling(cfg.gpus)
        # GPUs of down or drained nodes are held by the blocker: an app leaves them (as work
        # may, unlike a batch block), so they are not its to keep (else nothing can meet its floor)
        current = app.held & ~unavailable if app.held >= 0 else -1
        cap = rules.cap(cfg.swap_cap)
        lo = lows[app_id]
        if current >= 0:  # bounds one step cannot reach (`floor_problem` refuses them) are approached
            lo, hi = min(lo, current.bit_count() + cap), max(hi, current.bit_count() - cap)
        realtime.append(Realtime(index, app_id, rules.priority, tuple(demand_of(app)), lo, hi, cap, current))
        index += 1
    weights = tuple(cfg.time_decay**t for t in range(T))
    problem = Problem(
        f"window@{now}",
        cfg.gpus,
        cfg.node_size,
        T,
        cfg.time_decay,
        cfg.realtime_penalty,
        weights,
        tuple(batch),
        tuple(realtime),
        cfg.value_model,
    )
    if median_of is None or not (medians_always or contested(problem)):
        return problem
    medians = (median_of(apps[app.id]) for app in problem.realtime)
    return replace(
        problem,
        realtime=tuple(
            replace(app, median=tuple(map(min, m, app.demand))) for app, m in zip(problem.realtime, medians)
        ),
    )


def floors(apps: Mapping[str, AppState], cfg: PoolConfig, held: int, unavailable: int) -> dict[str, int]:
    """Each app's floor for the window (`lowered_floors`; `held`: the GPUs of running jobs and
    of down or drained nodes), beside what each app's swap cap makes it keep of its set."""
    kept = {
        app_id: max(0, (app.held & ~unavailable).bit_count() - app.spec.cap(cfg.swap_cap))
        for app_id, app in apps.items()
        if app.held >= 0
    }
    return lowered_floors(
        {app_id: app.spec.min_gpus for app_id, app in apps.items()},
        {app_id: app.spec.priority for app_id, app in apps.items()},
        cfg.gpus - held.bit_count(),
        kept,
    )


def demand(
    app: AppState,
    cfg: PoolConfig,
    now: int,
    forecasts: Forecasters,
    hour_of: Callable[[int], int],
    quantile: float | None = None,
) -> list[int]:
    """Demand for the window: a step's own observation where there is one (the current
    step's, say), else the traffic forecaster's for its hour at `quantile` (None: the settings';
    an hour of day not observed yet: the registered profile scaled by the level the observed
    hours ran at against it), else the profile as registered (nothing observed), else the
    latest observation held flat. The first step needs at least the observation of the step
    before it (`held_into`): demand seen before the boundary holds into the step it commits, so
    the plan meets it before starting batch work there."""
    return demands(app, cfg, now, forecasts, hour_of, (quantile or forecasts.settings.realtime_quantile,))[0]


def demands(
    app: AppState,
    cfg: PoolConfig,
    now: int,
    forecasts: Forecasters,
    hour_of: Callable[[int], int],
    quantiles: Sequence[float],
) -> list[list[int]]:
    """`demand` at each of `quantiles`, each hour's forecast read once for all of them and for
    every step that begins in that hour (two of 30 minutes, say)."""
    latest = app.observed[max(app.observed)] if app.observed else 0
    out: list[list[int]] = [[] for _ in quantiles]
    by_hour: dict[int, list[int]] = {}
    for t in range(cfg.horizon):
        step = now + t
        if step in app.observed:
            found = [app.observed[step]] * len(quantiles)
        elif (hour := hour_of(step)) in by_hour:
            found = by_hour[hour]
        else:
            forecast = forecasts.demands(app.spec.id, hour, quantiles, app.spec.profile)
            if forecast is not None:
                found = [min(cfg.gpus, f) for f in forecast]
            else:
                found = [app.spec.profile[hour % 24] if app.spec.profile else latest] * len(quantiles)
            by_hour[hour] = found
        for curve, n in zip(out, found):
            curve.append(n)
    if cfg.horizon and now not in app.observed:
        held = min(cfg.gpus, held_into(app, now))
        for curve in out:
            curve[0] = max(curve[0], held)
    return out


def held_into(app: AppState, step: int) -> int:
    """GPUs `app` was last seen to need, when that was in the step before `step`: an observation
    holds until the next (0: none then)."""
    return app.latest.gpus if app.latest is not None and app.latest.step == step - 1 else 0


def observed_in(app: AppState, step: int) -> int | None:
    """GPUs `app` was seen to need in `step`: its largest observation there, else the previous
    step's, which holds until the next observation comes (None: neither was observed)."""
    return app.observed.get(step, app.observed.get(step - 1))


def steps_left(spec: JobSpec, start: int, now: int) -> int:
    """Steps a running job is planned to hold its GPUs from `now`: the rest of its planned
    duration; past it, until its likely end (`likely_end`). It ends at a boundary the next plan
    sees, whichever comes first."""
    planned = start + spec.duration - now
    return planned if planned >= 1 else likely_end(spec, start, now) - now


def likely_end(spec: JobSpec, start: int, now: int) -> int:
    """The step a job that has run past its planned duration is likely to have ended by: the
    upper end of its duration's interval when its duration was forecast and that end is still
    ahead; else as long again as it has overrun so far (under heavy-tailed run times what is
    left grows with how long a job has outlived its plan). Planned a step at a time, the work
    waiting for its GPUs would slide forward one step per boundary while shorter work that fits
    before the end never starts; an early end costs at most what the overrun took. A time limit
    bounds it (the pool fails the job then)."""
    age, f = now - start, spec.forecast
    if f is not None and "duration" in f.forecast and math.ceil(f.high - 1e-9) > age:
        end = start + math.ceil(f.high - 1e-9)
    else:
        end = now + max(1, age - spec.duration + 1)
    return end if spec.time_limit is None else max(now + 1, min(end, start + spec.time_limit))


def overruns(running: Mapping[str, Running], now: int) -> dict[str, int]:
    """Running jobs past their planned duration, with the step their plan ended at."""
    return {
        job_id: entry.start + entry.spec.duration
        for job_id, entry in running.items()
        if entry.start + entry.spec.duration <= now
    }


def blocked_from(running: Mapping[str, Running], unavailable: int, now: int, horizon: int) -> dict[int, int]:
    """GPUs of down or drained nodes by the first step of the window they take no new work in
    (a blocker holds them from then to its end): at once where idle, once the running job on
    them is planned to end where one runs (drained: its work goes on, nothing new lands there)."""
    out: dict[int, int] = {}
    idle = unavailable & ~running_mask(running)
    if idle:
        out[0] = idle
    for entry in running.values():
        end = steps_left(entry.spec, entry.start, now)
        if entry.mask & unavailable and end < horizon:
            out[end] = out.get(end, 0) | (entry.mask & unavailable)
    return out


def running_mask(running: Mapping[str, Running]) -> int:
    """The GPUs running jobs hold."""
    mask = 0
    for entry in running.values():
        mask |= entry.mask
    return mask

"""Backtests of the forecasters on a trace of contract events, as the agent would meet it.

Jobs: each pool's forecasters size every job that gives features when it is submitted, and
learn from each completion when it arrives (`job.completed`, with what it `used`; a job the trace
never completes is taken as finished `actual_duration` steps after its submission). Truth is the
completion's `used` (GPUs, duration), else the submission's `actual_duration` and `gpus`. The
figures are those of the last `share` of the jobs, by submission, once the models have learned
from what came before.

Traffic: each app's forecaster learns from every observation as it comes (as the agent does) and,
from `WARMUP_WEEKS` on, forecasts each step before its first observation (one step ahead) and,
for the calibration by lead time, at the first observation of the step `lead - 1` before it
(`LEADS`: the steps a job placed now runs through); a step is under-provisioned when the GPUs
forecast are fewer than the GPUs its largest observation needs (the contract's demand). Beside it, the two baselines a platform would otherwise use: the registered profile and a
reservation at the peak demand of the warm-up weeks (its `PEAK_QUANTILE`, so one glitch does not
set it).
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, cast

from gpualloc.forecasting.forecasters import Forecasters, pool_hardware
from gpualloc.forecasting.job_forecast import SizeError
from gpualloc.forecasting.traffic import WEEK, pool_hour, week_minute
from gpualloc.schemas.events import Envelope, JobUsage, PoolConfigured
from gpualloc.schemas.features import FEATURES, Features
from gpualloc.schemas.settings import ForecastSettings

PEAK_QUANTILE = 0.99  # of the warm-up weeks' demand: the peak reservation baseline
WARMUP_WEEKS = 2  # of traffic learned before its steps are scored
QUANTILES = (0.8, 0.9, 0.95, 0.99)  # levels whose calibration is reported
LEADS = (1, 4, 16, 64)  # steps ahead a forecast is made, whose calibration is reported

# A trace: each event's envelope and its payload, whose model the envelope's type decides (Any here).
Events = list[tuple[Envelope, Any]]
T = TypeVar("T")


@dataclass
class JobResult:
    id: str
    pool: str
    kind: str
    group: str  # the variant (training) or the algorithm (quantization)
    gpus: int | None  # forecast (None: the forecaster could not size it)
    median: float | None = None  # steps
    low: float | None = None
    high: float | None = None
    planned: int | None = None  # steps, at the kind's quantile
    actual: int | None = None  # steps it ran
    true_gpus: int | None = None
    learned: int = 0  # completions of its kind and group its pool's forecasters had learned from


@dataclass
class _PoolState:
    config: PoolConfigured
    origin: datetime
    forecasters: Forecasters


def job_backtest(events: Events, settings: ForecastSettings = ForecastSettings()) -> list[JobResult]:
    """Per job given by its features, in submission order: the forecast and the truth."""
    events = sorted(events, key=lambda e: e[0].occurred_at)
    completed = {(env.pool, p.id) for env, p in events if env.type == "job.completed"}
    pools: dict[str, _PoolState] = {}
    jobs: dict[tuple[str, str], tuple[Features, JobResult]] = {}  # (pool, id) -> (features, result)
    due: list[tuple[datetime, int, str, str]] = []  # completions the trace leaves implicit
    results: list[JobResult] = []
    learned: dict[tuple[str, str, str], int] = {}  # (pool, kind, group) -> completions learned

    def learn(key: tuple[str, str], used: JobUsage | None = None) -> None:
        entry = jobs.pop(key, None)
        if entry is None:
            return
        f, r = entry
        r.actual = (used.duration if used and used.duration else None) or r.actual
        r.true_gpus = (used.gpus if used and used.gpus else None) or r.true_gpus
        state = pools[key[0]]
        if r.actual is None:
            return
        try:
            hw = pool_hardware(f, state.config)
        except SizeError:
            return
        state.forecasters.finished(
            r.kind, f, hw, r.true_gpus or r.gpus or 1, r.actual, used.peak_memory_gb if used else None
        )
        learned[r.pool, r.kind, r.group] = learned.get((r.pool, r.kind, r.group), 0) + 1

    for env, p in events:
        while due and due[0][0] <= env.occurred_at:
            _, _, pool, job_id = heapq.heappop(due)
            learn((pool, job_id))
        if env.type == "pool.configured":
            old = pools.get(env.pool)
            pools[env.pool] = _PoolState(
                p, old.origin if old else env.occurred_at, old.forecasters if old else Forecasters(settings)
            )
        elif env.type == "job.submitted" and env.pool in pools and p.kind in FEATURES and p.features:
            f, state = p.feature_model(), pools[env.pool]
            group = f.variant if p.kind == "training" else f.algorithm
            r = JobResult(p.id, env.pool, p.kind, group, None, actual=p.actual_duration, true_gpus=p.gpus)
            r.learned = learned.get((env.pool, p.kind, group), 0)
            try:
                made = state.forecasters.size(p.kind, f, pool_hardware(f, state.config), None, None)
                r.gpus, r.median, r.low, r.high, r.planned = made.gpus, made.median, made.low, made.high, made.duration
            except SizeError:
                pass
            results.append(r)
            jobs[(env.pool, p.id)] = (f, r)
            if (env.pool, p.id) not in completed and p.actual_duration:
                ends = env.occurred_at + timedelta(minutes=p.actual_duration * state.config.step_minutes)
                heapq.heappush(due, (ends, len(results), env.pool, p.id))
        elif env.type == "job.completed":
            learn((env.pool, p.id), p.used)
    return results


def job_summary(results: list[JobResult], share: float = 0.2) -> dict[str, Any]:
    """Figures of the last `share` of the jobs: duration median APE per kind and group and in
    all, interval coverage, the share finishing within the planned steps, GPU counts right."""
    held = results[len(results) - math.ceil(share * len(results)) :] if results else []
    groups: dict[tuple[str, str], list[JobResult]] = {}
    for r in held:
        groups.setdefault((r.kind, r.group), []).append(r)
    rows = [{"kind": kind, "group": group, **_figures(rs)} for (kind, group), rs in sorted(groups.items())]
    return {
        "jobs": len(results),
        "held_out": len(held),
        "rows": rows,
        "all": _figures(held),
        "by_kind": {kind: _figures([r for r in held if r.kind == kind]) for kind in sorted({r.kind for r in held})},
    }


class _Timed(Protocol):
    """A result that was sized and ran: its forecast and its steps are all set."""

    median: float
    low: float
    high: float
    planned: int
    actual: int


def _figures(rs: list[JobResult]) -> dict[str, Any]:
    timed = cast(list[_Timed], [r for r in rs if r.actual and r.median is not None])
    counted = [r for r in rs if r.true_gpus is not None]
    return {
        "jobs": len(rs),
        "duration_mdape": _round(
            statistics.median(abs(r.median - r.actual) / r.actual for r in timed) if timed else None
        ),
        "interval_coverage": _round(_share(timed, lambda r: r.low <= r.actual <= r.high)),
        "within_planned": _round(_share(timed, lambda r: r.actual <= r.planned)),
        "gpus_right": _round(_share(counted, lambda r: r.gpus == r.true_gpus)),
        "unsized": sum(r.gpus is None for r in rs),
    }


def _share(rs: Sequence[T], ok: Callable[[T], bool]) -> float | None:
    return sum(1 for r in rs if ok(r)) / len(rs) if rs else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# ---- traffic ----------------------------------------------------------------------------------


@dataclass
class AppSeries:
    """One app's traffic as a trace has it, by the pool's steps."""

    pool: str
    app: str
    profile: list[int] | None
    rps: float  # requests/s a GPU serves
    demand: dict[int, int] = field(default_factory=dict)  # step -> GPUs (its largest observation)
    loads: list[tuple[int, float, int]] = field(default_factory=list)  # (step, load, GPUs) in time order
    step_minutes: int = 60  # the pool's (its latest configuration's)
    start_minute: int = 0  # the pool's step 0, in minutes from the Monday 00:00 UTC before it


def traffic_series(events: Events) -> dict[str, AppSeries]:
    """Per app (`pool/app`, sorted): its observations by the pool's steps (a re-registered app
    keeps what it had; observations before step 0 are left out)."""
    events = sorted(events, key=lambda e: e[0].occurred_at)
    configs: dict[str, tuple[PoolConfigured, datetime]] = {}
    series: dict[tuple[str, str], AppSeries] = {}
    for env, p in events:
        if env.type == "pool.configured":
            configs[env.pool] = (p, configs[env.pool][1] if env.pool in configs else env.occurred_at)
        elif env.type == "app.registered" and env.pool in configs:
            old = series.get((env.pool, p.id))
            series[(env.pool, p.id)] = AppSeries(
                env.pool, p.id, p.profile, p.rps_per_gpu, *((old.demand, old.loads) if old else ())
            )
        elif env.type == "traffic.observed" and (env.pool, p.app) in series:
            s = series[(env.pool, p.app)]
            config, origin = configs[env.pool]
            step = math.floor((env.occurred_at - origin) / timedelta(minutes=config.step_minutes))
            if step < 0:
                continue
            gpus = p.gpus_needed(s.rps)
            s.demand[step] = max(gpus, s.demand.get(step, 0))
            s.loads.append((step, p.load(s.rps), gpus))
    for (pool, _), s in series.items():  # steps are scored on the pool's latest configuration
        config, origin = configs[pool]
        s.step_minutes, s.start_minute = config.step_minutes, week_minute(origin)
    return {f"{pool}/{app}": s for (pool, app), s in sorted(series.items())}


def traffic_backtest(
    events: Events,
    settings: ForecastSettings = ForecastSettings(),
    quantiles: Sequence[float] = QUANTILES,
    by_step: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per app: the scored steps' under-provisioned share and over-provisioning, for the
    forecaster (at the settings' quantile one step ahead, and at each of `quantiles` by lead)
    and the two baselines (see the module docstring); with `by_step`, also each scored step's
    one-step forecasts and demand."""
    out: dict[str, dict[str, Any]] = {}
    for key, s in traffic_series(events).items():
        out[key] = _app_backtest(s, settings, quantiles)
        if not by_step:
            out[key].pop("by_step", None)
    return out


def _app_backtest(s: AppSeries, settings: ForecastSettings, quantiles: Sequence[float]) -> dict[str, Any]:
    step_minutes, start_minute = s.step_minutes, s.start_minute
    week = WEEK * 60 // step_minutes
    end = max(s.demand, default=-1) + 1
    if end < (WARMUP_WEEKS + 1) * week:
        return {"steps": 0, "note": f"needs at least {WARMUP_WEEKS + 1} weeks of traffic ({end} steps of {3 * week})"}
    scored_from = WARMUP_WEEKS * week
    forecasters = Forecasters(settings)
    levels = (settings.realtime_quantile, *quantiles)

    def hour(step: int) -> int:
        return pool_hour(start_minute, step, step_minutes)

    made: dict[int, dict[int, list[int]]] = {lead: {} for lead in LEADS}  # lead -> step -> GPUs at `levels`
    latest, previous = 0, -1
    for step, load, gpus in s.loads:
        if step != previous:
            for lead in LEADS:
                target = step + lead - 1
                if target >= scored_from and target not in made[lead]:
                    fallback = s.profile[hour(target) % 24] if s.profile else latest
                    made[lead][target] = [_or(forecasters.demand(s.app, hour(target), q), fallback) for q in levels]
        forecasters.observed(s.app, hour(step), load)
        latest, previous = gpus, step
    trained = sorted(g for step, g in s.demand.items() if step < scored_from)
    peak = trained[math.ceil(PEAK_QUANTILE * len(trained)) - 1]
    one_step = made[1]
    steps = sorted(one_step)
    actual = [s.demand[t] for t in steps]

    def calibration(i: int) -> dict[str, Any]:
        by_lead = {}
        for lead in LEADS:
            judged = [t for t in sorted(made[lead]) if t in s.demand]
            by_lead[str(lead)] = provisioning([made[lead][t][i] for t in judged], [s.demand[t] for t in judged])
        return {**by_lead["1"], "by_lead": by_lead}

    return {
        "steps": len(steps),
        "weeks": round(end / week, 1),
        "scored_from": scored_from,
        "step_minutes": step_minutes,
        "forecast": provisioning([one_step[t][0] for t in steps], actual),
        "quantiles": {f"{q:g}": calibration(i + 1) for i, q in enumerate(quantiles)},
        "profile": provisioning([s.profile[hour(t) % 24] for t in steps], actual) if s.profile else None,
        "peak": provisioning([peak] * len(steps), actual),
        "by_step": {t: (one_step[t][1:], s.demand[t]) for t in steps},
    }


def _or(value: int | None, fallback: int) -> int:
    return fallback if value is None else value


def provisioning(planned: list[int], actual: list[int]) -> dict[str, float]:
    """The share of steps planned below demand, and GPUs planned above it as a share of demand."""
    if not actual:
        return {"under_share": 0.0, "over_share": 0.0}
    under = sum(1 for f, a in zip(planned, actual) if f < a) / len(actual)
    over = sum(max(0, f - a) for f, a in zip(planned, actual)) / max(1, sum(actual))
    return {"under_share": round(under, 4), "over_share": round(over, 4)}

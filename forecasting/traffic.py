"""Real-time demand by hour of week, learned from `traffic.observed`, calibrated as it goes.

An app's history is its load (GPUs, fractional: requests/s over `rps_per_gpu`) in each hour of
the pool's clock, kept for `weeks` weeks: the median of the hour's observations, each taken as an
equal share of the hour (telemetry samples), so a glitch observed for minutes does not stand for
the whole hour. The model, in logs:

    log load(h) = seasonal(day type, hour of day) + trend x (h - now) + level + error

- trend: the Theil-Sen slope of daily medians between days of the same type at most a week
  apart (so weekends, a holiday or a launch's one step do not set it), bounded by `MAX_TREND`;
- seasonal: per day type (weekdays, Saturdays, Sundays) and hour of day, the median of the
  detrended history, weighted to forget `forgetting` a week (the hour of day over all days
  where a day type has no sample yet);
- level: how far the latest observations run above or below that: the larger of the last week's
  median (a holiday or an outage drags it down for a day at most) and the last `RECENT`
  observations' median (a launch or a new customer lifts it within hours);
- the quantile: the point forecast raised by the `quantile` of its own one-step-ahead errors
  (every observation of the last `ERRORS` hours against its hour's forecast, an hour weighing
  one however many it has: the share of the time under-provisioned is what costs), plus a
  correction per quantile kept by quantile tracking: an hour moves it by the share of its
  observations that needed more GPUs than the forecast gave, less 1 - quantile, so that share
  comes to 1 - quantile on any stream (whole GPUs included), whatever the model misses. An hour
  far below its forecast (`ANOMALY` typical errors: a holiday, an outage) does not lower them: it
  says nothing of the upper quantiles. Errors are logs of load and forecast each plus `SLACK`
  GPUs: a load under one GPU that doubles costs one GPU, not a doubling of the daytime margin.
- further ahead: a forecast made `LEADS` hours or more before its hour is raised by that lead's
  own tracked correction (never below the one-step forecast), kept the same way against what the
  hour then needed, so plans that commit GPUs for hours (a batch job's block) see the error of
  forecasts that far ahead, which grows with the lead, not the one-step error.
Pure and deterministic: a function of the observations in order; `dump` and `load` carry all of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from statistics import NormalDist
from typing import Any

import numpy as np

WEEK = 168
RECENT = 6  # observations whose median is the short-term level
ERRORS = 2 * WEEK  # one-step-ahead errors kept for the quantiles
MIN_ERRORS = 24  # errors needed before their own quantiles replace the assumed spread
PRIOR_SPREAD = 0.15  # log-error spread assumed before that
QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)  # levels the tracker keeps a correction for
TRACK_RATE = 0.05  # log units a correction moves a tracked hour
OFFSET_LIMIT = 1.0  # log units a correction stays within (where the bound above holds it, it goes no further)
ANOMALY = 4.0  # typical errors below the forecast past which an hour does not move the corrections
MAX_TREND = 0.2 / WEEK  # log units an hour: a trend steeper than about 22% a week is not believed
DAY_SPAN = 7  # days at most between two daily medians whose slope counts
MIN_DAY = 6  # observations a day needs for its median to count
SLACK = 1.0  # GPUs added to load and forecast before an error's log is taken
HOUR_SAMPLES = 64  # observations an hour keeps at most: past it, every other one (evenly in arrival order)
HOUR_ERRORS = 8  # errors an hour keeps at most: past it, its errors' evenly spaced quantiles
LEADS = (4, 16, 64)  # hours ahead from which a forecast takes a lead's own tracked correction


def week_minute(at: datetime) -> int:
    """Minutes from the Monday 00:00 UTC before `at` (a pool's step 0) to it."""
    at = at.astimezone(timezone.utc)
    return at.weekday() * 1440 + at.hour * 60 + at.minute


def pool_hour(week_minute: int, step: int, step_minutes: int) -> int:
    """The hour `step` begins in, counted from the Monday 00:00 UTC before step 0 (which began
    `week_minute` minutes into that week)."""
    return (week_minute + step * step_minutes) // 60


def day_type(hour: int) -> int:
    """0: a weekday, 1: Saturday, 2: Sunday (hour 0 of the week is Monday 00:00 UTC)."""
    return min(2, max(0, (hour % WEEK) // 24 - 4))


@dataclass(frozen=True)
class Fit:
    """The model fitted to an app's history as of its latest hour `last` (logs throughout)."""

    profile: tuple[float, ...]  # by hour of the week: the seasonal log load at `last`'s level
    trend: float  # log units an hour
    level: float  # the latest observations' offset from the profile
    last: int
    hours_of_day: frozenset[int] = frozenset(range(24))  # those the history has seen

    def point(self, hour: int) -> float:
        """The log load expected in `hour` (no error)."""
        return self.profile[hour % WEEK] + self.trend * (hour - self.last) + self.level


@dataclass
class Pending:
    """The hour being observed: its point forecast and GPUs at each tracked quantile, made before
    any of its observations was learned."""

    hour: int
    point: float
    gpus: list[int]


@dataclass
class AppTraffic:
    loads: dict[int, float] = field(default_factory=dict)  # hour -> the median of its observations
    samples: list[float] = field(default_factory=list)  # the latest hour's observations, every `stride`-th
    seen: int = 0  # observations of the latest hour
    stride: int = 1
    errors: list[tuple[float, ...]] = field(default_factory=list)  # an hour's one-step-ahead errors, oldest first
    offsets: list[float] = field(default_factory=lambda: [0.0] * len(QUANTILES))  # tracked, by QUANTILES
    pending: Pending | None = None
    lead_offsets: list[list[float]] = field(default_factory=lambda: [[0.0] * len(QUANTILES) for _ in LEADS])
    lead_pending: list[dict[int, list[int]]] = field(default_factory=lambda: [{} for _ in LEADS])  # hour -> GPUs
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # the fit and the margins, derived

    def copy(self) -> AppTraffic:
        """The history and calibration, copied; the cache (derived from them) starts empty."""
        pending = (
            None if self.pending is None else Pending(self.pending.hour, self.pending.point, list(self.pending.gpus))
        )
        return AppTraffic(
            dict(self.loads),
            list(self.samples),
            self.seen,
            self.stride,
            list(self.errors),
            list(self.offsets),
            pending,
            [list(o) for o in self.lead_offsets],
            [{h: list(g) for h, g in p.items()} for p in self.lead_pending],
        )

    @property
    def last(self) -> int | None:
        return max(self.loads) if self.loads else None


@dataclass
class TrafficForecaster:
    weeks: int = 6
    forgetting: float = 0.7
    apps: dict[str, AppTraffic] = field(default_factory=dict)

    def observe(self, app_id: str, hour: int, load: float) -> None:
        """`load` GPUs needed in pool hour `hour` (late ones for an hour already left behind are
        not learned). The first observation of a new hour settles the hour before: its errors and
        the tracked corrections."""
        app = self.apps.setdefault(app_id, AppTraffic())
        if app.last is not None and hour < app.last:
            return
        if app.last is None or hour > app.last:  # a new hour: its forecast, if one can be made, before any of it
            self._settle(app)
            app.pending = None
            fit = self.fit(app_id)
            if fit is not None and hour % 24 in fit.hours_of_day:  # else no forecast was made: no error to learn
                point = fit.point(hour)
                gpus = [math.ceil(self._load(app, point, q) - 1e-9) for q in QUANTILES]
                app.pending = Pending(hour, point, gpus)
                for i, lead in enumerate(LEADS):  # forecasts made now for the hour `lead` ahead
                    target = hour + lead - 1
                    if target % 24 in fit.hours_of_day:
                        ahead = fit.point(target)
                        app.lead_pending[i][target] = [
                            math.ceil(self._load(app, ahead, q, i) - 1e-9) for q in QUANTILES
                        ]
        if hour != app.last:
            app.samples, app.seen, app.stride = [], 0, 1
        if app.seen % app.stride == 0:
            app.samples.append(load)
            if len(app.samples) > HOUR_SAMPLES:
                app.samples, app.stride = app.samples[::2], 2 * app.stride
        app.seen += 1
        app.loads[hour] = float(np.median(app.samples))
        oldest = hour - self.weeks * WEEK
        for h in [h for h in app.loads if h <= oldest]:
            del app.loads[h]
        app.cache.clear()

    def _settle(self, app: AppTraffic) -> None:
        """The pending hour is over: learn its error and move each quantile's correction."""
        p = app.pending
        if p is None or p.hour != app.last or not app.samples:
            return
        expected = math.exp(p.point) + SLACK
        errors = _evenly(sorted(math.log((load + SLACK) / expected) for load in app.samples), HOUR_ERRORS)
        spread = _quantile(app.errors, 0.5, absolute=True) if len(app.errors) >= MIN_ERRORS else None
        app.errors = (app.errors + [errors])[-ERRORS:]
        app.pending = None
        app.cache.clear()
        if spread is not None and float(np.median(errors)) < -ANOMALY * spread:
            for pending in app.lead_pending:
                pending.pop(p.hour, None)
            return  # a holiday's or an outage's hour: far below, it tells nothing of the upper quantiles
        needed = [math.ceil(load - 1e-9) for load in app.samples]
        _track(app.offsets, p.gpus, needed, -OFFSET_LIMIT)
        for offsets, pending in zip(app.lead_offsets, app.lead_pending):
            made = pending.pop(p.hour, None)
            for h in [h for h in pending if h < p.hour]:
                del pending[h]
            if made is not None:
                _track(offsets, made, needed, 0.0)

    def forecast(self, app_id: str, hour: int, quantile: float) -> float | None:
        """GPUs needed in pool hour `hour` at `quantile` (None: no history to go by, or none yet
        at that hour of the day: a new app's first day has seen its night, not its morning ramp,
        and the rest of the day's median says nothing of the ramp; the caller's prior does)."""
        fit = self.fit(app_id)
        if fit is None or hour % 24 not in fit.hours_of_day:
            return None
        lead = sum(1 for ahead in LEADS if hour - fit.last >= ahead) - 1
        return self._load(self.apps[app_id], fit.point(hour), quantile, lead if lead >= 0 else None)

    def scaled_profile(self, app_id: str, hour: int, quantile: float, profile: list[int]) -> float | None:
        """GPUs at `quantile` in an hour of day the history has not seen yet (a new app's first
        day): the registered `profile` (24 GPU counts by hour of day, a shape declared before
        any traffic) raised by the `quantile` of the ratios the hours seen so far ran at against
        it (logs of load and profile each plus `SLACK`); None: no hour seen."""
        app = self.apps.get(app_id)
        if app is None or not app.loads:
            return None
        hours = sorted(app.loads)
        ratios = [math.log((app.loads[h] + SLACK) / (profile[h % 24] + SLACK)) for h in hours]
        return max(0.0, (profile[hour % 24] + SLACK) * math.exp(float(np.quantile(ratios, quantile))) - SLACK)

    def _load(self, app: AppTraffic, point: float, q: float, lead: int | None = None) -> float:
        """GPUs at quantile `q` around the log point forecast: raised by the errors' own quantile,
        then moved by the tracked correction (interpolated between tracked levels), which may
        take back at most one GPU (the slack of whole GPUs), so a stream with little noise is
        never planned short by more than that at its peaks; `lead` (an index of `LEADS`): raised
        by that lead's tracked correction too."""
        base, moved = self._margins(app, q)
        raw = (math.exp(point) + SLACK) * math.exp(base) - SLACK
        one_step = max(raw * math.exp(moved), raw - 1.0, 0.0)
        if lead is None:
            return one_step
        return (one_step + SLACK) * math.exp(float(np.interp(q, QUANTILES, app.lead_offsets[lead]))) - SLACK

    def _margins(self, app: AppTraffic, q: float) -> tuple[float, float]:
        """(the errors' own q-quantile, the tracked correction at q), cached until either changes."""
        key = f"margin {q!r}"
        if key not in app.cache:
            if len(app.errors) < MIN_ERRORS:
                base = PRIOR_SPREAD * NormalDist().inv_cdf(min(max(q, 0.01), 0.99))
            else:
                base = _quantile(app.errors, q)
            app.cache[key] = (base, float(np.interp(q, QUANTILES, app.offsets)))
        margins: tuple[float, float] = app.cache[key]
        return margins

    def fit(self, app_id: str) -> Fit | None:
        """The app's model on its history (cached until it learns more; None: no history)."""
        app = self.apps.get(app_id)
        if app is None or not app.loads:
            return None
        if "fit" not in app.cache:
            app.cache["fit"] = _fit(app.loads, self.forgetting)
        fit: Fit = app.cache["fit"]
        return fit

    def dump(self) -> dict[str, Any]:
        return {
            app_id: {
                "hours": sorted([h, v] for h, v in a.loads.items()),
                "samples": a.samples,
                "seen": a.seen,
                "stride": a.stride,
                "errors": [list(e) for e in a.errors],
                "offsets": a.offsets,
                "pending": None if a.pending is None else [a.pending.hour, a.pending.point, a.pending.gpus],
                "lead_offsets": a.lead_offsets,
                "lead_pending": [sorted([h, g] for h, g in p.items()) for p in a.lead_pending],
            }
            for app_id, a in self.apps.items()
        }

    @classmethod
    def load(cls, data: dict[str, Any], weeks: int, forgetting: float) -> "TrafficForecaster":
        out = cls(weeks, forgetting)
        for app_id, a in data.items():
            pending = a.get("pending")
            out.apps[app_id] = AppTraffic(
                {int(h): float(v) for h, v in a["hours"]},
                [float(v) for v in a.get("samples", [])],
                int(a.get("seen", len(a.get("samples", [])))),
                int(a.get("stride", 1)),
                [tuple(float(x) for x in e) if isinstance(e, list) else (float(e),) for e in a.get("errors", [])],
                [float(o) for o in a.get("offsets", [0.0] * len(QUANTILES))],
                None if pending is None else Pending(int(pending[0]), float(pending[1]), [int(g) for g in pending[2]]),
                [
                    [float(o) for o in offsets]
                    for offsets in a.get("lead_offsets", [[0.0] * len(QUANTILES)] * len(LEADS))
                ],
                [{int(h): [int(x) for x in g] for h, g in p} for p in a.get("lead_pending", [[] for _ in LEADS])],
            )
        return out


def _track(offsets: list[float], gpus: list[int], needed: list[int], lowest: float) -> None:
    """Quantile tracking: each level's correction moves by the share of the hour's observations
    that needed more than the forecast's `gpus` at that level gave, less 1 - q, within
    [`lowest`, OFFSET_LIMIT]."""
    for i, q in enumerate(QUANTILES):
        short = sum(n > gpus[i] for n in needed) / len(needed)
        offsets[i] = min(OFFSET_LIMIT, max(lowest, offsets[i] + TRACK_RATE * (short - (1.0 - q))))


def _evenly(ordered: list[float], most: int) -> tuple[float, ...]:
    """`ordered` as it is, or, when longer than `most`, its values at `most` evenly spaced ranks
    (each standing for an equal share)."""
    n = len(ordered)
    if n <= most:
        return tuple(ordered)
    return tuple(ordered[(2 * i + 1) * n // (2 * most)] for i in range(most))


def _quantile(errors: list[tuple[float, ...]], q: float, absolute: bool = False) -> float:
    """The `q` quantile of the hours' errors (of their magnitudes with `absolute`), each hour
    weighing one, shared among its observations."""
    values = np.array([e for hour in errors for e in hour])
    weights = np.array([1.0 / len(hour) for hour in errors for _ in hour])
    return float(np.quantile(np.abs(values) if absolute else values, q, weights=weights, method="inverted_cdf"))


def _fit(loads: dict[int, float], forgetting: float) -> Fit:
    hours = np.array(sorted(loads), dtype=np.int64)
    y = np.log(np.maximum([loads[int(h)] for h in hours], 1e-6))
    last = int(hours[-1])
    trend = _trend(hours, y)
    z = y - trend * (hours - last)
    weights = forgetting ** ((last - hours) / WEEK)
    of_day = hours % 24
    bucket = np.clip((hours % WEEK) // 24 - 4, 0, 2) * 24 + of_day  # day type x hour of day
    keys, values, _ = _medians(bucket, z, weights)
    seasonal: dict[int, float] = {int(k): float(v) for k, v in zip(keys, values)}
    keys, values, _ = _medians(of_day, z, weights)
    by_hour: dict[int, float] = {int(k): float(v) for k, v in zip(keys, values)}
    overall = float(np.median(z))
    profile = tuple(seasonal.get(day_type(h) * 24 + h % 24, by_hour.get(h % 24, overall)) for h in range(WEEK))
    offset = z - np.array([profile[int(h % WEEK)] for h in hours])
    level = max(float(np.median(offset[hours > last - WEEK])), float(np.median(offset[-RECENT:])))
    return Fit(profile, trend, level, last, frozenset(int(h) for h in np.unique(of_day)))


def _trend(hours: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen slope (log units an hour) of daily medians, over pairs of days of the same type
    at most DAY_SPAN days apart (days of fewer than MIN_DAY observations left out); 0 when no
    such pair."""
    days, medians, counts = _medians(hours // 24, y)
    days, medians = days[counts >= MIN_DAY], medians[counts >= MIN_DAY]
    types = np.array([day_type(int(d) * 24) for d in days])
    apart = days[None, :] - days[:, None]
    pairs = (apart > 0) & (apart <= DAY_SPAN) & (types[None, :] == types[:, None])
    if not pairs.any():
        return 0.0
    slopes = ((medians[None, :] - medians[:, None]) / (np.maximum(apart, 1) * 24))[pairs]
    return float(np.clip(np.median(slopes), -MAX_TREND, MAX_TREND))


def _medians(
    keys: np.ndarray, values: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key (ascending): the median of its values (with `weights`, the smallest value
    whose cumulative weight reaches half its total), and its count."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    if weights is None:
        middle = (v[starts + (ends - starts - 1) // 2] + v[starts + (ends - starts) // 2]) / 2
    else:
        cumulative = np.cumsum(weights[order])
        before = np.where(starts > 0, cumulative[starts - 1], 0.0)
        middle = v[np.searchsorted(cumulative, before + 0.5 * (cumulative[ends - 1] - before) - 1e-12)]
    return k[starts], middle, ends - starts

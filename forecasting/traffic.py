"""Real-time demand by hour of week, learned from `traffic.observed`, calibrated as it goes.

An app's history is the largest load (GPUs, fractional: requests/s over `rps_per_gpu`) seen in
each hour of the pool's clock, kept for `weeks` weeks. The model, in logs:

    log load(h) = seasonal(day type, hour of day) + trend x (h - now) + level + error

- trend: the Theil-Sen slope of daily medians between days of the same type at most a week
  apart (so weekends, a holiday or a launch's one step do not set it), bounded by `MAX_TREND`;
- seasonal: per day type (weekdays, Saturdays, Sundays) and hour of day, the median of the
  detrended history, weighted to forget `forgetting` a week (the hour of day over all days
  where a day type has no sample yet);
- level: how far the latest observations run above or below that: the larger of the last week's
  median (a holiday or an outage drags it down for a day at most) and the last `RECENT`
  observations' median (a launch or a new customer lifts it within hours);
- the quantile: the point forecast times the `quantile` of its own one-step-ahead errors (the
  last `ERRORS`), plus a correction per quantile kept by quantile tracking: each hour whose
  largest load needed more GPUs than the forecast gave raises it, each other hour lowers it, so
  the share of under-provisioned hours comes to 1 - quantile on any stream (whole GPUs
  included), whatever the model misses. An hour far below its forecast (`ANOMALY` typical
  errors: a holiday, an outage) does not lower them: it says nothing of the upper quantiles.
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
    loads: dict[int, float] = field(default_factory=dict)  # hour -> largest load seen in it
    errors: list[float] = field(default_factory=list)  # one-step-ahead log errors, oldest first
    offsets: list[float] = field(default_factory=lambda: [0.0] * len(QUANTILES))  # tracked, by QUANTILES
    pending: Pending | None = None
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # the fit and the margins, derived

    def copy(self) -> AppTraffic:
        """The history and calibration, copied; the cache (derived from them) starts empty."""
        pending = (
            None if self.pending is None else Pending(self.pending.hour, self.pending.point, list(self.pending.gpus))
        )
        return AppTraffic(dict(self.loads), list(self.errors), list(self.offsets), pending)

    @property
    def last(self) -> int | None:
        return max(self.loads) if self.loads else None


@dataclass
class TrafficForecaster:
    weeks: int = 6
    forgetting: float = 0.7
    apps: dict[str, AppTraffic] = field(default_factory=dict)

    def observe(self, app_id: str, hour: int, load: float) -> None:
        """`load` GPUs needed in pool hour `hour` (its largest observation counts). The first
        observation of a new hour settles the hour before: its error and the tracked corrections."""
        app = self.apps.setdefault(app_id, AppTraffic())
        if app.pending is None or hour > app.pending.hour:
            self._settle(app)
            fit = self.fit(app_id)
            if fit is not None:
                point = fit.point(hour)
                gpus = [math.ceil(self._load(app, point, q) - 1e-9) for q in QUANTILES]
                app.pending = Pending(hour, point, gpus)
        app.loads[hour] = max(load, app.loads.get(hour, 0.0))
        oldest = hour - self.weeks * WEEK
        for h in [h for h in app.loads if h <= oldest]:
            del app.loads[h]
        app.cache.clear()

    def _settle(self, app: AppTraffic) -> None:
        """The pending hour is over: learn its error and move each quantile's correction."""
        p = app.pending
        if p is None or p.hour not in app.loads:
            return
        load = app.loads[p.hour]
        error = math.log(max(load, 1e-6)) - p.point
        spread = float(np.median(np.abs(app.errors))) if len(app.errors) >= MIN_ERRORS else None
        app.errors = (app.errors + [error])[-ERRORS:]
        app.pending = None
        app.cache.clear()
        if spread is not None and error < -ANOMALY * spread:
            return  # a holiday's or an outage's hour: far below, it tells nothing of the upper quantiles
        needed = math.ceil(load - 1e-9)
        for i, q in enumerate(QUANTILES):
            moved = app.offsets[i] + TRACK_RATE * ((1.0 if needed > p.gpus[i] else 0.0) - (1.0 - q))
            app.offsets[i] = min(OFFSET_LIMIT, max(-OFFSET_LIMIT, moved))

    def forecast(self, app_id: str, hour: int, quantile: float) -> float | None:
        """GPUs needed in pool hour `hour` at `quantile` (None: no history to go by, or none yet
        at that hour of the day: a new app's first day has seen its night, not its morning ramp,
        and the rest of the day's median says nothing of the ramp; the caller's prior does)."""
        fit = self.fit(app_id)
        if fit is None or hour % 24 not in fit.hours_of_day:
            return None
        return self._load(self.apps[app_id], fit.point(hour), quantile)

    def _load(self, app: AppTraffic, point: float, q: float) -> float:
        """GPUs at quantile `q` around the log point forecast: raised by the errors' own quantile,
        then moved by the tracked correction (interpolated between tracked levels), which may
        take back at most one GPU (the slack of whole GPUs), so a stream with little noise is
        never planned short by more than that at its peaks."""
        base, moved = self._margins(app, q)
        raw = math.exp(point + base)
        return max(raw * math.exp(moved), raw - 1.0)

    def _margins(self, app: AppTraffic, q: float) -> tuple[float, float]:
        """(the errors' own q-quantile, the tracked correction at q), cached until either changes."""
        key = f"margin {q!r}"
        if key not in app.cache:
            if len(app.errors) < MIN_ERRORS:
                base = PRIOR_SPREAD * NormalDist().inv_cdf(min(max(q, 0.01), 0.99))
            else:
                base = float(np.quantile(app.errors, q))
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
                "errors": a.errors,
                "offsets": a.offsets,
                "pending": None if a.pending is None else [a.pending.hour, a.pending.point, a.pending.gpus],
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
                [float(e) for e in a.get("errors", [])],
                [float(o) for o in a.get("offsets", [0.0] * len(QUANTILES))],
                None if pending is None else Pending(int(pending[0]), float(pending[1]), [int(g) for g in pending[2]]),
            )
        return out


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

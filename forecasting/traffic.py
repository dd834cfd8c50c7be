"""Real-time demand by hour of week, learned from `traffic.observed`, calibrated as it goes.

An app's demand in an hour of the pool's clock is the contract's (`traffic.observed`): what it
needs throughout the hour, its largest observation (load in GPUs, fractional: requests/s over
`rps_per_gpu`), whether it reports once an hour, every 15 seconds or at irregular times. An
observation only raises its hour's maximum, so the cost of one does not grow with the rate;
hours are kept for `weeks` weeks. The model's location is fitted to each hour's sustained level:
the largest load the app held for `SUSTAIN_MINUTES`, as the observations show it: the largest
load as many observations in a row reached as the app's recent hours had in that time (the
median count of its last `RATE_HOURS` hours observed, so a gap or an hour half reported does not
set it; at least two; in an app's first hour, whose rate is not known yet, the rate of the
pool's other apps, else two; an hour observed once: that observation). So the level means the
same at any rate: a burst of a minute, seen by four observations at 15 seconds, sets it no more
than a lone spike seen once an hour does. Such a burst is its hour's maximum, and the
calibration counts the miss, but it moves neither the hour's level nor the profile a new app's
unseen hours are scaled by; a rise that lasts does. The model of those levels, in logs:

    log demand(h) = seasonal(day type, hour of day) + trend x (h - now) + level + error

- trend: the Theil-Sen slope of daily medians between days of the same type at most a week
  apart (so weekends, a holiday or a launch's one step do not set it), bounded by `MAX_TREND`;
- seasonal: per day type (weekdays, Saturdays, Sundays) and hour of day, the median of the
  detrended history, weighted to forget `forgetting` a week (the hour of day over all days
  where a day type has no sample yet);
- level: how far the latest hours run above or below that: the larger of the last week's median
  (a holiday or an outage drags it down for a day at most) and the last `RECENT` hours' median (a
  launch or a new customer lifts it within hours), fading to the week's over `FADE` hours ahead;
- the quantile (`calibration`): split conformal on the last `ERRORS` one-step errors of hour
  maxima, corrected by adaptive quantile tracking per quantile and per lead time, so the share
  of hours whose maximum needs more GPUs than the forecast gave comes to 1 - quantile on any
  stream and at any rate.
Pure and deterministic: a function of the observations in order; `dump` and `load` carry all of it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from gpualloc.forecasting.calibration import LEADS, QUANTILES, SLACK, Calibration, Pending

WEEK = 168
RECENT = 6  # hours whose median is the short-term level
FADE = 24  # hours over which the latest hours' level fades to the last week's, by 1/e
MAX_TREND = 0.2 / WEEK  # log units an hour: a trend steeper than about 22% a week is not believed
DAY_SPAN = 7  # days at most between two daily medians whose slope counts
MIN_DAY = 6  # hours a day needs for its median to count
SUSTAIN_MINUTES = 10  # how long a load must hold to be an hour's level (`AppTraffic.confirm`)
MAX_SUSTAIN = 1024  # observations at most a level is judged over (one every 0.6 s: the window shortens)
RATE_HOURS = 24  # hours observed whose median count of observations is the app's rate


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
    level: float  # the latest hours' offset from the profile
    last: int
    hours_of_day: frozenset[int] = frozenset(range(24))  # those the history has seen
    week_level: float = 0.0  # the last week's offset from the profile

    def point(self, hour: int) -> float:
        """The log load expected in `hour` (no error): the latest hours' level the next hour,
        fading to the last week's `FADE` hours later on (what ran high or low an afternoon
        says less of the hours it is farther from)."""
        fade = math.exp(-max(0, hour - self.last - 1) / FADE)
        level = self.week_level + (self.level - self.week_level) * fade
        return self.profile[hour % WEEK] + self.trend * (hour - self.last) + level


@dataclass
class AppTraffic:
    loads: dict[int, float] = field(default_factory=dict)  # hour -> its largest observation so far
    calibration: Calibration = field(default_factory=Calibration)
    last: int | None = None  # the latest hour observed
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # the fit and the margins, derived
    levels: dict[int, float] = field(default_factory=dict)  # hour -> its sustained level (`confirm`)
    # hour `last`'s observations that may yet be the least of its latest `sustain`: (number in the
    # hour, load), loads rising (a sliding minimum: a load is dropped once a later one is no higher)
    window: deque[tuple[int, float]] = field(default_factory=deque)
    count: int = 0  # observations of hour `last`
    sustain: int = 2  # observations in a row that make hour `last`'s level
    # observations of each of the last `RATE_HOURS` hours observed before `last`
    counts: deque[int] = field(default_factory=lambda: deque(maxlen=RATE_HOURS))

    def copy(self) -> AppTraffic:
        """The history and calibration, copied; the cache (derived from them) starts empty."""
        return AppTraffic(
            dict(self.loads),
            self.calibration.copy(),
            self.last,
            levels=dict(self.levels),
            window=deque(self.window),
            count=self.count,
            sustain=self.sustain,
            counts=deque(self.counts, maxlen=RATE_HOURS),
        )

    def open_hour(self, hour: int, load: float) -> None:
        """`hour`'s first observation: its maximum and, for now, its level; its level will be
        judged over as many observations as the app's recent hours had in `SUSTAIN_MINUTES`."""
        if self.last is not None:
            self.counts.append(self.count)
            rate = float(np.median(self.counts))
            self.sustain = min(MAX_SUSTAIN, max(2, round(rate * SUSTAIN_MINUTES / 60)))
        self.last, self.count = hour, 1
        self.window = deque([(1, load)])
        self.loads[hour] = self.levels[hour] = load

    def confirm(self, load: float) -> None:
        """A later observation of hour `last`: its maximum rises to it; its level is the lowest of
        its first `sustain` observations, then the largest load `sustain` in a row reached (the
        level of an hour's first observation gives way to its confirmation, so a spike opening
        the hour sets nothing)."""
        hour = self.last
        assert hour is not None and self.window  # `observe` opened the hour
        self.count += 1
        while self.window and self.window[-1][1] >= load:
            self.window.pop()
        self.window.append((self.count, load))
        while self.window[0][0] <= self.count - self.sustain:
            self.window.popleft()
        seen = self.window[0][1]
        level = seen if self.count <= self.sustain else max(self.levels[hour], seen)
        if load > self.loads[hour]:
            self.loads[hour] = load
        if level != self.levels[hour]:
            self.levels[hour] = level
            self.cache.pop("fit", None)


@dataclass
class TrafficForecaster:
    weeks: int = 6
    forgetting: float = 0.7
    apps: dict[str, AppTraffic] = field(default_factory=dict)

    def observe(self, app_id: str, hour: int, load: float) -> None:
        """`load` GPUs needed in pool hour `hour` (late ones for an hour already left behind are
        not learned). The first observation of a new hour settles the hour before (its error
        and the tracked corrections) and makes the forecasts it will be judged by; later ones
        only raise the hour's maximum and its sustained level."""
        app = self.apps.get(app_id)
        if app is None:
            app = self.apps[app_id] = AppTraffic(sustain=self._pool_sustain())
        if app.last is not None and hour < app.last:
            return
        if app.last is None or hour > app.last:
            self._new_hour(app, hour, load)
        else:
            app.confirm(load)

    def _pool_sustain(self) -> int:
        """What a new app's first hour is judged by: the median of the pool's apps whose rate is
        known (their observations come through the same pipeline, as a rule), else two."""
        known = [a.sustain for a in self.apps.values() if a.counts]
        return max(2, round(float(np.median(known)))) if known else 2

    def _new_hour(self, app: AppTraffic, hour: int, load: float) -> None:
        """Settle the hour before `hour`, make `hour`'s forecasts (one step and each lead ahead)
        from the history up to it, then open `hour` and forget hours past `weeks`."""
        cal = app.calibration
        if app.last is not None:
            cal.settle(app.last, app.loads[app.last])
        app.cache.clear()
        fit = self.fit_of(app)
        cal.pending = None
        if fit is not None and hour % 24 in fit.hours_of_day:  # else no forecast was made: no error to learn
            point = fit.point(hour)
            cal.pending = Pending(hour, point, [_gpus(cal.at(point, q)) for q in QUANTILES])
            for i, lead in enumerate(LEADS):  # forecasts made now for the hour `lead` ahead, once the model has a week
                target = hour + lead - 1
                if cal.learned(WEEK) and target % 24 in fit.hours_of_day:
                    cal.lead_pending[i][target] = [_gpus(cal.at(fit.point(target), q, i)) for q in QUANTILES]
        app.open_hour(hour, load)
        oldest = hour - self.weeks * WEEK
        for h in [h for h in app.loads if h <= oldest]:
            del app.loads[h]
            app.levels.pop(h, None)
        app.cache.clear()

    def forecast(self, app_id: str, hour: int, quantile: float) -> float | None:
        """GPUs needed in pool hour `hour` at `quantile` (None: no history to go by, or none yet
        at that hour of the day: a new app's first day has seen its night, not its morning ramp,
        and the rest of the day's median says nothing of the ramp; the caller's prior does)."""
        found = self.forecasts(app_id, hour, (quantile,))
        return None if found is None else found[0]

    def forecasts(self, app_id: str, hour: int, quantiles: Sequence[float]) -> list[float] | None:
        """`forecast` at each of `quantiles`, the model read once for all of them."""
        app = self.apps.get(app_id)
        fit = None if app is None else self.fit_of(app)
        if app is None or fit is None or hour % 24 not in fit.hours_of_day:
            return None
        lead = sum(1 for ahead in LEADS if hour - fit.last >= ahead) - 1
        point = fit.point(hour)
        return [app.calibration.at(point, q, lead if lead >= 0 else None) for q in quantiles]

    def scaled_profile(self, app_id: str, hour: int, quantile: float, profile: list[int]) -> float | None:
        """GPUs at `quantile` in an hour of day the history has not seen yet (a new app's first
        day): the registered `profile` (24 GPU counts by hour of day, a shape declared before
        any traffic) raised by the `quantile` of the ratios the hours seen so far ran at against
        it (logs of load and profile each plus `SLACK`); None: no hour seen."""
        app = self.apps.get(app_id)
        if app is None or not app.loads:
            return None
        ratios = [math.log((app.levels[h] + SLACK) / (profile[h % 24] + SLACK)) for h in sorted(app.levels)]
        return max(0.0, (profile[hour % 24] + SLACK) * math.exp(float(np.quantile(ratios, quantile))) - SLACK)

    def fit(self, app_id: str) -> Fit | None:
        """The app's model on its history (None: no history)."""
        app = self.apps.get(app_id)
        return None if app is None else self.fit_of(app)

    def fit_of(self, app: AppTraffic) -> Fit | None:
        """`app`'s model, cached until its history changes (an hour's maximum rises only a few
        times an hour however often it is observed)."""
        if not app.levels:
            return None
        if "fit" not in app.cache:
            app.cache["fit"] = _fit(app.levels, self.forgetting)
        fit: Fit = app.cache["fit"]
        return fit

    def dump(self) -> dict[str, Any]:
        return {
            app_id: {
                "hours": sorted([h, v] for h, v in a.loads.items()),
                "levels": sorted([h, v] for h, v in a.levels.items()),
                "window": [list(r) for r in a.window],
                "count": a.count,
                "sustain": a.sustain,
                "counts": list(a.counts),
                **a.calibration.dump(),
            }
            for app_id, a in self.apps.items()
        }

    @classmethod
    def load(cls, data: dict[str, Any], weeks: int, forgetting: float) -> "TrafficForecaster":
        """The state `dump` wrote; one written with hour medians and per-observation errors
        restores with its latest hour's maximum taken from the samples it kept, one without
        levels with each hour's maximum for its level, and one with only the latest observation
        judging its hour's level by two in a row."""
        out = cls(weeks, forgetting)
        for app_id, a in data.items():
            loads = {int(h): float(v) for h, v in a["hours"]}
            last = max(loads) if loads else None
            if last is not None and a.get("samples"):
                loads[last] = max(float(v) for v in a["samples"])
            levels = {int(h): float(v) for h, v in a["levels"]} if "levels" in a else dict(loads)
            sustain = int(a.get("sustain", 2))
            count = int(a.get("count", 1))
            latest = [[count, a.get("previous", loads[last])]] if last is not None else []
            window = a.get("window", latest)
            out.apps[app_id] = AppTraffic(
                loads,
                Calibration.restore(a),
                last,
                levels=levels,
                window=deque((int(n), float(v)) for n, v in window),
                count=count,
                sustain=sustain,
                counts=deque((int(n) for n in a.get("counts", [])), maxlen=RATE_HOURS),
            )
        return out


def _gpus(load: float) -> int:
    return math.ceil(load - 1e-9)


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
    week_level = float(np.median(offset[hours > last - WEEK]))
    level = max(week_level, float(np.median(offset[-RECENT:])))
    return Fit(profile, trend, level, last, frozenset(int(h) for h in np.unique(of_day)), week_level)


def _trend(hours: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen slope (log units an hour) of daily medians, over pairs of days of the same type
    at most DAY_SPAN days apart (days of fewer than MIN_DAY hours left out); 0 when no
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

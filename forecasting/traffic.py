"""Real-time demand by hour of week, learned from `traffic.observed`.

An app's history is the largest load (GPUs, fractional: requests/s over `rps_per_gpu`) seen in
each hour of the pool's clock, kept for `weeks` weeks. The forecast for an hour is a weighted
upper quantile of the same hour of day on days of the same type (weekdays, Saturdays, Sundays):
- weights forget exponentially (`forgetting` a week), and the same day of the week counts
  double, so a drifting level and a weekly rhythm both come through;
- samples far above the others (a burst, a sensor glitch: above the median by more than
  `SPREADS` robust spreads) are clipped before the quantile is taken, and low ones (holidays,
  outages) fall below an upper quantile anyway;
- hours never observed (gaps) are simply absent; with no sample of the day type, the same hour
  of every day is used; with none at all the caller falls back on the registered profile.
Two corrections lift the forecast when live traffic runs above it, never lower it (a holiday
must not leave the next working day short):
- short-term: the median of the last `RECENT` observations' log ratios to their forecasts, when
  positive, decaying by `DECAY` an hour ahead (a surge under way);
- level: a moving average, about a day long, of the log ratio of loads to their seasonal
  median, when positive (a level drifting up faster than the forgetting follows).
Pure: a function of the observations in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

WEEK = 168
RECENT = 3  # observations whose ratio to the forecast says live traffic runs above it
DECAY = 0.8  # of that lift, an hour further ahead
LEVEL_RATE = 1 / 24  # of the level's moving average, an observation: about a day's memory
LEVEL_CAP = math.log(2.0)  # one observation moves the level by at most this (a glitch, a burst)
SPREADS = 6.0  # robust spreads above the median past which a sample is clipped
MIN_SPREAD = 0.05  # of the median: the spread's floor (a flat history has none)


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


@dataclass
class AppTraffic:
    by_hour_of_day: dict[int, dict[int, float]] = field(default_factory=dict)  # hour of day -> {hour: load}
    recent: list[float] = field(default_factory=list)  # log(load / forecast) of the last observations
    level: float = 0.0  # moving average of log(load / seasonal median): the level's drift since history
    last: int | None = None  # the latest hour observed
    cache: dict[tuple[int, float], float | None] = field(default_factory=dict, repr=False)

    def copy(self) -> AppTraffic:
        """The history and corrections, copied; the cache (derived from them) starts empty."""
        hours = {hour: dict(loads) for hour, loads in self.by_hour_of_day.items()}
        return AppTraffic(hours, list(self.recent), self.level, self.last)


@dataclass
class TrafficForecaster:
    weeks: int = 6
    forgetting: float = 0.7
    apps: dict[str, AppTraffic] = field(default_factory=dict)

    def observe(self, app_id: str, hour: int, load: float, quantile: float, learn: bool = True) -> None:
        """`load` GPUs needed in pool hour `hour` (its largest observation counts). Without
        `learn` only the short-term correction sees it (a backtest's held-out week)."""
        app = self.apps.setdefault(app_id, AppTraffic())
        expected, typical = self.seasonal(app_id, hour, quantile), self.seasonal(app_id, hour, 0.5)
        if expected:
            app.recent = (app.recent + [math.log(max(load, 1e-6) / expected)])[-RECENT:]
        if typical:
            app.level += LEVEL_RATE * (min(LEVEL_CAP, math.log(max(load, 1e-6) / typical)) - app.level)
        app.last = hour if app.last is None else max(app.last, hour)
        if not learn:
            return
        same = app.by_hour_of_day.setdefault(hour % 24, {})
        same[hour] = max(load, same.get(hour, 0.0))
        oldest = hour - self.weeks * WEEK
        for hours in app.by_hour_of_day.values():
            for h in [h for h in hours if h <= oldest]:
                del hours[h]
        app.cache.clear()

    def forecast(self, app_id: str, hour: int, quantile: float) -> float | None:
        """GPUs needed in pool hour `hour` (None: no history to go by)."""
        base = self.seasonal(app_id, hour, quantile)
        if base is None:
            return None
        app = self.apps[app_id]
        lift = sorted(app.recent)[len(app.recent) // 2] if app.recent else 0.0
        if lift > 0 and app.last is not None and hour > app.last:
            base *= math.exp(lift * DECAY ** (hour - app.last))
        return base * math.exp(max(0.0, app.level))

    def seasonal(self, app_id: str, hour: int, quantile: float) -> float | None:
        """The weighted upper quantile of earlier loads at this hour of day (see the module)."""
        app = self.apps.get(app_id)
        if app is None:
            return None
        key = (hour, quantile)
        if key not in app.cache:
            earlier = [(h, v) for h, v in app.by_hour_of_day.get(hour % 24, {}).items() if h < hour]
            alike = [(h, v) for h, v in earlier if day_type(h) == day_type(hour)]
            app.cache[key] = self._quantile(alike or earlier, hour, quantile)
        return app.cache[key]

    def _quantile(self, samples: list[tuple[int, float]], hour: int, q: float) -> float | None:
        if not samples:
            return None
        weighted = [
            (v, self.forgetting ** ((hour - h) / WEEK) * (2.0 if (hour - h) % WEEK == 0 else 1.0)) for h, v in samples
        ]
        median = _weighted_quantile(weighted, 0.5)
        spread = max(_weighted_quantile([(abs(v - median), w) for v, w in weighted], 0.5), MIN_SPREAD * median)
        cap = median + SPREADS * spread
        return _weighted_quantile([(min(v, cap), w) for v, w in weighted], q)

    def dump(self) -> dict[str, Any]:
        return {
            app_id: {
                "hours": sorted([h, v] for hours in a.by_hour_of_day.values() for h, v in hours.items()),
                "recent": a.recent,
                "last": a.last,
                "level": a.level,
            }
            for app_id, a in self.apps.items()
        }

    @classmethod
    def load(cls, data: dict[str, Any], weeks: int, forgetting: float) -> "TrafficForecaster":
        out = cls(weeks, forgetting)
        for app_id, a in data.items():
            app = out.apps[app_id] = AppTraffic(recent=list(a["recent"]), last=a["last"], level=a["level"])
            for h, v in a["hours"]:
                app.by_hour_of_day.setdefault(h % 24, {})[h] = v
        return out


def _weighted_quantile(pairs: list[tuple[float, float]], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total."""
    ordered = sorted(pairs)
    total = sum(w for _, w in ordered)
    reached = 0.0
    for value, weight in ordered:
        reached += weight
        if reached >= q * total - 1e-12:
            return value
    return ordered[-1][0]

"""Held-out generator of real-time serving traffic (issue 42): contract event streams of apps that
report `requests_per_s` at any observation rate.

Why held out: it was written without reading the project's forecasters or its other generators,
from the event contract alone, so that streams from it judge the forecasters on traffic nobody
tuned them for. Never tune a forecaster on these streams; use them only to judge one.

The model. Each app has a latent demand in GPUs on a 15-second grid, the same for a seed at every
observation rate:

- a daily shape by local hour of its time zone (interpolated knots, not a sine: a consumer app
  peaks in the evening, a business API has a morning ramp, a lunch dip and an early Friday
  evening, a small internal app is flatter), with its own weekend shape (consumer traffic rises at
  weekends, business traffic collapses), blended over local midnight, and daylight saving time
  moving it in UTC on the US and EU dates;
- growth of 1-3% a week, compounded, and a day-to-day level that wanders (an AR(1) of days);
- a launch in one app: new traffic from another region (its own time zone) ramped in over 6-72
  hours, with an overshoot that decays over days;
- a holiday in each app's region: one or two weekdays with the weekend shape at a lower level;
- multiplicative noise: two Ornstein-Uhlenbeck processes of the log (minutes and tens of minutes:
  autocorrelated within the hour), bursts with Pareto amplitudes that arrive in clusters (a burst
  may bring a follow-up), a few minutes' surges at the top of business hours (cron clients), and
  for the small app, clients' batch runs that add a plateau for hours.

Apps come in three kinds, a large smooth consumer app, a medium business API and a small spiky
app of a few GPUs; the first three apps are one of each (New York, Berlin, Tokyo), more are drawn.
Observations: each app's reporter sends the rate averaged over the last `clip(S, 15 s, 300 s)`
at times spaced `S` apart, each interval jittered by up to `jitter` either way, with a clock drift
of up to 0.3%, an occasional late report and a few missed ones; outages (the metrics pipeline is
down for hours: one for all apps, more per app) leave no observations; glitches are isolated
absurd readings (zeros from counter resets, x10 spikes, x0.1 readings, a stale value repeated for
up to two hours, a catch-up spike after an outage). The owner's `profile` is a rough guess: three
levels by hour of a weekday in the owner's head, the wrong scale (x0.6-1.5), standard time
without DST, at times an hour or two off; the small app's owner gives a flat count.

`generate(...)` returns the envelopes; `generate_with_truth(...)` also returns what was put in
(launch, holidays, outages, glitches by event id), which the command writes with `--truth FILE`:

    python -m gpualloc.generators.heldout_serving --seed 1 --weeks 8 --rate-seconds 450 --out FILE
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

GRID = 15.0  # seconds between points of the latent demand
DAY = 86_400.0
WEEK = 7 * DAY
DEFAULT_START = datetime(2026, 2, 23, tzinfo=timezone.utc)  # a Monday: 8 weeks span the US and EU DST changes
POOL = "default"


@dataclass(frozen=True)
class Zone:
    name: str
    std_minutes: int  # UTC offset in standard time
    dst: str | None  # "us", "eu" or None


ZONES = (
    Zone("America/New_York", -300, "us"),
    Zone("Europe/Berlin", 60, "eu"),
    Zone("Asia/Tokyo", 540, None),
    Zone("America/Los_Angeles", -480, "us"),
    Zone("Asia/Kolkata", 330, None),
    Zone("Europe/London", 0, "eu"),
    Zone("America/Sao_Paulo", -180, None),
)


@dataclass(frozen=True)
class Kind:
    name: str
    weekday: tuple[float, ...]  # 24 knots by local hour (the daily peak about 1)
    weekend: tuple[float, ...]
    friday_evening: float  # multiplier from Friday 15:00 local
    peak_gpus: tuple[float, float]  # at the start, at the daily peak
    rps_per_gpu: tuple[float, float]
    noise_sd: float  # of the log, stationary
    noise_minutes: float  # its correlation time
    bursts_per_day: float
    burst_scale: float  # smallest relative amplitude; Pareto tail above
    burst_minutes: tuple[float, float]  # decay times
    holiday_level: float  # on the weekend shape
    cron: float  # top-of-hour surge in business hours (0: none)
    plateaus_per_week: float  # clients' batch runs
    priority: tuple[int, int]


CONSUMER = Kind(
    name="consumer",
    weekday=(0.55, 0.40, 0.30, 0.24, 0.22, 0.24, 0.32, 0.45, 0.55, 0.60, 0.63, 0.66)
    + (0.70, 0.68, 0.66, 0.66, 0.70, 0.76, 0.84, 0.93, 1.00, 0.98, 0.88, 0.72),
    weekend=(0.66, 0.51, 0.38, 0.30, 0.25, 0.24, 0.26, 0.32, 0.43, 0.56, 0.68, 0.76)
    + (0.83, 0.85, 0.85, 0.85, 0.87, 0.91, 0.95, 1.02, 1.06, 1.03, 0.93, 0.78),
    friday_evening=1.04,
    peak_gpus=(22.0, 36.0),
    rps_per_gpu=(600.0, 1200.0),
    noise_sd=0.03,
    noise_minutes=40.0,
    bursts_per_day=0.7,
    burst_scale=0.04,
    burst_minutes=(10.0, 60.0),
    holiday_level=0.62,
    cron=0.0,
    plateaus_per_week=0.0,
    priority=(7, 9),
)
BUSINESS = Kind(
    name="business",
    weekday=(0.10, 0.08, 0.07, 0.07, 0.07, 0.09, 0.16, 0.35, 0.70, 0.92, 0.98, 0.95)
    + (0.74, 0.80, 0.97, 1.00, 0.93, 0.70, 0.42, 0.28, 0.22, 0.18, 0.14, 0.12),
    weekend=(0.10, 0.09, 0.08, 0.08, 0.08, 0.08, 0.09, 0.11, 0.14, 0.18, 0.21, 0.22)
    + (0.22, 0.22, 0.21, 0.20, 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, 0.12, 0.11),
    friday_evening=0.78,
    peak_gpus=(8.0, 14.0),
    rps_per_gpu=(150.0, 300.0),
    noise_sd=0.07,
    noise_minutes=20.0,
    bursts_per_day=2.0,
    burst_scale=0.12,
    burst_minutes=(5.0, 30.0),
    holiday_level=0.9,
    cron=0.35,
    plateaus_per_week=0.0,
    priority=(5, 7),
)
SPIKY = Kind(
    name="spiky",
    weekday=(0.35, 0.30, 0.28, 0.27, 0.27, 0.30, 0.38, 0.52, 0.70, 0.85, 0.95, 1.00)
    + (0.92, 0.96, 1.00, 0.97, 0.90, 0.80, 0.70, 0.62, 0.55, 0.50, 0.45, 0.40),
    weekend=(0.30, 0.28, 0.27, 0.26, 0.26, 0.27, 0.29, 0.32, 0.36, 0.40, 0.43, 0.45)
    + (0.45, 0.45, 0.44, 0.43, 0.42, 0.40, 0.38, 0.36, 0.34, 0.33, 0.32, 0.31),
    friday_evening=0.9,
    peak_gpus=(1.6, 3.2),
    rps_per_gpu=(20.0, 60.0),
    noise_sd=0.18,
    noise_minutes=10.0,
    bursts_per_day=10.0,
    burst_scale=0.4,
    burst_minutes=(3.0, 45.0),
    holiday_level=0.6,
    cron=0.0,
    plateaus_per_week=2.0,
    priority=(2, 4),
)
KINDS = (CONSUMER, BUSINESS, SPIKY)


@dataclass(frozen=True)
class App:
    id: str
    index: int
    kind: Kind
    zone: Zone
    peak_gpus: float
    rps_per_gpu: float
    growth_per_week: float
    weekday: np.ndarray  # the kind's knots, perturbed for this app
    weekend: np.ndarray
    phase_hours: float
    priority: int


@dataclass(frozen=True)
class Launch:
    app: int
    start: float  # seconds from the stream's start
    ramp: float  # seconds
    share: float  # new traffic, as a share of the app's level
    zone: Zone  # where the new traffic comes from
    overshoot: float
    overshoot_decay: float  # seconds


@dataclass(frozen=True)
class Outage:
    apps: tuple[int, ...]
    start: float
    end: float


@dataclass(frozen=True)
class Plan:
    seed: int
    start: datetime
    seconds: float
    apps: tuple[App, ...]
    launch: Launch
    holidays: dict[str, tuple[int, ...]]  # zone name -> local days (days since 1970-01-01 in local time)
    outages: tuple[Outage, ...]

    @property
    def start_epoch(self) -> float:
        return self.start.timestamp()


# --- time zones ------------------------------------------------------------------------------


def _nth_sunday(year: int, month: int, n: int) -> int:
    """Days since 1970-01-01 of the n-th Sunday of the month (n = -1: the last)."""
    if n > 0:
        first = datetime(year, month, 1, tzinfo=timezone.utc)
        day = 1 + (6 - first.weekday()) % 7 + 7 * (n - 1)
    else:
        nxt = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
        last = nxt.timestamp() / DAY - 1
        weekday = (int(last) + 3) % 7  # Monday 0
        return int(last) - (weekday - 6) % 7
    return int(datetime(year, month, day, tzinfo=timezone.utc).timestamp() // DAY)


def _dst_spans(zone: Zone, years: range) -> list[tuple[float, float]]:
    """UTC epoch seconds [begin, end) of daylight saving time."""
    spans = []
    for y in years:
        if zone.dst == "us":  # 2:00 local: second Sunday of March, first Sunday of November
            begin = _nth_sunday(y, 3, 2) * DAY + 2 * 3600 - zone.std_minutes * 60
            end = _nth_sunday(y, 11, 1) * DAY + 2 * 3600 - (zone.std_minutes + 60) * 60
        elif zone.dst == "eu":  # 1:00 UTC: last Sunday of March, last Sunday of October
            begin = _nth_sunday(y, 3, -1) * DAY + 3600
            end = _nth_sunday(y, 10, -1) * DAY + 3600
        else:
            continue
        spans.append((begin, end))
    return spans


def _offset_seconds(zone: Zone, epoch: np.ndarray) -> np.ndarray:
    offset = np.full(epoch.shape, zone.std_minutes * 60.0)
    if zone.dst and epoch.size:
        y0 = datetime.fromtimestamp(float(epoch.min()), timezone.utc).year
        y1 = datetime.fromtimestamp(float(epoch.max()), timezone.utc).year
        for begin, end in _dst_spans(zone, range(y0, y1 + 1)):
            offset[(epoch >= begin) & (epoch < end)] += 3600.0
    return offset


# --- the latent demand -----------------------------------------------------------------------


def _knots(knots: np.ndarray, hour: np.ndarray) -> np.ndarray:
    """Periodic Catmull-Rom curve through 24 hourly knots."""
    x = np.mod(hour, 24.0)
    i = np.floor(x).astype(np.int64)
    f = x - i
    p0, p1, p2, p3 = (knots[(i + k) % 24] for k in (-1, 0, 1, 2))
    value: np.ndarray = 0.5 * (
        2 * p1 + (p2 - p0) * f + (2 * p0 - 5 * p1 + 4 * p2 - p3) * f**2 + (3 * p1 - p0 - 3 * p2 + p3) * f**3
    )
    curve: np.ndarray = np.maximum(value, 0.01)
    return curve


def _daily_shape(app: App, zone: Zone, epoch: np.ndarray, holidays: tuple[int, ...]) -> np.ndarray:
    """The app's shape by local time: weekday or weekend/holiday curve, blended over 0-4h local."""
    local = epoch + _offset_seconds(zone, epoch)
    day = np.floor(local / DAY).astype(np.int64)
    hour = (local - day * DAY) / 3600.0 + app.phase_hours
    kind = app.kind
    weekday_curve = _knots(app.weekday, hour)
    weekend_curve = _knots(app.weekend, hour)
    holiday_days = np.array(holidays, dtype=np.int64)

    def curve_of(d: np.ndarray, h: np.ndarray) -> np.ndarray:
        dow = (d + 3) % 7  # Monday 0
        holiday = np.isin(d, holiday_days)
        off = (dow >= 5) | holiday
        value = np.where(off, weekend_curve, weekday_curve)
        value = np.where(holiday, value * kind.holiday_level, value)
        friday = (dow == 4) & ~holiday
        ramp = np.clip((h - 13.0) / 4.0, 0.0, 1.0)
        return np.where(friday, value * (1 + (kind.friday_evening - 1) * ramp), value)

    # before 4h local the night still belongs to the day before (Friday night, a holiday's end)
    w = np.clip((hour - app.phase_hours) / 4.0, 0.0, 1.0)
    shape: np.ndarray = w * curve_of(day, hour) + (1 - w) * curve_of(day - 1, hour + 24.0)
    return shape


def _ar1(rng: np.random.Generator, n: int, sd: float, tau: float) -> np.ndarray:
    """A stationary Ornstein-Uhlenbeck process sampled every GRID seconds (correlation time tau)."""
    phi = math.exp(-GRID / tau)
    e = rng.normal(0.0, sd * math.sqrt(1 - phi * phi), n)
    e[0] = rng.normal(0.0, sd)
    x = np.empty(n)
    block = max(1, min(256, int(10.0 / -math.log(phi))))
    j = np.arange(block)
    down = phi**j
    up = phi ** (-j)
    prev = 0.0
    for s in range(0, n, block):
        chunk = e[s : s + block]
        m = len(chunk)
        x[s : s + m] = down[:m] * (phi * prev + np.cumsum(chunk * up[:m]))
        prev = x[s + m - 1]
    return x


def _bursts(rng: np.random.Generator, t: np.ndarray, kind: Kind) -> np.ndarray:
    """1 + the bursts' relative amplitudes: Poisson arrivals, Pareto sizes, clusters."""
    m = np.ones_like(t)
    days = t[-1] / DAY
    count = rng.poisson(kind.bursts_per_day * days)
    starts = list(rng.uniform(0.0, t[-1], count))
    amps = list(np.minimum(kind.burst_scale * (1.0 + rng.pareto(1.5, count)), 8.0))
    for k in range(count):  # a burst brings a follow-up 10-60 minutes later, at times
        if rng.random() < 0.4:
            starts.append(starts[k] + rng.uniform(600.0, 3600.0))
            amps.append(amps[k] * rng.uniform(0.3, 0.8))
    for s, amp in zip(starts, amps, strict=True):
        tau = rng.uniform(*kind.burst_minutes) * 60.0
        rise = rng.uniform(30.0, 180.0)
        lo = int(s // GRID)
        hi = min(len(t), int((s + rise + 6 * tau) // GRID) + 2)
        if lo >= len(t):
            continue
        dt = t[lo:hi] - s
        m[lo:hi] += amp * np.clip(dt / rise, 0.0, 1.0) * np.exp(-np.maximum(dt - rise, 0.0) / tau)
    return m


def _growth(app: App, t: np.ndarray | float) -> Any:
    return np.exp(math.log1p(app.growth_per_week) * np.asarray(t) / WEEK)


def latent_gpus(plan: Plan, index: int) -> tuple[np.ndarray, np.ndarray]:
    """The app's demand in GPUs (not rounded), on the grid: (seconds from the start, GPUs)."""
    app = plan.apps[index]
    kind = app.kind
    rng = np.random.default_rng([plan.seed, index, 1])
    n = int(plan.seconds // GRID) + 1
    t = np.arange(n) * GRID
    epoch = plan.start_epoch + t
    level = app.peak_gpus * _growth(app, t)
    # the day-to-day level: an AR(1) of days, interpolated between the days' middles
    days = int(plan.seconds // DAY) + 2
    walk = np.empty(days)
    walk[0] = rng.normal(0.0, 0.04)
    for d in range(1, days):
        walk[d] = 0.6 * walk[d - 1] + rng.normal(0.0, 0.04 * math.sqrt(1 - 0.36))
    level = level * np.exp(np.interp(t / DAY - 0.5, np.arange(days), walk))
    g = level * _daily_shape(app, app.zone, epoch, plan.holidays.get(app.zone.name, ()))
    launch = plan.launch
    if launch.app == index:
        since = t - launch.start
        ramp = np.clip(since / launch.ramp, 0.0, 1.0)
        ramp = ramp * ramp * (3 - 2 * ramp)
        after = np.maximum(t - launch.start - launch.ramp, 0.0)
        novelty = 1.0 + launch.overshoot * np.exp(-after / launch.overshoot_decay)
        g = g + launch.share * level * _daily_shape(app, launch.zone, epoch, ()) * ramp * novelty
    g = g * np.exp(_ar1(rng, n, kind.noise_sd, kind.noise_minutes * 60.0) + _ar1(rng, n, kind.noise_sd / 2, 60.0))
    g = g * _bursts(rng, t, kind)
    if kind.cron:
        local = epoch + _offset_seconds(app.zone, epoch)
        day = np.floor(local / DAY)
        hour = (local - day * DAY) / 3600.0
        minute = (hour - np.floor(hour)) * 60.0
        busy = (((day.astype(np.int64) + 3) % 7) < 5) & (hour >= 7) & (hour < 19) & (minute < 3.0)
        g = np.where(busy, g * (1 + kind.cron * (1 - minute / 3.0)), g)
    if kind.plateaus_per_week:
        for _ in range(rng.poisson(kind.plateaus_per_week * plan.seconds / WEEK)):
            s = rng.uniform(0.0, plan.seconds)
            length = rng.uniform(3600.0, 4 * 3600.0)
            amp = rng.uniform(0.6, 1.5) * app.peak_gpus * float(_growth(app, s))
            edge = np.clip(np.minimum(t - s, s + length - t) / 300.0, 0.0, 1.0)
            g = g + amp * edge
    return t, np.maximum(g, 0.0)


# --- the plan: apps, launch, holidays, outages ---------------------------------------------


def _local_day_span(zone: Zone, day: int, plan_start: float) -> tuple[float, float]:
    """Seconds from the stream's start covering a local day (standard offset; DST moves it by 1h)."""
    return day * DAY - zone.std_minutes * 60 - plan_start, (day + 1) * DAY - zone.std_minutes * 60 - plan_start


def _make_app(seed: int, index: int) -> App:
    rng = np.random.default_rng([seed, index, 0])
    if index < len(KINDS):
        kind, zone = KINDS[index], ZONES[index]
    else:
        kind = KINDS[int(rng.choice(3, p=[0.3, 0.4, 0.3]))]
        zone = ZONES[int(rng.integers(len(ZONES)))]
    weekday = np.array(kind.weekday) * np.exp(rng.normal(0.0, 0.06, 24))
    weekend = np.array(kind.weekend) * np.exp(rng.normal(0.0, 0.06, 24))
    return App(
        id=f"svc-{index}",
        index=index,
        kind=kind,
        zone=zone,
        peak_gpus=float(rng.uniform(*kind.peak_gpus)),
        rps_per_gpu=float(round(rng.uniform(*kind.rps_per_gpu) / 5) * 5),
        growth_per_week=float(rng.uniform(0.01, 0.03)),
        weekday=weekday,
        weekend=weekend,
        phase_hours=float(rng.uniform(-0.75, 0.75)),
        priority=int(rng.integers(kind.priority[0], kind.priority[1] + 1)),
    )


def plan_stream(seed: int, weeks: int, apps: int = 3, start: datetime = DEFAULT_START) -> Plan:
    """What a stream holds before it is observed: its apps, launch, holidays and outages."""
    if weeks < 3:
        raise ValueError("weeks: at least 3 (a launch and a holiday, each with a week either side)")
    if not 1 <= apps <= 64:
        raise ValueError("apps: 1 to 64")
    if start.tzinfo is None:
        raise ValueError("start: give a time zone")
    seconds = weeks * WEEK
    rng = np.random.default_rng([seed, 1_000_000])
    made = tuple(_make_app(seed, i) for i in range(apps))
    t0 = start.timestamp()

    ramp = float(rng.uniform(6.0, 72.0)) * 3600.0
    lo, hi = max(7 * DAY, 0.3 * seconds), min(0.7 * seconds, seconds - ramp - 9 * DAY)
    launched = int(rng.integers(min(apps, 3)))
    others = [z for z in ZONES if z != made[launched].zone]
    launch = Launch(
        app=launched,
        start=float(rng.uniform(lo, max(lo, hi))),
        ramp=ramp,
        share=float(rng.uniform(0.4, 0.9)),
        zone=others[int(rng.integers(len(others)))],
        overshoot=float(rng.uniform(0.1, 0.4)),
        overshoot_decay=float(rng.uniform(1.0, 3.0)) * DAY,
    )

    holidays: dict[str, tuple[int, ...]] = {}
    for zone in dict.fromkeys(a.zone for a in made):
        first = int((t0 + zone.std_minutes * 60) // DAY)
        total = int(seconds // DAY)
        length = 1 + int(rng.random() < 0.5)
        candidates = []
        for d in range(first + 7, first + total - 8 - length):
            dows = [(d + k + 3) % 7 for k in range(length)]
            if max(dows) >= 5:
                continue
            begin, end = _local_day_span(zone, d, t0)
            near_launch = any(a.zone == zone and a.index == launched for a in made) and (
                begin < launch.start + launch.ramp + 8 * DAY and end > launch.start - 8 * DAY
            )
            candidates.append((d, near_launch))
        clear = [d for d, near in candidates if not near] or [d for d, _ in candidates]
        if clear:
            d = clear[int(rng.integers(len(clear)))]
            holidays[zone.name] = tuple(range(d, d + length))

    # outages keep off the holidays and the same weekdays a week before and after them
    guarded: dict[int, list[tuple[float, float]]] = {}
    for a in made:
        spans = []
        for d in holidays.get(a.zone.name, ()):
            for k in (-7, 0, 7):
                b, e = _local_day_span(a.zone, d + k, t0)
                spans.append((b - 6 * 3600, e + 6 * 3600))
        guarded[a.index] = spans

    def place(members: tuple[int, ...], length: float, must: bool) -> Outage | None:
        for attempt in range(200):
            s = float(rng.uniform(0.5 * DAY, seconds - length - 0.5 * DAY))
            clash = any(b < s + length and s < e for i in members for b, e in guarded[i])
            if not clash or (must and attempt == 199):
                return Outage(members, s, s + length)
        return None

    def duration() -> float:
        return float(np.clip(rng.lognormal(math.log(4 * 3600.0), 0.6), 1.5 * 3600.0, 20 * 3600.0))

    everyone = tuple(range(apps))
    outages = [place(everyone, max(3 * 3600.0, duration()), True)]
    for i in everyone:
        for _ in range(rng.poisson(seconds / (14 * DAY))):
            outages.append(place((i,), duration(), False))
    return Plan(
        seed=seed,
        start=start,
        seconds=seconds,
        apps=made,
        launch=launch,
        holidays=holidays,
        outages=tuple(sorted((o for o in outages if o is not None), key=lambda o: (o.start, o.apps))),
    )


# --- registration: what the owner says --------------------------------------------------------


def _registration(seed: int, app: App, gpus: np.ndarray) -> dict[str, Any]:
    rng = np.random.default_rng([seed, app.index, 4])
    kind = app.kind
    top = float(np.quantile(gpus, 0.999))
    max_gpus = max(2, math.ceil(1.25 * top) + 1)
    min_gpus = max(1, math.floor(0.1 * app.peak_gpus)) if kind is CONSUMER else 1
    min_gpus = min(min_gpus, max_gpus - 1)
    scale = float(rng.uniform(0.6, 1.5))
    if kind is SPIKY:  # "it needs about three"
        profile = [math.ceil(app.peak_gpus * scale)] * 24
    else:
        err = int(rng.choice([-2, -1, 0, 0, 0, 1]))
        levels = np.where(app.weekday < 0.35, 0.25, np.where(app.weekday < 0.75, 0.6, 1.0))
        offset = round(app.zone.std_minutes / 60)
        profile = [math.ceil(app.peak_gpus * scale * levels[(u + offset + err) % 24]) for u in range(24)]
    profile = [min(max(p, 0), max_gpus) for p in profile]
    return {
        "id": app.id,
        "priority": app.priority,
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "swap_cap": max(2, math.ceil(max_gpus / 4)),
        "rps_per_gpu": app.rps_per_gpu,
        "profile": profile,
    }


# --- observations -----------------------------------------------------------------------------


def _observe(
    plan: Plan, index: int, t: np.ndarray, gpus: np.ndarray, rate_seconds: float, jitter: float
) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """The app's reports: times (seconds from the start), requests_per_s, and a glitch tag each."""
    app = plan.apps[index]
    rng = np.random.default_rng([plan.seed, index, 2])
    drift = rng.uniform(-0.003, 0.003)
    step = rate_seconds * (1 + drift)
    n = int(plan.seconds / (step * (1 - jitter))) + 16
    gaps = step * (1 + jitter * rng.uniform(-1.0, 1.0, n))
    late = rng.random(n) < 0.01
    gaps[late] *= rng.uniform(1.5, 3.0, int(late.sum()))
    times = rng.uniform(0.0, step) + np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    times = times[times < plan.seconds]
    keep = rng.random(len(times)) >= 0.003  # missed reports
    mine = [o for o in plan.outages if index in o.apps]
    for o in mine:
        keep &= (times < o.start) | (times >= o.end)
    times = times[keep]

    rps = gpus * app.rps_per_gpu
    cum = np.concatenate([[0.0], np.cumsum(rps[:-1] * GRID)])
    window = min(max(rate_seconds, GRID), 300.0)
    lower = np.maximum(times - window, 0.0)
    span = times - lower
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (np.interp(times, t, cum) - np.interp(lower, t, cum)) / span
    mean = np.where(span < GRID, np.interp(times, t, rps), mean)
    counted = np.maximum(mean * np.maximum(span, 1.0), 1.0)
    noise = np.exp(rng.normal(0.0, 0.005, len(times))) * (1 + rng.normal(0.0, 1.0, len(times)) / np.sqrt(counted))
    values = np.maximum(mean * noise, 0.0)

    tags: list[str | None] = [None] * len(times)
    grng = np.random.default_rng([plan.seed, index, 3])
    if len(times) > 4:
        count = grng.poisson(0.3 * plan.seconds / DAY)
        kinds = ["zero", "x10"] + list(grng.choice(["zero", "x10", "stale", "x0.1"], count, p=[0.35, 0.35, 0.15, 0.15]))
        for kind in kinds:
            j = int(grng.integers(1, len(times) - 1))
            if kind == "zero":
                values[j] = 0.0
            elif kind == "x10":
                values[j] *= grng.uniform(8.0, 12.0)
            elif kind == "x0.1":
                values[j] *= 0.1
            else:  # the exporter hangs: its last value repeats for up to two hours
                until = times[j] + grng.uniform(1800.0, 7200.0)
                k = j + 1
                while k < len(times) and times[k] < until:
                    values[k] = values[j]
                    tags[k] = "stale"
                    k += 1
            tags[j] = kind
        for o in mine:  # the counter catches up after the outage, at times
            k = int(np.searchsorted(times, o.end))
            if k < len(times) and grng.random() < 0.5:
                values[k] *= grng.uniform(2.0, 4.0)
                tags[k] = "catch-up"
    return times, values, tags


# --- the stream -------------------------------------------------------------------------------


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_with_truth(
    seed: int,
    weeks: int = 8,
    rate_seconds: float = 450.0,
    jitter: float = 0.3,
    apps: int = 3,
    start: datetime = DEFAULT_START,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The stream's envelopes, and what was put in it (launch, holidays, outages, glitches)."""
    if not 5.0 <= rate_seconds <= 86_400.0:
        raise ValueError("rate_seconds: 5 to 86,400")
    if not 0.0 <= jitter <= 0.9:
        raise ValueError("jitter: 0 to 0.9")
    plan = plan_stream(seed, weeks, apps, start)
    t0 = int(plan.start_epoch)
    registrations, observed = [], []
    for i in range(apps):
        t, gpus = latent_gpus(plan, i)
        registrations.append(_registration(seed, plan.apps[i], gpus))
        times, values, tags = _observe(plan, i, t, gpus, rate_seconds, jitter)
        seconds = np.maximum(np.rint(times).astype(np.int64), 1)
        observed.append((seconds, values, tags))

    total = sum(registrations[i]["max_gpus"] for i in range(apps))
    gpus_pool = min(4096, 8 * math.ceil(1.25 * total / 8))
    if total > gpus_pool:
        raise ValueError(f"apps: their maximums ({total} GPUs) do not fit a pool of 4,096")
    counter = iter(range(10**9))

    def envelope(kind: str, at: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "event_id": f"heldout-{seed}-{next(counter)}",
            "type": kind,
            "occurred_at": at,
            "pool": POOL,
            "schema_version": 1,
            "payload": payload,
        }

    at0 = _iso(t0)
    config = {"gpus": gpus_pool, "gpus_per_node": 8, "horizon": 48, "step_minutes": 60}
    events = [envelope("pool.configured", at0, config)]
    events += [envelope("app.registered", at0, r) for r in registrations]

    when = np.concatenate([s for s, _, _ in observed])
    who = np.concatenate([np.full(len(s), i) for i, (s, _, _) in enumerate(observed)])
    pos = np.concatenate([np.arange(len(s)) for s, _, _ in observed])
    glitches = []
    iso_cache: dict[int, str] = {}
    for k in np.lexsort((who, when)):
        i, j, s = int(who[k]), int(pos[k]), int(when[k])
        at = iso_cache.get(s) or iso_cache.setdefault(s, _iso(t0 + s))
        value = round(float(observed[i][1][j]), 2)
        events.append(envelope("traffic.observed", at, {"app": plan.apps[i].id, "requests_per_s": value}))
        tag = observed[i][2][j]
        if tag is not None:
            glitches.append({"event_id": events[-1]["event_id"], "app": plan.apps[i].id, "kind": tag})
        if len(iso_cache) > 4096:
            iso_cache.clear()

    launch = plan.launch
    truth = {
        "seed": seed,
        "weeks": weeks,
        "rate_seconds": rate_seconds,
        "jitter": jitter,
        "start": at0,
        "apps": [
            {
                "id": a.id,
                "kind": a.kind.name,
                "zone": a.zone.name,
                "peak_gpus_at_start": round(a.peak_gpus, 2),
                "growth_per_week": round(a.growth_per_week, 4),
            }
            for a in plan.apps
        ],
        "launch": {
            "app": plan.apps[launch.app].id,
            "start": _iso(t0 + launch.start),
            "ramp_hours": round(launch.ramp / 3600, 1),
            "share": round(launch.share, 3),
            "from_zone": launch.zone.name,
        },
        "holidays": {zone: [_iso(d * DAY)[:10] for d in days] for zone, days in plan.holidays.items()},
        "outages": [
            {"apps": [plan.apps[i].id for i in o.apps], "start": _iso(t0 + o.start), "end": _iso(t0 + o.end)}
            for o in plan.outages
        ],
        "glitches": glitches,
    }
    return events, truth


def generate(
    seed: int,
    weeks: int = 8,
    rate_seconds: float = 450.0,
    jitter: float = 0.3,
    apps: int = 3,
    start: datetime = DEFAULT_START,
) -> list[dict[str, Any]]:
    """The stream's envelopes (dicts as on the bus): `pool.configured`, `app.registered` per app,
    then `traffic.observed` in time order. Pure: the same arguments give the same stream."""
    return generate_with_truth(seed, weeks, rate_seconds, jitter, apps, start)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpualloc.generators.heldout_serving",
        description="Held-out real-time serving traffic (issue 42): contract events as JSONL. "
        "Judge forecasters with it; never tune them on it.",
    )
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument("--rate-seconds", type=float, required=True, help="seconds between an app's reports")
    parser.add_argument("--jitter", type=float, default=0.3, help="each interval varies by up to this share")
    parser.add_argument("--apps", type=int, default=3)
    parser.add_argument("--start", default=None, help="ISO time of the stream's start (default 2026-02-23T00:00Z)")
    parser.add_argument("--out", required=True, help="JSONL file ('-': stdout)")
    parser.add_argument("--truth", default=None, help="also write what was put in (JSON)")
    args = parser.parse_args(argv)
    start = DEFAULT_START
    if args.start:
        start = datetime.fromisoformat(args.start.replace("Z", "+00:00"))
        if start.tzinfo is None:
            start = start.replace(tzinfo=timezone.utc)
    try:
        events, truth = generate_with_truth(args.seed, args.weeks, args.rate_seconds, args.jitter, args.apps, start)
    except ValueError as problem:
        parser.error(str(problem))
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    try:
        for event in events:
            out.write(json.dumps(event, separators=(",", ":")) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    if args.truth:
        with open(args.truth, "w", encoding="utf-8") as f:
            json.dump(truth, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

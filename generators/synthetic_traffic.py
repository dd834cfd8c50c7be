"""Ground-truth real-time traffic for testing demand forecasters (docs/synthetic-data.md).

Each app follows a known weekday and weekend shape, a weekly drift, holidays, bursts and
lognormal noise; observations have gaps and rare glitches. The truth is kept apart from the
observations (`traffic_plan`, `expected_level`) so a test can say what a perfect forecaster
would have predicted, and how far the noise alone puts it from what was observed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpualloc.generators.traces import T0
from gpualloc.schemas.events import envelope

Record = tuple[datetime, str, dict[str, Any], str]  # occurred_at, type, payload, pool

NOISE_SIGMA = 0.08  # lognormal sigma of every observation around the true level
PEAK_SHARE = 0.40  # the apps' weekday peaks add up to this share of the pool (they peak apart)
DRIFT = (0.04, -0.03, 0.01)  # level change a week, by archetype (exp(drift * weeks))
BURSTS_PER_WEEK = 0.6  # per app; each 2-6 hours at x1.5-2.5
GAPS_PER_WEEK = 2  # per app: single missing observations
OUTLIERS_PER_WEEK = 1  # per app: single observations x4-6 (sensor glitches)
OUTAGE_HOURS = (6, 12)  # once: no app is observed for this long


def _bump(hour: float, centre: float, width: float) -> float:
    """A bell over the hour of day, wrapping at midnight."""
    d = (hour - centre + 12) % 24 - 12
    return math.exp(-0.5 * (d / width) ** 2)


# Archetype -> (weekday, weekend) shape: (base, [(height, centre hour, width hours), ...]).
SHAPES = {
    "business": ((0.20, [(0.80, 10.0, 1.8), (0.70, 15.0, 2.2)]), (0.15, [(0.25, 13.5, 3.0)])),
    "consumer": ((0.18, [(0.35, 12.5, 2.0), (0.80, 21.0, 2.2)]), (0.22, [(0.40, 14.5, 3.0), (0.60, 22.0, 2.5)])),
    "flat": ((0.55, [(0.40, 14.0, 4.0)]), (0.50, [(0.22, 16.0, 4.0)])),
}
ARCHETYPES = tuple(SHAPES)


def _raw_shape(archetype: str, weekend: bool, hour: float) -> float:
    base, bumps = SHAPES[archetype][weekend]
    return base + sum(h * _bump(hour, c, w) for h, c, w in bumps)


_PEAK = {a: max(_raw_shape(a, False, m / 12) for m in range(24 * 12)) for a in ARCHETYPES}


def shape(archetype: str, weekend: bool, hour: float) -> float:
    """The archetype's level at an hour of day, as a share of its weekday peak (1.0)."""
    return _raw_shape(archetype, weekend, hour) / _PEAK[archetype]


@dataclass(frozen=True)
class AppTruth:
    id: str
    archetype: str
    peak_gpus: float  # weekday peak at T0, in GPUs
    rps_per_gpu: float
    drift: float  # per week
    shift_hours: float  # its shape runs this much later than the archetype's
    priority: int
    profile: tuple[int, ...]  # the registered prior: deliberately off (level, or too flat)


@dataclass(frozen=True)
class TrafficPlan:
    """Everything that is true about the traffic, before noise."""

    step_minutes: int
    steps: int
    apps: tuple[AppTruth, ...]
    holidays: tuple[int, ...]  # day indices (weekdays) at weekend level
    bursts: tuple[tuple[str, int, int, float], ...]  # app, first step, steps, factor
    gaps: frozenset[tuple[str, int]]  # (app, step) never observed
    outage: tuple[int, int]  # first step, steps: no app observed
    outliers: dict[tuple[str, int], float]  # (app, step) -> glitch factor

    def missing(self, app: str, step: int) -> bool:
        first, length = self.outage
        return (app, step) in self.gaps or first <= step < first + length


def traffic_plan(seed: int = 0, weeks: int = 5, apps: int = 3, step_minutes: int = 60, gpus: int = 64) -> TrafficPlan:
    """The seeded truth: apps, holidays, bursts, gaps, glitches."""
    rng = random.Random(seed * 1_000_003 + 17)
    per_hour = 60 / step_minutes
    steps = round(weeks * 7 * 24 * per_hour)
    truths = []
    for i in range(apps):
        archetype = ARCHETYPES[i % len(ARCHETYPES)]
        peak = gpus * PEAK_SHARE / apps * rng.uniform(0.85, 1.15)
        shift = rng.uniform(-0.75, 0.75)
        off = rng.choice((rng.uniform(0.70, 0.85), rng.uniform(1.15, 1.30)))
        prior = [shape(archetype, False, h - shift) for h in range(24)]
        if i % 2:  # too flat: half way to its mean
            mean = sum(prior) / 24
            prior = [(p + mean) / 2 for p in prior]
        truths.append(
            AppTruth(
                id=f"rt-{i}",
                archetype=archetype,
                peak_gpus=peak,
                rps_per_gpu=float(rng.randint(50, 200)),
                drift=DRIFT[i % len(DRIFT)] * rng.uniform(0.8, 1.2),
                shift_hours=shift,
                priority=rng.choice((5, 7, 9)),
                profile=tuple(max(1, round(peak * off * p)) for p in prior),
            )
        )
    days = weeks * 7
    weekdays = [d for d in range(7 if days > 7 else 1, days) if d % 7 < 5]
    holidays = tuple(sorted(rng.sample(weekdays, min(len(weekdays), 1 if weeks < 4 else 2))))
    start = round(24 * per_hour)  # the first day is always whole: something to learn from
    bursts: list[tuple[str, int, int, float]] = []
    gaps: set[tuple[str, int]] = set()
    outliers: dict[tuple[str, int], float] = {}
    for app in truths:
        for _ in range(max(1, round(BURSTS_PER_WEEK * weeks))):
            length = max(1, round(rng.randint(2, 6) * per_hour))
            bursts.append((app.id, rng.randrange(start, steps - length), length, rng.uniform(1.5, 2.5)))
        before = len(gaps)
        while len(gaps) - before < GAPS_PER_WEEK * weeks:
            gaps.add((app.id, rng.randrange(start, steps)))
    outage_len = max(1, round(rng.randint(*OUTAGE_HOURS) * per_hour))
    outage = (rng.randrange(start, steps - outage_len), outage_len)
    for app in truths:
        mine = 0
        while mine < OUTLIERS_PER_WEEK * weeks:
            step = rng.randrange(start, steps)
            if (app.id, step) not in gaps and not outage[0] <= step < sum(outage) and (app.id, step) not in outliers:
                outliers[(app.id, step)] = rng.uniform(4.0, 6.0)
                mine += 1
    return TrafficPlan(step_minutes, steps, tuple(truths), holidays, tuple(bursts), frozenset(gaps), outage, outliers)


def expected_level(plan: TrafficPlan, app: AppTruth, step: int) -> float:
    """The noise-free demand in GPUs (fractional) at a step: shape, drift, holiday, burst."""
    hours = step * plan.step_minutes / 60
    day = int(hours // 24)
    weekend = day % 7 >= 5 or day in plan.holidays
    level = app.peak_gpus * shape(app.archetype, weekend, hours % 24 - app.shift_hours)
    level *= math.exp(app.drift * hours / (24 * 7))
    for who, first, length, factor in plan.bursts:
        if who == app.id and first <= step < first + length:
            level *= factor
    return level


def expected_demand(plan: TrafficPlan) -> dict[str, list[float]]:
    """Per app, the noise-free level of every step: what a perfect forecaster predicts."""
    return {app.id: [expected_level(plan, app, s) for s in range(plan.steps)] for app in plan.apps}


def traffic_records(plan: TrafficPlan, seed: int, pool: str = "default") -> list[Record]:
    """`app.registered` for every app, then one `traffic.observed` per app and observed step:
    requests_per_s = level x exp(N(0, NOISE_SIGMA^2)) x glitch, x rps_per_gpu."""
    rng = random.Random(seed * 1_000_003 + 29)
    out: list[Record] = []
    for app in plan.apps:
        out.append(
            (
                T0,
                "app.registered",
                {
                    "id": app.id,
                    "priority": app.priority,
                    "min_gpus": 1,
                    "max_gpus": math.ceil(3 * app.peak_gpus),
                    "rps_per_gpu": app.rps_per_gpu,
                    "profile": list(app.profile),
                },
                pool,
            )
        )
    offset = timedelta(seconds=min(60, plan.step_minutes * 30))
    for step in range(plan.steps):
        at = T0 + timedelta(minutes=step * plan.step_minutes) + offset
        for app in plan.apps:
            noise = math.exp(rng.gauss(0, NOISE_SIGMA))  # drawn even when missing: gaps leave the rest alone
            if plan.missing(app.id, step):
                continue
            level = expected_level(plan, app, step) * noise * plan.outliers.get((app.id, step), 1.0)
            out.append(
                (at, "traffic.observed", {"app": app.id, "requests_per_s": round(level * app.rps_per_gpu, 1)}, pool)
            )
    return out


def pool_record(
    gpus: int,
    step_minutes: int,
    horizon: int = 24,
    pool: str = "default",
    gpus_per_node: int | None = None,
    **extra: Any,
) -> Record:
    """The pool's `pool.configured` at T0 (by default nodes of 8 when 8 divides the pool)."""
    node = gpus_per_node or (8 if gpus % 8 == 0 else gpus)
    payload = {"gpus": gpus, "gpus_per_node": node, "horizon": horizon, "step_minutes": step_minutes, **extra}
    return (T0, "pool.configured", payload, pool)


def to_events(records: list[Record], prefix: str) -> list[dict[str, Any]]:
    """Contract envelopes in time order (stable), ids `<prefix>-<n>` in that order."""
    ordered = sorted(records, key=lambda r: r[0])
    return [
        envelope(kind, payload, at, f"{prefix}-{n}", pool=pool) for n, (at, kind, payload, pool) in enumerate(ordered)
    ]


def traffic_trace(
    seed: int = 0, weeks: int = 5, apps: int = 3, step_minutes: int = 60, gpus: int = 64
) -> list[dict[str, Any]]:
    """A pool, its apps and their observed traffic (docs/synthetic-data.md, "Traffic")."""
    plan = traffic_plan(seed, weeks, apps, step_minutes, gpus)
    return to_events([pool_record(gpus, step_minutes)] + traffic_records(plan, seed), f"t{seed}")

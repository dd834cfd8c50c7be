"""Seeded serving traffic observed at a chosen rate, for calibrating demand forecasts.

Three apps in three time zones, each a continuous demand process sampled when its metrics are
scraped: `hourly` (one observation an hour at a random minute), `irregular` (every 7-8 minutes
at jittered times, as a metrics pipeline pushing on its own clock) or `15s` (a Prometheus scrape
every 15 seconds). The same seed gives the same demand at every rate, so the rates differ only
in what is seen of it. Within an hour, demand wanders (a log Ornstein-Uhlenbeck process of
minutes) and the small app bursts for minutes at a time, so an hour's largest observation grows
with the rate, as the contract's demand (`traffic.observed`: the step's largest) does.

- `spiky`: small (peak about 10 GPUs), an evening consumer shape (UTC+9), bursts x1.5-3 of 1-10
  minutes about twice an hour, 35% wander;
- `smooth`: large (peak about 120 GPUs), office hours (UTC-5), 4% wander, a holiday (one weekday
  at 35%) in the third week;
- `api`: mid-sized (peak about 40 GPUs), flat-ish (UTC+1), 12% wander, a launch (x1.5 from then
  on, ramped over two hours) in the third week.
Every app grows 1-3% a week, misses reporting for 1-6 hours two or three times (gaps), and
reports about one glitch a day (a single observation x3-6).

    python -m gpualloc.generators.observation_rates --seed 1 --weeks 5 --rate irregular --out FILE
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpualloc.schemas.events import envelope

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday 00:00 UTC
HOUR = 3600.0
RATES = ("hourly", "irregular", "15s")
GPUS = 256


def _bump(h: float, centre: float, width: float) -> float:
    return math.exp(-0.5 * (((h - centre + 12) % 24 - 12) / width) ** 2)


def _office(h: float, weekend: bool) -> float:
    return 0.12 + 0.88 * (0.2 if weekend else 1.0) * max(_bump(h, 11, 2.5), 0.9 * _bump(h, 15, 2.2))


def _evening(h: float, weekend: bool) -> float:
    return (0.15 + 0.3 * _bump(h, 13, 3) + 0.65 * _bump(h, 21, 2)) * (1.15 if weekend else 1.0)


def _flat(h: float, weekend: bool) -> float:
    return (0.8 + 0.2 * math.cos(2 * math.pi * (h - 15) / 24)) * (0.85 if weekend else 1.0)


@dataclass
class App:
    id: str
    shape: Callable[[float, bool], float]
    utc_offset: int  # hours
    peak: float  # GPUs
    wander: float  # log sd of the within-hour process
    tau: float  # its time constant, seconds
    rps_per_gpu: float
    growth: float  # a week, log
    bursts_per_hour: float = 0.0
    holiday_day: int | None = None  # days since T0 (local)
    launch_at: float | None = None  # seconds since T0

    def level(self, t: float) -> float:
        """Demand in GPUs at `t` seconds since T0, before the within-hour process and bursts."""
        local = t / HOUR + self.utc_offset
        day = int(local // 24)
        base = self.peak * self.shape(local % 24, day % 7 >= 5) * math.exp(self.growth * t / (168 * HOUR))
        if day == self.holiday_day:
            base *= 0.35
        if self.launch_at is not None and t > self.launch_at:
            base *= 1.0 + 0.5 * min(1.0, (t - self.launch_at) / (2 * HOUR))
        return base


def fleet(rng: random.Random, weeks: int) -> list[App]:
    third = 14 + rng.randint(0, 4) if weeks >= 3 else None
    return [
        App("spiky", _evening, 9, rng.uniform(8, 12), 0.35, 300.0, 40.0, rng.uniform(0.01, 0.03), 2.0),
        App("smooth", _office, -5, rng.uniform(100, 140), 0.04, 1800.0, 200.0, rng.uniform(0.01, 0.03), 0.0, third),
        App(
            "api",
            _flat,
            1,
            rng.uniform(30, 50),
            0.12,
            600.0,
            120.0,
            rng.uniform(0.01, 0.03),
            0.0,
            launch_at=None if third is None else (third + 1) * 24 * HOUR + rng.uniform(8, 16) * HOUR,
        ),
    ]


def _times(rng: random.Random, rate: str, end: float) -> Iterator[float]:
    """Observation times in seconds since T0 at `rate`."""
    if rate == "hourly":
        for h in range(int(end // HOUR)):
            yield h * HOUR + rng.uniform(60, HOUR - 60)
    elif rate == "irregular":
        t = rng.uniform(0, 450)
        while t < end:
            yield t
            t += rng.uniform(420, 480)
    elif rate == "15s":
        t = rng.uniform(0, 15)
        while t < end:
            yield t
            t += 15.0
    else:
        raise ValueError(f"rate: one of {', '.join(RATES)} (got {rate!r})")


def multipliers(app: App, world: random.Random, steps: int) -> list[float]:
    """The within-hour process, from its start: the log multiplier of demand over the level
    every 15 seconds for `steps` steps (wander x bursts), drawn from `world`."""
    grid: list[float] = []
    x, burst_left, burst = 0.0, 0.0, 1.0
    keep = math.exp(-15.0 / app.tau)
    kick = app.wander * math.sqrt(1 - keep * keep)
    for _ in range(steps):
        x = x * keep + kick * world.gauss(0, 1)
        if burst_left <= 0 and world.random() < app.bursts_per_hour * 15 / HOUR:
            burst_left, burst = world.uniform(60, 600), world.uniform(1.5, 3.0)
        burst_left -= 15
        grid.append(x + (math.log(burst) if burst_left > 0 else 0.0))
    return grid


def observations(app: App, seed: int, rate: str, weeks: int) -> list[tuple[float, float]]:
    """(seconds since T0, requests/s). The demand process is drawn on a 15-second grid from
    `seed` alone, so every rate samples the same demand; the observation times, gaps and
    glitches come from the rate's own draws."""
    end = weeks * 168 * HOUR
    world = random.Random(f"{seed}:{app.id}:world")
    grid = multipliers(app, world, int(end // 15) + 1)
    gaps = [(s, s + world.uniform(1, 6) * HOUR) for s in (world.uniform(0, end) for _ in range(world.randint(2, 3)))]
    glitch_days = {day: world.uniform(0, 24 * HOUR) for day in range(weeks * 7)}
    seen = random.Random(f"{seed}:{app.id}:{rate}")
    out: list[tuple[float, float]] = []
    pending = dict(glitch_days)
    for t in _times(seen, rate, end):
        if any(a <= t < b for a, b in gaps):
            continue
        need = app.level(t) * math.exp(grid[int(t // 15)])
        day = int(t // (24 * HOUR))
        if day in pending and t >= day * 24 * HOUR + pending[day]:
            del pending[day]
            need *= world.uniform(3.0, 6.0)
        out.append((t, round(need * app.rps_per_gpu, 1)))
    return out


def rates_trace(seed: int, weeks: int = 5, rate: str = "irregular") -> list[dict[str, Any]]:
    """The trace's envelopes in time order: the pool, its three apps, their observations."""
    if rate not in RATES:
        raise ValueError(f"rate: one of {', '.join(RATES)} (got {rate!r})")
    apps = fleet(random.Random(f"{seed}:fleet"), weeks)
    made: list[tuple[float, str, dict[str, Any], str]] = [
        (0.0, "pool.configured", {"gpus": GPUS, "gpus_per_node": 8, "horizon": 48, "step_minutes": 60}, "pool")
    ]
    for app in apps:
        profile = [max(0, round(app.level((h + 0.5) * HOUR))) for h in range(24)]
        payload = {"id": app.id, "priority": 5, "min_gpus": 1, "max_gpus": GPUS // 2, "swap_cap": 4}
        made.append((0.0, "app.registered", {**payload, "rps_per_gpu": app.rps_per_gpu, "profile": profile}, app.id))
    for app in apps:
        for k, (t, rps) in enumerate(observations(app, seed, rate, weeks)):
            made.append((t, "traffic.observed", {"app": app.id, "requests_per_s": rps}, f"{app.id}:{k}"))
    made.sort(key=lambda m: m[0])
    return [
        envelope(kind, payload, T0 + timedelta(seconds=t), f"rates-{seed}-{rate}:{eid}", checked=False)
        for t, kind, payload, eid in made
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--weeks", type=int, default=5)
    p.add_argument("--rate", choices=RATES, default="irregular")
    p.add_argument("--out", required=True, help="JSON lines file to write")
    args = p.parse_args(argv)
    with open(args.out, "w") as f:
        for e in rates_trace(args.seed, args.weeks, args.rate):
            f.write(json.dumps(e, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()

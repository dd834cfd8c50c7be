"""Seeded multi-day traces of the pool's input events, for measuring how the allocator serves
real-time inference apps beside batch work.

Written from the event contract and public knowledge of serving and training workloads only, not
from the planner, simulator or forecasters it measures, so that it is not shaped by them:

- real-time apps with demand shapes that differ per app (a business-hours app with a steep
  morning ramp and a lunch dip, an evening consumer app, a flat-ish API with multi-hour bursts),
  observed 3-6 times an hour at irregular minutes with 5-15% multiplicative noise, one-observation
  sensor glitches (x3-6) and flash crowds of 1-3 hours; the apps together peak at 45-55% of the
  pool on an ordinary day, and each registers a deliberately rough hourly `profile`;
- batch jobs arriving through the working day with a night lull, whose real durations are heavy
  tailed against what their submitters declared (as the Philly, Helios and Alibaba trace studies
  report), enough to ask 1.4-1.7x the GPU-hours the apps leave over; about 5% are cancelled;
- a node down for 3-8 hours on day 2 and another drained for a few hours on day 3.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any

from gpualloc.schemas.events import envelope

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday 00:00 UTC: the trace's hours are hours of day and weekdays
HOUR = 3600  # seconds

Shape = Callable[[float, bool], float]  # (UTC hour of day, weekend) -> share of the app's peak


@dataclass(frozen=True)
class _Surge:
    """A stretch of raised demand (a flash crowd or a burst): ramps up, holds, ramps down."""

    start: float  # hours since T0
    end: float
    mult: float
    ramp_in: float  # hours
    ramp_out: float

    def factor(self, t: float) -> float:
        if not self.start < t < self.end:
            return 1.0
        rise = min(1.0, (t - self.start) / self.ramp_in, (self.end - t) / self.ramp_out)
        return 1.0 + (self.mult - 1.0) * rise


@dataclass
class _App:
    id: str
    shape: Shape
    weight: float  # its share of the apps' peak, before calibration
    surges: list[_Surge]
    noise: float  # multiplicative, one standard deviation
    min_gpus: int
    rps_per_gpu: float
    peak: float = 0.0  # GPUs at shape 1, set once the apps are calibrated to the pool

    def base(self, t: float) -> float:
        """Demand in GPUs without surges: what an ordinary day looks like."""
        return self.peak * self.shape(t % 24, _weekend(t))

    def demand(self, t: float) -> float:
        """Demand in GPUs at `t` hours since T0, surges included, before noise."""
        return self.base(t) * max((s.factor(t) for s in self.surges), default=1.0)


@dataclass(frozen=True)
class _Kind:
    """How a batch kind's submissions look: its share, block sizes, declared hours, priorities."""

    prefix: str
    share: float
    log2_size: float  # the block sizes it favours, as log2 of GPUs
    median_hours: float  # declared duration, lognormal
    sigma: float
    max_hours: float
    priorities: tuple[int, int]


KINDS = {
    "training": _Kind("train", 0.45, 2.5, 6.0, 0.9, 72.0, (2, 9)),
    "batch_inference": _Kind("infer", 0.40, 0.7, 2.0, 0.7, 12.0, (1, 6)),
    "quantization": _Kind("quant", 0.15, 1.2, 1.5, 0.5, 6.0, (3, 8)),
}
# Relative submission rate by UTC hour of a weekday: a night lull, the working day, an evening tail
ARRIVALS = (
    [0.15] * 6 + [0.4, 0.7] + [1.0, 1.2, 1.2, 1.0, 0.8, 1.0, 1.2, 1.1, 1.0, 0.9] + [0.6, 0.5, 0.4, 0.3, 0.2, 0.15]
)
WEEKEND_ARRIVALS = 0.35


def serving_trace(
    seed: int, days: int = 3, gpus: int = 32, gpus_per_node: int = 8, apps: int = 3, step_minutes: int = 60
) -> list[dict[str, Any]]:
    """The trace's envelopes in time order (ties in the order they were made), all from `seed`."""
    if days < 1 or apps < 0:
        raise ValueError(f"days, apps: need days >= 1 and apps >= 0 (got {days}, {apps})")
    if gpus_per_node < 1 or gpus % gpus_per_node:
        raise ValueError(f"gpus_per_node: must divide gpus ({gpus_per_node} does not divide {gpus})")
    rng = random.Random(seed)
    hours = days * 24
    made: list[tuple[int, str, dict[str, Any], str]] = []  # (seconds since T0, type, payload, event id)

    def add(at: int, kind: str, payload: dict[str, Any], eid: str) -> None:
        made.append((at, kind, payload, f"serving-{seed}:{eid}"))

    add(
        0,
        "pool.configured",
        {
            "gpus": gpus,
            "gpus_per_node": gpus_per_node,
            "horizon": 24,
            "step_minutes": step_minutes,
            "gpu_type": "h100-80gb",
            "gpu_memory_gb": 80.0,
        },
        "pool",
    )
    fleet = _apps(rng, apps, hours, gpus)
    for app in fleet:
        add(0, "app.registered", _registration(rng, app, gpus), f"app:{app.id}")
    for app in fleet:
        for k, (at, rps) in enumerate(_observations(rng, app, hours, days)):
            add(at, "traffic.observed", {"app": app.id, "requests_per_s": rps}, f"obs:{app.id}:{k}")
    left_over = sum(max(0.0, gpus - sum(max(a.min_gpus, a.demand(h + 0.5)) for a in fleet)) for h in range(hours))
    jobs = _jobs(rng, hours, gpus, gpus_per_node, step_minutes, rng.uniform(1.4, 1.7) * left_over)
    for at, job in jobs:
        add(at, "job.submitted", job, f"job:{job['id']}")
    for at, job_id in _cancellations(rng, jobs, hours, step_minutes):
        add(at, "job.cancelled", {"id": job_id, "detail": "cancelled by the submitter"}, f"cancel:{job_id}")
    for at, node, state, detail in _node_events(rng, days, gpus // gpus_per_node):
        add(at, "node.status", {"node": node, "state": state, "detail": detail}, f"node:{node}:{state}:{at}")
    made.sort(key=lambda m: m[0])  # stable: the pool and its apps stay first at T0
    return [envelope(kind, payload, T0 + timedelta(seconds=at), eid) for at, kind, payload, eid in made]


def _weekend(t: float) -> bool:
    return (int(t // 24) % 7) >= 5  # T0 is a Monday


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


def _circular(h: float, centre: float) -> float:
    """Hours from `centre` around the clock, in [-12, 12)."""
    return (h - centre + 12.0) % 24.0 - 12.0


def _business(rng: random.Random) -> Shape:
    """Office hours: most of the morning rise within 1-2 hours, a lunch dip, a slow evening fall."""
    ramp_at, steep = rng.uniform(7.0, 9.0), rng.uniform(2.5, 4.0)  # 10%-90% of the rise in 1.1-1.8 h
    fall_at, lunch_at, lunch = rng.uniform(17.0, 19.0), rng.uniform(11.8, 13.0), rng.uniform(0.25, 0.4)
    night = rng.uniform(0.08, 0.15)

    def shape(h: float, weekend: bool) -> float:
        day = _logistic(steep * (h - ramp_at)) * _logistic(-1.2 * (h - fall_at))
        day *= 1.0 - lunch * math.exp(-(((h - lunch_at) / 0.6) ** 2))
        return night + (1.0 - night) * day * (0.25 if weekend else 1.0)

    return shape


def _evening(rng: random.Random) -> Shape:
    """A consumer app: low at night, a daytime plateau, its peak in the evening (more at weekends)."""
    peak_at, width, night = rng.uniform(19.5, 21.5), rng.uniform(1.8, 2.6), rng.uniform(0.1, 0.18)

    def shape(h: float, weekend: bool) -> float:
        daytime = 0.35 * math.exp(-((_circular(h, 14.0) / 4.5) ** 2))
        evening = 0.65 * math.exp(-((_circular(h, peak_at) / width) ** 2))
        return (night + (1.0 - night) * (daytime + evening)) * (1.15 if weekend else 1.0)

    return shape


def _api(rng: random.Random) -> Shape:
    """A machine-to-machine API: flat-ish, a mild swing over the day."""
    swing, peak_at = rng.uniform(0.08, 0.15), rng.uniform(13.0, 17.0)

    def shape(h: float, weekend: bool) -> float:
        return (0.85 + swing * math.cos(2 * math.pi * _circular(h, peak_at) / 24)) * (0.85 if weekend else 1.0)

    return shape


STYLES: list[tuple[str, Callable[[random.Random], Shape]]] = [("office", _business), ("chat", _evening), ("api", _api)]


def _surges(
    rng: random.Random,
    count: int,
    hours: int,
    length: tuple[float, float],
    mult: tuple[float, float],
    ramp: tuple[float, float],
) -> list[_Surge]:
    out: list[_Surge] = []
    for _ in range(count):
        span = rng.uniform(*length)
        start = rng.uniform(0.0, max(0.0, hours - span))
        ramp_in = rng.uniform(*ramp)
        out.append(
            _Surge(start, start + span, rng.uniform(*mult), ramp_in, max(ramp_in, span * rng.uniform(0.25, 0.45)))
        )
    return out


def _apps(rng: random.Random, count: int, hours: int, gpus: int) -> list[_App]:
    """The apps, cycling through the styles, their peaks scaled so the sum of their ordinary
    demand (noise aside) tops out at 42-52% of the pool."""
    fleet: list[_App] = []
    for i in range(count):
        name, style = STYLES[i % len(STYLES)]
        # flash crowds: fast onset (5-15 minutes), 1-3 hours, 1.8-3x; one per app in 3 days, up to 2 in 4-7
        surges = _surges(rng, rng.randint(1, 1 + hours // 96), hours, (1.0, 3.0), (1.8, 3.0), (0.08, 0.25))
        if style is _api:  # bursts of batch-like clients: 2-4 hours, 1.6-2.2x, 2-3 in 3 days
            surges += _surges(rng, rng.randint(2, 2 + hours // 72), hours, (2.0, 4.0), (1.6, 2.2), (0.25, 0.5))
        fleet.append(
            _App(
                id=f"{name}-{i + 1}",
                shape=style(rng),
                weight=rng.uniform(0.6, 1.4),
                surges=surges,
                noise=rng.uniform(0.05, 0.15),
                min_gpus=rng.randint(1, 2),
                rps_per_gpu=float(rng.randrange(50, 201, 5)),
            )
        )
    together = max((sum(a.weight * a.shape(t % 24, _weekend(t)) for a in fleet) for t in _grid(hours)), default=0.0)
    scale = rng.uniform(0.42, 0.52) * gpus / together if together else 0.0
    for app in fleet:
        app.peak = app.weight * scale
    return fleet


def _grid(hours: int) -> list[float]:
    return [q / 4 for q in range(hours * 4)]  # quarter hours


def _registration(rng: random.Random, app: _App, gpus: int) -> dict[str, Any]:
    """`app.registered` with a rough prior: the weekday shape, biased, jittered, maybe an hour off."""
    bias, shift = rng.uniform(0.8, 1.25), rng.choice((-1, 0, 0, 1))
    profile = [
        max(0, round(app.peak * app.shape((h + 0.5 + shift) % 24, False) * bias * rng.uniform(0.8, 1.25)))
        for h in range(24)
    ]
    return {
        "id": app.id,
        "priority": rng.randint(4, 9),
        "min_gpus": app.min_gpus,
        "max_gpus": max(app.min_gpus, round(gpus / 3)),
        "swap_cap": rng.randint(2, 4),
        "rps_per_gpu": app.rps_per_gpu,
        "profile": profile,
    }


def _observations(rng: random.Random, app: _App, hours: int, days: int) -> list[tuple[int, float]]:
    """(seconds since T0, requests/s): 3-6 an hour at random minutes past it, noisy, with a
    day's one or two sensor glitches (one observation x3-6, never two side by side)."""
    obs: list[tuple[int, float]] = []
    for h in range(hours):
        for minute in sorted(rng.sample(range(1, 60), rng.randint(3, 6))):
            at = h * HOUR + minute * 60 + rng.randrange(60)
            obs.append((at, app.demand(at / HOUR) * max(0.3, rng.gauss(1.0, app.noise))))
    glitches: set[int] = set()
    for k in rng.sample(range(1, len(obs) - 1), min(len(obs) - 2, rng.randint(days, 2 * days))):
        if not glitches & {k - 1, k + 1}:
            glitches.add(k)
    return [
        (at, round(need * app.rps_per_gpu * (rng.uniform(3.0, 6.0) if k in glitches else 1.0), 1))
        for k, (at, need) in enumerate(obs)
    ]


def _jobs(
    rng: random.Random, hours: int, gpus: int, gpus_per_node: int, step_minutes: int, work: float
) -> list[tuple[int, dict[str, Any]]]:
    """`job.submitted` payloads, by arrival, until their real GPU-hours within the trace reach
    `work`; blocks are powers of two up to a node, and two nodes when that is at most half the pool."""
    sizes = [1 << k for k in range(gpus_per_node.bit_length()) if 1 << k <= min(gpus_per_node, gpus)]
    two_nodes = 2 * gpus_per_node
    if two_nodes & (two_nodes - 1) == 0 and two_nodes <= gpus // 2:
        sizes.append(two_nodes)
    rate = [ARRIVALS[h % 24] * (WEEKEND_ARRIVALS if _weekend(h) else 1.0) for h in range(hours)]
    cumulative = list(accumulate(rate))
    kinds = list(KINDS)
    step_hours = step_minutes / 60
    drawn: list[tuple[int, str, dict[str, Any]]] = []
    total = 0.0
    while total < work:
        at = bisect.bisect_right(cumulative, rng.uniform(0, cumulative[-1])) * HOUR + rng.randint(1, HOUR - 1)
        at = min(at, hours * HOUR - 1)
        kind = rng.choices(kinds, weights=[KINDS[k].share for k in kinds])[0]
        spec = KINDS[kind]
        size = rng.choices(sizes, weights=[_size_weight(spec, s, gpus_per_node) for s in sizes])[0]
        declared_hours = min(spec.max_hours, max(1.0, rng.lognormvariate(math.log(spec.median_hours), spec.sigma)))
        declared = max(1, round(declared_hours / step_hours))
        actual = max(1, round(declared * _overrun(rng)))
        total += size * min(actual * step_hours, hours - at / HOUR)
        drawn.append(
            (
                at,
                spec.prefix,
                {
                    "kind": kind,
                    "priority": rng.randint(*spec.priorities),
                    "gpus": size,
                    "duration": declared,
                    "actual_duration": actual,
                },
            )
        )
    drawn.sort(key=lambda d: d[0])
    return [(at, {"id": f"{prefix}-{n:04d}", **job}) for n, (at, prefix, job) in enumerate(drawn)]


def _size_weight(spec: _Kind, size: int, gpus_per_node: int) -> float:
    """Sizes near the kind's favourite; blocks spanning nodes half as often again."""
    weight = math.exp(-((math.log2(size) - spec.log2_size) ** 2) / 2)
    return weight * (0.5 if size > gpus_per_node else 1.0)


def _overrun(rng: random.Random) -> float:
    """Real over declared duration: most within +-30% (lognormal, sigma 0.15), 12% stop much
    earlier (crashes, early stopping: 0.05-0.5x), 7% run on 3-10x (a Pareto tail, capped)."""
    r = rng.random()
    if r < 0.12:
        return rng.uniform(0.05, 0.5)
    if r < 0.19:
        return min(10.0, 3.0 * rng.paretovariate(1.5))
    return rng.lognormvariate(0.0, 0.15)


def _cancellations(
    rng: random.Random, jobs: list[tuple[int, dict[str, Any]]], hours: int, step_minutes: int
) -> list[tuple[int, str]]:
    """About 5% of the jobs are cancelled inside the trace: alternately 2-30 minutes after
    submission (likely still queued) and 30-80% into their real run (likely running)."""
    wanted = round(0.05 * len(jobs)) if len(jobs) >= 10 else min(1, len(jobs))
    out: list[tuple[int, str]] = []
    for at, job in rng.sample(jobs, len(jobs)):
        if len(out) == wanted:
            break
        if len(out) % 2 == 0:
            when = at + rng.randint(120, 1800)
        else:
            when = at + max(60, round(job["actual_duration"] * step_minutes * 60 * rng.uniform(0.3, 0.8)))
        if when < hours * HOUR:
            out.append((when, job["id"]))
    return out


def _node_events(rng: random.Random, days: int, nodes: int) -> list[tuple[int, int, str, str]]:
    """A node down for 3-8 hours on day 2 (day 1 of a one-day trace), and with two nodes or more
    another drained for 2-5 hours on day 3 (the last day of a shorter trace)."""
    out: list[tuple[int, int, str, str]] = []
    down = rng.randrange(nodes)
    start = (min(1, days - 1) * 24 + rng.uniform(1.0, 15.0)) * HOUR
    back = start + rng.uniform(3.0, 8.0) * HOUR
    out += [
        (round(start), down, "down", "GPU fell off the bus (Xid 79): node fenced"),
        (round(back), down, "up", "repaired"),
    ]
    if nodes >= 2:
        drained = rng.choice([n for n in range(nodes) if n != down])
        start = (min(2, days - 1) * 24 + rng.uniform(8.0, 16.0)) * HOUR
        back = start + rng.uniform(2.0, 5.0) * HOUR
        out += [(round(start), drained, "drained", "firmware update"), (round(back), drained, "up", "updated")]
    return out

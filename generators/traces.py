"""Seeded multi-day traces of contract events: diurnal real-time traffic, job arrivals that
follow the working day, declared durations and the actual ones (jobs end early or late)."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from typing import Any

from gpualloc.schemas.events import envelope

T0 = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday
KINDS = (("training", 0.5, (3, 9)), ("batch_inference", 0.3, (2, 8)), ("quantization", 0.2, (1, 6)))
SIZES = ((1, 0.4), (2, 0.25), (4, 0.2), (8, 0.15))


def diurnal(hour: float) -> float:
    """0..1: low at night, a peak in the afternoon."""
    return 0.5 - 0.5 * math.cos(2 * math.pi * (hour - 3) / 24)


def generate_trace(
    gpus: int = 64,
    days: int = 7,
    jobs: int = 1000,
    apps: int = 3,
    seed: int = 0,
    gpus_per_node: int = 8,
    step_minutes: int = 60,
) -> list[dict[str, Any]]:
    """Events (envelope dicts) in time order. Real-time peaks add up to about a third of the
    pool; batch demand is about one and a half times what is left."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []

    def emit(at: datetime, kind: str, payload: dict[str, Any]) -> None:
        out.append(envelope(kind, payload, at, f"s{seed}-{len(out)}"))

    emit(
        T0,
        "pool.configured",
        {
            "gpus": gpus,
            "gpus_per_node": gpus_per_node,
            "horizon": 24,
            "step_minutes": step_minutes,
            "time_decay": 0.95,
            "realtime_penalty": 8.0,
            "swap_cap": 2,
        },
    )
    peaks = []
    for a in range(apps):
        peak = max(2, round(gpus / 3 / apps * rng.uniform(0.7, 1.3)))
        peaks.append(peak)
        profile = [max(1, round(peak * (0.25 + 0.75 * diurnal(h)))) for h in range(24)]
        emit(
            T0,
            "app.registered",
            {
                "id": f"rt-{a}",
                "priority": rng.choice([3, 5, 7, 9]),
                "min_gpus": 1,
                "max_gpus": peak + 2,
                "rps_per_gpu": 50.0,
                "profile": profile,
            },
        )
    steps_per_day = 24 * 60 // step_minutes
    weights = [0.3 + diurnal(s * step_minutes / 60) for s in range(steps_per_day * days)]
    arrivals = sorted(rng.choices(range(len(weights)), weights=weights, k=jobs))
    per_step: dict[int, int] = {}
    for s in arrivals:
        per_step[s] = per_step.get(s, 0) + 1
    n = 0
    for step in range(steps_per_day * days):
        start = T0 + timedelta(minutes=step * step_minutes)
        for a, peak in enumerate(peaks):
            hour = (step * step_minutes / 60) % 24
            level = peak * (0.25 + 0.75 * diurnal(hour)) * rng.uniform(0.85, 1.15)
            emit(
                start + timedelta(minutes=1),
                "traffic.observed",
                {"app": f"rt-{a}", "requests_per_s": round(max(0.0, level) * 50.0, 1)},
            )
        for _ in range(per_step.get(step, 0)):
            kind, prio_range = _pick_kind(rng)
            size = rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]
            duration = rng.randint(1, 12)
            actual = max(1, round(duration * rng.uniform(0.6, 1.4)))
            emit(
                start + timedelta(minutes=rng.randint(2, step_minutes - 1)),
                "job.submitted",
                {
                    "id": f"job-{n}",
                    "kind": kind,
                    "priority": rng.randint(*prio_range),
                    "gpus": size,
                    "duration": duration,
                    "actual_duration": actual,
                },
            )
            n += 1
    return sorted(out, key=lambda e: e["occurred_at"])


def _pick_kind(rng: random.Random) -> tuple[str, tuple[int, int]]:
    kind, _, prio = rng.choices(KINDS, weights=[w for _, w, _ in KINDS])[0]
    return kind, prio

"""A trace read for the runs: its events by step, how long a run may go, what each information mode sees, demand."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from gpualloc.schemas.events import Envelope
from gpualloc.schemas.features import FEATURES
from gpualloc.solvers.planner.records import PoolConfig

# A trace's events, (envelope, payload), and the same with each one's step in front; the
# envelope's type decides the payload's model (Any here).
Events = list[tuple[Envelope, Any]]
Timed = list[tuple[int, Envelope, Any]]

# What a run told part of the truth knows of each job, by the name its mode takes ("gpus" ->
# "gpus-known"): the rest of a job given by its features is forecast, and traffic comes as it comes
KNOWN = {"gpus": ("gpus",), "durations": ("duration",), "sizes": ("gpus", "duration")}


def drain_cap(timed: Timed, last: int, gpus: int) -> int:
    """Steps a whole-trace run may take: past the last event, twice the longest declared
    duration and the steps the pool's `gpus` take to run all the trace's work end to end, so an
    overloaded trace's backlog can drain (jobs that cannot by then are reported as never started
    or unfinished)."""
    jobs = [p for _, env, p in timed if env.type == "job.submitted"]
    longest = max((max(p.duration or 1, p.actual_duration or 1) for p in jobs), default=0)
    work = sum((p.gpus or 1) * max(p.duration or 1, p.actual_duration or 1) for p in jobs)
    return last + 1 + 2 * longest + math.ceil(work / gpus)


def informed(timed: Timed, mode: str | None, config: PoolConfig) -> Timed:
    """The events as a run with `mode`'s information meets them: (delivery step, envelope,
    payload). Forecast: sizes withheld from jobs that give features. `<part>-known` (`KNOWN`):
    the forecast run's, but every job with its true GPUs, duration or both. Oracle: true sizes,
    and traffic delivered a window (horizon - 1 steps) before the step it is for."""
    if mode is None:
        return timed
    known = KNOWN["sizes"] if mode == "oracle" else KNOWN.get(mode.removesuffix("-known"), ())
    out = []
    for step, env, p in timed:
        if env.type == "job.submitted":
            used = p.actual_used
            truth = {"gpus": used.gpus if used and used.gpus else p.gpus, "duration": p.actual_duration or p.duration}
            withheld = (
                {"gpus": None, "duration": None} if mode != "oracle" and p.features and p.kind in FEATURES else {}
            )
            p = p.model_copy(update=withheld | {field: truth[field] for field in known})
        elif env.type == "traffic.observed" and mode == "oracle":
            step = max(0, step - config.horizon + 1)
        out.append((step, env, p))
    return sorted(out, key=lambda e: e[0])  # stable


def planned_at(timed: Timed, factor: float) -> Timed:
    """The events with every job told its true GPUs and planned at `factor` x its true duration
    (rounded up); it still runs its true duration, so `factor` 1 is planning at the truth."""
    out = []
    for step, env, p in timed:
        if env.type == "job.submitted":
            used = p.actual_used
            true = p.actual_duration or p.duration
            if true is not None:
                gpus = used.gpus if used and used.gpus else p.gpus
                planned = math.ceil(true * factor)
                p = p.model_copy(update={"gpus": gpus, "duration": planned, "actual_duration": true})
        out.append((step, env, p))
    return out


def observed(
    timed: Timed, steps: int, origin: datetime, step_length: timedelta, step_minutes: int
) -> tuple[dict[str, list[int]], dict[str, float], dict[tuple[str, int], list[tuple[float, int]]]]:
    """Per app, demand per step as observed (its largest observation, held flat between
    observations); priorities; and per (app, step) observed within the step, its demand from each
    minute on (`Simulation.within`)."""
    demand: dict[str, list[int]] = {}
    rps: dict[str, float] = {}
    priorities: dict[str, float] = {}
    seen: dict[tuple[str, int], list[tuple[float, int]]] = {}  # (app, step) -> (minute, GPUs) in time order
    for step, env, p in timed:
        if env.type == "app.registered":
            demand.setdefault(p.id, [0] * steps)
            rps[p.id] = p.rps_per_gpu
            priorities[p.id] = p.priority
        elif env.type == "job.submitted":
            priorities[p.id] = p.priority
        elif env.type == "traffic.observed" and p.app in demand and step < steps:
            gpus = p.gpus_needed(rps[p.app])
            demand[p.app][step] = max(demand[p.app][step], gpus)
            minute = (env.occurred_at - origin - step * step_length) / step_length * step_minutes
            seen.setdefault((p.app, step), []).append((max(0.0, minute), gpus))
    for curve in demand.values():
        for s in range(1, steps):
            if curve[s] == 0:
                curve[s] = curve[s - 1]
    within: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for app in demand:
        last: int | None = None  # the last observation before the step at hand
        for step in range(steps):
            points = sorted(seen.get((app, step), ()))
            if points:
                carried = [] if points[0][0] == 0 or last is None else [(0.0, last)]
                within[(app, step)] = carried + ([(0.0, points[0][1])] if last is None else []) + points
                last = points[-1][1]
            elif last is not None:
                within[(app, step)] = [(0.0, last)]
    return demand, priorities, within

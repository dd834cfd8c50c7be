"""Tiny scenario builders, input events and a compact grid notation for hand-made cases."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from gpualloc.schemas import Scenario
from gpualloc.solvers import compile_scenario

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday: the pools of the interpreter's tests start here


def ev(kind: str, payload: dict, minutes: float = 0, ref=None):
    """An input event of pool `default`, `minutes` after T0, validated as the contract says."""
    from gpualloc.schemas.events import parse_event
    from gpualloc.solvers.planner.effects import Event

    env, p = parse_event(
        {
            "event_id": f"e-{kind}-{minutes}-{ref}",
            "type": kind,
            "pool": "default",
            "occurred_at": (T0 + timedelta(minutes=minutes)).isoformat(),
            "payload": payload,
        }
    )
    return Event(env.type, p, env.occurred_at, ref)


def batch(
    id: str,
    gpus: int,
    duration: int,
    *,
    priority: float = 1,
    kind: str = "training",
    arrival: int = 0,
    running: tuple[list[int], int] | None = None,
) -> dict:
    job = {"id": id, "kind": kind, "priority": priority, "gpus": gpus, "duration": duration, "arrival": arrival}
    if running is not None:
        job["running"] = {"gpus": running[0], "remaining": running[1]}
    return job


def app(id: str, demand: list[int], *, priority: float = 1, **extra) -> dict:
    return {"id": id, "kind": "realtime", "priority": priority, "demand": demand, **extra}


def scenario_dict(gpus: int, horizon: int, jobs: list[dict], **extra) -> dict:
    return {"name": "hand", "gpus": gpus, "horizon": horizon, "jobs": jobs, **extra}


def make(gpus: int, horizon: int, jobs: list[dict], **extra):
    """(Scenario, Problem) of a hand-made scenario."""
    sc = Scenario.model_validate(scenario_dict(gpus, horizon, jobs, **extra))
    return sc, compile_scenario(sc)


def grid(*rows: str) -> list[list[str | None]]:
    """One string per GPU, one character per step: a job id of one letter, or '.' for idle."""
    return [[None if c == "." else c for c in row] for row in rows]


def show(g: list[list[str | None]]) -> list[str]:
    """The inverse of `grid`, for readable assertion failures."""
    return ["".join("." if c is None else c for c in row) for row in g]

"""Running jobs past what their plan expected: a job whose `job.completed` is late by more than its
forecast allowed (past its forecast interval's upper bound) or, with a declared duration, past
that duration. `gpualloc status` lists them, so an operator sees a job that may never report its
end before it holds its GPUs for long (a `time_limit` ends such a job; without one it runs on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpualloc.solvers.planner.records import JobSpec, Running


def overrun(job_id: str, spec: JobSpec, start: int, now: int) -> dict[str, Any] | None:
    """`job_id` (started at step `start`; `now`: the step to commit next, so it has run `now - start`
    steps) when it has run past its forecast interval's upper bound (a forecast duration) or past
    its planned duration (a declared one), with a line saying so; None when it has not."""
    ran, planned, f = now - start, spec.duration, spec.forecast
    forecast = f is not None and "duration" in f.forecast
    bound = round(f.high, 1) if f is not None and forecast else planned
    if ran <= bound:
        return None
    past = f"past its forecast interval's upper bound {bound:g}" if forecast else "past its declared duration"
    limit = (
        f"; failed by its time limit at step {start + spec.time_limit}"
        if spec.time_limit is not None
        else "; no time limit: it runs until it is reported ended"
    )
    return {
        "id": job_id,
        "ran": ran,
        "planned": planned,
        "bound": bound,
        "time_limit": spec.time_limit,
        "line": f"{job_id}: running {ran} steps, planned {planned} ({past}){limit}",
    }


def overruns(running: Mapping[str, Running], now: int) -> list[dict[str, Any]]:
    """Every running job past its plan (`overrun`), furthest past first."""
    out = [o for job_id, r in running.items() if (o := overrun(job_id, r.spec, r.start, now)) is not None]
    return sorted(out, key=lambda o: (o["bound"] - o["ran"], o["id"]))


LISTED = 1_000  # jobs past their plan listed in `status --json` (the count is always there)
SHOWN = 20  # listed in the text


def past_plan(running: Mapping[str, Running], now: int) -> dict[str, Any]:
    """`status`'s fields for the running jobs past their plan: the first `LISTED` and how many."""
    over = overruns(running, now)
    return {"past_plan": over[:LISTED], "past_plan_total": len(over)}


def past_plan_lines(status: Mapping[str, Any]) -> list[str]:
    """`status`'s text for them: a line each (the first `SHOWN`); nothing when none is."""
    total, over = status.get("past_plan_total", 0), status.get("past_plan", [])
    if not total:
        return []
    more = [f"  ... and {total - SHOWN:,} more (`--json` lists {LISTED:,})"] if total > SHOWN else []
    return ["", f"running past their plan ({total:,}):"] + [f"  {o['line']}" for o in over[:SHOWN]] + more

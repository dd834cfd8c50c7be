"""A public trace's jobs as contract events, the part every converter shares (Pollux, openb, the
job tables): the `pool.configured` that opens the trace at `traces.T0`, then each job's
`job.submitted` at its time, every envelope's id `<source>-<n>` in order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable

from gpualloc.generators.traces import T0
from gpualloc.schemas.events import envelope


def job_events(
    source: str, gpus: int, jobs: Iterable[tuple[float, dict[str, Any]]], step_minutes: int = 10, gpus_per_node: int = 8
) -> list[dict[str, Any]]:
    """The pool of `gpus` (nodes of `gpus_per_node`, `step_minutes` steps) at T0, then each of
    `jobs` (seconds from T0, its `job.submitted` payload)."""
    pool = {
        "gpus": gpus,
        "gpus_per_node": gpus_per_node,
        "horizon": 24,
        "step_minutes": step_minutes,
        "time_decay": 0.99,
        "realtime_penalty": 8.0,
        "swap_cap": 2,
    }
    out = [envelope("pool.configured", pool, T0, f"{source}-0")]
    for seconds, payload in jobs:
        out.append(envelope("job.submitted", payload, T0 + timedelta(seconds=seconds), f"{source}-{len(out)}"))
    return out

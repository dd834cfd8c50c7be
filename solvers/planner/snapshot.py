"""A pool's state as plain JSON data and back: what the state topic stores, so a restarted agent
resumes where the last committed transaction left it.

Pure and versioned (`VERSION`, carried by the snapshot message). A snapshot of another version
or a damaged one raises `SnapshotError` (the agent then rebuilds the state by replaying its
ledger from the start). GPU sets are hex
strings of their bitmasks, so a 1,024-GPU pool costs a few hundred bytes per holder.
"""

from __future__ import annotations

import base64
import zlib
from datetime import datetime
from typing import Any, Callable

import orjson

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.schemas.config import ForecastSettings
from gpualloc.schemas.features import FEATURES
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.state import AppSpec, JobSpec, Planner, PoolConfig
from gpualloc.solvers.problem import Problem

VERSION = 3  # 2: the forecasters' state, the pool's GPU type, jobs' features; 3: apps' held GPUs in hex
READABLE = (2, 3)  # a version 2 snapshot reads as it was written (its held masks are JSON integers)


class SnapshotError(ValueError):
    """A snapshot this release cannot restore (another version, or damaged)."""


def _hex(mask: int) -> str:
    """A GPU set as the hex of its bitmask: text whatever the pool's size (JSON numbers are not);
    -1, an app's "never committed", is "-1", which `int(text, 16)` reads back."""
    return format(mask, "x")


def _job(spec: JobSpec) -> list:
    features = spec.features.model_dump(mode="json") if spec.features is not None else None
    return [spec.kind, spec.priority, spec.gpus, spec.duration, spec.submitted, spec.requeue, features]


def _spec(job_id: str, data: list) -> JobSpec:
    kind, priority, gpus, duration, submitted, requeue, features = data
    return JobSpec(job_id, kind, priority, gpus, duration, submitted, requeue,
                   FEATURES[kind].model_validate(features) if features is not None else None)


def dump_planner(planner: Planner) -> dict[str, Any]:
    c = planner.config
    return {
        "config": [c.gpus, c.gpus_per_node, c.horizon, c.step_minutes, c.time_decay, c.realtime_penalty, c.swap_cap,
                   c.gpu_type, c.gpu_memory_gb, c.starvation_steps],  # a snapshot without the last reads as None
        "now": planner.now, "week_minute": planner.week_minute, "forecasters": planner.forecasts.dump(),
        "queued": {job_id: _job(spec) for job_id, spec in planner.queued.items()},
        "running": {job_id: [_job(spec), _hex(mask), start] for job_id, (spec, mask, start) in planner.running.items()},
        "apps": {app_id: [a.priority, a.min_gpus, a.max_gpus, a.swap_cap, a.profile, a.rps_per_gpu,
                          [[step, gpus] for step, gpus in a.observed.items()], _hex(a.held)]
                 for app_id, a in planner.apps.items()},
        "down": _hex(planner.down), "drained": _hex(planner.drained), "committed": _hex(planner.committed),
        "busy": None if planner.busy is None else [_hex(mask) for mask in planner.busy],
    }


def load_planner(data: dict[str, Any], scheduler: Callable[[Problem], Schedule],
                 forecast: ForecastSettings = ForecastSettings()) -> Planner:
    planner = Planner(PoolConfig(*data["config"]), now=data["now"], scheduler=scheduler,
                      forecasts=Forecasters.load(data["forecasters"], forecast), week_minute=data["week_minute"])
    planner.queued = {job_id: _spec(job_id, job) for job_id, job in data["queued"].items()}
    planner.running = {job_id: (_spec(job_id, job), int(mask, 16), start)
                       for job_id, (job, mask, start) in data["running"].items()}
    for app_id, (priority, lo, hi, cap, profile, rps, observed, held) in data["apps"].items():
        held = int(held, 16) if isinstance(held, str) else held  # version 2: a JSON integer
        planner.apps[app_id] = AppSpec(app_id, priority, lo, hi, cap, profile, rps, {s: g for s, g in observed}, held)
    planner.down, planner.drained = int(data["down"], 16), int(data["drained"], 16)
    planner.committed = int(data["committed"], 16)
    busy = data.get("busy")  # absent from snapshots made before arrivals were inserted: a fresh plan then
    planner.busy = None if busy is None else [int(mask, 16) for mask in busy]
    return planner


def dump_pool(pool: Pool) -> dict[str, Any]:
    """The interpreter's state; its pending events are not kept (a snapshot follows a commit,
    and a pool commits only once configured, when nothing is pending)."""
    return {"origin": pool.origin.isoformat() if pool.origin else None, "passes": pool.passes,
            "planner": dump_planner(pool.planner) if pool.planner else None}


def load_pool(data: dict[str, Any], pool: Pool) -> Pool:
    """`pool` (fresh, with the agent's scheduler and clock settings) given the snapshot's state
    (the snapshot message carries the `VERSION` it was written with)."""
    try:
        pool.origin = datetime.fromisoformat(data["origin"]) if data["origin"] else None
        pool.passes = data["passes"]
        pool.planner = load_planner(data["planner"], pool.scheduler, pool.forecast) if data["planner"] else None
        if pool.planner is not None:
            pool.planner.by_arrival = pool.by_arrival
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"snapshot: damaged ({type(e).__name__}: {e})") from None
    return pool


def dump_schedule(schedule: Schedule) -> dict[str, Any]:
    """A schedule (an adopted full-mode plan, recorded so replays reuse it) as JSON data."""
    return {"batch": {job_id: [start, _hex(mask)] for job_id, (start, mask) in schedule.batch.items()},
            "realtime": {app_id: [_hex(m) for m in masks] for app_id, masks in schedule.realtime.items()}}


def load_schedule(data: dict[str, Any]) -> Schedule:
    return Schedule({job_id: (start, int(mask, 16)) for job_id, (start, mask) in data["batch"].items()},
                    {app_id: [int(m, 16) for m in masks] for app_id, masks in data["realtime"].items()})


def pack(data: Any) -> str:
    """JSON data compressed into text (zlib, base64) for a message that must stay small."""
    return pack_json(orjson.dumps(data))


def pack_json(raw: bytes) -> str:
    """`pack` of data already serialized (compressing releases the GIL: a thread can do it)."""
    return base64.b64encode(zlib.compress(raw, 1)).decode("ascii")  # level 6: 3x the time, 8% smaller


def unpack(text: str) -> Any:
    try:
        return orjson.loads(zlib.decompress(base64.b64decode(text)))
    except (ValueError, zlib.error) as e:
        raise SnapshotError(f"snapshot: damaged ({e})") from None

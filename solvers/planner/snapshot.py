"""A pool's state as plain JSON data and back: what the state topic stores, so a restarted agent
resumes where the last committed transaction left it; and an adopted full-mode plan as the
ledger records it.

Pure and versioned (`VERSION`, carried by the snapshot message). A snapshot of a version not in
`READABLE` or a damaged one raises `SnapshotError` (the agent then rebuilds the state by
replaying its ledger from the start). No GPU set is a JSON number (a pool's masks outgrow 64
bits): in snapshots they are hex strings of their bitmasks (at most 1,024 characters at 4,096
GPUs, and runs of zeros compress to nothing), the GPUs busy per step are stored once per run of
equal steps; in ledger schedules they are runs of GPUs (`gpu_runs.flat_runs`), a few bytes a run.
"""

from __future__ import annotations

import base64
import zlib
from datetime import datetime
from typing import Any, Callable

import orjson

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import JobForecast
from gpualloc.schemas.features import FEATURES
from gpualloc.schemas.gpu_runs import flat_runs, mask_of_flat
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, AppState, JobSpec, PoolConfig, Running, Seen
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.release import RULES
from gpualloc.solvers.value_models import GPU_STEPS

# 2: the forecasters' state, the pool's GPU type, jobs' features; 3: apps' held GPUs in hex, the GPUs the
# current plan holds once per run of steps; 4: the default time limit a configuration replaced, and when;
# 5: node agents known alive (when each was last heard, the starts not yet bound), the liveness bounds
VERSION = 5
READABLE = (2, 3, 4, 5)  # version 2 reads as written: held GPUs JSON integers, the plan's GPUs a hex mask a step


class SnapshotError(ValueError):
    """A snapshot this release cannot restore (another version, or damaged)."""


def _hex(mask: int) -> str:
    """A GPU set as the hex of its bitmask: text whatever the pool's size (JSON numbers are not);
    -1, an app's "never committed", is "-1", which `int(text, 16)` reads back."""
    return format(mask, "x")


def _job(spec: JobSpec) -> list[Any]:
    features = spec.features.model_dump(mode="json") if spec.features is not None else None
    f = spec.forecast
    forecast = (
        None
        if f is None
        else [f.gpus, f.duration, f.median, f.low, f.high, f.coverage, f.quantile, list(f.forecast), f.peak_memory_gb]
    )
    fields = [spec.kind, spec.priority, spec.gpus, spec.duration, spec.submitted, spec.requeue, features, forecast]
    return fields if spec.time_limit is None else [*fields, spec.time_limit]


def _spec(job_id: str, data: list[Any]) -> JobSpec:
    kind, priority, gpus, duration, submitted, requeue, features, *rest = data
    forecast = rest[0] if rest else None  # absent from snapshots before forecasts were kept
    time_limit = rest[1] if len(rest) > 1 else None  # absent: no limit
    return JobSpec(
        job_id,
        kind,
        priority,
        gpus,
        duration,
        submitted,
        requeue,
        FEATURES[kind].model_validate(features) if features is not None else None,
        None if forecast is None else _forecast(forecast),
        time_limit,
    )


def _forecast(data: list[Any]) -> JobForecast:
    gpus, duration, median, low, high, coverage, quantile, made, peak = data
    return JobForecast(gpus, duration, median, low, high, coverage, quantile, tuple(made), peak)


def dump_planner(planner: Planner) -> dict[str, Any]:
    c = planner.config
    return {
        "config": [
            c.gpus,
            c.gpus_per_node,
            c.horizon,
            c.step_minutes,
            c.time_decay,
            c.realtime_penalty,
            c.swap_cap,
            c.gpu_type,
            c.gpu_memory_gb,
            c.starvation_steps,
            c.time_limit,
            c.previous_time_limit,
            None if c.time_limit_since is None else c.time_limit_since.isoformat(),
            c.node_silence_seconds,
            c.bind_confirm_seconds,
            c.bind_requeue_seconds,
            *_added(c),
        ],  # a snapshot without the last ones reads them as their defaults
        "now": planner.now,
        "week_minute": planner.week_minute,
        "forecasters": planner.forecasts.dump(),
        "queued": {job_id: _job(spec) for job_id, spec in planner.queued.items()},
        "running": {job_id: [_job(r.spec), _hex(r.mask), r.start] for job_id, r in planner.running.items()},
        "apps": {
            app_id: [
                a.spec.priority,
                a.spec.min_gpus,
                a.spec.max_gpus,
                a.spec.swap_cap,
                a.spec.profile,
                a.spec.rps_per_gpu,
                [[step, gpus] for step, gpus in a.observed.items()],
                _hex(a.held),
                _hex(a.before),
                None if a.latest is None else list(a.latest),
                _hex(a.granted),
            ]
            for app_id, a in planner.apps.items()
        },
        "down": _hex(planner.down),
        "drained": _hex(planner.drained),
        "committed": _hex(planner.committed),
        "busy": None if planner.busy is None else [[n, _hex(mask)] for n, mask in _runs_over_steps(planner.busy)],
        "watch": [
            [[node, at, interval] for node, (at, interval) in sorted(planner.heard.items())],
            _hex(planner.unheard),
            {job_id: [since, _hex(nodes)] for job_id, (since, nodes) in planner.unbound.items()},
            planner.clock,
            planner.watched_since,
        ],
    }


def load_planner(
    data: dict[str, Any],
    scheduler: Callable[[Problem], Schedule],
    forecast: ForecastSettings = ForecastSettings(),
    by_arrival: bool = False,
    replan_work: int = 0,
    rules: int = RULES,
) -> Planner:
    """The planner a snapshot holds, planning with the hot path given (`scheduler`, `by_arrival`,
    `replan_work`: the run's settings, which a snapshot does not keep)."""
    planner = Planner(
        _config(data["config"]),
        now=data["now"],
        scheduler=scheduler,
        forecasts=Forecasters.load(data["forecasters"], forecast),
        week_minute=data["week_minute"],
        by_arrival=by_arrival,
        replan_work=replan_work,
        rules=rules,
    )
    planner.queued = {job_id: _spec(job_id, job) for job_id, job in data["queued"].items()}
    planner.running = {
        job_id: Running(_spec(job_id, job), int(mask, 16), start)
        for job_id, (job, mask, start) in data["running"].items()
    }
    for app_id, (priority, lo, hi, cap, profile, rps, observed, held, *rest) in data["apps"].items():
        held = int(held, 16) if isinstance(held, str) else held  # version 2: a JSON integer
        before = rest[0] if rest else held  # absent before reactive grants: its set is what the step began with
        before = int(before, 16) if isinstance(before, str) else before
        latest = Seen(*rest[1]) if len(rest) > 1 and rest[1] is not None else None  # absent before releases
        granted = int(rest[2], 16) if len(rest) > 2 else 0
        spec = AppSpec(app_id, priority, lo, hi, cap, profile, rps)
        planner.apps[app_id] = AppState(spec, {s: g for s, g in observed}, held, before, latest, granted)
    planner.down, planner.drained = int(data["down"], 16), int(data["drained"], 16)
    planner.committed = int(data["committed"], 16)
    busy = data.get("busy")  # absent from snapshots made before arrivals were inserted: a fresh plan then
    if busy is not None:  # runs [steps, hex]; version 2: a hex mask per step
        busy = _steps([[1, m] if isinstance(m, str) else m for m in busy], lambda mask: int(mask, 16))
    planner.busy = busy
    if "watch" in data:  # absent before version 5: no node agent had reported
        heard, unheard, unbound, clock, watched_since = data["watch"]
        planner.heard = {node: (at, interval) for node, at, interval in heard}
        planner.unheard = int(unheard, 16)
        planner.unbound = {job_id: (since, int(nodes, 16)) for job_id, (since, nodes) in unbound.items()}
        planner.clock, planner.watched_since = clock, watched_since
    return planner


def _added(c: PoolConfig) -> list[Any]:
    """The configuration's fields added last (`value_model`, `reserved_jobs`, `interconnect`), up to
    the last one not at its default: a snapshot of a pool that sets none is written as before them."""
    added: list[Any] = [c.value_model, c.reserved_jobs, c.interconnect]
    while added and added[-1] in (GPU_STEPS, None):
        added.pop()
    return added


def _config(fields: list[Any]) -> PoolConfig:
    """`dump_planner`'s configuration list back (the time its default time limit last changed
    written as ISO 8601 text)."""
    if len(fields) > 12 and fields[12] is not None:
        fields = [*fields[:12], datetime.fromisoformat(fields[12]), *fields[13:]]
    return PoolConfig(*fields)


def dump_pool(pool: Pool) -> dict[str, Any]:
    """The interpreter's state; its pending events are not kept (a snapshot follows a commit,
    and a pool commits only once configured, when nothing is pending)."""
    return {
        "origin": pool.origin.isoformat() if pool.origin else None,
        "passes": pool.passes,
        "planner": dump_planner(pool.planner) if pool.planner else None,
    }


def load_pool(data: dict[str, Any], pool: Pool) -> Pool:
    """`pool` (fresh, with the agent's hot path and clock settings) given the snapshot's state, its
    planner planning with that hot path (the snapshot message carries the `VERSION` it was
    written with)."""
    try:
        pool.origin = datetime.fromisoformat(data["origin"]) if data["origin"] else None
        pool.passes = data["passes"]
        pool.planner = (
            load_planner(data["planner"], pool.scheduler, pool.forecast, pool.by_arrival, pool.replan_work, pool.rules)
            if data["planner"]
            else None
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"snapshot: damaged ({type(e).__name__}: {e})") from None
    return pool


def _runs_over_steps(masks: list[int]) -> list[tuple[int, int]]:
    """Consecutive equal masks as (steps, mask) runs: an app's set or the busy GPUs change at a
    few steps of a window, not at each of its 336."""
    out: list[tuple[int, int]] = []
    for mask in masks:
        if out and out[-1][1] == mask:
            out[-1] = (out[-1][0] + 1, mask)
        else:
            out.append((1, mask))
    return out


def _steps(runs: list[Any], read: Callable[[Any], int]) -> list[int]:
    """`_runs_over_steps`'s runs [steps, GPU set] back to a mask per step (`read` reads a set)."""
    out: list[int] = []
    for n, gpus in runs:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"a run of {n!r} steps")
        out += [read(gpus)] * n
    return out


def dump_schedule(schedule: Schedule) -> dict[str, Any]:
    """A schedule (an adopted full-mode plan, recorded so replays reuse it) as JSON data: a
    job's block [start, GPU runs], an app's sets as runs of steps [steps, GPU runs] (GPU runs:
    `flat_runs`). At most 10 bytes a run of GPUs, and an app's set is written once per change."""
    return {
        "batch": {job_id: [start, flat_runs(mask)] for job_id, (start, mask) in schedule.batch.items()},
        "realtime": {
            app_id: [[n, flat_runs(mask)] for n, mask in _runs_over_steps(masks)]
            for app_id, masks in schedule.realtime.items()
        },
    }


def load_schedule(data: dict[str, Any]) -> Schedule:
    """`dump_schedule`'s form, or the hex masks of ledgers written before it (a block [start, hex],
    an app's sets a hex mask per step), told apart by their JSON types."""
    return Schedule(
        {
            job_id: (start, int(gpus, 16) if isinstance(gpus, str) else mask_of_flat(gpus))
            for job_id, (start, gpus) in data["batch"].items()
        },
        {
            app_id: [int(m, 16) for m in sets] if all(isinstance(m, str) for m in sets) else _steps(sets, mask_of_flat)
            for app_id, sets in data["realtime"].items()
        },
    )


def joined(first: str, parts: int, pieces: dict[int, str]) -> str:
    """A snapshot's `state` split over `parts` records: its first piece (the snapshot record's)
    and the others by part number 1 .. parts - 1 (SnapshotError naming a missing one)."""
    missing = [i for i in range(1, parts) if i not in pieces]
    if missing:
        raise SnapshotError(f"snapshot: part {missing[0]} of parts 1-{parts - 1} is missing")
    return first + "".join(pieces[i] for i in range(1, parts))


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

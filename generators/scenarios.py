"""Seeded generator of random, contended scenarios (contract-valid scenario dicts).

`generate_scenario(gpus, jobs, seed)` is pure: all randomness comes from one
`random.Random(seed)`, so the same arguments always give the same dict. The output always
passes `gpualloc.schemas.Scenario` validation, and is built so that every scheduler has a feasible plan:

- real-time floors plus running jobs fit the pool at every step (running jobs all hold their
  GPUs from step 0, so step 0 is the tightest step);
- an app's `current` is disjoint from running jobs' GPUs and from the other apps' `current`;
- `len(current) - swap_cap <= max_gpus` and `len(current) + swap_cap >= min_gpus`, so step 0
  can honour R3 and R4 at once, and what the apps must keep at step 0 fits beside running jobs.

Shape of a scenario: ~10-15% of the jobs are real-time apps (at least one from 4 jobs on) with
diurnal demand curves whose peaks add up to ~30-40% of the pool; the rest are training, batch
inference and quantization jobs of power-of-two sizes (mostly within a node, occasionally whole
nodes), a few already running, most arriving at step 0, with total batch demand ~1.2-2x the
capacity left over by real-time demand and running jobs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

KIND_PREFIX = {"training": "train", "batch_inference": "infer", "quantization": "quant"}
_KIND_WEIGHTS = (("training", 0.45), ("batch_inference", 0.35), ("quantization", 0.20))
_PRIORITY_RANGE = {"training": (3, 9), "batch_inference": (2, 8), "quantization": (1, 5)}


def default_node_size(gpus: int) -> int:
    """8-GPU nodes for pools of 16+ GPUs that split evenly, else one pool."""
    return 8 if gpus >= 16 and gpus % 8 == 0 else gpus


def block_sizes(gpus: int, node_size: int) -> list[int]:
    """Power-of-two block sizes the node rule can place: within a node, or whole nodes."""
    out, n = [], 1
    while n <= gpus:
        if n <= node_size or n % node_size == 0:
            out.append(n)
        n *= 2
    return out


def generate_scenario(
    gpus: int,
    jobs: int,
    seed: int | str,
    *,
    horizon: int = 24,
    gpus_per_node: int | None = None,
    name: str | None = None,
    step_minutes: int = 60,
    time_decay: float = 0.95,
    realtime_penalty: float = 8.0,
    swap_cap: int = 2,
    realtime: int | None = None,
    app_swap_caps: bool = True,
    currents: bool = True,
    running: bool = True,
    late_arrivals: bool = True,
    floors: bool = True,
    load: tuple[float, float] = (1.2, 2.0),
    value_model: str | None = None,
) -> dict[str, Any]:
    """A random contended scenario as a contract-valid dict.

    gpus, jobs: pool size (any int >= 1, powers of two or not) and number of jobs (>= 1,
        real-time apps included).
    seed: seeds the one `random.Random` used; same arguments, same scenario.
    horizon, step_minutes, time_decay, realtime_penalty, swap_cap: scenario fields.
    gpus_per_node: node size (must divide gpus); default `default_node_size(gpus)`.
    realtime: number of real-time apps (default ~10-15% of jobs, >= 1 when jobs >= 4).
    app_swap_caps, currents, running, late_arrivals, floors: allow per-app swap caps (0-4),
        `current` GPU sets, already-running jobs, arrivals after step 0, and min/max floors.
    load: range of total batch demand as a multiple of the capacity left to batch work.
    value_model: the scenario's `value_model` (None: not written, the contract's default).
    """
    _check_args(gpus, jobs, horizon, gpus_per_node, swap_cap, realtime, load)
    rng = random.Random(seed)
    node = gpus_per_node if gpus_per_node is not None else default_node_size(gpus)
    T = horizon
    n_rt = realtime if realtime is not None else _realtime_count(rng, jobs, gpus)
    apps = _realtime_apps(rng, gpus, n_rt, T, step_minutes, swap_cap, app_swap_caps, floors)
    if currents:
        _add_currents(rng, gpus, apps, swap_cap)
    n_batch = jobs - n_rt
    sizes = block_sizes(gpus, node)
    counter = iter(range(10**9))
    runs = _running_jobs(rng, gpus, node, sizes, apps, swap_cap, T, n_batch, counter) if running else []
    rt_steps = sum(sum(a["demand"]) for a in apps)
    run_steps = sum(len(r["running"]["gpus"]) * min(r["running"]["remaining"], T) for r in runs)
    left = max(gpus * T - rt_steps - run_steps, gpus)
    queue = _batch_jobs(rng, n_batch - len(runs), sizes, node, T, late_arrivals, rng.uniform(*load) * left, counter)
    out: dict[str, Any] = {
        "name": name if name is not None else f"gen-g{gpus}-j{jobs}-s{seed}",
        "gpus": gpus,
        "horizon": T,
        "step_minutes": step_minutes,
        "time_decay": time_decay,
        "realtime_penalty": realtime_penalty,
        "swap_cap": swap_cap,
        "jobs": apps + runs + queue,
    }
    if node != gpus:
        out["gpus_per_node"] = node
    if value_model is not None:
        out["value_model"] = value_model
    return out


def _check_args(
    gpus: int,
    jobs: int,
    horizon: int,
    node: int | None,
    swap_cap: int,
    realtime: int | None,
    load: tuple[float, float],
) -> None:
    if gpus < 1 or jobs < 1 or horizon < 1:
        raise ValueError("gpus, jobs and horizon must be >= 1")
    if node is not None and (node < 1 or gpus % node):
        raise ValueError(f"gpus_per_node must divide gpus ({node} does not divide {gpus})")
    if swap_cap < 0:
        raise ValueError("swap_cap must be >= 0")
    if realtime is not None and not 0 <= realtime <= min(jobs, gpus):
        raise ValueError(f"realtime must be between 0 and min(jobs, gpus) = {min(jobs, gpus)}")
    if not 0 < load[0] <= load[1]:
        raise ValueError("load must be a range (lo, hi) with 0 < lo <= hi")


def _realtime_count(rng: random.Random, jobs: int, gpus: int) -> int:
    if jobs < 4:
        return 1 if jobs >= 2 and rng.random() < 0.25 else 0
    return min(gpus, jobs - 1, max(1, round(jobs * rng.uniform(0.10, 0.15))))


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """`total` split into `parts` positive ints at random (each at least 1)."""
    if parts == 0:
        return []
    total = max(total, parts)
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    scale = (total - parts) / sum(weights)
    out = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(out)):
        out[i % parts] += 1
    return out


def _diurnal(rng: random.Random, peak: int, T: int, step_minutes: int) -> list[int]:
    """Demand following the hour of day: a trough at night, the peak in the afternoon/evening."""
    base = rng.uniform(0.15, 0.5)
    peak_hour = rng.uniform(11, 20)
    start_hour = rng.uniform(0, 24) if rng.random() < 0.3 else 0.0
    out = []
    for t in range(T):
        hour = start_hour + t * step_minutes / 60
        shape = 0.5 + 0.5 * math.cos(2 * math.pi * (hour - peak_hour) / 24)
        level = peak * (base + (1 - base) * shape)
        noise = rng.choice((-1, 0, 0, 0, 1)) if peak >= 3 else 0
        out.append(min(peak, max(0, round(level) + noise)))
    if T and max(out) < peak:
        out[max(range(T), key=lambda t: (out[t], -t))] = peak
    return out


def _realtime_apps(
    rng: random.Random,
    gpus: int,
    n_rt: int,
    T: int,
    step_minutes: int,
    swap_cap: int,
    app_caps: bool,
    floors: bool,
) -> list[dict[str, Any]]:
    peaks = _split(rng, round(gpus * rng.uniform(0.30, 0.40)), n_rt)
    apps = []
    for i, peak in enumerate(peaks):
        peak = min(peak, gpus)
        app: dict[str, Any] = {
            "id": f"rt-{i}",
            "kind": "realtime",
            "priority": rng.randint(5, 10),
            "demand": _diurnal(rng, peak, T, step_minutes),
        }
        if floors:
            if rng.random() < 0.6:
                app["min_gpus"] = rng.randint(1, max(1, math.ceil(peak * 0.3)))
            roll = rng.random()
            if roll < 0.5:
                app["max_gpus"] = min(gpus, peak + rng.randint(0, 2))
            elif roll < 0.6 and peak > 1:
                app["max_gpus"] = peak - 1  # a ceiling below the peak: shortfall by design
            if "max_gpus" in app and app.get("min_gpus", 0) > app["max_gpus"]:
                app["min_gpus"] = app["max_gpus"]
        if app_caps and rng.random() < 0.35:
            app["swap_cap"] = rng.randint(0, 4)
        apps.append(app)
    # Floors must fit the pool (and leave room for batch work): trim the largest first.
    while sum(a.get("min_gpus", 0) for a in apps) > gpus // 2 and any(a.get("min_gpus") for a in apps):
        top = max(apps, key=lambda a: a.get("min_gpus", 0))
        top["min_gpus"] -= 1
    return apps


def _cap(app: dict[str, Any], default_cap: int) -> int:
    cap: int = app.get("swap_cap", default_cap)
    return cap


def _must_keep(app: dict[str, Any], default_cap: int) -> int:
    """GPUs an app must hold at step 0: min_gpus, and what R4 stops it shedding from `current`."""
    floor: int = app.get("min_gpus", 0)
    if "current" not in app:
        return floor
    return max(floor, len(app["current"]) - _cap(app, default_cap))


def _add_currents(rng: random.Random, gpus: int, apps: list[dict[str, Any]], default_cap: int) -> None:
    """Give some apps the GPUs they hold before step 0 (disjoint, within R3/R4's reach)."""
    free = list(range(gpus))
    rng.shuffle(free)
    for app in apps:
        if rng.random() >= 0.4:
            continue
        cap = _cap(app, default_cap)
        lo = max(0, app.get("min_gpus", 0) - cap)
        hi = app.get("max_gpus", gpus) + cap
        want = min(max(app["demand"][0] + rng.randint(-1, 1), lo), hi)
        others = sum(_must_keep(a, default_cap) for a in apps if a is not app)
        # Keep what this app must hold at step 0 within the pool, beside the others' floors.
        while want > lo and max(app.get("min_gpus", 0), want - cap) + others > gpus:
            want -= 1
        if want > len(free) or max(app.get("min_gpus", 0), want - cap) + others > gpus:
            continue
        app["current"] = sorted(free[:want])
        del free[:want]


def _running_jobs(
    rng: random.Random,
    gpus: int,
    node: int,
    sizes: list[int],
    apps: list[dict[str, Any]],
    default_cap: int,
    T: int,
    n_batch: int,
    counter: Iterator[int],
) -> list[dict[str, Any]]:
    """A few jobs already running at step 0, on GPUs no app holds and within the floors' room."""
    if n_batch < 2 or rng.random() < 0.35:
        return []
    taken = set()
    for a in apps:
        taken.update(a.get("current", ()))
    floor = sum(a.get("min_gpus", 0) for a in apps)
    keep0 = sum(_must_keep(a, default_cap) for a in apps)
    budget = gpus - max(floor, keep0)
    count = rng.randint(1, max(1, min(3, n_batch // 4)))
    out = []
    for _ in range(count):
        fits = [n for n in sizes if n <= budget and n <= gpus - len(taken) and n <= node]
        if not fits:
            break
        n = rng.choice(fits[:3])
        block = _free_block(rng, gpus, node, n, taken)
        if block is None or rng.random() < 0.15:  # inherited GPUs need not form a legal block
            block = sorted(rng.sample(sorted(set(range(gpus)) - taken), n))
        taken.update(block)
        budget -= n
        kind = _pick_kind(rng)
        remaining = rng.randint(1, max(1, min(12, T + 2)))
        out.append(
            {
                "id": f"{KIND_PREFIX[kind]}-{next(counter)}",
                "kind": kind,
                "priority": rng.randint(*_PRIORITY_RANGE[kind]),
                "gpus": n,
                "duration": remaining + rng.randint(0, 6),
                "running": {"gpus": block, "remaining": remaining},
            }
        )
    return out


def _free_block(rng: random.Random, gpus: int, node: int, n: int, taken: set[int]) -> list[int] | None:
    starts = [p for p in range(gpus - n + 1) if p % node + n <= node and not taken.intersection(range(p, p + n))]
    if not starts:
        return None
    p = rng.choice(starts)
    return list(range(p, p + n))


def _pick_kind(rng: random.Random) -> str:
    roll, acc = rng.random(), 0.0
    for kind, w in _KIND_WEIGHTS:
        acc += w
        if roll < acc:
            return kind
    return _KIND_WEIGHTS[-1][0]


def _batch_jobs(
    rng: random.Random,
    count: int,
    sizes: list[int],
    node: int,
    T: int,
    late: bool,
    target: float,
    counter: Iterator[int],
) -> list[dict[str, Any]]:
    """Queued batch jobs whose GPU-steps add up to roughly `target`."""
    if count <= 0:
        return []
    in_node = [n for n in sizes if n <= node] or sizes[:1]
    whole = [n for n in sizes if n > node]
    d_max = min(16, max(2, (2 * T) // 3))
    jobs = []
    for _ in range(count):
        kind = _pick_kind(rng)
        if whole and rng.random() < 0.08:
            n = rng.choice(whole)
        else:
            n = in_node[min(len(in_node) - 1, int(rng.triangular(0, len(in_node), 1)))]
        arrival = 0
        if late and T > 1 and rng.random() < 0.3:
            arrival = rng.randint(1, max(1, (2 * T) // 3))
        jobs.append(
            {
                "id": f"{KIND_PREFIX[kind]}-{next(counter)}",
                "kind": kind,
                "priority": rng.randint(*_PRIORITY_RANGE[kind]),
                "gpus": n,
                "duration": rng.randint(1, d_max),
                "arrival": arrival,
            }
        )
    _fit_load(rng, jobs, target, d_max, in_node)
    return jobs


def _fit_load(rng: random.Random, jobs: list[dict[str, Any]], target: float, d_max: int, in_node: list[int]) -> None:
    """Scale durations (then sizes) so total GPU-steps land near `target`."""
    total = sum(j["gpus"] * j["duration"] for j in jobs)
    factor = target / total
    for j in jobs:
        j["duration"] = min(d_max, max(1, round(j["duration"] * factor)))
    for _ in range(4 * len(jobs)):
        total = sum(j["gpus"] * j["duration"] for j in jobs)
        if total >= 0.9 * target:
            break
        j = rng.choice(jobs)
        bigger = [n for n in in_node if n > j["gpus"]]
        if j["duration"] < d_max:
            j["duration"] = min(d_max, j["duration"] + max(1, d_max // 4))
        elif bigger:
            j["gpus"] = bigger[0]

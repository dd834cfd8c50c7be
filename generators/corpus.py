"""The benchmark corpus: a fixed, documented family of scenarios much wider than the bundled seven.

`corpus_scenario(i)` is pure: scenario i comes from one `random.Random(f"corpus-{i}")`, and its
shapes from the index alone, so the mixture is fixed and cannot drift toward easy cases:

- pool size cycles through SIZES (i % 8), so every size has an eighth of the corpus and half of it
  (4-16 GPUs) gets proven optima from the exact model; nodes hold 2, 4 or 8 GPUs, at most eight
  nodes a pool (64 GPUs come in nodes of 8);
- each binary shape (SHARES) is present in a stated share of the corpus, assigned by a
  low-discrepancy sequence of the index (every window of the corpus holds about that share);
- the offered batch load (GPU-steps of queued and running jobs inside the horizon, over the
  pool's G x T) is uniform in LOAD;
- the split is fixed once: scenarios in even blocks of eight (i // 8 even) are the tuning half,
  the others held out, so both halves hold every size alike.

docs/benchmarks.md describes the family, its shares and how the optima were proven.
"""

from __future__ import annotations

import math
import random
from typing import Any

from gpualloc.generators.scenarios import block_sizes

SIZE = 300
SIZES = (4, 8, 12, 16, 24, 32, 48, 64)
NODE_SIZES = (2, 4, 8)
HORIZONS = (8, 24)
LOAD = (0.8, 2.0)
DECAY = (0.90, 1.00)
PENALTY = (1.0, 16.0)  # realtime_penalty, log-uniform
MAX_APPS = 4
SHARES = {  # shape -> share of the corpus that has it (apps: 0-4 each a fifth)
    "late_arrivals": 0.5,
    "running_jobs": 0.4,
    "beyond_node": 0.3,  # at least one job larger than a node (pools of two nodes or more)
    "dominant_long_job": 0.3,
    "zero_floor": 0.5,  # of the scenarios with apps: at least one app with min_gpus 0
    "current": 0.5,  # of the scenarios with apps: apps that hold GPUs before step 0
    "app_swap_caps": 0.3,  # of the scenarios with apps: per-app swap caps
}
PRIORITY_MODES = (("uniform", 0.25), ("narrow", 0.45), ("wide", 0.30))
CURVES = ("flat", "diurnal", "spiky")
_PHI = (math.sqrt(5) - 1) / 2


def _stratum(i: int, shape: int) -> float:
    """A point in [0, 1) for scenario i and a shape: a golden-ratio sequence per shape, so any
    window of consecutive scenarios holds each share to within a scenario or two."""
    return ((i + 0.5) * _PHI + shape * 0.2137) % 1.0


def has_shape(i: int, shape: str) -> bool:
    return _stratum(i, list(SHARES).index(shape) + 1) < SHARES[shape]


def apps_of(i: int) -> int:
    """0-4 apps, each count a fifth of the corpus."""
    return min(MAX_APPS, int(_stratum(i, 0) * (MAX_APPS + 1)))


def priority_mode(i: int) -> str:
    x, acc = _stratum(i, len(SHARES) + 1), 0.0
    for mode, share in PRIORITY_MODES:
        acc += share
        if x < acc:
            return mode
    return PRIORITY_MODES[-1][0]


def split_of(i: int) -> str:
    return "tune" if (i // 8) % 2 == 0 else "heldout"


def name_of(i: int) -> str:
    return f"corpus-{i:03d}-g{SIZES[i % len(SIZES)]}"


def index_of(name: str) -> int:
    return int(name.split("-")[1])


def _priority(rng: random.Random, mode: str) -> float:
    if mode == "uniform":
        return 5.0
    if mode == "narrow":
        return float(rng.randint(1, 9))
    return round(math.exp(rng.uniform(0.0, math.log(100.0))), 2)


def corpus_scenario(i: int) -> dict[str, Any]:
    """Scenario i of the corpus, as a contract-valid dict (same i, same dict)."""
    if not 0 <= i < SIZE:
        raise ValueError(f"corpus index: must be in 0..{SIZE - 1} (got {i})")
    rng = random.Random(f"corpus-{i}")
    G = SIZES[i % len(SIZES)]
    node = rng.choice([n for n in NODE_SIZES if n <= G and G % n == 0 and n * 8 >= G])
    T = rng.randint(*HORIZONS)
    cap = rng.randint(0, 3)
    mode = priority_mode(i)
    n_apps = apps_of(i)
    apps = _apps(rng, i, G, T, cap, n_apps, mode)
    runs = _running(rng, i, G, node, T, mode, apps, cap)
    target = rng.uniform(*LOAD) * G * T
    queue = _queue(rng, i, G, node, T, mode, target - sum(_area(j, T) for j in runs), len(runs))
    return {
        "name": name_of(i),
        "gpus": G,
        "gpus_per_node": node,
        "horizon": T,
        "step_minutes": 60,
        "time_decay": round(rng.uniform(*DECAY), 3),
        "realtime_penalty": round(math.exp(rng.uniform(math.log(PENALTY[0]), math.log(PENALTY[1]))), 2),
        "swap_cap": cap,
        "jobs": apps + runs + queue,
    }


def _area(job: dict[str, Any], T: int) -> int:
    """A batch job's GPU-steps inside the horizon."""
    area: int = (
        job["gpus"] * min(job["running"]["remaining"], T)
        if "running" in job
        else job["gpus"] * max(0, min(job["duration"], T - job["arrival"]))
    )
    return area


def _curve(rng: random.Random, shape: str, peak: int, T: int) -> list[int]:
    if shape == "flat":
        level = max(1, round(peak * rng.uniform(0.5, 1.0)))
        return [level] * T
    if shape == "spiky":
        base = round(peak * rng.uniform(0.0, 0.3))
        out = [base] * T
        for _ in range(max(1, T // 6)):
            t = rng.randrange(T)
            for u in range(t, min(T, t + rng.randint(1, 3))):
                out[u] = peak
        return out
    phase, base_share = rng.uniform(0, 24), rng.uniform(0.1, 0.5)
    return [
        round(peak * (base_share + (1 - base_share) * (0.5 + 0.5 * math.cos(2 * math.pi * (t - phase) / 24))))
        for t in range(T)
    ]


def _apps(rng: random.Random, i: int, G: int, T: int, cap: int, n: int, mode: str) -> list[dict[str, Any]]:
    """n apps whose peaks add up to 20-50% of the pool; floors sum to at most a quarter of it."""
    if n == 0:
        return []
    total = max(n, round(G * rng.uniform(0.2, 0.5)))
    apps = []
    zero_floor = has_shape(i, "zero_floor")
    for k in range(n):
        peak = max(1, total // n + (k < total % n))
        demand = _curve(rng, CURVES[(i + k) % len(CURVES)], peak, T)
        app: dict[str, Any] = {"id": f"rt-{k}", "kind": "realtime", "priority": _priority(rng, mode), "demand": demand}
        if not (zero_floor and k == 0):
            app["min_gpus"] = rng.randint(1, max(1, min(demand)))
        if rng.random() < 0.5:
            app["max_gpus"] = min(G, peak + rng.randint(0, 2))
        if has_shape(i, "app_swap_caps") and rng.random() < 0.6:
            app["swap_cap"] = rng.randint(0, 3)
        apps.append(app)
    while sum(a.get("min_gpus", 0) for a in apps) > max(1, G // 4):
        top = max(apps, key=lambda a: a.get("min_gpus", 0))
        top["min_gpus"] -= 1
        if top["min_gpus"] == 0:
            del top["min_gpus"]
    if has_shape(i, "current"):  # apps hold GPUs at the top of the pool before step 0
        g = G
        for app in apps:
            lo, hi = app.get("min_gpus", 0), app.get("max_gpus", G)
            want = min(hi, max(lo, app["demand"][0]))
            if want > 0:
                app["current"] = list(range(g - want, g))
                g -= want
    return apps


def _running(
    rng: random.Random, i: int, G: int, node: int, T: int, mode: str, apps: list[dict[str, Any]], cap: int
) -> list[dict[str, Any]]:
    """1-3 jobs already running at step 0 on the lowest nodes, leaving the apps' floors room."""
    if not has_shape(i, "running_jobs"):
        return []
    held = {g for a in apps for g in a.get("current", ())}
    floors = sum(max(a.get("min_gpus", 0), len(a.get("current", ())) - a.get("swap_cap", cap)) for a in apps)
    room = G - len(held) - floors
    out, g = [], 0
    for k in range(rng.randint(1, 3)):
        n = rng.choice([s for s in block_sizes(G, node) if s <= node])
        if g % n or g + n > G or any(x in held for x in range(g, g + n)) or n > room:
            break
        out.append(
            {
                "id": f"run-{k}",
                "kind": "training",
                "priority": _priority(rng, mode),
                "gpus": n,
                "duration": T + rng.randint(0, 4),
                "running": {"gpus": list(range(g, g + n)), "remaining": rng.randint(1, T)},
            }
        )
        g += n
        room -= n
    return out


def _queue(
    rng: random.Random, i: int, G: int, node: int, T: int, mode: str, target: float, start: int
) -> list[dict[str, Any]]:
    """Queued jobs until their GPU-steps inside the horizon reach `target`.

    Sizes are log-uniform over the blocks within a node (and whole-node multiples with the
    beyond-node shape), durations uniform in 1..T; a dominant long job, when the shape asks
    for one, comes first: a node-sized block for 60-100% of the horizon at three times the top
    priority.
    """
    sizes = [s for s in block_sizes(G, node) if s <= node]
    wide = [s for s in block_sizes(G, node) if s > node] if has_shape(i, "beyond_node") else []
    late = has_shape(i, "late_arrivals")
    kinds = ("training", "batch_inference", "quantization")
    out: list[dict[str, Any]] = []
    area = 0.0
    if has_shape(i, "dominant_long_job"):
        top = 100.0 if mode == "wide" else 9.0 if mode == "narrow" else 5.0
        job = {
            "id": "dominant",
            "kind": "training",
            "priority": round(3 * top, 2),
            "gpus": min(node, max(sizes)),
            "duration": rng.randint(math.ceil(0.6 * T), T),
            "arrival": 0,
        }
        out.append(job)
        area += _area(job, T)
    if wide:
        n = rng.choice(wide)
        job = {
            "id": "wide",
            "kind": "training",
            "priority": _priority(rng, mode),
            "gpus": n,
            "duration": rng.randint(1, max(1, T // 2)),
            "arrival": 0,
        }
        out.append(job)
        area += _area(job, T)
    k = 0
    while area < target or len(out) + start < 3:
        n = sizes[min(len(sizes) - 1, int(rng.uniform(0, len(sizes))))]
        kind = kinds[k % 3]
        arrival = rng.randint(1, max(1, 2 * T // 3)) if late and rng.random() < 0.4 else 0
        job = {
            "id": f"{kind[:5]}-{k}",
            "kind": kind,
            "priority": _priority(rng, mode),
            "gpus": n,
            "duration": rng.randint(1, T),
            "arrival": arrival,
        }
        out.append(job)
        area += _area(job, T)
        k += 1
    return out

"""`python -m gpualloc.benchmarks.traffic_rate`: what the observation rate costs the planner's
decisions. Two pools alike (64 apps, the contract's most; 512 GPUs; jobs waiting and arriving),
warmed with two weeks of hourly traffic, then run through the same hours: one hears each app
once an hour, the other every 15 seconds (240 an hour, in time order with the arrivals). Each
arrival's decision and each step boundary (replan and commit: every app's demand forecast over
the window) is timed, and so is each observation, in one run so the machine is the same."""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from typing import Any

from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.simulation.report import quantiles

APPS, GPUS, WARM_HOURS = 64, 512, 2 * 168
SIZES = (1, 1, 2, 2, 4, 4, 8)


def _demand(app: int, t: float, rng: random.Random) -> float:
    """GPUs app `app` needs at `t` hours: a daily swing around 1-4 GPUs, noisy."""
    peak = 1 + app % 4
    return peak * (0.6 + 0.4 * math.sin(2 * math.pi * (t + app) / 24)) * math.exp(rng.gauss(0, 0.2))


def _pool(seed: int) -> Planner:
    rng = random.Random(seed)
    planner = Planner(PoolConfig(gpus=GPUS, gpus_per_node=8, horizon=48), scheduler=heuristic_schedule)
    for a in range(APPS):
        planner.realtime.register_app(AppSpec(f"app-{a}", priority=5, min_gpus=1, max_gpus=8, profile=[2] * 24))
    for h in range(WARM_HOURS):
        for a in range(APPS):
            load = _demand(a, h + 0.5, rng)
            planner.forecasts.observed(f"app-{a}", planner.hour_of(h), load)
    planner.now = WARM_HOURS
    for k in range(200):
        planner.queued[f"q{k}"] = JobSpec(
            f"q{k}", "training", rng.randint(1, 9), rng.choice(SIZES), rng.randint(1, 12), 0
        )
    planner.boundary.tick()
    return planner


def run(hours: int = 4, arrivals_per_hour: int = 60, seed: int = 0) -> dict[str, Any]:
    """Per rate: decisions (arrivals and boundaries) p50, p99 and max in ms, arrivals' p99 and
    boundaries' p50 and max apart, observations' mean and max in microseconds; and the ratios
    (15 s over hourly)."""
    out: dict[str, Any] = {}
    for name, per_hour in (("hourly", 1), ("15s", 240)):
        planner, rng = _pool(seed), random.Random(seed + 1)
        decisions, boundaries, observations = [], [], []
        for h in range(hours):
            began = time.perf_counter()
            planner.boundary.tick()
            boundaries.append((time.perf_counter() - began) * 1000)
            events = [(k / per_hour, "obs", k) for k in range(per_hour)]
            events += [((k + 0.5) / arrivals_per_hour, "job", k) for k in range(arrivals_per_hour)]
            for at, kind, k in sorted(events):
                if kind == "job":
                    job = JobSpec(f"j{h}-{k}", "training", rng.randint(1, 9), rng.choice(SIZES), rng.randint(1, 12), 0)
                    began = time.perf_counter()
                    planner.admission.submit(job)
                    decisions.append((time.perf_counter() - began) * 1000)
                    continue
                for a in range(APPS):
                    load = _demand(a, planner.now + at, rng)
                    began = time.perf_counter()
                    planner.realtime.observe_traffic(f"app-{a}", planner.now, math.ceil(load - 1e-9), load)
                    observations.append((time.perf_counter() - began) * 1e6)
        d, arr, b = quantiles(decisions + boundaries), quantiles(decisions), quantiles(boundaries)
        out[name] = {
            "decisions": len(decisions) + len(boundaries),
            "decision_p50_ms": round(d["p50"], 3),
            "decision_p99_ms": round(d["p99"], 3),
            "decision_max_ms": round(d["max"], 3),
            "arrival_p99_ms": round(arr["p99"], 3),
            "boundary_p50_ms": round(b["p50"], 2),
            "boundary_max_ms": round(b["max"], 2),
            "observations": len(observations),
            "observation_mean_us": round(sum(observations) / len(observations), 1),
            "observation_max_us": round(max(observations), 1),
        }
    for key in ("decision_p99_ms", "arrival_p99_ms", "boundary_p50_ms"):
        out[f"{key} ratio"] = round(out["15s"][key] / out["hourly"][key], 3)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hours", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(json.dumps(run(args.hours, seed=args.seed), indent=1))


if __name__ == "__main__":
    main()

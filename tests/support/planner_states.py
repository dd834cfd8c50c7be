"""Planner states for tests of full mode's adoption: an app, a few running jobs and a queue."""

from __future__ import annotations

from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig
from gpualloc.solvers.policies.heuristic import heuristic_schedule

CONFIG = PoolConfig(gpus=16, gpus_per_node=8, horizon=12, swap_cap=2)
PROFILE = [2, 2, 2, 2, 2, 3, 3, 4, 5, 6, 6, 6, 6, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2]


def loaded_planner(scheduler=heuristic_schedule, jobs: int = 20, seed: int = 2) -> Planner:
    """A deterministic mix of sizes, priorities and durations; a step committed every 5 jobs."""
    planner = Planner(CONFIG, scheduler=scheduler)
    planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=8, profile=PROFILE))
    for k in range(jobs):
        gpus = [1, 2, 4, 8, 2, 1, 4][(k * 7 + seed) % 7]
        planner.admission.submit(JobSpec(f"j{k}", "training", 1 + (k * 5 + seed) % 9, gpus, 1 + (k * 3 + seed) % 7, 0))
        if k % 5 == 4:
            planner.boundary.tick()
    return planner

"""`gpualloc bench --hot-path`: how long one arrival's decision takes in the planner core, the
figure issue 15's faster hot path (p99 <= 0.5 ms at 64 GPUs and about 240 queued jobs) is
measured against. A pool of `gpus` GPUs in 8-GPU nodes is filled with `queued` waiting jobs and a
full pool of running ones (seeded sizes and durations, three real-time apps); each timed
arrival is decided on a copy of that state (copying is not timed), so every sample is the same
situation with one new job."""

from __future__ import annotations

import copy
import random
import time
from dataclasses import asdict, dataclass

from gpualloc.schemas.config import AgentSettings
from gpualloc.solvers.planner.state import AppSpec, JobSpec, Planner, PoolConfig
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.simulation.report import quantiles

SIZES = (1, 1, 2, 2, 4, 4, 8)


@dataclass(frozen=True)
class HotPathResult:
    gpus: int
    queued: int
    effort: float
    arrivals: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    def line(self) -> str:
        return (f"hot path (effort {self.effort:g}), {self.gpus} GPUs, {self.queued} queued: one arrival decided in "
                f"p50 {self.p50_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, max {self.max_ms:.2f} ms over {self.arrivals} "
                "arrivals (target p99 <= 0.5 ms)")

    def as_dict(self) -> dict:
        return asdict(self)


def loaded_pool(gpus: int, queued: int, seed: int = 0, effort: float = AgentSettings().hot_path_effort) -> Planner:
    """A planner with running work on every GPU, three apps, and `queued` jobs waiting; its hot
    path at the agent's effort (`agent.hot_path_effort`)."""
    rng = random.Random(seed)
    planner = Planner(PoolConfig(gpus=gpus, gpus_per_node=8, horizon=24),
                      scheduler=lambda problem: heuristic_schedule(problem, effort))
    for k in range(3):
        planner.register_app(AppSpec(f"app-{k}", priority=8, min_gpus=1, max_gpus=8))
        planner.observe_traffic(f"app-{k}", 0, 2)
    for k in range(queued):
        planner.queued[f"q{k}"] = JobSpec(f"q{k}", "training", rng.randint(1, 9), rng.choice(SIZES),
                                          rng.randint(1, 12), 0)
    planner.tick()  # the first commit starts what fits
    return planner


def measure_hot_path(gpus: int = 64, queued: int = 240, arrivals: int = 50, seed: int = 0,
                     effort: float = AgentSettings().hot_path_effort) -> HotPathResult:
    base = loaded_pool(gpus, queued, seed, effort)
    rng = random.Random(seed + 1)
    samples = []
    for k in range(arrivals):
        planner = copy.deepcopy(base)
        job = JobSpec(f"new-{k}", "training", rng.randint(1, 9), rng.choice(SIZES), rng.randint(1, 12), planner.now)
        began = time.perf_counter()
        planner.submit(job)
        samples.append((time.perf_counter() - began) * 1000)
    q = quantiles(samples)
    return HotPathResult(gpus, len(base.queued), effort, arrivals, round(q["p50"], 3), round(q["p99"], 3),
                         round(q["max"], 3))

"""`gpualloc bench hot-path`: how long one arrival's decision takes in the planner core (the
hot path's target: p99 <= 0.5 ms at 64 GPUs and about 240 queued jobs), and what the step
boundary it leaves the replan to costs. A pool of `gpus`
GPUs in 8-GPU nodes is filled with `queued` waiting jobs and a full pool of running ones (seeded
sizes and durations, three real-time apps); each timed arrival (inserted into the current plan)
and each timed boundary (the window replanned and committed, or the plan made ahead of it carried
over after `since_cut` arrivals and completions) is run on a copy of that state (copying is not
timed), so every sample is the same situation."""

from __future__ import annotations

import copy
import random
import time
from dataclasses import asdict, dataclass

from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig
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
    boundaries: int
    boundary_p50_ms: float  # a step boundary: the window replanned at the hot path's effort, then committed
    boundary_max_ms: float
    carried_p50_ms: float  # a step boundary carrying over the plan made ahead of it, `since_cut` arrivals later
    carried_max_ms: float
    since_cut: int

    def line(self) -> str:
        return (
            f"hot path (effort {self.effort:g}), {self.gpus} GPUs, {self.queued} queued: one arrival decided in "
            f"p50 {self.p50_ms:.3f} ms, p99 {self.p99_ms:.3f} ms, max {self.max_ms:.3f} ms over {self.arrivals} "
            f"arrivals (target p99 <= 0.5 ms); a step boundary (replan and commit) p50 "
            f"{self.boundary_p50_ms:.1f} ms, max {self.boundary_max_ms:.1f} ms over {self.boundaries}; one "
            f"carrying over the plan made ahead of it ({self.since_cut} arrivals and completions since the cut) "
            f"p50 {self.carried_p50_ms:.1f} ms, max {self.carried_max_ms:.1f} ms"
        )

    def as_dict(self) -> dict:
        return asdict(self)


def loaded_pool(gpus: int, queued: int, seed: int = 0, effort: float = AgentSettings().hot_path_effort) -> Planner:
    """A planner with running work on every GPU, three apps, and `queued` jobs waiting; its hot
    path at the agent's effort (`agent.hot_path_effort`)."""
    rng = random.Random(seed)
    planner = Planner(
        PoolConfig(gpus=gpus, gpus_per_node=8, horizon=24),
        scheduler=lambda problem: heuristic_schedule(problem, effort),
    )
    for k in range(3):
        planner.realtime.register_app(AppSpec(f"app-{k}", priority=8, min_gpus=1, max_gpus=8))
        planner.realtime.observe_traffic(f"app-{k}", 0, 2)
    for k in range(queued):
        planner.queued[f"q{k}"] = JobSpec(
            f"q{k}", "training", rng.randint(1, 9), rng.choice(SIZES), rng.randint(1, 12), 0
        )
    planner.boundary.tick()  # the first commit starts what fits
    return planner


def measure_hot_path(
    gpus: int = 64,
    queued: int = 240,
    arrivals: int = 500,
    seed: int = 0,
    effort: float = AgentSettings().hot_path_effort,
    boundaries: int = 10,
    since_cut: int = 100,
) -> HotPathResult:
    base = loaded_pool(gpus, queued, seed, effort)
    rng = random.Random(seed + 1)
    samples = []
    for k in range(arrivals):
        planner = copy.deepcopy(base)
        job = JobSpec(f"new-{k}", "training", rng.randint(1, 9), rng.choice(SIZES), rng.randint(1, 12), planner.now)
        began = time.perf_counter()
        planner.admission.submit(job)
        samples.append((time.perf_counter() - began) * 1000)
    ticks = []
    for _ in range(boundaries):
        planner = copy.deepcopy(base)
        began = time.perf_counter()
        planner.boundary.tick()
        ticks.append((time.perf_counter() - began) * 1000)
    carried = []
    for k in range(boundaries):
        planner = copy.deepcopy(base)
        # made elsewhere in the agent: not timed
        planner.boundary.planned_ahead(planner.scheduler(planner.boundary.cut()))
        late = random.Random(seed + 2 + k)
        for n in range(since_cut):  # each arrival balanced by a job leaving, as in `bench agent`
            planner.admission.submit(
                JobSpec(
                    f"late-{n}", "training", late.randint(1, 9), late.choice(SIZES), late.randint(1, 12), planner.now
                )
            )
            planner.admission.complete(sorted(planner.queued)[late.randrange(len(planner.queued))])
        began = time.perf_counter()
        planner.boundary.tick()
        carried.append((time.perf_counter() - began) * 1000)
    q, b, c = quantiles(samples), quantiles(ticks), quantiles(carried)
    return HotPathResult(
        gpus,
        len(base.queued),
        effort,
        arrivals,
        round(q["p50"], 4),
        round(q["p99"], 4),
        round(q["max"], 4),
        boundaries,
        round(b["p50"], 2),
        round(b["max"], 2),
        round(c["p50"], 2),
        round(c["max"], 2),
        since_cut,
    )

"""The data step of full mode: a Problem turned into plain lists and dicts (no Pyomo).

Batch jobs become their legal (start, block) options only: a block that obeys the node rule,
starts at or after arrival and avoids the GPUs that running jobs hold over its steps. Identical
queued jobs (same size, duration, arrival and priority) are grouped so the model can order them
instead of exploring their permutations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpualloc.solvers.problem import Problem, bits_of


@dataclass(frozen=True)
class BlockOption:
    job: int  # index into MilpData.jobs
    start: int
    first_gpu: int
    end: int
    value: float  # priority x GPUs x weighted steps: the objective's reward for this option


@dataclass
class MilpData:
    gpus: int
    horizon: int
    weights: list[float]
    penalty: float
    jobs: list[dict[str, Any]]  # id, priority, gpus, duration, arrival (queued jobs only)
    options: list[BlockOption]
    cover: dict[tuple[int, int], list[int]]  # (gpu, step) -> options holding that cell
    running_cells: set[tuple[int, int]]  # (gpu, step) held by running jobs
    running_value: float  # the running jobs' fixed reward
    apps: list[dict[str, Any]]  # id, priority, demand, min, max, cap, current (GPU list or None)
    twins: list[list[int]] = field(default_factory=list)  # groups of interchangeable jobs


# What the model costs before any search, per nonzero of `model_size`: building it in Pyomo (1.2 us)
# and handing it to HiGHS (1.8 us), measured on a 2-core VM
SETUP_S_PER_NONZERO = 3e-6


@dataclass(frozen=True)
class ModelSize:
    """An upper estimate of full mode's model of a problem, from counts alone (no model built):
    what building it costs in time and memory grows with `nonzeros`."""

    variables: int
    nonzeros: int


def model_size(problem: Problem, exact: bool = False) -> ModelSize:
    """The model `milp_data` and `formulation.build_model` would make of `problem` (`exact`: with the
    apps' per-GPU sets), counted without building it: a binary per queued job, start and block
    (each in a row per cell it covers), the cells' occupancy and transition variables, and the
    apps' counts; blocks that running jobs rule out are counted too."""
    G, T = problem.gpus, problem.horizon
    options = nonzeros = 0
    for job in problem.batch:
        if job.running_mask:
            continue
        starts = problem.valid_starts(job.gpus).bit_count()
        for s in range(job.arrival, T):
            options += starts
            nonzeros += starts * (job.gpus * (problem.end_of(job, s) - s) + 2)  # its cells, `once`, the objective
    apps = len(problem.realtime)
    variables = options + 2 * G * T + 3 * apps * T  # + u and v a cell; n, short and k an app and step
    nonzeros += 5 * G * T + 8 * apps * T  # u in occupy and capacity, v in two rows and transition
    if exact and apps:
        variables += 2 * apps * G * T
        nonzeros += 8 * apps * G * T
    return ModelSize(variables, nonzeros)


def milp_data(problem: Problem) -> MilpData:
    G, T = problem.gpus, problem.horizon
    running_cells: set[tuple[int, int]] = set()
    running_value = 0.0
    for job in problem.batch:
        if job.running_mask:
            first, end = problem.held_span(job)
            running_cells.update((g, t) for g in bits_of(job.running_mask) for t in range(first, end))
            running_value += problem.held_value(job)
    jobs: list[dict[str, Any]] = []
    options: list[BlockOption] = []
    cover: dict[tuple[int, int], list[int]] = {}
    for job in problem.batch:
        if job.running_mask:
            continue
        j = len(jobs)
        jobs.append(
            {"id": job.id, "priority": job.priority, "gpus": job.gpus, "duration": job.duration, "arrival": job.arrival}
        )
        starts = bits_of(problem.valid_starts(job.gpus))
        for s in range(job.arrival, T):
            e = problem.end_of(job, s)
            held = 0
            for t in range(s, e):
                held |= problem.running_busy[t]
            value = problem.start_value(job, s)
            for p in starts:
                if held & problem.block(p, job.gpus):
                    continue
                o = len(options)
                options.append(BlockOption(j, s, p, e, value))
                for g in range(p, p + job.gpus):
                    for t in range(s, e):
                        cover.setdefault((g, t), []).append(o)
    apps = [
        {
            "id": a.id,
            "priority": a.priority,
            "demand": list(a.demand),
            "min": a.min_gpus,
            "max": a.max_gpus,
            "cap": a.swap_cap,
            "current": bits_of(a.current_mask) if a.current_mask >= 0 else None,
        }
        for a in problem.realtime
    ]
    groups: dict[tuple[int, int, int, float], list[int]] = {}
    for j, row in enumerate(jobs):
        groups.setdefault((row["gpus"], row["duration"], row["arrival"], row["priority"]), []).append(j)
    twins = [g for g in groups.values() if len(g) > 1]
    return MilpData(
        G, T, list(problem.weights), problem.penalty, jobs, options, cover, running_cells, running_value, apps, twins
    )

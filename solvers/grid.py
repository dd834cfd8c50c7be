"""Grids (GPU x step tables of job ids) to and from per-job occupancy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpualloc.solvers.problem import Problem, bits_of

Grid = list[list[str | None]]


@dataclass
class Schedule:
    """What a scheduler decided: batch blocks and real-time GPU sets, as bitmasks.

    `batch[job_id] = (start_step, gpu_mask)`; `realtime[app_id][t] = gpu_mask` held at step t.
    """

    batch: dict[str, tuple[int, int]] = field(default_factory=dict)
    realtime: dict[str, list[int]] = field(default_factory=dict)


def batch_spans(problem: Problem, schedule: Schedule) -> dict[str, tuple[int, int, int]]:
    """job id -> (start, end, GPU mask): the steps [start, end) of the window its block holds,
    running jobs from step 0 for what remains of them."""
    T = problem.horizon
    by_id = {j.id: j for j in problem.batch}
    out = {}
    for job_id, (start, mask) in schedule.batch.items():
        job = by_id[job_id]
        out[job_id] = (start, min(job.remaining, T) if job.running_mask else problem.end_of(job, start), mask)
    return out


def to_grid(problem: Problem, schedule: Schedule) -> Grid:
    T = problem.horizon
    grid: Grid = [[None] * T for _ in range(problem.gpus)]
    for job_id, (start, end, mask) in batch_spans(problem, schedule).items():
        for g in bits_of(mask):
            row = grid[g]
            for t in range(start, end):
                row[t] = job_id
    for app_id, masks in schedule.realtime.items():
        for t, mask in enumerate(masks):
            for g in bits_of(mask):
                grid[g][t] = app_id
    return grid


def occupancy(grid: Grid) -> dict[str, list[tuple[int, int]]]:
    """job id -> list of (gpu, step) cells it occupies, row by row."""
    cells: dict[str, list[tuple[int, int]]] = {}
    for g, row in enumerate(grid):
        for t, job_id in enumerate(row):
            if job_id is not None:
                cells.setdefault(job_id, []).append((g, t))
    return cells


def step_masks(cells: Iterable[tuple[int, int]], horizon: int) -> list[int]:
    """Per step, the bitmask of GPUs among `cells`."""
    masks = [0] * horizon
    for g, t in cells:
        if 0 <= t < horizon:
            masks[t] |= 1 << g
    return masks

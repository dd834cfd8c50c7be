"""Batch blocks placed into GPU x time around reserved real-time capacity.

`pack` takes jobs in a given order and gives each the earliest start at which a legal block is
free while leaving every step enough GPUs for the real-time curves. Among the free blocks at that
start it prefers, in turn: a block wedged between busy GPUs or node edges on both sides for its
whole run, one touching on one side and aligned to its size (buddy-style), one touching on one
side, one aligned, then the lowest index. That keeps the free pool in whole power-of-two shapes
for the jobs still to come and leaves the high indices to real-time apps.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from solvers.problem import Batch, Problem, free_block_starts, lowest_bit

Bans = dict[str, dict[int, int]]  # job id -> start step -> GPUs its block must avoid at that start


@dataclass(frozen=True)
class Packing:
    starts: dict[str, tuple[int, int]]  # job id -> (start step, GPU bitmask)
    value: float  # sum of priority x w_t over the placed batch GPU-steps
    busy: list[int]  # per step, GPUs held by batch work (running jobs included)


def _spread(mask: int, n: int) -> int:
    """Bits p such that [p, p+n) meets `mask`."""
    k = 1
    while k < n:
        step = min(k, n - k)
        mask |= mask >> step
        k += step
    return mask


@lru_cache(maxsize=64)
def _edge_masks(gpus: int, node_size: int, n: int) -> tuple[int, int, int]:
    """(left edge starts, right edge starts, size-aligned starts) for n-blocks in this pool."""
    left = right = aligned = 0
    for p in range(0, gpus - n + 1):
        local = p % node_size
        if local == 0:
            left |= 1 << p
        if (p + n) % node_size == 0:
            right |= 1 << p
        if local % n == 0:
            aligned |= 1 << p
    return left, right, aligned


def _choose_block(problem: Problem, cands: int, inter: int, n: int) -> int:
    left, right, aligned = _edge_masks(problem.gpus, problem.node_size, n)
    touch_l = cands & ((inter << 1) | left)
    touch_r = cands & ((inter >> n) | right)
    for tier in (touch_l & touch_r, (touch_l | touch_r) & aligned, touch_l | touch_r, cands & aligned, cands):
        if tier:
            return lowest_bit(tier)
    raise AssertionError("no candidate block")  # callers pass a non-empty `cands`


def pack(problem: Problem, order: list[Batch], reserve: list[int], bans: Bans | None = None) -> Packing:
    """Place `order` greedily; `reserve[t]` GPUs stay free at step t for real-time apps."""
    T = problem.horizon
    busy = list(problem.running_busy)
    slack = [problem.gpus - busy[t].bit_count() - reserve[t] for t in range(T)]
    starts: dict[str, tuple[int, int]] = {}
    value = 0.0
    for job in problem.batch:
        if job.running_mask:
            starts[job.id] = (0, job.running_mask)
            value += job.priority * job.gpus * problem.interval_weight(0, min(job.remaining, T))
    for job in order:
        n, s = job.gpus, job.arrival
        job_bans = bans.get(job.id) if bans else None
        while s < T:
            e = min(s + job.duration, T)
            short = next((t for t in range(e - 1, s - 1, -1) if slack[t] < n), -1)
            if short >= 0:
                s = short + 1
                continue
            union, inter = 0, problem.full
            for t in range(s, e):
                union |= busy[t]
                inter &= busy[t]
            cands = free_block_starts(problem, union, n)
            if job_bans and s in job_bans:
                cands &= ~_spread(job_bans[s], n)
            if not cands:
                s += 1
                continue
            block = problem.block(_choose_block(problem, cands, inter, n), n)
            for t in range(s, e):
                busy[t] |= block
                slack[t] -= n
            starts[job.id] = (s, block)
            value += job.priority * n * problem.interval_weight(s, e)
            break
    return Packing(starts, value, busy)

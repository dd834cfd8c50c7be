"""A scenario compiled into plain, fast data: GPU sets as int bitmasks, weights as prefix sums.

Every scheduler works on a `Problem`, never on pydantic objects in its inner loops: Python
ints as bitmasks make "is this block free over these steps" a handful of machine-word ops,
even at 1,024 GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from gpualloc.schemas import BatchJob, Scenario
from gpualloc.solvers.value_models import COMPLETION, GPU_STEPS, ValueModel, completion_value


def mask_of(gpus: Iterable[int]) -> int:
    """Bitmask with bit g set for every GPU g."""
    m = 0
    for g in gpus:
        m |= 1 << g
    return m


def obeys_node_rule(first: int, n: int, node_size: int) -> bool:
    """R3's node rule for an n-GPU block from GPU `first`: within one node, or whole nodes."""
    if n <= node_size:
        return first % node_size + n <= node_size
    return first % node_size == 0 and n % node_size == 0


def bits_of(mask: int) -> list[int]:
    """GPU indices of a bitmask, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch-like job. `running_mask` is non-zero for inherited jobs, fixed on it over steps
    [held_from, remaining): from step 0 for a running job; from later for a blocker holding GPUs
    that take no new work once the running job on them ends."""

    index: int
    id: str
    priority: float
    gpus: int
    duration: int
    arrival: int
    running_mask: int
    remaining: int
    held_from: int = 0


@dataclass(frozen=True, slots=True)
class Realtime:
    """A real-time app; `current_mask` is -1 when the app has no `current` (step 0 is free).
    `median`: its median demand per step where the planner has a forecast's (the heuristic
    shares contested room by it, `heuristic.contention`); empty otherwise. `reserve`: the GPUs
    per step `demand` was lifted by against a node's loss (`planner.node_reserve`), over the
    demand within the app's floor and ceiling; empty where it was not lifted."""

    index: int
    id: str
    priority: float
    demand: tuple[int, ...]
    min_gpus: int
    max_gpus: int
    swap_cap: int
    current_mask: int
    median: tuple[int, ...] = ()
    reserve: tuple[int, ...] = ()


@dataclass(frozen=True)
class Problem:
    name: str
    gpus: int
    node_size: int
    horizon: int
    time_decay: float
    penalty: float
    weights: tuple[float, ...]
    batch: tuple[Batch, ...]
    realtime: tuple[Realtime, ...]
    value_model: ValueModel = GPU_STEPS  # what a batch job is worth where it is placed (`value_models`)

    @cached_property
    def full(self) -> int:
        return (1 << self.gpus) - 1

    @cached_property
    def cum_weight(self) -> tuple[float, ...]:
        """cum_weight[k] = w_0 + ... + w_{k-1}, so a step interval's weight is one subtraction."""
        acc, out = 0.0, [0.0]
        for w in self.weights:
            acc += w
            out.append(acc)
        return tuple(out)

    def interval_weight(self, start: int, end: int) -> float:
        return self.cum_weight[end] - self.cum_weight[start]

    def start_value(self, job: Batch, start: int) -> float:
        """What a queued `job` started at step `start` adds to the objective under the value model
        (`value_models`): never more than at an earlier start."""
        if self.value_model == COMPLETION:
            return completion_value(job.priority, start + job.duration, self.time_decay, self.horizon)
        return job.priority * job.gpus * self.interval_weight(start, self.end_of(job, start))

    def held_value(self, job: Batch) -> float:
        """What an inherited job (running, or a blocker) adds: the same in every plan."""
        if self.value_model == COMPLETION:
            return completion_value(job.priority, job.remaining, self.time_decay, self.horizon)
        return job.priority * job.gpus * self.interval_weight(*self.held_span(job))

    def placed_value(self, job: Batch, start: int) -> float:
        """What `job` adds where a plan has it: `held_value` for an inherited job, else
        `start_value` at `start`."""
        return self.held_value(job) if job.running_mask else self.start_value(job, start)

    def end_of(self, job: Batch, start: int) -> int:
        return min(start + job.duration, self.horizon)

    def held_span(self, job: Batch) -> tuple[int, int]:
        """Steps [first, end) an inherited job holds its GPUs in the window."""
        return job.held_from, min(job.remaining, self.horizon)

    def block(self, start_gpu: int, n: int) -> int:
        return ((1 << n) - 1) << start_gpu

    def valid_starts(self, n: int) -> int:
        """Bitmask of first GPUs at which an n-block obeys the node rule."""
        return self._valid_starts[n]

    @cached_property
    def _valid_starts(self) -> dict[int, int]:
        G, N = self.gpus, self.node_size
        out: dict[int, int] = {}
        n = 1
        while n <= G:
            m = 0
            for p in range(G - n + 1):
                if obeys_node_rule(p, n, N):
                    m |= 1 << p
            out[n] = m
            n *= 2
        return out

    @cached_property
    def node_starts(self) -> int:
        """Bitmask of the first GPU of every node."""
        return mask_of(range(0, self.gpus, self.node_size))

    @cached_property
    def buddy_halves(self) -> tuple[tuple[int, int, int], ...]:
        """Per aligned block size s = 2, 4, ... up to the node size: (mask of the lower s/2 GPUs
        of every s-block, mask of the upper s/2, s/2), over the whole pool; shifting a mask's
        low half up and its high half down spreads "this half holds a GPU" over the block."""
        out, s = [], 2
        while s <= self.node_size:
            half = s // 2
            low = 0
            for base in range(0, self.gpus, s):
                low |= ((1 << half) - 1) << base
            out.append((low & self.full, (low << half) & self.full, half))
            s *= 2
        return tuple(out)

    def node_end_starts(self, n: int) -> int:
        """Bitmask of first GPUs p at which an n-block ends flush with a node's end."""
        return self.node_starts_shifted.get(n, 0)

    @cached_property
    def node_starts_shifted(self) -> dict[int, int]:
        ends = (self.node_starts | (1 << self.gpus)) & ~1  # GPU indices where a node ends
        return {n: ends >> n for n in self._valid_starts}

    @cached_property
    def running_busy(self) -> tuple[int, ...]:
        """Per step, the GPUs held by inherited running jobs."""
        busy = [0] * self.horizon
        for j in self.batch:
            if j.running_mask:
                for t in range(*self.held_span(j)):
                    busy[t] |= j.running_mask
        return tuple(busy)


def compile_scenario(sc: Scenario) -> Problem:
    """Validated scenario -> Problem (defaults resolved, GPU lists turned into bitmasks)."""
    batch, realtime = [], []
    for i, job in enumerate(sc.jobs):
        if isinstance(job, BatchJob):
            run = job.running
            batch.append(
                Batch(
                    i,
                    job.id,
                    float(job.priority),
                    job.gpus,
                    job.duration,
                    job.arrival,
                    mask_of(run.gpus) if run else 0,
                    run.remaining if run else 0,
                )
            )
        else:
            realtime.append(
                Realtime(
                    i,
                    job.id,
                    float(job.priority),
                    tuple(job.demand),
                    job.min_gpus,
                    sc.max_gpus_of(job),
                    sc.swap_cap_of(job),
                    mask_of(job.current) if job.current is not None else -1,
                )
            )
    weights = tuple(sc.time_decay**t for t in range(sc.horizon))
    return Problem(
        sc.name,
        sc.gpus,
        sc.node_size,
        sc.horizon,
        sc.time_decay,
        sc.realtime_penalty,
        weights,
        tuple(batch),
        tuple(realtime),
        sc.value_model or GPU_STEPS,
    )


def free_block_starts(problem: Problem, busy_union: int, n: int) -> int:
    """Bitmask of first GPUs p such that [p, p+n) avoids `busy_union` and obeys the node rule."""
    r = problem.full & ~busy_union
    k = 1
    while k < n and r:
        step = min(k, n - k)
        r &= r >> step
        k += step
    return r & problem.valid_starts(n)


def earliest_block(problem: Problem, job: Batch, busy: list[int]) -> tuple[int, int] | None:
    """(start step, GPU mask) of the first legal block free of `busy` (a mask per step) for the
    whole of `job`'s run, from its arrival on, lowest GPUs first; None when there is none."""
    for start in range(job.arrival, problem.horizon):
        union = 0
        for t in range(start, problem.end_of(job, start)):
            union |= busy[t]
        starts = free_block_starts(problem, union, job.gpus)
        if starts:
            return start, problem.block(lowest_bit(starts), job.gpus)
    return None


def insert_in_order(problem: Problem, jobs: Iterable[Batch], busy: list[int]) -> dict[str, tuple[int, int]]:
    """Each of `jobs` in turn at its earliest legal block free of `busy` (`earliest_block`),
    which then holds it: {job id: (start step, GPU mask)}; a job that fits nowhere is left out.

    `busy` only grows here, so once a job fits nowhere from its arrival on, neither does one at
    least as wide, as long and as late (its block would hold a legal block of the first), and
    such jobs are skipped without a scan: under a full window most of a long queue is such jobs,
    and each scan reads every start of the horizon."""
    placed: dict[str, tuple[int, int]] = {}
    misfits: list[tuple[int, int, int]] = []  # (gpus, duration, arrival) of jobs that fitted nowhere
    for job in jobs:
        if any(n <= job.gpus and d <= job.duration and a <= job.arrival for n, d, a in misfits):
            continue
        block = earliest_block(problem, job, busy)
        if block is None:
            misfits.append((job.gpus, job.duration, job.arrival))
            continue
        start, mask = placed[job.id] = block
        for t in range(start, problem.end_of(job, start)):
            busy[t] |= mask
    return placed


def highest_bits(mask: int, n: int) -> int:
    """The n highest set bits of mask (all of them when it has fewer)."""
    out = 0
    while n > 0 and mask:
        top = 1 << (mask.bit_length() - 1)
        out |= top
        mask ^= top
        n -= 1
    return out


def lowest_bits(mask: int, n: int) -> int:
    """The n lowest set bits of mask (all of them when it has fewer)."""
    out = 0
    while n > 0 and mask:
        low = mask & -mask
        out |= low
        mask ^= low
        n -= 1
    return out


def lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1

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
from typing import TYPE_CHECKING

from gpualloc.solvers.problem import Batch, Problem, free_block_starts, lowest_bit

if TYPE_CHECKING:
    from gpualloc.solvers.policies.heuristic.trade import Trade


@dataclass(frozen=True)
class Packing:
    starts: dict[str, tuple[int, int]]  # job id -> (start step, GPU bitmask)
    value: float  # sum of priority x w_t over the placed batch GPU-steps, less `traded`
    busy: list[int]  # per step, GPUs held by batch work (running jobs included)
    curves: list[list[int]] | None = None  # the real-time curves trades left (None: the layout's)
    traded: float = 0.0  # the shortfall those trades cost, already taken off `value`


MAX_RUNS = 12  # free runs examined per placement: best fit among the lowest ones


def _choose_block(problem: Problem, cands: int, union: int, n: int) -> int:
    """Best fit in space: among the candidates (first GPUs of legal, allowed blocks), one in the
    shortest free run (within a node) over the block's steps, preferring the run's low end,
    then its high end, when that end is aligned to the block size (buddy-style)."""
    N = problem.node_size
    free = problem.full & ~union
    busy = ~free
    exact = cands & ((busy << 1) | problem.node_starts) & ((busy >> n) | problem.node_end_starts(n))
    if exact:
        return lowest_bit(exact)
    best_len, best_pos = None, -1
    left = cands
    for _ in range(MAX_RUNS):
        if not left:
            break
        p = lowest_bit(left)
        below = busy & ((1 << p) - 1)  # the run starts above the highest busy GPU under p
        node_lo, node_hi = ((p // N) * N, min((p // N + 1) * N, problem.gpus)) if n <= N else (0, problem.gpus)
        a = max(below.bit_length(), node_lo)
        up = free >> p
        b = min(p + (up & ~(up + 1)).bit_length(), node_hi)
        in_run = cands & (((1 << (b - a)) - 1) << a)
        left &= ~in_run
        length = b - a
        if best_len is not None and length >= best_len:
            continue
        best_len, hi = length, b - n
        if (in_run >> a) & 1 and (a - node_lo) % n == 0:
            best_pos = a
        elif (in_run >> hi) & 1 and (hi - node_lo) % n == 0:
            best_pos = hi
        else:
            best_pos = lowest_bit(in_run)
        if length == n:
            break
    return best_pos


BOUNDARY_TRIES = 16  # blocks checked one by one when a step boundary is tight


def _fully_within(mask: int, n: int) -> int:
    """Bits p such that [p, p+n) lies inside `mask`."""
    k = 1
    while k < n and mask:
        step = min(k, n - k)
        mask &= mask >> step
        k += step
    return mask


def _boundary_ok(problem: Problem, cands: int, n: int, s: int, e: int, busy: list[int], tslack: list[int]) -> int:
    """Candidates whose block leaves enough GPUs free across the steps s-1 -> s and e-1 -> e.

    Blocks that were busy on the other side of the boundary cost nothing there and pass at
    once; a few of the others are checked one by one.
    """
    T = problem.horizon
    need_s = s > 0 and tslack[s] < n
    need_e = e < T and tslack[e] < n
    if not (need_s or need_e):
        return cands
    ok = cands
    if need_s:
        ok &= _fully_within(busy[s - 1], n)
    if need_e:
        ok &= _fully_within(busy[e], n)
    rest = cands & ~ok
    for _ in range(BOUNDARY_TRIES):
        if not rest:
            break
        low = rest & -rest
        rest ^= low
        block = problem.block(low.bit_length() - 1, n)
        if need_s and (block & ~busy[s - 1]).bit_count() > tslack[s]:
            continue
        if need_e and (block & ~busy[e]).bit_count() > tslack[e]:
            continue
        ok |= low
    return ok


@dataclass(frozen=True)
class Reservation:
    """What batch blocks must leave to the real-time apps.

    `reserve[t]`: GPUs that stay free at step t; `keep[t]`: GPUs that stay free at both t-1 and
    t, so apps can hold on across the step without being pushed off by a new block (None: no
    such need); `zone[t]`: GPUs no block may take at step t (a fixed real-time area, GPUs an
    app is bound to). With `trade`, the curves behind `reserve` and `keep` are the state's, and
    a block may lower them where what it adds beats the shortfall it causes.
    """

    reserve: list[int]
    keep: list[int] | None
    zone: list[int]
    trade: "Trade | None" = None  # real-time service blocks may buy back (the reserving layout's)


class PackState:
    """A partial packing: what is held at each step and what is left for real-time apps.

    `placed` is an append-only log of (job id, start, GPU mask) shared between a state and the
    snapshots taken from it; a state owns its first `count` entries. Snapshots are cheap (four
    per-step lists), and resuming from one copies the log once, not at every placement.
    """

    __slots__ = ("busy", "blocked", "slack", "tslack", "placed", "count", "value", "curves", "traded", "room")

    def __init__(
        self,
        busy: list[int],
        blocked: list[int],
        slack: list[int],
        tslack: list[int],
        placed: list[tuple[str, int, int]],
        count: int,
        value: float,
        curves: list[list[int]] | None = None,
        traded: float = 0.0,
        room: list[int] | None = None,
    ) -> None:
        self.busy: list[int] = busy  # per step: GPUs held by batch work (running jobs included)
        self.blocked: list[int] = blocked  # busy plus the real-time zone
        self.slack: list[int] = slack  # GPUs a new block may still take at each step
        self.tslack: list[int] = tslack  # same, for GPUs free across the step t-1 -> t
        self.placed: list[tuple[str, int, int]] = placed
        self.count: int = count
        self.value: float = value  # batch value, less the shortfall trades cost
        self.curves: list[list[int]] | None = curves  # with a trade: the real-time curves, as cut so far
        self.traded: float = traded  # what those cuts cost (taken off `value`)
        self.room: list[int] | None = room  # with a trade: per step, reserved GPUs cuts could still free

    @classmethod
    def empty(cls, problem: Problem, res: Reservation) -> "PackState":
        """Only the running jobs placed."""
        T, full = problem.horizon, problem.full
        busy = list(problem.running_busy)
        blocked = [busy[t] | res.zone[t] for t in range(T)]
        slack = [problem.gpus - blocked[t].bit_count() - res.reserve[t] for t in range(T)]
        if res.keep is None:  # no step-to-step need: never binding
            tslack = [2 * problem.gpus * (T + 1)] * T
        else:
            tslack = [0] + [(full & ~(busy[t - 1] | busy[t])).bit_count() - res.keep[t] for t in range(1, T)]
        curves: list[list[int]] | None = None
        room: list[int] | None = None
        if res.trade is not None:
            curves = [list(c) for c in res.trade.curves]
            room = res.trade.room(curves, range(T))
        state = cls(busy, blocked, slack, tslack, [], 0, 0.0, curves, 0.0, room)
        for job in problem.batch:
            if job.running_mask:
                state.record(job.id, job.held_from, job.running_mask)
                state.value += problem.held_value(job)
        return state

    def record(self, job_id: str, start: int, mask: int) -> None:
        if len(self.placed) != self.count:
            self.placed = self.placed[: self.count]
        self.placed.append((job_id, start, mask))
        self.count += 1

    def occupy(self, problem: Problem, job: Batch, s: int, block: int) -> None:
        """Hold `block` for `job` from step `s` on (its value counted); no checks."""
        T = problem.horizon
        e = min(s + job.duration, T)
        busy, blocked, slack, tslack = self.busy, self.blocked, self.slack, self.tslack
        if s > 0:  # GPUs free across a boundary: those no batch work holds on either side
            tslack[s] -= (block & ~busy[s - 1]).bit_count()
        if e < T:
            tslack[e] -= (block & ~busy[e]).bit_count()
        for t in range(s, e):
            busy[t] |= block
            blocked[t] |= block
            slack[t] -= job.gpus
        for t in range(s + 1, e):
            tslack[t] -= job.gpus
        self.record(job.id, s, block)
        self.value += problem.start_value(job, s)

    def snapshot(self) -> "PackState":
        """A frozen copy of the per-step lists; the log is shared, not copied."""
        if self.curves is None:
            return PackState(
                self.busy[:], self.blocked[:], self.slack[:], self.tslack[:], self.placed, self.count, self.value
            )
        assert self.room is not None  # set with the curves (a trade)
        return PackState(
            self.busy[:],
            self.blocked[:],
            self.slack[:],
            self.tslack[:],
            self.placed,
            self.count,
            self.value,
            list(self.curves),
            self.traded,
            self.room[:],
        )

    def packing(self) -> Packing:
        return Packing(
            {job_id: (s, m) for job_id, s, m in self.placed[: self.count]},
            self.value,
            self.busy,
            self.curves,
            self.traded,
        )


def fit_at(
    problem: Problem, job: Batch, s: int, blocked: list[int], busy: list[int], slack: list[int], tslack: list[int]
) -> tuple[int, int]:
    """(first GPU of the block `job` takes from step s, -1 when none fits there; the next
    start worth trying), against these per-step lists (a state's, or a trade's trial ones)."""
    T, n = problem.horizon, job.gpus
    e = s + job.duration if s + job.duration < T else T
    for t in range(e - 1, s - 1, -1):
        if slack[t] < n or (t > s and tslack[t] < n):
            return -1, t + 1 if slack[t] < n else t  # past a short step, or from a tight boundary
    union = 0
    for t in range(s, e):
        union |= blocked[t]
    cands = free_block_starts(problem, union, n)
    if cands:
        cands = _boundary_ok(problem, cands, n, s, e, busy, tslack)
    if not cands:
        return -1, s + 1
    return _choose_block(problem, cands, union, n), s + 1


def place(problem: Problem, res: Reservation, state: PackState, job: Batch) -> None:
    """Give `job` its earliest start at which a block is free and `res` stays intact, or an
    earlier one paid for by cutting real-time curves where `res.trade` says that is worth it
    (`trade.earlier_start`); or no start at all."""
    T = problem.horizon
    slack = state.slack
    n, s = job.gpus, job.arrival
    found = None
    if s < T and n <= max(slack[s:]):  # else no step from its arrival on has room: common when oversubscribed
        while s < T:
            first, nxt = fit_at(problem, job, s, state.blocked, state.busy, slack, state.tslack)
            if first >= 0:
                found = s, first
                break
            s = nxt
    if res.trade is not None and res.trade.earlier_start(problem, state, job, found[0] if found else T):
        return
    if found is not None:
        state.occupy(problem, job, found[0], problem.block(found[1], n))


def pack(problem: Problem, order: list[Batch], res: Reservation) -> Packing:
    """Place `order` greedily, each job at its earliest start that leaves `res` intact."""
    state = PackState.empty(problem, res)
    for job in order:
        place(problem, res, state, job)
    return state.packing()

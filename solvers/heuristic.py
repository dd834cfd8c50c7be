"""The fast-mode planner: legal by construction, deterministic, planned over the whole queue.

1. Real-time apps get target curves (`solvers.realtime.target_curves`): demand followed within
   the swap cap, troughs lent to batch work, no daily-peak reservation.
2. Batch jobs are packed (`solvers.packing.pack`) in several priority-led orders; the best
   packing by objective seeds a local search over the order (adjacent swaps, moves to the front),
   bounded by a work budget, not a clock, so the same input always gives the same plan.
3. Real-time GPU identities are assigned around the chosen packing. When a batch block would
   force an app past its swap cap, that block is banned at that start and the packing redone;
   every ban removes an option, so the loop ends, at worst with the block elsewhere or later.
"""

from __future__ import annotations

from dataclasses import dataclass

from solvers.grid import Schedule
from solvers.packing import Bans, Packing, PackState, Reservation, pack, place
from solvers.problem import Batch, Problem
from solvers.realtime import assign_realtime, target_curves

DEFAULT_EFFORT = 0.25


def _seed_orders(problem: Problem, jobs: list[Batch]) -> list[list[Batch]]:
    """Value-led and priority-led orders with different tie-breaks, plus size and arrival orders."""
    def alone(j: Batch) -> float:
        """What the job adds if it starts at its arrival: priority x GPUs x weighted steps."""
        return j.priority * j.gpus * problem.interval_weight(min(j.arrival, problem.horizon), problem.end_of(j, j.arrival))

    keys = (
        lambda j: (-alone(j), j.index),
        lambda j: (-j.priority, -j.gpus * j.duration, j.arrival, j.index),
        lambda j: (-j.priority * j.gpus, -j.duration, j.index),
    )
    seen, out = set(), []
    for key in keys:
        order = sorted(jobs, key=key)
        sig = tuple(j.index for j in order)
        if sig not in seen:
            seen.add(sig)
            out.append(order)
    return out


def _top_zone(problem: Problem, curves: list[list[int]]) -> list[int]:
    """Per step, the highest free GPUs, as many as the real-time curves ask for (a skyline)."""
    zone = []
    for t in range(problem.horizon):
        want = sum(c[t] for c in curves)
        free = problem.full & ~problem.running_busy[t]
        mask = 0
        while want > 0 and free:
            top = 1 << (free.bit_length() - 1)
            mask |= top
            free ^= top
            want -= 1
        zone.append(mask)
    return zone


@dataclass(frozen=True)
class _Context:
    """What every packing of one problem shares: real-time curves and what they ask of batch work."""

    curves: list[list[int]]
    reservation: Reservation

    @classmethod
    def reserving(cls, problem: Problem, curves: list[list[int]]) -> "_Context":
        """Apps may end up on any GPUs; blocks leave enough of them free, step by step."""
        T = problem.horizon
        reserve = [sum(c[t] for c in curves) for t in range(T)]
        keep = [0] + [sum(min(c[t - 1], c[t]) for c in curves) for t in range(1, T)]
        return cls(curves, Reservation(reserve, keep, [0] * T, _current_gpus(problem)))

    @classmethod
    def skyline(cls, problem: Problem, curves: list[list[int]]) -> "_Context":
        """Apps live at the top of the pool, growing down into it; blocks fill in below."""
        T = problem.horizon
        return cls(curves, Reservation([0] * T, [0] * T, _top_zone(problem, curves), _current_gpus(problem)))

    def pack(self, problem: Problem, order: list[Batch], bans: Bans | None = None) -> Packing:
        return pack(problem, order, self.reservation, bans)


def _current_gpus(problem: Problem) -> int:
    mask = 0
    for app in problem.realtime:
        mask |= max(app.current_mask, 0)
    return mask


class _Search:
    """Packings of one context under a deterministic work budget (counted in job placements).

    A trial order is packed from the snapshot of its unchanged prefix, and abandoned as soon as
    even its best case (every remaining job at its arrival) cannot beat the incumbent.
    """

    def __init__(self, problem: Problem, ctx: _Context, budget: int):
        self.problem, self.ctx, self.budget = problem, ctx, budget
        self.potential = {j.id: j.priority * j.gpus * problem.interval_weight(min(j.arrival, problem.horizon), problem.end_of(j, j.arrival))
                          for j in problem.batch}

    def run(self, order: list[Batch], prefix: list[PackState], floor: float,
            budgeted: bool = True) -> tuple[PackState, list[PackState]] | None:
        """Pack `order` from `prefix` (snapshots of its first len(prefix)-1 jobs); None when it
        cannot beat `floor` or (when `budgeted`) the budget runs out."""
        k = len(prefix) - 1
        rest = [self.potential[j.id] for j in order[k:]]
        remaining = sum(rest)
        state = prefix[-1].copy()
        snaps = list(prefix)
        res = self.ctx.reservation
        for idx in range(k, len(order)):
            if state.value + remaining <= floor + 1e-9 or (budgeted and self.budget <= 0):
                return None
            self.budget -= budgeted
            place(self.problem, res, state, order[idx])
            remaining -= rest[idx - k]
            snaps.append(state.copy())
        if state.value <= floor + 1e-9:
            return None
        return state, snaps

    def improve(self, order: list[Batch], snaps: list[PackState]) -> tuple[list[Batch], PackState]:
        """First-improvement local search: adjacent swaps and moves to the front."""
        best = snaps[-1]
        improved = True
        while improved and self.budget > 0:
            improved = False
            for i in range(1, len(order)):
                moves = ((order[:i - 1] + [order[i], order[i - 1]] + order[i + 1:], i - 1),
                         ([order[i]] + order[:i] + order[i + 1:], 0))
                for cand, k in moves:
                    found = self.run(cand, snaps[:k + 1], best.value)
                    if found:
                        order, (best, snaps), improved = cand, found, True
                        break
                if improved or self.budget <= 0:
                    break
        return order, best


def _finish(problem: Problem, ctx: _Context, order: list[Batch], packing: Packing) -> tuple[Schedule, float]:
    """Assign real-time GPUs around `packing`, banning blocks that force a move; return the
    schedule and its objective.

    Strictly first (a block that leaves an app short by taking its GPUs is banned too); when
    that banned anything, also leniently (such shortfalls accepted), and keep the better.
    """
    strict = _assign_with_bans(problem, ctx, order, packing, strict=True)
    if strict[2]:
        lenient = _assign_with_bans(problem, ctx, order, packing, strict=False)
        if lenient[1] > strict[1] + 1e-9:
            return lenient[0], lenient[1]
    return strict[0], strict[1]


def _assign_with_bans(problem: Problem, ctx: _Context, order: list[Batch], packing: Packing,
                      strict: bool) -> tuple[Schedule, float, bool]:
    """(schedule, objective, whether any block was banned)."""
    bans: Bans = {}
    while True:
        sets, forced = assign_realtime(problem, ctx.curves, packing.busy, strict)
        if forced is None:
            break
        _ban_culprits(problem, packing, forced.step, forced.gpus, bans)
        packing = ctx.pack(problem, order, bans)
    penalty = 0.0
    for app in problem.realtime:
        for t, mask in enumerate(sets[app.id]):
            short = app.demand[t] - mask.bit_count()
            if short > 0:
                penalty += app.priority * problem.weights[t] * short
    return Schedule(batch=packing.starts, realtime=sets), packing.value - problem.penalty * penalty, bool(bans)


def heuristic_schedule(problem: Problem, effort: float = DEFAULT_EFFORT) -> Schedule:
    """Plan batch blocks and real-time GPU sets for the whole horizon."""
    curves = target_curves(problem)
    queue = [j for j in problem.batch if not j.running_mask]
    seeded = []  # per context: (packing value, context, search, best seed order, its snapshots)
    for ctx in (_Context.reserving(problem, curves), _Context.skyline(problem, curves)):
        search = _Search(problem, ctx, budget=int(effort * 40 * max(len(queue), 1)))
        start = [PackState.empty(problem, ctx.reservation)]
        best_order, best_snaps = [], start
        for order in _seed_orders(problem, queue):
            found = search.run(order, start, best_snaps[-1].value if best_order else float("-inf"), budgeted=False)
            if found:
                best_order, best_snaps = order, found[1]
        seeded.append((best_snaps[-1].value, ctx, search, best_order, best_snaps))
    seeded.sort(key=lambda s: -s[0])
    _, ctx, search, order, snaps = seeded[0]
    improved_order, improved = search.improve(order, snaps)
    candidates = [(ctx, improved_order, improved)] + [(c, o, sn[-1]) for _, c, _, o, sn in seeded]
    best_schedule, best_objective = None, float("-inf")
    for cand_ctx, cand_order, state in candidates:
        schedule, objective = _finish(problem, cand_ctx, cand_order, state.packing())
        if objective > best_objective + 1e-9:
            best_schedule, best_objective = schedule, objective
    return best_schedule


def _ban_culprits(problem: Problem, packing: Packing, step: int, gpus: int, bans: Bans) -> None:
    """Ban, at `step`, every block starting then on `gpus` (the GPUs an app could not leave).

    When no block starts there (the app fell short for want of free GPUs, not for a forced
    move), take the least valuable batch job active at `step` out of the plan altogether.
    """
    hit = False
    for job in problem.batch:
        placed = packing.starts.get(job.id)
        if placed and not job.running_mask and placed[0] == step and placed[1] & gpus:
            per_job = bans.setdefault(job.id, {})
            per_job[step] = per_job.get(step, 0) | gpus
            hit = True
    if hit:
        return
    active = [j for j in problem.batch if not j.running_mask and j.id in packing.starts
              and packing.starts[j.id][0] <= step < problem.end_of(j, packing.starts[j.id][0])]
    if not active:
        raise ValueError(f"real-time floors cannot be met at step {step} even without batch work")
    victim = min(active, key=lambda j: (j.priority * j.gpus * j.duration, -j.index))
    bans[victim.id] = {s: problem.full for s in range(problem.horizon)}

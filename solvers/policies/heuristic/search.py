"""The packing search of one layout, in Python: the reference the compiled search
(solvers/native/src/search.rs) is proven against, and the path taken without it.

Packings of one layout under a deterministic work budget (counted in job placements). A trial
order is packed from the snapshot of its unchanged prefix, and abandoned as soon as even its
best case (every remaining job at its arrival) cannot beat the incumbent. Sums of floats run in
a fixed order (left to right), so both implementations reach the same values bit for bit.
"""

from __future__ import annotations

import random

from gpualloc.solvers.policies.heuristic.packing import Packing, PackState, Reservation, place
from gpualloc.solvers.problem import Batch, Problem


class Search:
    """Seed orders packed around one layout's reservation, then a local search over the best
    one; `order` and `packing()` are the best found so far."""

    def __init__(self, problem: Problem, res: Reservation, budget: int, potential: dict[str, float]):
        self.problem, self.res, self.budget = problem, res, budget
        self.potential = potential  # job id -> value_at_arrival
        self._best: tuple[list[Batch], list[PackState]] | None = None

    @property
    def order(self) -> list[Batch]:
        return self._best[0] if self._best else []

    def packing(self) -> Packing:
        if self._best is None:
            return PackState.empty(self.problem, self.res).packing()
        return self._best[1][-1].packing()

    def best_of(self, seeds: list[list[Batch]]) -> bool:
        """Pack each seed order from the running jobs on, each only while it can beat the best
        so far; True when the best changed."""
        start = self._best[1][:1] if self._best else [PackState.empty(self.problem, self.res)]
        changed = False
        for cand in seeds:
            if self._best is not None and cand == self._best[0]:
                continue
            floor = self._best[1][-1].value if self._best and self._best[0] else float("-inf")
            found = self._run(cand, start, floor, budgeted=False)
            if found is not None:
                self._best, changed = (cand, found), True
        return changed

    def improve(self) -> bool:
        """Iterated local search: descend (`_descend`); while budget is left, kick the best
        order (one job moved earlier, at positions drawn from a generator seeded by the
        queue's length, so the same input gives the same plan) and descend again from there.
        True when a better order was found (it is then the best)."""
        if self._best is None:
            return False
        order, snaps = self._best
        rng = random.Random(len(order))
        best_order, best_snaps, changed = order, snaps, False
        while True:
            order, snaps = self._descend(order, snaps)
            if snaps[-1].value > best_snaps[-1].value + 1e-9:
                best_order, best_snaps, changed = order, snaps, True
            if self.budget <= 0 or len(best_order) < 3:
                break
            j = rng.randrange(1, len(best_order))
            i = rng.randrange(0, j)
            kicked = best_order[:i] + [best_order[j]] + best_order[i:j] + best_order[j + 1 :]
            found = self._run(kicked, best_snaps[: i + 1], float("-inf"))
            if found is None:
                break
            order, snaps = kicked, found
        self._best = best_order, best_snaps
        return changed

    def _run(
        self, order: list[Batch], prefix: list[PackState], floor: float, budgeted: bool = True
    ) -> list[PackState] | None:
        """Pack `order` from `prefix` (snapshots of its first len(prefix)-1 jobs): the
        snapshots after each job; None when it cannot beat `floor` or (when `budgeted`) the
        budget runs out."""
        k = len(prefix) - 1
        if budgeted:  # a trial costs at least a placement, even one its bound ends at once
            if self.budget <= 0:
                return None
            self.budget -= 1
        rest = [self.potential[j.id] for j in order[k:]]
        remaining = 0.0
        for x in rest:  # left to right, as the compiled search sums
            remaining += x
        state = prefix[-1].snapshot()
        snaps = list(prefix)
        for idx in range(k, len(order)):
            if state.value + remaining <= floor + 1e-9 or (budgeted and self.budget <= 0):
                return None
            self.budget -= budgeted
            place(self.problem, self.res, state, order[idx])
            remaining -= rest[idx - k]
            snaps.append(state.snapshot())
        if state.value <= floor + 1e-9:
            return None
        return snaps

    def _descend(self, order: list[Batch], snaps: list[PackState]) -> tuple[list[Batch], list[PackState]]:
        """First-improvement local search: adjacent swaps and moves to the front."""
        improved = True
        while improved and self.budget > 0:
            improved = False
            for i in range(1, len(order)):
                moves = (
                    (order[: i - 1] + [order[i], order[i - 1]] + order[i + 1 :], i - 1),
                    ([order[i]] + order[:i] + order[i + 1 :], 0),
                )
                for cand, k in moves:
                    found = self._run(cand, snaps[: k + 1], snaps[-1].value)
                    if found:
                        order, snaps, improved = cand, found, True
                        break
                if improved or self.budget <= 0:
                    break
        return order, snaps

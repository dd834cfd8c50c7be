"""Real-time service traded against batch value, one block at a time (the reserving layout).

The reservation keeps each app's curve free for it, so a block that would need some of those
GPUs waits, possibly past the horizon. Yet the objective prices a real-time GPU-step short at
penalty x priority x w_t and a batch GPU-step at the job's priority x w_t: when a block started
earlier adds more than the shortfall it causes, the optimum starts it earlier. So before a block
takes its ordinary start, `Trade.earlier_start` tries the earlier starts its arrival allows,
each paid for by cutting the cheapest apps' curves (never below their floors) where the block
needs their GPUs, the cut spread to the neighbouring steps so the curve stays within the app's
swap cap. The first start whose gain beats its shortfall takes it; the cut curves become the
state's, and what they cost comes off the state's value so the search sees the trade's price.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpualloc.solvers.policies.heuristic.packing import PackState, fit_at
from gpualloc.solvers.problem import Batch, Problem


def reserved(level: int, pinned: int) -> int:
    """GPUs a curve at `level` asks the reservation to keep free: those beyond the app's own
    pinned GPUs, which sit in the zone already."""
    return level - min(pinned, level)


TRIES = 4  # earlier starts costed per placement (those the floors leave room for): a work bound


@dataclass(frozen=True)
class Trade:
    curves: list[list[int]]  # per app: the curve the reservation starts from
    floors: list[list[int]]  # per app: the lowest a cut may take it
    pinned: list[list[int]]  # per app, per step: GPUs of its own in the zone (not in the reserve)
    low: list[list[int]]  # per app, per step: a cut's limit, max(floor, pinned)
    worth: list[float]  # per app: penalty x priority, the price of a GPU-step short
    caps: list[int]
    demand: list[tuple[int, ...]]
    weights: tuple[float, ...]  # w_t
    cheapest: list[int]  # app indices, cheapest first

    @classmethod
    def of(cls, problem: Problem, curves: list[list[int]], floors: list[list[int]], pinned: list[list[int]]) -> "Trade":
        worth = [problem.penalty * app.priority for app in problem.realtime]
        low = [[max(f, p) for f, p in zip(fl, pn)] for fl, pn in zip(floors, pinned)]
        return cls(
            curves,
            floors,
            pinned,
            low,
            worth,
            [app.swap_cap for app in problem.realtime],
            [app.demand for app in problem.realtime],
            problem.weights,
            sorted(range(len(worth)), key=lambda a: (worth[a], a)),
        )

    def earlier_start(self, problem: Problem, state: PackState, job: Batch, ordinary: int) -> bool:
        """Start `job` before `ordinary` (its start without trading, T for none) when a cut of
        the real-time curves pays for it; True when it did (the job is then placed)."""
        T, n = problem.horizon, job.gpus
        end = min(ordinary, T)
        if end <= job.arrival:
            return False
        base = problem.start_value(job, ordinary) if ordinary < T else 0.0
        if problem.start_value(job, job.arrival) <= base + 1e-9:
            return False
        reach = min(end + job.duration, T)
        assert state.room is not None  # a trading state: its curves and room are set
        hard = [a + b for a, b in zip(state.slack[job.arrival : reach], state.room[job.arrival : reach])]
        tries, s = 0, job.arrival
        while s < end and tries < TRIES:
            e = min(s + job.duration, T)
            gain = problem.start_value(job, s) - base
            if gain <= 1e-9:  # later starts gain less still
                return False
            short = next((t for t in range(e - 1, s - 1, -1) if hard[t - job.arrival] < n), -1)
            if short >= 0:  # even the floors leave no room at `short`: start after it
                s = short + 1
                continue
            tries += 1
            if self._take(problem, state, job, s, e, gain):
                return True
            s += 1
        return False

    def _take(self, problem: Problem, state: PackState, job: Batch, s: int, e: int, gain: float) -> bool:
        """Place `job` at s with the cuts it needs when they cost less than `gain`."""
        n = job.gpus
        cut = self._cut(state, n, s, e, gain)
        if cut is None:
            return False
        curves, cost, freed = cut
        state_curves = state.curves
        assert state_curves is not None and state.room is not None  # a trading state
        slack = [x + f for x, f in zip(state.slack, freed)]
        tslack = self._tslack(state, curves)
        first, _ = fit_at(problem, job, s, state.blocked, state.busy, slack, tslack)
        if first < 0:
            return False
        state.curves, state.slack, state.tslack = curves, slack, tslack
        cut_rows = [(c, o) for c, o in zip(curves, state_curves) if c is not o]
        changed = [u for u in range(len(slack)) if any(c[u] != o[u] for c, o in cut_rows)]
        for u, free in zip(changed, self.room(curves, changed)):
            state.room[u] = free
        state.occupy(problem, job, s, problem.block(first, n))
        state.value -= cost
        state.traded += cost
        return True

    def room(self, curves: list[list[int]], steps: Iterable[int]) -> list[int]:
        """Per step of `steps`: the reserved GPUs the apps could give up (above their floors
        and pins)."""
        out = []
        for t in steps:
            free = 0
            for c, low in zip(curves, self.low):
                if c[t] > low[t]:
                    free += c[t] - low[t]
            out.append(free)
        return out

    def _reserved(self, a: int, level: int, t: int) -> int:
        return reserved(level, self.pinned[a][t])

    def _cut(
        self, state: PackState, n: int, s: int, e: int, gain: float
    ) -> tuple[list[list[int]], float, list[int]] | None:
        """Curves with the cheapest apps cut where a block of n GPUs over [s, e) needs their
        reserved GPUs, the weighted shortfall the cuts add, and the reserved GPUs they free at
        each step; None when floors forbid it or the shortfall reaches `gain`."""
        assert state.curves is not None  # a trading state
        curves = list(state.curves)  # rows are copied when first cut
        copied = [False] * len(curves)
        freed = [0] * len(state.slack)
        cost = 0.0
        for t in range(s, e):
            need = n - state.slack[t] - freed[t]
            for a in self.cheapest:
                if need <= 0:
                    break
                room = curves[a][t] - self.low[a][t]
                if room <= 0:
                    continue
                if not copied[a]:
                    curves[a], copied[a] = curves[a][:], True
                take = min(room, need)
                cost += self._lower(a, curves[a], t, curves[a][t] - take, freed)
                if cost >= gain:
                    return None
                need = n - state.slack[t] - freed[t]
            if need > 0:
                return None
        return curves, cost, freed

    def _lower(self, a: int, c: list[int], t: int, level: int, freed: list[int]) -> float:
        """Cut app a's curve `c` to `level` at t, spread outward at the swap cap's slope until
        the curve is no higher than the cut (it rises at most that fast, so it stays within
        the cap); add the reserved GPUs it frees to `freed`; return the shortfall it adds."""
        cost, cap, floor, dem, w = 0.0, self.caps[a], self.floors[a], self.demand[a], self.weights
        for step in (1, -1):
            u = t if step == 1 else t - 1
            while 0 <= u < len(c):
                lower = max(level + abs(u - t) * cap, floor[u])
                if lower >= c[u]:
                    break
                freed[u] += self._reserved(a, c[u], u) - self._reserved(a, lower, u)
                cost += self.worth[a] * w[u] * (min(c[u], dem[u]) - min(lower, dem[u]))
                c[u] = lower
                u += step
        return cost

    def _tslack(self, state: PackState, curves: list[list[int]]) -> list[int]:
        """The state's step-to-step slack under `curves` (what apps keep across a step)."""
        tslack = state.tslack[:]
        assert state.curves is not None  # a trading state
        for a in self.cheapest:
            old, new = state.curves[a], curves[a]
            if new is old:  # rows are copied only when cut
                continue
            for u in range(1, len(old)):
                if new[u] != old[u] or new[u - 1] != old[u - 1]:
                    tslack[u] += min(old[u - 1], old[u]) - min(new[u - 1], new[u])
        return tslack

"""Real-time demand served with the GPUs batch work left: the last step of the greedy, and of
the heuristic's plans that held some apps below their demand so batch work could have the GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from gpualloc.solvers.policies.heuristic.realtime import free_levels, target_curves
from gpualloc.solvers.problem import Problem, bits_of


def grow_to_demand(
    problem: Problem, floor_sets: dict[str, list[int]], batch_busy: list[int], curves: list[list[int]] | None = None
) -> dict[str, list[int]]:
    """Each app (most valuable first) grows its legal sets `floor_sets` toward its demand with the
    GPUs left around `batch_busy`, up to `curves` (default: `target_curves`). A GPU joins at step
    t only if the swap budget (R4) has room at t and at the step r it must be left again (when
    batch work, a floor set or a more valuable app takes it, or when the app already holds its
    ceiling there, R3), and is then held through [t, r); its leaving is booked at r before it is
    taken. A GPU the app holds in `current` is kept the same way, at no cost at step 0. Swaps are
    counted on the floor sets and the extras apart: an overcount at worst, so the sets stay legal."""
    T = problem.horizon
    taken = list(batch_busy)
    for masks in floor_sets.values():
        for t, mask in enumerate(masks):
            taken[t] |= mask
    if curves is None:  # demand ramped within the swap caps, floors and ceilings
        curves = target_curves(problem)
    out = {app_id: list(masks) for app_id, masks in floor_sets.items()}
    for k in sorted(range(len(problem.realtime)), key=lambda i: (-problem.realtime[i].priority, i)):
        app, sets = problem.realtime[k], out[problem.realtime[k].id]
        before = [app.current_mask] + sets[:-1]
        used = [(sets[t] ^ before[t]).bit_count() if before[t] >= 0 else 0 for t in range(T)]
        budget = [app.swap_cap if before[t] >= 0 else problem.gpus for t in range(T)]  # step 0 free without `current`
        extras = [0] * T
        held = [m.bit_count() for m in sets]  # GPUs the app holds at each step: its set and its extras
        full = _first_full(held, app.max_gpus)  # from each step, the first at which it holds its ceiling

        def until(g: int, t: int) -> int:
            """The first step from t at which GPU g is taken (T: free to the end)."""
            return next((u for u in range(t, T) if taken[u] >> g & 1), T)

        def claim(g: int, t: int, kept: bool) -> bool:
            """Hold GPU g from step t until it is taken or the app is at its ceiling (a GPU held
            on through that step would take it past `max_gpus`); False when the budget forbids it."""
            r = min(until(g, t), full[t])
            leave = r < T and used[r] >= budget[r]
            if leave or (not kept and used[t] >= budget[t]):
                return False
            used[t] += -1 if kept else 1  # a kept GPU of `current` is a swap the floors counted
            if r < T:
                used[r] += 1
            for u in range(t, r):
                extras[u] |= 1 << g
                held[u] += 1
                if held[u] == app.max_gpus:
                    _now_full(full, u)
            return True

        if app.current_mask > 0:  # GPUs of `current` beyond the floor set: kept while free
            for g in sorted(bits_of(app.current_mask & ~sets[0] & ~taken[0]), key=lambda g: (-until(g, 0), g)):
                if held[0] >= curves[k][0]:
                    break
                claim(g, 0, kept=True)
        for t in range(T):
            if held[t] >= curves[k][t] or used[t] >= budget[t]:
                continue
            for g in _longest_free_first(problem.full & ~taken[t] & ~sets[t] & ~extras[t], taken, t):
                if held[t] >= curves[k][t] or used[t] >= budget[t]:
                    break
                claim(g, t, kept=False)
        for t in range(T):
            sets[t] |= extras[t]
            taken[t] |= sets[t]
    return out


def _first_full(held: list[int], ceiling: int) -> list[int]:
    """From each step, the first step at which `held` reaches `ceiling` (its length: none)."""
    out, first = [len(held)] * len(held), len(held)
    for u in range(len(held) - 1, -1, -1):
        if held[u] >= ceiling:
            first = u
        out[u] = first
    return out


def _now_full(full: list[int], u: int) -> None:
    """`_first_full`'s answers once step u reaches the ceiling (holdings only grow): every step up
    to u whose first full step came later now finds u."""
    for v in range(u, -1, -1):
        if full[v] <= u:
            break
        full[v] = u


def _longest_free_first(free: int, taken: list[int], t: int) -> Iterator[int]:
    """The GPUs of `free` (at step t), those that stay untaken longest first (fewest leaves
    later), lowest index among equals; computed level by level on bitmasks, lazily."""
    below = 0
    for level in reversed(free_levels(free, taken, t)):
        yield from bits_of(level & ~below)
        below |= level

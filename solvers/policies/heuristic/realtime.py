"""Real-time apps in the heuristic: target GPU counts per step, then GPU identities per step.

Counts first: the demand curve, clamped to [min_gpus, max_gpus], lifted into the smallest
curve whose step-to-step change stays within the swap cap (ramp up ahead of a peak, ramp down
after it; never a flat daily-peak reservation), then lowered where running jobs and floors leave
no room, lowest priority first. Identities second, once batch blocks are placed: each app keeps
the GPUs it held, sheds the ones that get busy soonest and takes the ones that stay free longest,
so batch blocks rarely force it to move. A forced move beyond the swap cap is reported, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.solvers.problem import Problem, Realtime, highest_bits


def _floor(app: Realtime, t: int) -> int:
    """Fewest GPUs the app may hold at step t (min_gpus, and R4's limit on shedding `current`)."""
    if app.current_mask < 0:
        return app.min_gpus
    return max(app.min_gpus, app.current_mask.bit_count() - (t + 1) * app.swap_cap)


def _ceiling(app: Realtime, t: int) -> int:
    """Most GPUs the app may hold at step t (max_gpus, and R4's limit on growing from `current`)."""
    if app.current_mask < 0:
        return app.max_gpus
    return min(app.max_gpus, app.current_mask.bit_count() + (t + 1) * app.swap_cap)


def _ramped(values: list[int], cap: int) -> list[int]:
    """Smallest curve >= values whose step-to-step change is at most `cap` (max-plus envelope)."""
    out = list(values)
    for t in range(1, len(out)):
        out[t] = max(out[t], out[t - 1] - cap)
    for t in range(len(out) - 2, -1, -1):
        out[t] = max(out[t], out[t + 1] - cap)
    return out


def floor_curves(problem: Problem) -> list[list[int]]:
    """Fewest GPUs each real-time app may hold at each step (order of `problem.realtime`)."""
    return [[_floor(app, t) for t in range(problem.horizon)] for app in problem.realtime]


def target_curves(problem: Problem) -> list[list[int]]:
    """GPU count each real-time app aims to hold at each step (order of `problem.realtime`)."""
    T = problem.horizon
    curves = []
    for app in problem.realtime:
        wanted = [max(min(d, app.max_gpus), _floor(app, t)) for t, d in enumerate(app.demand)]
        lifted = _ramped(wanted, app.swap_cap)
        curves.append([min(lifted[t], _ceiling(app, t)) for t in range(T)])
    _fit_capacity(problem, curves)
    return curves


def _fit_capacity(problem: Problem, curves: list[list[int]]) -> None:
    """Lower curves until apps plus running jobs fit the pool at every step, lowest priority first.

    A cut at step t is spread to its neighbours (|t' - t| * cap above it) so ramps stay legal;
    floors are themselves cap-Lipschitz, so the cut never goes below them.
    """
    apps = problem.realtime
    by_priority = sorted(range(len(apps)), key=lambda i: (apps[i].priority, -i))
    for t in range(problem.horizon):
        room = problem.gpus - problem.running_busy[t].bit_count()
        excess = sum(c[t] for c in curves) - room
        for i in by_priority:
            if excess <= 0:
                break
            app, curve = apps[i], curves[i]
            cut = min(excess, curve[t] - _floor(app, t))
            if cut <= 0:
                continue
            level = curve[t] - cut
            for u in range(problem.horizon):
                curve[u] = min(curve[u], level + abs(u - t) * app.swap_cap)
            excess -= cut


@dataclass(frozen=True)
class ForcedMove:
    """An app that batch blocks would push past its swap cap or below its floor at `step`."""

    app: str
    step: int
    gpus: int  # bitmask of the GPUs it held at step - 1 that batch work takes at `step`


def free_levels(mask: int, busy: list[int], t: int) -> list[int]:
    """levels[k]: the GPUs of `mask` that stay free of `busy` from step t+1 through t+k (the
    last level is the longest-lasting; empty levels are not listed)."""
    levels = [mask]
    for k in range(t + 1, len(busy)):
        nxt = levels[-1] & ~busy[k]
        if not nxt:
            break
        levels.append(nxt)
    return levels


def _pick_lasting(candidates: int, busy: list[int], t: int, need: int) -> int:
    """`need` GPUs of `candidates` that stay free longest after step t (ties: highest index).

    Real-time GPUs gather at the top and away from blocks about to start, so batch blocks
    rarely push an app off its GPUs.
    """
    if candidates.bit_count() <= need:
        return candidates
    chosen = 0
    for level in reversed(free_levels(candidates, busy, t)):
        chosen |= highest_bits(level & ~chosen, need - chosen.bit_count())
        if chosen.bit_count() >= need:
            break
    return chosen


def assign_realtime(
    problem: Problem,
    curves: list[list[int]],
    busy: list[int],
    strict: bool = False,
    fixed: dict[int, list[int]] | None = None,
) -> tuple[dict[str, list[int]], list[ForcedMove]]:
    """GPU sets per step for every app around the batch occupancy `busy` (bitmask per step).

    Returns the sets and the forced moves: moves past the swap cap or below the floor, and with
    `strict` also those that leave an app short of its curve because the cap was spent leaving
    GPUs that batch blocks took. The sets are legal only when that list is empty; the pass goes
    on past each forced move (the app keeps what it can) so one pass finds them all.
    Apps in `fixed` (index -> set per step) keep those sets; the others never use those GPUs.
    """
    T, apps = problem.horizon, problem.realtime
    fixed = fixed or {}
    homes = 0  # GPUs of fixed apps' sets at any step: off limits to the others
    for masks in fixed.values():
        for mask in masks:
            homes |= mask
    busy = [b | homes for b in busy]
    order = sorted((i for i in range(len(apps)) if i not in fixed), key=lambda i: (-apps[i].priority, i))
    sets: list[list[int]] = [list(fixed[i]) if i in fixed else [0] * T for i in range(len(apps))]
    found: list[ForcedMove] = []
    later = [0] * T  # later[t]: GPUs busy at some step after t
    for t in range(T - 2, -1, -1):
        later[t] = later[t + 1] | busy[t + 1]
    for t in range(T):
        free = problem.full & ~busy[t]
        avail = free
        wants: list[tuple[int, int, int]] = []
        for i in order:
            app = apps[i]
            prev = sets[i][t - 1] if t else app.current_mask
            target = curves[i][t]
            if prev < 0:
                wants.append((i, target, 0))
                continue
            kept = prev & free
            if kept.bit_count() >= target:
                sets[i][t] = _pick_lasting(kept, busy, t, target)
                avail &= ~sets[i][t]
                continue
            forced = prev & ~free
            room = app.swap_cap - forced.bit_count()
            if room < 0 or (strict and forced and kept.bit_count() + room < target):
                _record(found, ForcedMove(app.id, t, forced))
            sets[i][t] = kept
            avail &= ~kept
            wants.append((i, min(target - kept.bit_count(), max(room, 0)), forced))
        for i, need, forced in wants:
            if need > 0:
                pick = _pick_lasting(avail, busy, t, need)
                sets[i][t] |= pick
                avail &= ~pick
            if sets[i][t].bit_count() < apps[i].min_gpus:
                _record(found, ForcedMove(apps[i].id, t, forced))
        for i in order:
            prev = sets[i][t - 1] if t else apps[i].current_mask
            if prev >= 0:
                spare = apps[i].swap_cap - (sets[i][t] ^ prev).bit_count()
                sets[i][t], avail = _migrate(sets[i][t], avail, busy, later, t, spare)
    return {app.id: s for app, s in zip(apps, sets)}, found


def _migrate(held: int, avail: int, busy: list[int], later: list[int], t: int, spare: int) -> tuple[int, int]:
    """Spend spare swap budget moving off GPUs that a block takes soon, one GPU (2 swaps) at a
    time, so the app is not pushed past its cap later. Returns (held, avail)."""
    T = len(busy)
    while spare >= 2 and held & later[t]:
        until = next((k for k in range(t + 1, T) if held & busy[k]), None)
        if until is None:
            break
        threatened = held & busy[until]
        outlasting = avail
        for k in range(t + 1, until + 1):
            outlasting &= ~busy[k]
        if not outlasting:
            break
        leave = threatened & -threatened
        enter = _pick_lasting(outlasting, busy, t, 1)
        held = (held & ~leave) | enter
        avail = (avail & ~enter) | leave
        spare -= 2
    return held, avail


def _record(found: list[ForcedMove], move: ForcedMove) -> None:
    """Keep an app's first forced move only: the later ones follow from it."""
    if all(m.app != move.app for m in found):
        found.append(move)

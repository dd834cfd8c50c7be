"""A node's worth of real-time GPUs held against a node's loss (`forecast.realtime_node_reserve`).

When a node goes down, the apps lose the GPUs they held on it, and running batch work, which
is never moved, holds the rest of the pool: the apps regrow only as jobs end, hours in a small
pool. With the reserve on, each step of the plan holds the apps enough GPUs that losing any one
node still leaves them, together, their median demand: the GPUs they could lose (a node's, or all they
hold when that is fewer), less the headroom they already hold above their medians. The lift
takes only room that running work and the apps' planned demands leave, so it never cuts
another app's demand, and it is shared by each app's planned demand (the GPUs it could lose),
the remainder one GPU an app, highest priority first, within the ceilings. It covers the apps
together: one app's headroom may stand in for another's loss (the GPUs can move between them
within their swap caps).

Its price is the batch work those GPUs would have held: on the serving and generated traces it
trades objective and completions for service (docs/results.md, "A node's worth held"). It
counts GPUs, not where they sit: apps whose sets, lift included, fit on one node can still lose
them together; a pool of one node gets none. The planners plan on the lifted demand
(`Realtime.reserve` records the lift; full mode's bound is then on the lifted objective and is
not published); FIFO, the contract's baseline, reserves its static peaks on the demand without it.
"""

from __future__ import annotations

from dataclasses import replace

from gpualloc.solvers.problem import Problem, Realtime


def _wanted(app: Realtime, t: int) -> int:
    """The GPUs the app's plan holds at `t` before the lift: its demand within its floor and
    ceiling (the lift stacks on what the app holds, so on its floor where its demand is below)."""
    return min(max(app.demand[t], app.min_gpus), app.max_gpus)


def _step_reserve(problem: Problem, t: int, running: int, medians: bool, order: list[int]) -> list[int]:
    """Each app's lift at step `t` (the module's rule): `running` GPUs held by running work
    there; `medians`: the apps carry their medians (else none of their headroom is counted);
    `order`: the apps' indices, highest priority first."""
    apps = problem.realtime
    want = [_wanted(app, t) for app in apps]
    total = sum(want)
    exposed = min(problem.node_size, total)
    held_above = sum(w - min(app.median[t], w) for app, w in zip(apps, want)) if medians else 0
    lift = max(0, min(exposed - held_above, problem.gpus - running - total))
    if not lift:
        return [0] * len(apps)
    share = [min(lift * w // total, app.max_gpus - w) for app, w in zip(apps, want)]
    spare = [app.max_gpus - w - n for app, w, n in zip(apps, want, share)]
    # the remainder in rounds of one GPU an app below its ceiling, the last round highest
    # priority first: `rounds` whole rounds, found by bisection, not one GPU at a time
    left = lift - sum(share)
    lo, hi = 0, max(spare)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sum(min(mid, s) for s in spare) <= left else (lo, mid - 1)
    for a, s in enumerate(spare):
        share[a] += min(lo, s)
        left -= min(lo, s)
    for a in order:
        if left and spare[a] > lo:
            share[a] += 1
            left -= 1
    return share


def reserved(problem: Problem) -> Problem:
    """`problem` with each app's demand lifted by its reserve at every step, recorded in
    `Realtime.reserve`; the same problem where nothing is lifted or it was lifted already."""
    apps = problem.realtime
    # one node: losing it loses everything, nothing to hold
    if not apps or any(app.reserve for app in apps) or problem.gpus <= problem.node_size:
        return problem
    medians = all(len(app.median) == problem.horizon for app in apps)
    order = sorted(range(len(apps)), key=lambda a: (-apps[a].priority, a))
    lifts = [_step_reserve(problem, t, busy.bit_count(), medians, order) for t, busy in enumerate(problem.running_busy)]
    if not any(any(step) for step in lifts):
        return problem
    return replace(
        problem,
        realtime=tuple(
            replace(
                app,
                demand=tuple(
                    _wanted(app, t) + lifts[t][a] if lifts[t][a] else app.demand[t] for t in range(problem.horizon)
                ),
                reserve=tuple(step[a] for step in lifts),
            )
            for a, app in enumerate(apps)
        ),
    )

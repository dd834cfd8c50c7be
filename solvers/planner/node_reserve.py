"""A node's worth of real-time GPUs held against a node's loss (`forecast.realtime_node_reserve`).

When a node goes down, the apps lose the GPUs they held on it, and running batch work, which
is never moved, holds the rest of the pool: the apps regrow only as jobs end, hours in a small
pool. With the reserve on, each step of the plan holds the apps enough GPUs that losing any one
node still leaves them their median demand: the GPUs they could lose (a node's, or all they
hold when that is fewer), less the headroom they already hold above their medians. The lift
takes only room that running work and the apps' planned demands leave, so it never cuts
another app's demand, and it is shared by each app's planned demand (the GPUs it could lose),
the remainder one GPU an app, highest priority first, within the ceilings.

Its price is the batch work those GPUs would have held: on the serving and generated traces it
trades objective and completions for service (docs/results.md, "A node's worth held").
It counts GPUs, not where they sit: apps whose sets all fit on one node can still lose them
together. The planners plan on the lifted demand (`Realtime.reserve` records the lift); FIFO,
the contract's baseline, reserves its static peaks on the demand without it.
"""

from __future__ import annotations

from dataclasses import replace

from gpualloc.solvers.problem import Problem, Realtime


def _wanted(app: Realtime, t: int) -> int:
    return min(max(app.demand[t], app.min_gpus), app.max_gpus)


def step_reserve(problem: Problem, t: int, running: int) -> list[int]:
    """Each app's lift at step `t` (the module's rule), `running` GPUs held by running work there."""
    apps = problem.realtime
    want = [_wanted(app, t) for app in apps]
    total = sum(want)
    exposed = min(problem.node_size, total)
    held_above = sum(w - min(app.median[t], w) for app, w in zip(apps, want)) if _has_medians(problem) else 0
    room = problem.gpus - running - total
    lift = max(0, min(exposed - held_above, room))
    if not lift:
        return [0] * len(apps)
    share = [min(lift * w // total, app.max_gpus - w) for app, w in zip(apps, want)]
    left = lift - sum(share)
    order = sorted(range(len(apps)), key=lambda a: (-apps[a].priority, a))
    while left:  # the remainder one GPU an app, highest priority first, round by round
        under = [a for a in order if want[a] + share[a] < apps[a].max_gpus][:left]
        if not under:
            break
        for a in under:
            share[a] += 1
        left -= len(under)
    return share


def reserved(problem: Problem) -> Problem:
    """`problem` with each app's demand lifted by its reserve at every step, recorded in
    `Realtime.reserve`; the same problem where nothing is lifted or it was lifted already."""
    apps = problem.realtime
    if not apps or any(app.reserve for app in apps):
        return problem
    lifts = [step_reserve(problem, t, busy.bit_count()) for t, busy in enumerate(problem.running_busy)]
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


def _has_medians(problem: Problem) -> bool:
    return all(len(app.median) == problem.horizon for app in problem.realtime)


def first_step_reserve(problem: Problem) -> dict[str, int]:
    """Each app's lift at the window's first step, the step a commit holds (what its reason says)."""
    if not problem.realtime:
        return {}
    lifts = step_reserve(problem, 0, problem.running_busy[0].bit_count())
    return {app.id: n for app, n in zip(problem.realtime, lifts) if n}

"""Room the real-time apps contend for, shared by how often each GPU is needed.

Each app is planned at the demand quantile its price calls for against the batch value a GPU
held idle displaces (`planner.headroom`): for a spiky app that is far above what it needs most
steps. Where the apps' demands together exceed the room running jobs and lost nodes leave, a GPU
one app holds above its need displaces another app's demand instead, and cutting the curves
lowest priority first (`realtime.target_curves`) would take a lower-priority app to its floor
while a higher one keeps GPUs for spikes that seldom come. So at those steps the room is shared
in tiers: each app's floor, then every app up to its median demand (GPUs it needs in most
steps), highest priority first, then up to its planned demand in the same order. A problem
without medians (`Realtime.median` empty: scenarios, plan files) is planned as given.
"""

from __future__ import annotations

from dataclasses import replace

from gpualloc.solvers.problem import Problem


def contested(problem: Problem) -> list[int]:
    """Steps where the apps' planned demands (within their ceilings) exceed the room running
    jobs and lost nodes leave."""
    out = []
    for t, busy in enumerate(problem.running_busy):
        if sum(max(min(app.demand[t], app.max_gpus), 0) for app in problem.realtime) > problem.gpus - busy.bit_count():
            out.append(t)
    return out


def shared(problem: Problem) -> Problem:
    """`problem` with each app's demand at contested steps shared as the module says; the same
    problem where no app has a median or no step is contested."""
    apps = problem.realtime
    if not apps or not all(len(app.median) == problem.horizon for app in apps):
        return problem
    order = sorted(range(len(apps)), key=lambda a: (-apps[a].priority, a))
    demand = [list(app.demand) for app in apps]
    changed = False
    for t in contested(problem):
        room = problem.gpus - problem.running_busy[t].bit_count()
        want = [max(min(app.demand[t], app.max_gpus), 0) for app in apps]
        given = [min(app.min_gpus, w) for app, w in zip(apps, want)]
        left = room - sum(given)
        if left < 0:  # the floors alone do not fit: the curves' own cut decides
            continue
        for tier in ([min(app.median[t], w) for app, w in zip(apps, want)], want):
            for a in order:
                more = min(max(0, tier[a] - given[a]), left)
                given[a] += more
                left -= more
        for a, n in enumerate(given):
            changed |= demand[a][t] != n
            demand[a][t] = n
    if not changed:
        return problem
    return replace(problem, realtime=tuple(replace(app, demand=tuple(d)) for app, d in zip(apps, demand)))

"""Apps keep the GPUs they hold: a plan's app sets moved back onto them where nothing needs them.

A plan's app sets are chosen by count (the objective weighs how many GPUs an app is given, not
which), so a replan may give an app another GPU for one it holds although both are free: each
such move is a release and a bind on the node agents, and an inference replica reloads its model.
`keep_held` moves them back. For a GPU `a` the app would bind at the committed step and a GPU `b`
it holds and would release there, `a` is renamed `b` in the app's sets from that step until the
first step that no longer has `a` (or already has `b`), or until the first step where a batch
block or another app takes `b`. Counts, batch blocks and every other app are unchanged, so the
objective is too. At the committed step the swaps fall by two. Where the renaming stops at the
end of `a` they stay or fall; where work takes `b` first, the app moves from `b` to `a` at that
step instead (two more swaps there, only where the app's swap cap allows them, so a legal plan
stays legal). A move that makes room for work is thus made when the work starts, not before: a
later plan that no longer places the work there never makes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.problem import Problem, bits_of


def keep_held(problem: Problem, schedule: Schedule) -> Schedule:
    """`schedule` with its app sets moved back onto the GPUs each app holds, where that moves
    nothing else (see the module docstring); the same schedule when there is nothing to move.
    Idempotent: renaming runs until no pair is left, so a replayed commit renames the same."""
    sets = {app_id: list(masks) for app_id, masks in schedule.realtime.items()}
    released = 0  # GPUs some app holds and would release at the first step: the only ones renamed onto
    for app in problem.realtime:
        masks = sets.get(app.id)
        if app.current_mask >= 0 and masks:
            released |= app.current_mask & ~masks[0]
    if not released:
        return schedule
    blocks = _first_taken(schedule.batch.values(), released)  # a block holds its GPUs from its first step
    moved = False
    while _rename_round(problem, blocks, sets):
        moved = True
    return Schedule(schedule.batch, sets) if moved else schedule


def _rename_round(problem: Problem, blocks: dict[int, int], sets: dict[str, list[int]]) -> bool:
    """One pass over the apps, in the window's order (`blocks`: the first step a batch block
    holds each GPU that may be renamed onto); True when something was renamed."""
    T, renamed = problem.horizon, False
    for app in problem.realtime:
        masks = sets.get(app.id)
        if app.current_mask < 0 or not masks or len(masks) < T:
            continue
        bind, release = masks[0] & ~app.current_mask, app.current_mask & ~masks[0]
        if not bind or not release:
            continue
        others = (
            (t, mask) for other, own in sets.items() if other != app.id for t, mask in enumerate(own) if mask & release
        )
        taken = _first_taken(others, release)
        for a in bits_of(bind):
            for b in bits_of(release):
                end = next((t for t in range(T) if not masks[t] >> a & 1 or masks[t] >> b & 1), T)
                stop = min(end, taken.get(b, T), blocks.get(b, T))
                # stopping before `end`, the app moves from b to a at `stop`: two more swaps there
                if stop and (stop == end or (masks[stop] ^ masks[stop - 1]).bit_count() + 2 <= app.swap_cap):
                    for t in range(stop):
                        masks[t] = masks[t] & ~(1 << a) | 1 << b
                    release &= ~(1 << b)
                    renamed = True
                    break
    return renamed


def _first_taken(holds: Iterable[tuple[int, int]], candidates: int) -> dict[int, int]:
    """For each GPU of `candidates`, the first step of `holds` ((first step, GPU mask) each, held
    from that step) that holds it; absent: none does."""
    out: dict[int, int] = {}
    for step, mask in holds:
        for g in bits_of(mask & candidates):
            if step < out.get(g, step + 1):
                out[g] = step
    return out

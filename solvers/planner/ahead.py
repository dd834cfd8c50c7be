"""A step boundary's plan made ahead of it, and carried onto the window the boundary finds.

Replanning the window takes tens of milliseconds at 64 GPUs, and an arrival that comes while
the agent replans waits for it. So the agent cuts the window a little before the boundary
(`Boundary.cut`), has the plan made elsewhere while arrivals go on being inserted into the
current plan, and at the boundary carries that plan onto the window as it is then
(`carry_over`): the same step's window, with what happened since the cut. Running jobs hold
what they hold now (those started since the cut included); the plan's app sets stay, unless an
app changed, a GPU they take is now held, or an app was seen since the cut to need more in the
first step than the plan gives it (the boundary then replans: observed demand comes before the
batch starts a plan made without it would commit); its blocks of jobs still queued stay where they
clash with nothing; and the jobs it never saw (they arrived after the cut), with those whose
block now clashes, are inserted at their earliest legal block, as the hot path inserts
arrivals. Jobs the plan left unplaced stay unplaced, as it decided. The result is legal by
construction (the validator checks it in the tests), and a pure function of the plan and the
window, so a replay that makes the same cut makes the same commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.problem import Batch, Problem, insert_in_order
from gpualloc.solvers.value_models import most_valuable_first


@dataclass(frozen=True)
class Ahead:
    """A plan of the window at step `now`, cut before its boundary: `seen`, the queued jobs it
    was made for; `apps`, each app's rules then (id, floor, ceiling, swap cap, current set);
    `problem`, what is to be solved for it; `schedule`, None until it is made; `needs`, each
    app's demand in the window's first step then (`first_needs`)."""

    now: int
    seen: frozenset[str]
    apps: tuple[tuple[str, int, int, int, int], ...]
    problem: Problem | None = None
    schedule: Schedule | None = None
    needs: tuple[tuple[str, int], ...] = ()


def app_rules(problem: Problem) -> tuple[tuple[str, int, int, int, int], ...]:
    """What an app set must satisfy in `problem`, beyond its demand (which only weighs it)."""
    return tuple((a.id, a.min_gpus, a.max_gpus, a.swap_cap, a.current_mask) for a in problem.realtime)


def first_needs(problem: Problem) -> tuple[tuple[str, int], ...]:
    """Each app's demand in `problem`'s first step: what it was seen to need before the boundary."""
    return tuple((a.id, a.demand[0]) for a in problem.realtime)


def carry_over(window: Problem, ahead: Ahead, by_arrival: bool = False) -> Schedule | None:
    """`ahead`'s plan on `window` (see the module docstring); None when its app sets no longer
    hold (an app registered, changed or left, or a GPU one of them takes is held now), or when
    an app was seen to need more in the first step since the cut than the plan gives it there
    (observed demand outranks the batch starts the plan made without it: the boundary replans
    with it). Jobs are inserted most valuable first (priority, then work), or in arrival
    order when `by_arrival` (FIFO's order); most valuable by the window's value model
    (`value_models.most_valuable_first`)."""
    plan, T = ahead.schedule, window.horizon
    if plan is None or app_rules(window) != ahead.apps or set(plan.realtime) != {a.id for a in window.realtime}:
        return None
    before = dict(ahead.needs)
    for app_id, need in first_needs(window):
        masks = plan.realtime[app_id]
        if need > before.get(app_id, need) and masks and masks[0].bit_count() < need:
            return None
    busy = [0] * T
    batch: dict[str, tuple[int, int]] = {}
    for job in window.batch:
        if job.running_mask:
            batch[job.id] = (job.held_from, job.running_mask)
            _hold(busy, job.running_mask, *window.held_span(job))
    for app_id, masks in plan.realtime.items():
        if len(masks) != T or any(mask & busy[t] for t, mask in enumerate(masks)):
            return None
        for t, mask in enumerate(masks):
            busy[t] |= mask
    later: list[Batch] = []
    for job in window.batch:
        if job.running_mask:
            continue
        placed = plan.batch.get(job.id) if job.id in ahead.seen else None
        if placed is None:
            if job.id not in ahead.seen:
                later.append(job)
            continue
        start, mask = placed
        end = window.end_of(job, start)
        if start < job.arrival or any(busy[t] & mask for t in range(start, end)):
            later.append(job)
            continue
        batch[job.id] = placed
        _hold(busy, mask, start, end)
    if not by_arrival:
        later.sort(key=lambda j: (*most_valuable_first(window.value_model, j.priority, j.gpus, j.duration), j.index))
    batch.update(insert_in_order(window, later, busy))
    return Schedule(batch, {app_id: list(masks) for app_id, masks in plan.realtime.items()})


def _hold(busy: list[int], mask: int, start: int, end: int) -> None:
    for t in range(start, end):
        busy[t] |= mask

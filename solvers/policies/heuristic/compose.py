"""The heuristic's composition in Python (the steps `heuristic_schedule` tells): curve sets,
layouts, screening, finishing with repairs, the local search, the greedy, the polish. The
reference the compiled composition (solvers/native/src/compose.rs) is proven against, and the
path without the extension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.extras import grow_to_demand
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_order, greedy_reference
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.layouts import Layout, layouts
from gpualloc.solvers.policies.heuristic.packing import Packing, pack
from gpualloc.solvers.policies.heuristic.polish import polish
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, floor_curves, target_curves
from gpualloc.solvers.policies.heuristic.search import Search
from gpualloc.solvers.problem import Batch, Problem
from gpualloc.solvers.value_models import COMPLETION


def value_at_arrival(problem: Problem, job: Batch) -> float:
    """What the job adds if it starts at its arrival: its best case, since a later start is
    never worth more (0 for an arrival past the window, where it cannot start)."""
    return problem.start_value(job, job.arrival) if job.arrival < problem.horizon else 0.0


def _seed_orders(problem: Problem, jobs: list[Batch]) -> list[list[Batch]]:
    """A value-led order and three priority-led ones with different tie-breaks (the third is
    arrival order among equal priorities, the order an operator would take by hand). Under the
    `gpu_steps` value model, most value first and the largest work first; under `completion`,
    most value per GPU-step first (Smith's rule: the smallest work first at equal priorities)
    and the shortest first."""
    if problem.value_model == COMPLETION:
        keys: tuple[Callable[[Batch], tuple[float, ...]], ...] = (
            lambda j: (-value_at_arrival(problem, j) / (j.gpus * j.duration), j.index),
            lambda j: (-j.priority, j.gpus * j.duration, j.arrival, j.index),
            lambda j: (-j.priority, j.arrival, j.index),
            lambda j: (-j.priority, j.duration, j.gpus, j.index),
        )
    else:
        keys = (
            lambda j: (-value_at_arrival(problem, j), j.index),
            lambda j: (-j.priority, -j.gpus * j.duration, j.arrival, j.index),
            lambda j: (-j.priority, j.arrival, j.index),
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


def _finish(problem: Problem, layout: Layout, order: list[Batch], packing: Packing) -> tuple[Schedule, float] | None:
    """Assign real-time GPUs around `packing`, closing cells where blocks force a move; return
    the schedule and its objective (None when the layout ran out of repair rounds).

    Strictly first (a block that leaves an app short by taking its GPUs counts as forcing);
    when that changed the packing, also leniently (such shortfalls accepted); the better wins.
    """
    strict = _assign_with_repairs(problem, layout, order, packing, strict=True)
    if strict is None:
        return None
    best = _served(problem, layout, *strict[:2])
    if strict[2]:
        lenient = _assign_with_repairs(problem, layout, order, packing, strict=False)
        if lenient is not None:
            other = _served(problem, layout, *lenient[:2])
            if other[1] > best[1] + 1e-9:
                best = other
    return best


def _served(problem: Problem, layout: Layout, packing: Packing, sets: dict[str, list[int]]) -> tuple[Schedule, float]:
    """The schedule and its objective; apps held below their demand by the layout's curves take
    the GPUs batch work left (`grow_to_demand`)."""
    cut = packing.curves is not None and packing.curves != layout.curves
    if layout.lowered is not None or cut:
        sets = grow_to_demand(problem, sets, packing.busy, layout.lowered or layout.curves)
    penalty = 0.0
    for app in problem.realtime:
        for demand, mask, w in zip(app.demand, sets[app.id], problem.weights):
            short = demand - mask.bit_count()
            if short > 0:
                penalty += app.priority * w * short
    return Schedule(batch=packing.starts, realtime=sets), packing.value + packing.traded - problem.penalty * penalty


def _assign_with_repairs(
    problem: Problem, layout: Layout, order: list[Batch], packing: Packing, strict: bool
) -> tuple[Packing, dict[str, list[int]], bool] | None:
    """(packing, real-time sets, whether the packing had to change), or None past
    `max_repairs` rounds (or with more than twice that many forced moves in one round: a lost
    cause).

    Each forced move closes the GPUs the app could not leave to batch work at that step, and
    the order is packed again; a shortfall with no block to blame takes the least valuable job
    active at that step out of the plan. Each round closes new cells or drops a job, so it ends.
    """
    if len(layout.fixed) == len(problem.realtime):  # every app's sets are the layout's, kept out of every block
        return packing, {app.id: list(layout.fixed[i]) for i, app in enumerate(problem.realtime)}, False
    res, kept_order, rounds = layout.reservation, order, 0
    while True:
        curves = layout.curves if packing.curves is None else packing.curves
        sets, forced = assign_realtime(problem, curves, packing.busy, strict, layout.fixed)
        if not forced:
            return packing, sets, rounds > 0
        if layout.max_repairs is not None and (rounds >= layout.max_repairs or len(forced) > 2 * layout.max_repairs):
            return None
        rounds += 1
        zone = list(res.zone)
        for move in forced:
            if move.gpus & ~zone[move.step]:
                zone[move.step] |= move.gpus
            else:
                victim = _least_valuable_at(problem, packing, move.step)
                kept_order = [j for j in kept_order if j is not victim]
        res = replace(res, zone=zone)
        packing = pack(problem, kept_order, res)


def _least_valuable_at(problem: Problem, packing: Packing, step: int) -> Batch:
    """The batch job active at `step` whose removal costs least (an app fell below its floor
    there for want of free GPUs, with no block start to blame)."""
    active = [
        j
        for j in problem.batch
        if not j.running_mask
        and j.id in packing.starts
        and packing.starts[j.id][0] <= step < problem.end_of(j, packing.starts[j.id][0])
    ]
    if not active:
        raise ValueError(f"real-time floors cannot be met at step {step} even without batch work")
    return min(active, key=lambda j: (j.priority * j.gpus * j.duration, -j.index))


def curve_sets(
    problem: Problem, queue: list[Batch], target: list[list[int]], floors: list[list[int]]
) -> list[tuple[list[list[int]], list[list[int]] | None]]:
    """Real-time curves to plan around (from the apps' `target` and `floors` curves), each with
    the target curves when it holds some app below them (None when it is the target itself).

    An app's service above its floor avoids penalty x priority x w_t of shortfall for every
    GPU-step of demand it meets, and takes every GPU-step of its curve above the floor from
    batch work, worth up to the top waiting priority x w_t (the swap cap's ramps and a cap of
    0 make the curve hold GPUs where there is no demand). So beside the demand for every app,
    the apps whose avoided shortfall per GPU-step taken is below that top priority are held at
    their floors; they get what batch work leaves. Last, every app at its floor: a block is
    indivisible, so one GPU-step served where a block would start can push the whole block
    back, whatever the app's worth per GPU-step.
    """
    out: list[tuple[list[list[int]], list[list[int]] | None]] = [(target, None)]
    if not queue or not problem.realtime:
        return out
    top = max(j.priority for j in queue)
    w = problem.weights
    worth = []
    for app, curve, floor in zip(problem.realtime, target, floors):
        taken = avoided = 0.0  # summed left to right, as the compiled twin does (not `sum`: 3.12 compensates)
        for t in range(problem.horizon):
            taken += w[t] * (curve[t] - floor[t])
        for t in range(problem.horizon):
            avoided += w[t] * max(0, min(curve[t], app.demand[t]) - floor[t])
        worth.append(problem.penalty * app.priority * avoided / taken if taken > 0 else float("inf"))
    cheap = [i for i, x in enumerate(worth) if x < top]
    curves = [list(c) for c in target]
    for i in cheap:
        curves[i] = floors[i]
    if cheap:
        out.append((curves, target))
    if len(cheap) < len(worth) and floors != target:  # and every app at its floor: blocks are
        out.append((floors, target))  # indivisible, so a GPU-step served can delay a whole block
    return out


@dataclass
class _Candidate:
    """A layout's best packed seed order, finished into a plan."""

    objective: float
    layout: Layout
    search: Search
    schedule: Schedule


def _pack_seeds(
    problem: Problem,
    layout: Layout,
    search: Search,
    seeds: list[list[Batch]],
    prior: _Candidate | None = None,
) -> _Candidate | None:
    """Pack each seed order around the layout (each only while it can beat the best so far;
    `prior` holds the search's best already finished) and finish the best; None when finishing
    gives up."""
    if not search.best_of(seeds) and prior is not None:
        return prior
    finished = _finish(problem, layout, search.order, search.packing())
    return None if finished is None else _Candidate(finished[1], layout, search, finished[0])


def compose(problem: Problem, knobs: Knobs) -> Schedule:
    """The heuristic's plan (`heuristic.heuristic_schedule` tells the steps) with the budgets
    and constants of `knobs`."""
    queue = [j for j in problem.batch if not j.running_mask]
    seeds = _seed_orders(problem, queue)
    budget = knobs.budget
    potential = {j.id: value_at_arrival(problem, j) for j in queue}
    target, floors = target_curves(problem), floor_curves(problem)
    found = _distinct(
        [
            layout
            for curves, lowered in curve_sets(problem, queue, target, floors)
            for layout in layouts(problem, curves, lowered, floors, knobs.home_cap, knobs.reserving_repairs)
        ]
    )
    found = found[: max(knobs.screened, budget // max(1, len(queue)))]  # screening within the work budget
    searches = [(layout, Search(problem, layout.reservation, budget, potential)) for layout in found]
    if len(searches) > knobs.screened:
        screened = [c for c in (_pack_seeds(problem, *pair, seeds[:1]) for pair in searches) if c]
        screened.sort(key=lambda c: -c.objective)
        chosen = screened[: knobs.screened] + [c for c in screened[knobs.screened :] if c.layout.lowered is None][:1]
        best = [c for c in (_pack_seeds(problem, c.layout, c.search, seeds, c) for c in chosen) if c]
    else:
        best = [c for c in (_pack_seeds(problem, *pair, seeds) for pair in searches) if c]
    top = max(best, key=lambda c: c.objective)
    objective, schedule = top.objective, top.schedule
    firsts = sorted((c for c in best if c.layout.lowered is None), key=lambda c: -c.objective)
    for searched in firsts[: knobs.searched]:
        if searched.search.improve():
            finished = _finish(problem, searched.layout, searched.search.order, searched.search.packing())
            if finished is not None and finished[1] > objective + 1e-9:
                objective, schedule = finished[1], finished[0]
    greedy = greedy_reference(problem, greedy_order(problem), floors, target)  # the search's plans must beat it
    if _objective(problem, greedy) > _objective(problem, schedule) + 1e-9:
        schedule = greedy
    return polish(problem, schedule, knobs.polish_budget)


def _objective(problem: Problem, schedule: Schedule) -> float:
    """The objective up to the running jobs' value (the same in every plan), summed in the
    problem's order and unrounded, as the compiled composition sums it."""
    T, w = problem.horizon, problem.weights
    value = 0.0
    for job in problem.batch:
        if not job.running_mask and job.id in schedule.batch:
            start = schedule.batch[job.id][0]
            value += problem.start_value(job, start)
    penalty = 0.0
    for app in problem.realtime:
        masks = schedule.realtime[app.id]
        short = 0.0
        for t in range(T):
            short += w[t] * (app.demand[t] - min(masks[t].bit_count(), app.demand[t]))
        penalty += app.priority * short
    return value - problem.penalty * penalty


def _distinct(candidates: list[Layout]) -> list[Layout]:
    """The layouts that ask different things of batch work and of the apps (first of equals).
    Compared by equality, not hashed: the layouts are few and their per-step lists long."""
    seen: list[tuple[object, ...]] = []
    out = []
    for layout in candidates:
        res = layout.reservation
        keep = None if res.keep is None or not any(res.keep) else res.keep
        key = (res.reserve, keep, res.zone, layout.fixed, layout.lowered is None, layout.curves)
        if key not in seen:
            seen.append(key)
            out.append(layout)
    return out

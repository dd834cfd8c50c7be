"""The fast-mode planner: legal by construction, deterministic, planned over the whole queue.

1. Real-time apps get target curves (`realtime.target_curves`): demand followed within the swap
   cap, troughs lent to batch work, no daily-peak reservation.
2. For each layout (`layouts`: reserving, skyline, nest) batch jobs are packed (`packing`) in a few
   value- and priority-led seed orders, and the best is finished
   (step 4). The layout whose finished plan is better gets a local search over the order
   (adjacent swaps, moves to the front), bounded by a count of placements, not a clock, so the
   same input always gives the same plan; its result is kept if it finishes better still.
3. Trials resume from the snapshot of their unchanged prefix and stop as soon as their best case
   (every remaining job at its arrival) cannot beat the incumbent.
4. Finishing assigns real-time GPUs around the packing. Where a block would push an app past its
   swap cap, those cells are closed to batch work at that step and the order packed again; every
   round closes new cells or drops a job, so it ends, at worst with no batch work, which is
   always legal.
5. The greedy plan (`greedy_plan`) is the last candidate: the heuristic never plans worse.
6. The plan chosen is polished (`polish`): jobs that wait are moved earlier or given a start,
   taking blocks that apps migrate off (within their swap caps) or that a job or two make way
   for; a move is kept only when the objective rises.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.greedy_plan import greedy_schedule
from gpualloc.solvers.policies.heuristic.kernels import Kernels, PackSearch, kernels_for
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.layouts import HOME_CAP, RESERVING_REPAIRS, Layout, layouts
from gpualloc.solvers.policies.heuristic.packing import Packing
from gpualloc.solvers.policies.heuristic.realtime import floor_curves, target_curves
from gpualloc.solvers.policies.policy import Solution
from gpualloc.solvers.problem import Batch, Problem

DEFAULT_EFFORT = SolveOptions().effort
MAX_BUDGET = 8000  # placements at effort 1: local search pays off on small queues, not on huge ones
POLISH_PER_JOB = 640  # polish work (`polish`: start steps, blocks examined, ejections) a queued job at effort 1
MAX_POLISH = 32000  # and at most this much


def value_at_arrival(problem: Problem, job: Batch) -> float:
    """What the job adds if it starts at its arrival (priority x GPUs x weighted steps): its
    best case, since a later start only loses weight."""
    return (
        job.priority
        * job.gpus
        * problem.interval_weight(min(job.arrival, problem.horizon), problem.end_of(job, job.arrival))
    )


def _seed_orders(problem: Problem, jobs: list[Batch]) -> list[list[Batch]]:
    """A value-led order and three priority-led ones with different tie-breaks (the last is
    arrival order among equal priorities, the order an operator would take by hand)."""
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


def _finish(
    problem: Problem, kernels: Kernels, layout: Layout, order: list[Batch], packing: Packing
) -> tuple[Schedule, float] | None:
    """Assign real-time GPUs around `packing`, closing cells where blocks force a move; return
    the schedule and its objective (None when the layout ran out of repair rounds).

    Strictly first (a block that leaves an app short by taking its GPUs counts as forcing);
    when that changed the packing, also leniently (such shortfalls accepted); the better wins.
    """
    strict = _assign_with_repairs(problem, kernels, layout, order, packing, strict=True)
    if strict is None:
        return None
    best = _served(problem, kernels, layout, *strict[:2])
    if strict[2]:
        lenient = _assign_with_repairs(problem, kernels, layout, order, packing, strict=False)
        if lenient is not None:
            other = _served(problem, kernels, layout, *lenient[:2])
            if other[1] > best[1] + 1e-9:
                best = other
    return best


def _served(
    problem: Problem, kernels: Kernels, layout: Layout, packing: Packing, sets: dict[str, list[int]]
) -> tuple[Schedule, float]:
    """The schedule and its objective; apps held below their demand by the layout's curves take
    the GPUs batch work left (`grow_to_demand`)."""
    cut = packing.curves is not None and packing.curves != layout.curves
    if layout.lowered is not None or cut:
        sets = kernels.grow_to_demand(sets, packing.busy, layout.lowered or layout.curves)
    penalty = 0.0
    for app in problem.realtime:
        for demand, mask, w in zip(app.demand, sets[app.id], problem.weights):
            short = demand - mask.bit_count()
            if short > 0:
                penalty += app.priority * w * short
    return Schedule(batch=packing.starts, realtime=sets), packing.value + packing.traded - problem.penalty * penalty


def _assign_with_repairs(
    problem: Problem, kernels: Kernels, layout: Layout, order: list[Batch], packing: Packing, strict: bool
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
        sets, forced = kernels.assign_realtime(curves, packing.busy, strict, layout.fixed)
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
        packing = kernels.pack(kept_order, res)


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
        taken = sum(w[t] * (curve[t] - floor[t]) for t in range(problem.horizon))
        avoided = sum(w[t] * max(0, min(curve[t], app.demand[t]) - floor[t]) for t in range(problem.horizon))
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
    search: PackSearch
    schedule: Schedule


def _pack_seeds(
    problem: Problem,
    kernels: Kernels,
    layout: Layout,
    search: PackSearch,
    seeds: list[list[Batch]],
    prior: _Candidate | None = None,
) -> _Candidate | None:
    """Pack each seed order around the layout (each only while it can beat the best so far;
    `prior` holds the search's best already finished) and finish the best; None when finishing
    gives up."""
    if not search.best_of(seeds) and prior is not None:
        return prior
    finished = _finish(problem, kernels, layout, search.order, search.packing())
    return None if finished is None else _Candidate(finished[1], layout, search, finished[0])


SCREENED = 2  # layouts that pack every seed order after all were screened with the first
SEARCHED = 2  # demand-first plans the local search improves, best first


def heuristic_schedule(problem: Problem, effort: float = DEFAULT_EFFORT, native: bool | None = None) -> Schedule:
    """Plan batch blocks and real-time GPU sets for the whole horizon.

    Every layout (`layouts`) of every set of real-time curves (`curve_sets`) is screened with
    the first seed order, as many as the work budget pays for (one packing of the queue a
    layout, never fewer than SCREENED; demand-first layouts first). The SCREENED best finished
    ones, and the best demand-first one, pack the other seed orders too. The local search works
    on the best demand-first one: there the packing's value (batch value less what trades cost)
    is the plan's objective up to the apps' fixed demand, while with apps held at floors it
    would fill the GPUs their extras need. Its plan is kept when it finishes better than every
    plan so far. The greedy plan (`greedy_plan`) is taken when it is better still, so the
    heuristic never plans worse than the greedy; last, the plan chosen is polished (`polish`),
    which only raises its objective.

    The inner loops (`kernels`) run compiled when the extension is installed, in Python
    otherwise (`native=False` forces that); the plan is the same either way.
    """
    kernels = kernels_for(problem, native)
    queue = [j for j in problem.batch if not j.running_mask]
    knobs = Knobs(
        budget=int(effort * min(40 * len(queue), MAX_BUDGET)),
        polish_budget=int(effort * min(POLISH_PER_JOB * len(queue), MAX_POLISH)),
        screened=SCREENED,
        searched=SEARCHED,
        reserving_repairs=RESERVING_REPAIRS,
        home_cap=HOME_CAP,
    )
    compiled = kernels.solve(knobs)
    if compiled is not None:
        return compiled
    seeds = _seed_orders(problem, queue)
    budget = knobs.budget
    potential = {j.id: value_at_arrival(problem, j) for j in queue}
    target, floors = target_curves(problem), floor_curves(problem)
    found = _distinct(
        [
            layout
            for curves, lowered in curve_sets(problem, queue, target, floors)
            for layout in layouts(problem, curves, lowered, kernels.app_sets, floors)
        ]
    )
    found = found[: max(SCREENED, budget // max(1, len(queue)))]  # screening within the work budget
    searches = [(layout, kernels.search(layout.reservation, budget, potential)) for layout in found]
    if len(searches) > SCREENED:
        screened = [c for c in (_pack_seeds(problem, kernels, *pair, seeds[:1]) for pair in searches) if c]
        screened.sort(key=lambda c: -c.objective)
        chosen = screened[:SCREENED] + [c for c in screened[SCREENED:] if c.layout.lowered is None][:1]
        best = [c for c in (_pack_seeds(problem, kernels, c.layout, c.search, seeds, c) for c in chosen) if c]
    else:
        best = [c for c in (_pack_seeds(problem, kernels, *pair, seeds) for pair in searches) if c]
    top = max(best, key=lambda c: c.objective)
    objective, schedule = top.objective, top.schedule
    firsts = sorted((c for c in best if c.layout.lowered is None), key=lambda c: -c.objective)
    for searched in firsts[:SEARCHED]:
        if searched.search.improve():
            finished = _finish(problem, kernels, searched.layout, searched.search.order, searched.search.packing())
            if finished is not None and finished[1] > objective + 1e-9:
                objective, schedule = finished[1], finished[0]
    greedy = greedy_schedule(problem, kernels, floors, target)  # one pass: the search's plans must beat it
    if _objective(problem, greedy) > _objective(problem, schedule) + 1e-9:
        schedule = greedy
    return kernels.polish(schedule, knobs.polish_budget)


def _objective(problem: Problem, schedule: Schedule) -> float:
    """The objective up to the running jobs' value (the same in every plan), summed in the
    problem's order and unrounded, as the compiled composition sums it."""
    T, w = problem.horizon, problem.weights
    value = 0.0
    for job in problem.batch:
        if not job.running_mask and job.id in schedule.batch:
            start = schedule.batch[job.id][0]
            value += job.priority * job.gpus * problem.interval_weight(start, problem.end_of(job, start))
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


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point."""
    return Solution(heuristic_schedule(problem, options.effort))

"""The fast-mode planner: legal by construction, deterministic, planned over the whole queue.
The steps run in `compose` (Python) or compiled (solvers/native), the same plans either way;
this module holds the defaults and turns an effort into the counts both run on.

1. Real-time apps get target curves (`realtime.target_curves`): demand followed within the swap
   cap, troughs lent to batch work, no daily-peak reservation. Where the apps contend for the
   room running work leaves, it is first shared medians first (`contention`).
2. For each layout (`layouts`: reserving, skyline, nest) batch jobs are packed (`packing`) in a few
   value- and priority-led seed orders, and the best is finished (step 4). The two best
   demand-first plans get a local search over the order (adjacent swaps, moves to the front),
   where the budget pays for it, bounded by a count of placements, not a clock, so the same
   input always gives the same plan; a result is kept if it finishes better still.
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

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.contention import shared
from gpualloc.solvers.policies.heuristic.kernels import kernels_for
from gpualloc.solvers.policies.heuristic.knobs import Knobs
from gpualloc.solvers.policies.heuristic.layouts import HOME_CAP, RESERVING_REPAIRS
from gpualloc.solvers.policies.solution import Solution
from gpualloc.solvers.problem import Problem

DEFAULT_EFFORT = SolveOptions().effort
MAX_BUDGET = 8000  # placements at effort 1: local search pays off on small queues, not on huge ones
POLISH_PER_JOB = 640  # polish work (`polish`: start steps, blocks examined, ejections) a queued job at effort 1
MAX_POLISH = 32000  # and at most this much
SCREENED = 2  # layouts that pack every seed order after all were screened with the first
SEARCHED = 2  # demand-first plans the local search improves, best first
SEARCH_PACKINGS = 12  # packings of the queue a search's budget must pay for (below 11 none improved, 375-4,000 jobs)


def heuristic_schedule(problem: Problem, effort: float = DEFAULT_EFFORT, native: bool | None = None) -> Schedule:
    """Plan batch blocks and real-time GPU sets for the whole horizon.

    Every layout (`layouts`) of every set of real-time curves (`curve_sets`) is screened with
    the first seed order, as many as the work budget pays for (one packing of the queue a
    layout, never fewer than SCREENED; demand-first layouts first). The SCREENED best finished
    ones, and the best demand-first one, pack the other seed orders too. The local search works
    on the best demand-first one: there the packing's value (batch value less what trades cost)
    is the plan's objective up to the apps' fixed demand, while with apps held at floors it
    would fill the GPUs their extras need. Its plan is kept when it finishes better than every
    plan so far; a search runs only where the budget pays for SEARCH_PACKINGS packings of the
    queue (fewer trials than that over a long queue found nothing). The greedy plan
    (`greedy_plan`) is taken when it is better still, so the heuristic never plans worse than
    the greedy; last, the plan chosen is polished (`polish`), which only raises its objective.

    It runs compiled (solvers/native) when the extension is installed, in Python (`compose`)
    otherwise (`native=False` forces that); the plan is the same either way.
    """
    problem = shared(problem)
    return kernels_for(problem, native).solve(knobs_for(problem, effort))


def knobs_for(problem: Problem, effort: float) -> Knobs:
    """The work budgets at `effort` (a negative one counts as 0) and the composition's constants
    for `problem`'s queue."""
    effort = max(effort, 0.0)
    queue = sum(1 for j in problem.batch if not j.running_mask)
    budget = int(effort * min(40 * queue, MAX_BUDGET))  # each search's own
    return Knobs(
        budget=budget,
        polish_budget=int(effort * min(POLISH_PER_JOB * queue, MAX_POLISH)),
        screened=SCREENED,
        searched=SEARCHED if budget >= SEARCH_PACKINGS * queue else 0,
        reserving_repairs=RESERVING_REPAIRS,
        home_cap=HOME_CAP,
    )


def solve(problem: Problem, options: SolveOptions) -> Solution:
    """The registry's entry point."""
    return Solution(heuristic_schedule(problem, options.effort))

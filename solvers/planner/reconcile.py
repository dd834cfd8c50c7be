"""Carrying a full-mode plan onto the window in which it may be adopted.

Full mode solves a snapshot of the window while the hot path keeps deciding arrivals; by the
step boundary where its plan could be adopted, jobs may have arrived, finished or been
cancelled, traffic may have moved and, if the boundary slipped by `shift` steps, the hot path
may have started jobs of its own. The plan's blocks are kept where they still hold (same job
still queued, start not passed, GPUs not taken by a running job), shifted to the new window;
every other queued job is packed around them the heuristic's way, most valuable first; the
apps' GPU sets are the plan's own where they still fit, else assigned afresh. The result is a
candidate only: the planner adopts it when the validator passes it and it beats the hot path.
"""

from __future__ import annotations

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.compose import value_at_arrival
from gpualloc.solvers.policies.heuristic.layouts import Layout
from gpualloc.solvers.policies.heuristic.packing import PackState, place
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime, target_curves
from gpualloc.solvers.problem import Batch, Problem


def reconcile(problem: Problem, proposal: Schedule, shift: int) -> list[Schedule]:
    """Candidate schedules for `problem` built from `proposal`, a plan made `shift` steps
    earlier: with the proposal's own app sets (shifted, the last held on) when it has them,
    and with app sets assigned around the kept blocks. Empty when the apps cannot follow the
    kept blocks within their swap caps and floors."""
    curves = target_curves(problem)
    layout = Layout.reserving(problem, curves)
    state = PackState.empty(problem, layout.reservation)
    rest: list[Batch] = []
    for job in sorted((j for j in problem.batch if not j.running_mask), key=lambda j: _start_key(proposal, j)):
        placed = proposal.batch.get(job.id)
        if placed is not None and _still_free(problem, state, job, placed[0] - shift, placed[1]):
            state.occupy(problem, job, placed[0] - shift, placed[1])
        else:
            rest.append(job)
    for job in sorted(rest, key=lambda j: (-value_at_arrival(problem, j), j.index)):
        place(problem, layout.reservation, state, job)
    packing = state.packing()
    candidates = []
    own = _shifted_sets(problem, proposal, shift)
    if own is not None:
        candidates.append(Schedule(batch=packing.starts, realtime=own))
    sets, forced = assign_realtime(problem, curves, packing.busy, False, layout.fixed)
    if not forced:
        candidates.append(Schedule(batch=packing.starts, realtime=sets))
    return candidates


def _start_key(proposal: Schedule, job: Batch) -> tuple[int, int]:
    placed = proposal.batch.get(job.id)
    return (placed[0] if placed is not None else 1 << 30, job.index)


def _still_free(problem: Problem, state: PackState, job: Batch, start: int, mask: int) -> bool:
    """The block can still be held from `start`: not passed, not before the job's arrival,
    and clear of every block held so far."""
    if start < max(job.arrival, 0) or start >= problem.horizon:
        return False
    return all(not (state.busy[t] & mask) for t in range(start, problem.end_of(job, start)))


def _shifted_sets(problem: Problem, proposal: Schedule, shift: int) -> dict[str, list[int]] | None:
    """The proposal's app sets moved `shift` steps earlier, the last one held to the window's
    end; None when an app is new to the plan."""
    T = problem.horizon
    out = {}
    for app in problem.realtime:
        masks = proposal.realtime.get(app.id)
        if not masks or shift >= len(masks):
            return None
        kept = list(masks[shift:])
        out[app.id] = (kept + [kept[-1]] * T)[:T]
    return out

"""Full mode as the rolling horizon runs it: every K steps, on a snapshot of the planner's window.

The snapshot keeps the running jobs, the apps and the most valuable `max_jobs` queued jobs (the
model grows with the queue; `FullModeAdoption.adopt` packs the others around full mode's blocks). The
solve is a pure function of the snapshot and the options, so the agent can run it in another
process and the simulator inline; with a time limit its result depends on the machine, which is
why an adopted plan is recorded in its commit and replays reuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpualloc.schemas.published import FullModeReport, FullModeSolve
from gpualloc.schemas.settings import FullModeOptions, SolveOptions
from gpualloc.solvers.metrics import objective_of, relative_gap
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import Adoption, Cut, FullModePlan
from gpualloc.solvers.policies import policy
from gpualloc.solvers.policies.milp.data import SETUP_S_PER_NONZERO, model_size
from gpualloc.solvers.problem import Batch, Problem
from gpualloc.solvers.value_models import GPU_STEPS, most_valuable_first

SETUP_SHARE = 0.25  # of the time limit the model's setup may take; the rest is the search's
# a solver process's address space before any model (Python, Pyomo, HiGHS: 460 MB here), and per nonzero
# of `model_size` (940 MB resident at 2 M nonzeros after a 20 s search with HiGHS on a 2-core VM)
PROCESS_BYTES = 512 << 20
BYTES_PER_NONZERO = 300


def full_mode_window(planner: Planner, max_jobs: int) -> Cut:
    """The window full mode solves now: `snapshot` of the current step."""
    return Cut(planner.now, snapshot(planner, max_jobs))


def snapshot(planner: Planner, max_jobs: int) -> Problem:
    """The current window as the hot path plans it (starving jobs first), its queue cut to the
    `max_jobs` most valuable jobs (`_worth`; ties by arrival order)."""
    problem = planner.scheduling_problem(planner.window_problem())  # starving jobs first, as the hot path
    queued = [j for j in problem.batch if not j.running_mask]
    if len(queued) <= max_jobs:
        return problem
    keep = {j.id for j in sorted(queued, key=lambda j: (*_worth(problem, j), j.index))[:max_jobs]}
    return replace(problem, batch=tuple(j for j in problem.batch if j.running_mask or j.id in keep))


def _worth(problem: Problem, job: Batch) -> tuple[float, ...]:
    """The sort key of the most valuable queued jobs: under `gpu_steps` the most priority x
    GPU-steps; under `completion` the highest priority, then the least work."""
    if problem.value_model == GPU_STEPS:
        return (-job.priority * job.gpus * job.duration,)
    return most_valuable_first(problem.value_model, job.priority, job.gpus, job.duration)


def not_worth_starting(
    problem: Problem, options: FullModeOptions, memory_bytes: int | None = None, max_nonzeros: int | None = None
) -> str | None:
    """Why full mode should not start on `problem` (None: it may): its model is larger than
    `max_nonzeros` (where it was not seen to improve a plan), would take more than SETUP_SHARE of
    the time limit to build, leaving the search too little, or more than `memory_bytes`. From the
    model's size alone, before anything is built. The large-neighbourhood search solves
    sub-models of two nodes, whatever the pool's size."""
    if options.lns:
        return None
    size = model_size(problem, exact=bool(options.exact))
    model = f"model of ~{size.variables:,} variables, ~{size.nonzeros:,} nonzeros"
    if max_nonzeros is not None and size.nonzeros > max_nonzeros:
        return f"{model}, more than agent.full_mode_max_nonzeros ({max_nonzeros:,})"
    setup = size.nonzeros * SETUP_S_PER_NONZERO
    if options.time_limit is not None and setup > SETUP_SHARE * options.time_limit:
        return (
            f"{model}: building it takes ~{setup:.0f} s, more than {SETUP_SHARE:.0%} of its "
            f"{options.time_limit:g} s time limit"
        )
    need = PROCESS_BYTES + size.nonzeros * BYTES_PER_NONZERO
    if memory_bytes is not None and need > memory_bytes:
        return f"{model} needs ~{need >> 20:,} MB, more than the solver process's {memory_bytes >> 20:,} MB"
    return None


@dataclass(frozen=True)
class FullModeRun:
    """One full-mode solve of a snapshot: its warm start's objective (the hot path's plan of that
    window), its own plan's, its bound (the tighter of the solver's and the capacity relaxation's),
    and the plan when it beat the warm start. The gap (bound - warm) / |bound| says how far the
    hot path can be from the snapshot's optimum."""

    warm: float | None
    objective: float
    bound: float | None
    plan: FullModePlan | None
    bound_source: str | None = None  # "solver" or "capacity"

    @property
    def hot_gap(self) -> float | None:
        if self.bound is None or self.warm is None or not self.bound:
            return None
        return max(0.0, relative_gap(self.bound, self.warm))


def run_snapshot(problem: Problem, made_at: int, policy_name: str, options: SolveOptions) -> FullModeRun:
    """The registered full-mode policy `policy_name` on `problem` (a `snapshot` taken at step
    `made_at`), with what it found; `plan` only when it beat its warm start on that model. Takes
    the policy by name so that a solver process can be handed the call."""
    solution = policy(policy_name).solve(problem, options)
    objective = objective_of(problem, solution.schedule)
    bound = solution.certificate.get("bound")
    plan = FullModePlan(made_at, solution.schedule, objective, bound) if solution.improved else None
    return FullModeRun(
        solution.certificate.get("warm_objective"), objective, bound, plan, solution.certificate.get("bound_source")
    )


def ended_without_plan(run: FullModeRun, step: int, seconds: float) -> FullModeSolve:
    """A solve of the window at `step` whose plan is not offered: it did not beat its warm
    start (the hot path's plan of the same snapshot)."""
    bound = "" if run.bound is None else f", bound {run.bound:.2f}"
    against = "" if run.warm is None else f" ({run.objective:.2f} against {run.warm:.2f}{bound})"
    return FullModeSolve(
        step=step, outcome="not_better", detail=f"no better than the heuristic{against}", seconds=seconds
    )


def settled(report: FullModeReport, adoption: Adoption, adopted: bool) -> FullModeReport:
    """`report` of a commit that was offered full mode's plan, its last solve saying what became
    of the plan there: adopted (by how much it beat the hot path), stale (no legal plan once
    carried onto the window as it is now) or not better."""
    assert report.last is not None  # a plan is offered only by a solve that ended
    if adopted:
        gain = None
        if adoption.objective is not None and adoption.hot_objective is not None:
            gain = round(adoption.objective - adoption.hot_objective, 6)
        last = report.last.model_copy(update={"outcome": "adopted", "detail": adoption.reason, "gain": gain})
    else:
        outcome = "stale" if adoption.objective is None else "not_better"
        last = report.last.model_copy(update={"outcome": outcome, "detail": adoption.reason})
    return report.model_copy(update={"last": last})


def next_due(now: int, every: int) -> int | None:
    """The first step from `now` whose window full mode solves when it runs every `every` steps
    (None: never)."""
    return -(-now // every) * every if every else None


def outcome(report: FullModeReport) -> str:
    """One word for what became of full mode at a commit: how its solve ended, or its state."""
    return report.last.outcome if report.state == "ran" and report.last is not None else report.state

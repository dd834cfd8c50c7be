"""Full mode: the contract's model in Pyomo, solved by HiGHS or CBC, warm-started from the
heuristic, certified by the solver's bound.

Stage 1 is exact for batch work (a binary per legal (start, block) option) and aggregates each
real-time app to a GPU count per step. The aggregation keeps only conditions every legal plan
meets, so stage 1 is a relaxation and its bound is a valid bound on the true optimum:
  - counts within [min_gpus, max_gpus], step-to-step change within the swap cap;
  - per step, batch GPUs plus app counts fit the pool;
  - per step boundary, an app keeps at least ceil((n(t-1) + n(t) - cap) / 2) of its GPUs (leaves
    plus entries are at most cap), and the kept GPUs of all apps fit in the GPUs that no batch
    block holds at t-1 or t; at step 0 the kept ones must be among `current` and free of blocks.
Stage 2 realizes the counts as GPU sets: the heuristic's assignment first, and when it cannot
honour them, an exact per-GPU model with the batch blocks fixed. The realized objective is what
is reported, beside stage 1's bound; a plan worse than the warm start is never returned.

The exact model (`add_exact_realtime`) puts each app's GPU set into stage 1 itself (a binary per
app, GPU and step, R1 per cell and R4 on the sets), so its optimum is a plan and its bound a bound
on plans. It runs when asked (`exact`), and by default on pools of at most EXACT_GPUS where the
count model's stage 2 fell short of its own bound: then a plan is `optimal` only if proven so.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, get_args, overload

import pyomo.environ as pyo
from pyomo.common.log import LoggingIntercept

from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of, relative_gap
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime
from gpualloc.solvers.policies.milp.data import SETUP_S_PER_NONZERO, MilpData, milp_data, model_size
from gpualloc.solvers.problem import Problem, mask_of

SOLVERS = get_args(FullModeOptions.model_fields["solver"].annotation)
EXACT_GPUS = 16  # pools up to this size get the exact model where stage 2 falls short (binaries: GPUs x steps x apps)
MIN_SEARCH_S = 1.0  # a solve given less time than this after building its model is not started
UPDATE_CHECKS = (
    "check_for_new_or_removed_constraints",
    "check_for_new_or_removed_vars",
    "check_for_new_or_removed_params",
    "check_for_new_objective",
    "update_constraints",
    "update_vars",
    "update_params",
    "update_named_expressions",
    "update_objective",
)


@dataclass
class MilpResult:
    schedule: Schedule
    objective: float  # realized objective of `schedule`
    bound: float | None  # stage 1's proven bound on the optimum
    gap: float | None  # (bound - objective) / |bound|
    status: str
    build_seconds: float
    solve_seconds: float
    warm_objective: float  # the heuristic plan's objective (the warm start)
    source: str  # "milp", or "heuristic" when the warm start was not beaten
    stage2: str = ""  # how real-time GPUs were realized
    bound_source: str = "solver"  # or "capacity": `bound.capacity_bound` was the tighter
    notes: list[str] = field(default_factory=list)


def build_model(data: MilpData, *, symmetry: bool = True) -> pyo.ConcreteModel:
    """Stage 1 of the module docstring, from plain data."""
    G, T = data.gpus, data.horizon
    m = pyo.ConcreteModel("gpualloc")
    opts = data.options
    m.O = pyo.Set(initialize=range(len(opts)))
    m.x = pyo.Var(m.O, within=pyo.Binary)
    by_job: list[list[int]] = [[] for _ in data.jobs]
    for o, opt in enumerate(opts):
        by_job[opt.job].append(o)
    m.J = pyo.Set(initialize=[j for j in range(len(data.jobs)) if by_job[j]])
    m.once = pyo.Constraint(m.J, rule=lambda m, j: sum(m.x[o] for o in by_job[j]) <= 1)

    cells = sorted(data.cover)
    m.C = pyo.Set(initialize=cells, dimen=2)
    m.u = pyo.Var(m.C, bounds=(0, 1))  # batch occupancy of a cell
    m.occupy = pyo.Constraint(m.C, rule=lambda m, g, t: sum(m.x[o] for o in data.cover[g, t]) <= m.u[g, t])
    cells_at: list[list[int]] = [[] for _ in range(T)]
    for g, t in cells:
        cells_at[t].append(g)
    running_at = [sum(1 for g in range(G) if (g, t) in data.running_cells) for t in range(T)]

    apps = data.apps
    m.A = pyo.Set(initialize=range(len(apps)))
    m.T = pyo.Set(initialize=range(T))
    m.n = pyo.Var(m.A, m.T, within=pyo.NonNegativeIntegers, bounds=lambda m, a, t: (apps[a]["min"], apps[a]["max"]))
    m.short = pyo.Var(m.A, m.T, within=pyo.NonNegativeReals)
    m.demand = pyo.Constraint(m.A, m.T, rule=lambda m, a, t: m.short[a, t] >= apps[a]["demand"][t] - m.n[a, t])

    def ramp(m: pyo.ConcreteModel, a: int, t: int, sign: int) -> Any:  # a pyomo expression or Skip
        cap = apps[a]["cap"]
        if t == 0:
            cur = apps[a]["current"]
            return pyo.Constraint.Skip if cur is None else sign * (m.n[a, 0] - len(cur)) <= cap
        return sign * (m.n[a, t] - m.n[a, t - 1]) <= cap

    m.ramp_up = pyo.Constraint(m.A, m.T, rule=lambda m, a, t: ramp(m, a, t, 1))
    m.ramp_down = pyo.Constraint(m.A, m.T, rule=lambda m, a, t: ramp(m, a, t, -1))
    m.capacity = pyo.Constraint(
        m.T,
        rule=lambda m, t: (
            pyo.Constraint.Skip
            if not apps
            else sum(m.u[g, t] for g in cells_at[t]) + sum(m.n[a, t] for a in m.A) <= G - running_at[t]
        ),
    )

    # Kept GPUs across each step boundary (see the module docstring).
    m.k = pyo.Var(m.A, m.T, within=pyo.NonNegativeIntegers)
    m.keep_min = pyo.Constraint(m.A, m.T, rule=lambda m, a, t: _keep_rule(m, apps[a], a, t))
    m.keep_cur = pyo.Constraint(
        m.A,
        rule=lambda m, a: (
            pyo.Constraint.Skip
            if apps[a]["current"] is None
            else m.k[a, 0]
            <= len(apps[a]["current"]) - sum(m.u[g, 0] for g in apps[a]["current"] if (g, 0) in data.cover)
        ),
    )
    span = {
        (g, t)
        for t in range(1, T)
        for g in range(G)
        if ((g, t) in data.cover or (g, t - 1) in data.cover)
        and (g, t - 1) not in data.running_cells
        and (g, t) not in data.running_cells
    }
    m.V = pyo.Set(initialize=sorted(span), dimen=2)
    m.v = pyo.Var(m.V, bounds=(0, 1))  # batch on the GPU at t-1 or at t
    m.v_prev = pyo.Constraint(
        m.V, rule=lambda m, g, t: m.v[g, t] >= m.u[g, t - 1] if (g, t - 1) in data.cover else pyo.Constraint.Skip
    )
    m.v_now = pyo.Constraint(
        m.V, rule=lambda m, g, t: m.v[g, t] >= m.u[g, t] if (g, t) in data.cover else pyo.Constraint.Skip
    )
    span_at: list[list[int]] = [[] for _ in range(T)]
    for g, t in span:
        span_at[t].append(g)
    held_either = [0] + [
        sum(1 for g in range(G) if (g, t - 1) in data.running_cells or (g, t) in data.running_cells)
        for t in range(1, T)
    ]
    m.transition = pyo.Constraint(
        m.T,
        rule=lambda m, t: (
            pyo.Constraint.Skip
            if t == 0 or not apps
            else sum(m.k[a, t] for a in m.A) + sum(m.v[g, t] for g in span_at[t]) <= G - held_either[t]
        ),
    )

    if symmetry:
        _order_twins(m, data, by_job)

    w = data.weights
    m.obj = pyo.Objective(
        expr=data.running_value
        + sum(opts[o].value * m.x[o] for o in m.O)
        - data.penalty * sum(apps[a]["priority"] * w[t] * m.short[a, t] for a in m.A for t in m.T),
        sense=pyo.maximize,
    )
    return m


def _keep_rule(m: pyo.ConcreteModel, app: dict[str, Any], a: int, t: int) -> Any:  # a pyomo expression or Skip
    if t == 0:
        cur = app["current"]
        return pyo.Constraint.Skip if cur is None else 2 * m.k[a, 0] >= len(cur) + m.n[a, 0] - app["cap"]
    return 2 * m.k[a, t] >= m.n[a, t - 1] + m.n[a, t] - app["cap"]


def _order_twins(m: pyo.ConcreteModel, data: MilpData, by_job: list[list[int]]) -> None:
    """Interchangeable jobs: the earlier one is scheduled if the later one is, and not later."""
    T = data.horizon
    pairs = [(g[i], g[i + 1]) for g in data.twins for i in range(len(g) - 1) if by_job[g[i]]]
    m.P = pyo.Set(initialize=range(len(pairs)))

    def placed(j: int) -> Any:  # a pyomo expression
        return sum(m.x[o] for o in by_job[j])

    def start(j: int) -> Any:  # a pyomo expression
        return sum(data.options[o].start * m.x[o] for o in by_job[j])

    m.twin_placed = pyo.Constraint(m.P, rule=lambda m, i: placed(pairs[i][0]) >= placed(pairs[i][1]))
    m.twin_start = pyo.Constraint(
        m.P, rule=lambda m, i: start(pairs[i][0]) <= start(pairs[i][1]) + T * (1 - placed(pairs[i][1]))
    )


def warm_start(m: pyo.ConcreteModel, data: MilpData, schedule: Schedule) -> None:
    """Load a legal schedule (the heuristic's) as stage-1 values: a feasible MIP start."""
    T = data.horizon
    chosen = {}
    for job_id, (start, mask) in schedule.batch.items():
        chosen[job_id] = (start, (mask & -mask).bit_length() - 1)
    for o, opt in enumerate(data.options):
        job = data.jobs[opt.job]
        m.x[o].value = 1 if chosen.get(job["id"]) == (opt.start, opt.first_gpu) else 0
    for g, t in m.C:
        m.u[g, t].value = sum(m.x[o].value for o in data.cover[g, t])
    for g, t in m.V:
        m.v[g, t].value = max(
            m.u[g, t - 1].value if (g, t - 1) in data.cover else 0, m.u[g, t].value if (g, t) in data.cover else 0
        )
    for a, app in enumerate(data.apps):
        sets = schedule.realtime[app["id"]]
        for t in range(T):
            n = sets[t].bit_count()
            m.n[a, t].value = n
            m.short[a, t].value = max(0, app["demand"][t] - n)
            prev = sets[t - 1] if t else (mask_of(app["current"]) if app["current"] is not None else 0)
            m.k[a, t].value = (prev & sets[t]).bit_count()


def solve_model(m: pyo.ConcreteModel, opts: FullModeOptions) -> tuple[str, float | None, float | None]:
    """Run the solver; load its incumbent; return (status, incumbent objective, bound). Whatever
    Pyomo or the solver prints (the solver's log with `progress`, Pyomo's warnings, which its
    handler writes to stdout) goes to stderr, so a plan on stdout stays clean: through a copy of
    the stderr descriptor, since Pyomo captures descriptors 1 and 2 during the solve."""
    with os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1) as log, contextlib.redirect_stdout(log):
        return _run_solver(m, opts)


def _run_solver(m: pyo.ConcreteModel, opts: FullModeOptions) -> tuple[str, float | None, float | None]:
    if opts.solver == "highs":
        from pyomo.contrib.appsi.solvers import Highs

        opt = Highs()
        began = time.perf_counter()
        opt.set_instance(m)  # handing the model to HiGHS, before its own clock starts: within the time limit
        if opts.time_limit is not None:
            left = opts.time_limit - (time.perf_counter() - began)
            if left < MIN_SEARCH_S:
                return "time limit", None, None
            opt.config.time_limit = left
        for check in UPDATE_CHECKS:  # the model handed over is the one solved: no second pass over it
            setattr(opt.update_config, check, False)
        opt.config.mip_gap = opts.mip_gap
        opt.config.warmstart = True
        opt.config.load_solution = False
        opt.config.stream_solver = opts.progress
        opt.highs_options = {"threads": opts.threads, "random_seed": opts.seed}
        if opts.node_limit is not None:
            opt.highs_options["mip_max_nodes"] = opts.node_limit
        res = opt.solve(m)
        status = str(res.termination_condition).split(".")[-1]
        if res.best_feasible_objective is None:
            return status, None, res.best_objective_bound
        res.solution_loader.load_vars()
        return status, res.best_feasible_objective, res.best_objective_bound
    if opts.solver == "cbc":
        opt = pyo.SolverFactory("cbc")
        # preprocess off: CBC 2.10.8 aborts ("Illegal index in ClpModel::getColumnName") when its
        # preprocessing adds columns to a model that came with a MIP start.
        cbc_options = {
            "threads": opts.threads,
            "randomSeed": opts.seed + 1,
            "ratioGap": opts.mip_gap,
            "preprocess": "off",
        }
        if opts.time_limit is not None:
            cbc_options["sec"] = opts.time_limit
        if opts.node_limit is not None:
            cbc_options["maxNodes"] = opts.node_limit
        res = opt.solve(m, warmstart=True, tee=opts.progress, options=cbc_options, load_solutions=False)
        status = str(res.solver.termination_condition)
        if len(res.solution) == 0:
            return status, None, None
        with LoggingIntercept(io.StringIO(), "pyomo.core", logging.WARNING):  # "an 'aborted' status, but
            m.solutions.load_from(res)  # containing a solution": a limit stopped it, as asked
        incumbent = pyo.value(m.obj)
        # Pyomo hands back CBC's bound of the reformulated minimisation, with its sign flipped
        # when CBC stops on a limit: the bound is the one of +-upper_bound not below the incumbent.
        upper = res.problem.upper_bound
        candidates = (
            [] if upper is None or not math.isfinite(upper) else [b for b in (upper, -upper) if b >= incumbent - 1e-6]
        )
        return status, incumbent, min(candidates) if candidates else None
    raise ValueError(f"solver: unknown {opts.solver!r} (choose from {', '.join(SOLVERS)})")


def solver_available(name: str) -> bool:
    if name == "highs":
        from pyomo.contrib.appsi.solvers import Highs

        return bool(Highs().available())
    if name == "cbc":
        return bool(pyo.SolverFactory("cbc").available(exception_flag=False))
    return False


def solve_milp(
    problem: Problem, options: FullModeOptions = FullModeOptions(), warm: Schedule | None = None
) -> MilpResult:
    """Full mode: the better of the model's plan and the warm start. `options.exact` True or
    False picks the model; None runs the count model first and, where its stage 2 falls short
    of its own proven bound on a pool of at most EXACT_GPUS, the exact model next, warm-started
    from the best plan so far and given the time left."""
    if warm is None:
        warm = heuristic_schedule(problem)
    first = _solve_once(problem, options, warm, exact=bool(problem.realtime) and bool(options.exact))
    if options.exact is not None or not problem.realtime or problem.gpus > EXACT_GPUS or first.status != "feasible":
        return first
    spent = first.build_seconds + first.solve_seconds
    left = None if options.time_limit is None else options.time_limit - spent
    if left is not None and left < 1:
        first.notes.append("no time left for the exact model")
        return first
    second = _solve_once(problem, options.model_copy(update={"time_limit": left}), first.schedule, exact=True)
    if first.source == "milp":
        second.source = "milp"  # its warm start was the count model's plan
    second.warm_objective = first.warm_objective
    second.build_seconds += first.build_seconds
    second.solve_seconds += first.solve_seconds
    second.notes = first.notes + ["solved again with the exact model"] + second.notes
    return second


def _solve_once(problem: Problem, options: FullModeOptions, warm: Schedule, exact: bool) -> MilpResult:
    """One model (exact: per-GPU real-time sets inside it; else counts and stage 2), and the
    better of its plan and the warm start. The time limit covers building the model and handing
    it to the solver: the solver gets what is left (none left: the warm start stands)."""
    warm_objective = objective_of(problem, warm)
    t0 = time.perf_counter()
    deadline = None if options.time_limit is None else t0 + options.time_limit
    if options.time_limit is not None:  # the deadline's
        nonzeros = model_size(problem, exact).nonzeros
        if nonzeros * SETUP_S_PER_NONZERO > options.time_limit:
            return _unsolved(
                warm,
                warm_objective,
                0.0,
                f"a model of ~{nonzeros:,} nonzeros takes about "
                f"{nonzeros * SETUP_S_PER_NONZERO:.0f} s to build, more than its {options.time_limit:g} s "
                "time limit: not built",
            )
    data = milp_data(problem)
    m = build_model(data)
    if exact:
        add_exact_realtime(m, data, problem)
    warm_start(m, data, warm)
    if exact:
        _warm_exact(m, problem, warm)
    build_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    left = _left(deadline)
    if left is not None and left < MIN_SEARCH_S:
        return _unsolved(
            warm,
            warm_objective,
            build_seconds,
            f"building the model took {build_seconds:.1f} s of its {options.time_limit:g} s time limit: not solved",
        )
    status, incumbent, bound = solve_model(m, options.model_copy(update={"time_limit": left}))
    result = MilpResult(warm, warm_objective, bound, None, status, build_seconds, 0.0, warm_objective, "heuristic")
    if incumbent is not None:
        stage2 = (
            options
            if deadline is None
            else options.model_copy(update={"time_limit": max(MIN_SEARCH_S, _left(deadline))})
        )
        realized, how = _exact_plan(problem, data, m) if exact else _realize(problem, data, m, stage2)
        result.stage2 = how
        if realized is not None:
            objective = objective_of(problem, realized)
            if objective > warm_objective + 1e-6 and not check_plan(problem, to_grid(problem, realized)):
                result.schedule, result.objective, result.source = realized, objective, "milp"
        if realized is None or result.source == "heuristic":
            result.notes.append("the warm start was not beaten")
    result.solve_seconds = time.perf_counter() - t1
    if bound is not None:
        bound = max(bound, result.objective)  # a bound below a legal plan is a solver's rounding
        result.bound = bound
        result.gap = relative_gap(bound, result.objective)
        if result.status == "optimal" and result.gap > options.mip_gap:
            # the solver proved stage 1's bound, but stage 2 (or the warm start) did not reach it:
            # the plan is not proven optimal, and says so with its true gap
            result.status = "feasible"
            result.notes.append(
                f"stage 1 is optimal but the plan is {result.gap:.2%} below its bound "
                f"({result.objective:.4f} < {bound:.4f})"
            )
    return result


def _unsolved(warm: Schedule, warm_objective: float, build_seconds: float, why: str) -> MilpResult:
    """The warm start, standing for a model the time limit left no search for."""
    return MilpResult(
        warm, warm_objective, None, None, "time limit", build_seconds, 0.0, warm_objective, "heuristic", notes=[why]
    )


@overload
def _left(deadline: float) -> float: ...
@overload
def _left(deadline: None) -> None: ...
def _left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (None: no deadline)."""
    return None if deadline is None else deadline - time.perf_counter()


def add_exact_realtime(m: pyo.ConcreteModel, data: MilpData, problem: Problem) -> None:
    """Make stage 1 exact: a binary per (app, GPU, step) holding the app's set, one owner per
    cell with the batch blocks, the count `n` as the set's size, and R4 on the sets themselves
    (GPUs entering or leaving, against `current` at step 0). The optimum is then a plan's, and
    its bound a bound on plans: no stage 2, no realization gap."""
    T, G, apps = problem.horizon, problem.gpus, problem.realtime
    cells = [(g, t) for t in range(T) for g in range(G) if (g, t) not in data.running_cells]
    m.Y = pyo.Set(initialize=[(a, g, t) for a in range(len(apps)) for g, t in cells], dimen=3)
    m.y = pyo.Var(m.Y, within=pyo.Binary)
    m.D = pyo.Set(initialize=[(a, g, t) for a, g, t in m.Y if t > 0 or apps[a].current_mask >= 0], dimen=3)
    m.d = pyo.Var(m.D, bounds=(0, 1))  # the GPU enters or leaves the app's set at step t

    def held(a: int, g: int, t: int) -> Any:  # a pyomo expression, or 0 or 1
        if t < 0:
            return (apps[a].current_mask >> g) & 1
        return m.y[a, g, t] if (a, g, t) in m.Y else 0

    m.one_owner = pyo.Constraint(
        cells,
        rule=lambda m, g, t: (
            sum(m.y[a, g, t] for a in range(len(apps))) + (m.u[g, t] if (g, t) in data.cover else 0) <= 1
        ),
    )
    m.set_size = pyo.Constraint(m.A, m.T, rule=lambda m, a, t: sum(held(a, g, t) for g in range(G)) == m.n[a, t])
    m.enter = pyo.Constraint(m.D, rule=lambda m, a, g, t: m.d[a, g, t] >= held(a, g, t) - held(a, g, t - 1))
    m.leave = pyo.Constraint(m.D, rule=lambda m, a, g, t: m.d[a, g, t] >= held(a, g, t - 1) - held(a, g, t))

    def moved(a: int, g: int, t: int) -> Any:  # a pyomo expression, or 0 or 1
        """Whether GPU g enters or leaves app a's set at t (a cell a running job holds at t is
        left by the app if it had it before)."""
        if (a, g, t) in m.D:
            return m.d[a, g, t]
        return held(a, g, t - 1) if (a, g, t) not in m.Y else 0

    m.swaps = pyo.Constraint(
        m.A,
        m.T,
        rule=lambda m, a, t: (
            pyo.Constraint.Skip
            if t == 0 and apps[a].current_mask < 0
            else sum(moved(a, g, t) for g in range(G)) <= apps[a].swap_cap
        ),
    )


def _warm_exact(m: pyo.ConcreteModel, problem: Problem, schedule: Schedule) -> None:
    """The warm start's real-time sets as values of the exact model's variables."""
    for a, g, t in m.Y:
        m.y[a, g, t].value = (schedule.realtime[problem.realtime[a].id][t] >> g) & 1
    for a, g, t in m.D:
        before = schedule.realtime[problem.realtime[a].id][t - 1] if t else problem.realtime[a].current_mask
        m.d[a, g, t].value = ((before >> g) & 1) ^ int(m.y[a, g, t].value)


def _batch_of(problem: Problem, data: MilpData, m: pyo.ConcreteModel) -> tuple[dict[str, tuple[int, int]], list[int]]:
    """Stage 1's batch blocks (and the running jobs'), with the GPUs they hold per step."""
    batch: dict[str, tuple[int, int]] = {}
    busy = list(problem.running_busy)
    for job in problem.batch:
        if job.running_mask:
            batch[job.id] = (job.held_from, job.running_mask)
    for o, opt in enumerate(data.options):
        if (m.x[o].value or 0) > 0.5:
            row = data.jobs[opt.job]
            block = problem.block(opt.first_gpu, row["gpus"])
            batch[row["id"]] = (opt.start, block)
            for t in range(opt.start, opt.end):
                busy[t] |= block
    return batch, busy


def _exact_plan(problem: Problem, data: MilpData, m: pyo.ConcreteModel) -> tuple[Schedule, str]:
    """The exact model's plan: its blocks and its real-time sets, as solved."""
    batch, _ = _batch_of(problem, data, m)
    sets = {}
    for a, app in enumerate(problem.realtime):
        masks = [0] * problem.horizon
        for _, g, t in (k for k in m.Y if k[0] == a):
            if (m.y[a, g, t].value or 0) > 0.5:
                masks[t] |= 1 << g
        sets[app.id] = masks
    return Schedule(batch=batch, realtime=sets), "in the model (exact)"


def _realize(
    problem: Problem, data: MilpData, m: pyo.ConcreteModel, options: FullModeOptions
) -> tuple[Schedule | None, str]:
    """Stage 2: GPU sets for the apps around stage 1's blocks, at stage 1's counts if possible."""
    T = problem.horizon
    batch, busy = _batch_of(problem, data, m)
    counts = [[int(round(m.n[a, t].value)) for t in range(T)] for a in range(len(data.apps))]
    sets, forced = assign_realtime(problem, counts, busy)
    if not forced:
        return Schedule(batch=batch, realtime=sets), "assigned"
    exact = _exact_realtime(problem, busy, options)
    if exact is None:
        return None, "no real-time assignment fits these blocks"
    return Schedule(batch=batch, realtime=exact), "exact per-GPU model"


def _exact_realtime(problem: Problem, busy: list[int], options: FullModeOptions) -> dict[str, list[int]] | None:
    """Per-GPU real-time model with batch fixed: least weighted shortfall under R3 and R4."""
    T, G, apps = problem.horizon, problem.gpus, problem.realtime
    free = [(g, t) for t in range(T) for g in range(G) if not (busy[t] >> g) & 1]
    m = pyo.ConcreteModel("realtime")
    m.Y = pyo.Set(initialize=[(a, g, t) for a in range(len(apps)) for g, t in free], dimen=3)
    m.y = pyo.Var(m.Y, within=pyo.Binary)
    m.short = pyo.Var(range(len(apps)), range(T), within=pyo.NonNegativeReals)
    by_cell: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    by_app_step: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for a, g, t in m.Y:
        by_cell.setdefault((g, t), []).append((a, g, t))
        by_app_step.setdefault((a, t), []).append((a, g, t))
    m.cons = pyo.ConstraintList()
    for keys in by_cell.values():
        m.cons.add(sum(m.y[k] for k in keys) <= 1)
    for a, app in enumerate(apps):
        for t in range(T):
            held = sum(m.y[k] for k in by_app_step.get((a, t), ()))
            m.cons.add(pyo.inequality(app.min_gpus, held, app.max_gpus))
            m.cons.add(m.short[a, t] >= app.demand[t] - held)
            if t == 0 and app.current_mask < 0:
                continue
            moved = []
            for g in range(G):
                now = m.y[a, g, t] if (a, g, t) in m.Y else 0
                before = (m.y[a, g, t - 1] if (a, g, t - 1) in m.Y else 0) if t else (app.current_mask >> g) & 1
                if isinstance(now, int) and isinstance(before, int):
                    moved.append(abs(now - before))
                    continue
                d = pyo.Var(within=pyo.NonNegativeReals)
                m.add_component(f"d_{a}_{g}_{t}", d)
                m.cons.add(d >= now - before)
                m.cons.add(d >= before - now)
                moved.append(d)
            m.cons.add(sum(moved) <= app.swap_cap)
    m.obj = pyo.Objective(
        expr=sum(app.priority * problem.weights[t] * m.short[a, t] for a, app in enumerate(apps) for t in range(T)),
        sense=pyo.minimize,
    )
    from pyomo.contrib.appsi.solvers import Highs

    opt = Highs()
    opt.config.time_limit = options.time_limit
    opt.config.load_solution = False
    opt.highs_options = {"threads": options.threads, "random_seed": options.seed}
    res = opt.solve(m)
    if res.best_feasible_objective is None:
        return None
    res.solution_loader.load_vars()
    out = {}
    for a, app in enumerate(apps):
        masks = [0] * T
        for g, t in free:
            if (m.y[a, g, t].value or 0) > 0.5:
                masks[t] |= 1 << g
        out[app.id] = masks
    return out

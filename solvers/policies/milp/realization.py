"""Stage 2: a solved model's batch blocks and the real-time apps' GPU sets, as a plan."""

from __future__ import annotations

import pyomo.environ as pyo

from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.heuristic.realtime import assign_realtime
from gpualloc.solvers.policies.milp.data import MilpData
from gpualloc.solvers.problem import Problem


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


def exact_plan(problem: Problem, data: MilpData, m: pyo.ConcreteModel) -> tuple[Schedule, str]:
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


def realize(
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

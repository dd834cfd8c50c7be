"""The MILP in Pyomo: stage 1 (exact for batch, counts per real-time app), its exact per-GPU form, warm starts."""

from __future__ import annotations

from typing import Any

import pyomo.environ as pyo

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.policies.milp.data import MilpData
from gpualloc.solvers.problem import Problem, mask_of


def build_model(data: MilpData, *, symmetry: bool = True) -> pyo.ConcreteModel:
    """Stage 1 of `model`'s docstring, from plain data."""
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

    # Kept GPUs across each step boundary (see `model`'s docstring).
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


def warm_exact(m: pyo.ConcreteModel, problem: Problem, schedule: Schedule) -> None:
    """The warm start's real-time sets as values of the exact model's variables."""
    for a, g, t in m.Y:
        m.y[a, g, t].value = (schedule.realtime[problem.realtime[a].id][t] >> g) & 1
    for a, g, t in m.D:
        before = schedule.realtime[problem.realtime[a].id][t - 1] if t else problem.realtime[a].current_mask
        m.d[a, g, t].value = ((before >> g) & 1) ^ int(m.y[a, g, t].value)

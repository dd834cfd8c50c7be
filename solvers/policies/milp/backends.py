"""Running HiGHS or CBC on a built model: time limits, logs kept off stdout, incumbent and bound read back."""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import sys
import time
from typing import get_args

import pyomo.environ as pyo
from pyomo.common.log import LoggingIntercept

from gpualloc.schemas.settings import FullModeOptions

SOLVERS = get_args(FullModeOptions.model_fields["solver"].annotation)
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

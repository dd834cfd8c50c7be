"""An upper bound on a window's objective that a 64-GPU pool can afford: the capacity relaxation.

The whole model's bound at 64 GPUs with a standing queue is the root LP's at best (a node-limited
solve stops there, a time-limited one may not even finish the root), so the hot path's gap to it
says little about what full mode could win. This bound forgets which GPUs a job or an app holds:
a batch job is a start step, an app is a GPU count per step within its floor and ceiling that
moves by at most its swap cap (R4 moves at least that many GPUs), and every step's jobs and apps
fit the GPUs the running jobs leave. Blocks, nodes and fragmentation are what it leaves out.
Its LP (time-indexed, a column per job and start) solves in a fraction of a second at 64 GPUs and
500 queued jobs; every legal plan is feasible for it, so its optimum bounds the contract's
objective from above.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import highspy
import numpy as np

from gpualloc.solvers.metrics import relative_gap
from gpualloc.solvers.problem import Problem

if TYPE_CHECKING:  # the model module loads Pyomo, which reports needing only the bound do without
    from gpualloc.solvers.policies.milp.model import MilpResult

INF = highspy.kHighsInf


@dataclass
class _Lp:
    """A maximisation LP built column by column, rows declared first."""

    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def row(self, lower: float, upper: float) -> int:
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        return len(self.row_lower) - 1

    def column(self, cost: float, lower: float, upper: float, entries: list[tuple[int, float]]) -> None:
        self.costs.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        self.starts.append(len(self.index))
        for row, coefficient in entries:
            self.index.append(row)
            self.value.append(coefficient)

    def maximum(self) -> float | None:
        """The optimum; None when HiGHS ends otherwise (a window no legal plan fits, which the
        contract's input rules keep out, or a numerical failure): no bound, rather than no plan."""
        if not self.costs:  # nothing to place (HiGHS calls an empty model a status of its own)
            return 0.0
        with _stdout_to_stderr():
            h = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy leaves Highs.__init__ unannotated
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        empty = np.array([], dtype=np.int32)
        h.addRows(
            len(self.row_lower),
            np.array(self.row_lower),
            np.array(self.row_upper),
            0,
            empty,
            empty,
            np.array([], dtype=np.float64),
        )
        h.addCols(
            len(self.costs),
            np.array(self.costs),
            np.array(self.lower),
            np.array(self.upper),
            len(self.index),
            np.array(self.starts, dtype=np.int32),
            np.array(self.index, dtype=np.int32),
            np.array(self.value),
        )
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.run()
        status = h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        return h.getInfo().objective_function_value


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Descriptor 1 pointed at stderr: HiGHS prints its banner there when a process makes its first
    instance, before any option can silence it, and a plan or report on stdout must stay clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def capacity_bound(problem: Problem) -> float | None:
    """The LP optimum of the capacity relaxation of `problem` (see the module), plus what the
    running jobs earn: at least the objective of every legal plan of it."""
    T = problem.horizon
    lp = _Lp()
    capacity = [lp.row(-INF, problem.gpus - held.bit_count()) for held in problem.running_busy]
    fixed = 0.0
    for job in problem.batch:
        if job.running_mask:  # inherited: its GPUs are taken as they are
            fixed += problem.held_value(job)
            continue
        once = lp.row(-INF, 1.0)
        for s in range(max(job.arrival, 0), T):
            end = problem.end_of(job, s)
            lp.column(
                problem.start_value(job, s),
                0.0,
                1.0,
                [(once, 1.0)] + [(capacity[t], float(job.gpus)) for t in range(s, end)],
            )
    for app in problem.realtime:
        served = [lp.row(app.demand[t], INF) for t in range(T)]  # held + shortfall >= demand
        before = app.current_mask.bit_count() if app.current_mask >= 0 else None
        moves = [
            lp.row(-app.swap_cap, app.swap_cap)
            if t
            # held[t] - held[t-1]
            else lp.row(before - app.swap_cap, before + app.swap_cap)
            if before is not None
            else None  # held[0]
            for t in range(T)
        ]
        for t in range(T):
            entries = [(capacity[t], 1.0), (served[t], 1.0)]
            move = moves[t]
            if move is not None:
                entries.append((move, 1.0))
            if t + 1 < T:
                later = moves[t + 1]
                assert later is not None  # only step 0 may have no move row
                entries.append((later, -1.0))
            lp.column(0.0, float(app.min_gpus), float(app.max_gpus), entries)
            lp.column(-problem.penalty * app.priority * problem.weights[t], 0.0, INF, [(served[t], 1.0)])
    best = lp.maximum()
    return None if best is None else fixed + best


def tightened(result: MilpResult, problem: Problem, mip_gap: float) -> MilpResult:
    """`result` with its bound the tighter of the solver's (None when it proved none, as the
    large-neighbourhood search never does) and `capacity_bound`'s, its gap measured to it, and
    `optimal` when the plan meets it within `mip_gap`: the relaxation proves what the model could
    not reach."""
    capacity = capacity_bound(problem)
    if capacity is None or (result.bound is not None and result.bound <= capacity):
        return result
    capacity = max(capacity, result.objective)  # below a legal plan: LP rounding
    gap = relative_gap(capacity, result.objective)
    status = "optimal" if gap <= mip_gap else result.status
    return replace(
        result,
        bound=capacity,
        gap=gap,
        status=status,
        bound_source="capacity",
        notes=[*result.notes, f"bound {capacity:.4f} from the capacity relaxation"],
    )

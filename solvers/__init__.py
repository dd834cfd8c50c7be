"""The pure planning core: schedulers, legality validator and metrics. No I/O, no clocks."""

from gpualloc.solvers.api import SCHEDULERS, build_plan, solve
from gpualloc.solvers.legality import Violation, check_plan
from gpualloc.solvers.metrics import compute_metrics
from gpualloc.solvers.problem import Problem, compile_scenario

__all__ = ["SCHEDULERS", "Problem", "Violation", "build_plan", "check_plan", "compile_scenario",
           "compute_metrics", "solve"]

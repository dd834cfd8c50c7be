"""The pure planning core: schedulers, legality validator and metrics. No I/O, no clocks."""

from solvers.api import SCHEDULERS, build_plan, solve
from solvers.legality import Violation, check_plan
from solvers.metrics import compute_metrics
from solvers.problem import Problem, compile_scenario

__all__ = ["SCHEDULERS", "Problem", "Violation", "build_plan", "check_plan", "compile_scenario",
           "compute_metrics", "solve"]

"""The pure planning core: policies (`policies`), the planner (`planner`), legality, metrics and
the simulator (`simulation`). No I/O and no wall clock in any decision."""

from gpualloc.solvers.legality import Violation, check_plan
from gpualloc.solvers.metrics import compute_metrics
from gpualloc.solvers.policies import POLICIES, build_plan, policy, solve
from gpualloc.solvers.problem import Problem, compile_scenario

__all__ = [
    "POLICIES",
    "Problem",
    "Violation",
    "build_plan",
    "check_plan",
    "compile_scenario",
    "compute_metrics",
    "policy",
    "solve",
]

"""The policy registry: every scheduler by name. A new policy is one module (a `solve(problem,
options) -> Solution`) plus one entry in `POLICIES`; the CLI's choices, the plan schema's
scheduler names, the simulator's policies, the legality exemptions and the charts all read it.

An online policy (what the simulator and the agent run) is a composition of registered ones: a
hot-path policy that answers every arrival, plus optionally a full-mode policy solved every K
steps and adopted at a step boundary when it is legal and better (`online_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.schemas import Plan
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import R3_REALTIME, R4
from gpualloc.solvers.metrics import compute_metrics
from gpualloc.solvers.policies import fifo, greedy, heuristic, milp
from gpualloc.solvers.policies.solution import Policy, Solution
from gpualloc.solvers.problem import Problem

POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("fifo", "FIFO", "#9e9e9e", fifo.solve, exempt=frozenset({R3_REALTIME, R4}), by_arrival=True),
        Policy("greedy", "Greedy", "#ff7f0e", greedy.solve),
        Policy("heuristic", "Heuristic", "#1f77b4", heuristic.solve),
        Policy(
            "full-mode",
            "Full mode (MILP)",
            "#2ca02c",
            milp.solve,
            plan_name="milp",
            aliases=("milp",),
            hot_path="heuristic",
        ),
    )
}


def policy(name: str) -> Policy:
    """The registered policy called `name` (or one of its aliases, or its name in plan files)."""
    for p in POLICIES.values():
        if name == p.name or name in p.aliases or name == p.output_name:
            return p
    raise ValueError(f"scheduler: {name!r} is not one of {', '.join(names())}")


def names() -> list[str]:
    """Every name the CLI accepts for a registered policy."""
    return [n for p in POLICIES.values() for n in (p.name, *p.aliases)]


def plan_names() -> list[str]:
    """The `scheduler` values a plan file may carry."""
    return [p.output_name for p in POLICIES.values()]


@dataclass(frozen=True)
class OnlinePolicy:
    """What runs in the rolling horizon: `hot` answers arrivals and commits steps; `full_mode`,
    when set, is solved every K steps and adopted at a boundary when legal and better."""

    name: str
    hot: Policy
    full_mode: Policy | None = None

    @property
    def colour(self) -> str:
        return (self.full_mode or self.hot).colour


def online_policy(name: str) -> OnlinePolicy:
    """`HOT` or `HOT+FULL` (registered names); a policy too slow for arrivals (full mode) runs on
    its own hot path: `full-mode` is `heuristic+full-mode`, and `heuristic+milp` is its alias."""
    hot_name, plus, full_name = name.partition("+")
    hot, full = policy(hot_name), policy(full_name) if plus else None
    if full is None and hot.hot_path is not None:
        hot, full = policy(hot.hot_path), hot
    if hot.hot_path is not None:
        raise ValueError(
            f"policy: {hot.name!r} cannot answer arrivals; run it as full mode ({hot.hot_path}+{hot.name})"
        )
    if full is None:
        return OnlinePolicy(hot.name, hot)
    canonical = full.name if full.hot_path == hot.name else f"{hot.name}+{full.name}"
    return OnlinePolicy(canonical, hot, full)


def build_plan(problem: Problem, chosen: Policy, solution: Solution, solve_ms: float = 0.0) -> Plan:
    """The contract's plan file of `solution`, with the policy's certificate as added fields."""
    grid = to_grid(problem, solution.schedule)
    return Plan(
        scenario=problem.name,
        scheduler=chosen.output_name,
        grid=grid,
        metrics=compute_metrics(problem, grid),
        solve_ms=round(solve_ms, 4),
        **solution.certificate,
    )


def solve(problem: Problem, name: str, options: SolveOptions = SolveOptions()) -> Plan:
    """Run a registered policy and return the contract's plan (solve_ms left to the caller)."""
    chosen = policy(name)
    return build_plan(problem, chosen, chosen.solve(problem, options))

"""What every scheduling policy is: one signature (Problem, SolveOptions) -> Solution, declared
with its name, its label and the legality rules the contract exempts it from."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers.grid import Grid, Schedule
from gpualloc.solvers.legality import Violation, check_plan
from gpualloc.solvers.problem import Problem


@dataclass(frozen=True)
class Solution:
    """A policy's plan of a problem."""

    schedule: Schedule
    certificate: Mapping[str, Any] = field(
        default_factory=dict
    )  # fields a plan file gains (full mode: bound, gap, ...)
    improved: bool = True  # False: full mode did not beat its warm start, and `schedule` is that start


Solve = Callable[[Problem, SolveOptions], Solution]


@dataclass(frozen=True)
class Policy:
    """A registered scheduler (see `gpualloc.solvers.policies` for the registry)."""

    name: str  # what the CLI takes
    label: str  # tables and charts
    colour: str  # charts
    solve: Solve
    plan_name: str = ""  # `scheduler` in plan files and `source` in commits (default: `name`)
    aliases: tuple[str, ...] = ()  # other names the CLI accepts
    exempt: frozenset[str] = frozenset()  # legality rules the contract waives for it
    hot_path: str | None = None  # too slow for arrivals: the policy answering them when it runs online
    by_arrival: bool = False  # its order is arrival order: a pass's arrivals are inserted in it, not by value

    @property
    def output_name(self) -> str:
        return self.plan_name or self.name

    def schedule(self, problem: Problem, options: SolveOptions = SolveOptions()) -> Schedule:
        return self.solve(problem, options).schedule

    def bind(self, options: SolveOptions) -> Callable[[Problem], Schedule]:
        """This policy as a plain scheduler with `options` (e.g. the agent's hot path)."""
        return partial(self.schedule, options=options)

    def check(self, problem: Problem, grid: Grid) -> list[Violation]:
        """The validator under this policy's exemptions."""
        return check_plan(problem, grid, exempt=self.exempt)

"""The counts a solve runs on, handed to the kernels whole (`kernels.Kernels.solve`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knobs:
    """Work budgets at the solve's effort, and the composition's constants (`heuristic`)."""

    budget: int  # placements the search may spend on a layout
    polish_budget: int  # polish work units
    screened: int  # layouts packing every seed order after screening
    searched: int  # demand-first plans the local search improves
    reserving_repairs: int  # repair rounds before a reserving layout is given up
    home_cap: int  # apps with a swap cap at most this get a fixed home
